"""A fake OpenAI-compatible server on 127.0.0.1 for tests and benchmarks (stdlib only).

It serves ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions`` and
``POST /v1/responses``; with ``owned_by="vllm"`` and a ``tokenizer`` (a real Hugging Face tokenizer) it also
answers vLLM's ``POST /tokenize`` and ``POST /detokenize`` and lists ``max_model_len`` under the model, as
vLLM does. What it answers is scriptable:

* ``responder(protocol, body, nth) -> Reply | str`` builds the answer; ``nth`` counts how often this
  prompt (the last message's content) was seen before, so "malformed first, valid on retry" is easy;
* ``faults``: a queue of :class:`Reply` objects served first, one per request (429 + Retry-After, 500,
  delays longer than the client timeout ...);
* ``delay``: seconds to wait before every answer.

A :class:`Reply` with ``raw`` sends that body verbatim (an HTML page, an error object with HTTP 200); one
with ``drip`` sends the headers, then the body one byte every ``drip`` seconds.

Every request is recorded in ``requests`` as ``(protocol, prompt, body)``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.loopback import LoopbackServer


@dataclass
class Reply:
    """One scripted answer."""

    text: str = "ok"
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    error: str = "scripted error"
    raw: str | None = None
    content_type: str = "application/json"
    drip: float = 0.0


def prompt_of(protocol: str, body: dict[str, Any]) -> str:
    """The last message's content of a request body."""
    if protocol == "completions":
        prompt = body.get("prompt")
        return prompt if isinstance(prompt, str) else "ids:" + ",".join(str(t) for t in prompt or [])
    items = body.get("messages") if protocol == "chat" else body.get("input")
    if isinstance(items, str):
        return items
    return str(items[-1]["content"]) if items else ""


def _chat_body(model: str, text: str, n: int) -> dict[str, Any]:
    words = len(text.split())
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": words, "total_tokens": 11 + words},
    }


def _completions_body(model: str, text: str, n: int) -> dict[str, Any]:
    words = len(text.split())
    return {
        "id": f"cmpl-{n}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 11, "completion_tokens": words, "total_tokens": 11 + words},
    }


def _responses_body(model: str, text: str, n: int) -> dict[str, Any]:
    words = len(text.split())
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": f"msg_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 11,
            "output_tokens": words + 3,
            "total_tokens": 14 + words,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 3},
        },
    }


class FakeLLMServer(LoopbackServer):
    """A threaded loopback server speaking both OpenAI protocols; use as a context manager."""

    def __init__(
        self,
        responder: Callable[[str, dict[str, Any], int], Reply | str] | None = None,
        *,
        delay: float = 0.0,
        known_models: set[str] | None = None,
        api_key: str | None = None,
        owned_by: str | None = None,
        max_model_len: int | None = None,
        tokenizer: Any = None,
    ) -> None:
        self.responder = responder or (lambda protocol, body, nth: f"echo: {prompt_of(protocol, body)}")
        self.delay = delay
        self.known_models = known_models
        self.api_key = api_key
        self.owned_by = owned_by
        self.max_model_len = max_model_len
        self.tokenizer = tokenizer
        self.tokenize_requests: list[dict[str, Any]] = []
        self.served_as: str | None = None  # answer as this model, whatever was asked (a gateway's reroute)
        self.faults: list[Reply] = []
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self._seen: dict[str, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeLLMServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # send headers and body at once (no 40 ms delayed-ACK stall)
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # silence
                pass

            def _send(
                self,
                status: int,
                payload: dict[str, Any] | str,
                headers: dict[str, str] | None = None,
                *,
                content_type: str = "application/json",
                drip: float = 0.0,
            ) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    if not drip:
                        self.wfile.write(data)
                    for i in range(len(data) if drip else 0):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(drip)
                except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout test)
                    pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    names = sorted(owner.known_models or {"fake-model"})
                    self._send(200, {"object": "list", "data": [owner._model_card(m) for m in names]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path in ("/tokenize", "/detokenize") and owner.tokenizer is not None:
                    self._send(200, owner._tokenize(self.path, body))
                    return
                if self.path.endswith("/chat/completions"):
                    protocol = "chat"
                elif self.path.endswith("/completions"):
                    protocol = "completions"
                elif self.path.endswith("/responses"):
                    protocol = "responses"
                else:
                    self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                    return
                owner._handle(self, protocol, body)

        self._serve(Handler, queue=256)
        return self

    def _handle(self, handler: Any, protocol: str, body: dict[str, Any]) -> None:
        prompt = prompt_of(protocol, body)
        with self._lock:
            self.requests.append((protocol, prompt, body))
            fault = self.faults.pop(0) if self.faults else None
            nth = self._seen.get(prompt, 0)
            if fault is None:
                self._seen[prompt] = nth + 1
            count = len(self.requests)
        auth = handler.headers.get("Authorization", "")
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            handler._send(
                401,
                {"error": {"message": f"Incorrect API key provided: {auth[7:]}", "code": "invalid_api_key"}},
            )
            return
        if self.known_models is not None and body.get("model") not in self.known_models:
            handler._send(404, {"error": {"message": f"The model {body.get('model')} does not exist"}})
            return
        reply = fault if fault is not None else self.responder(protocol, body, nth)
        if isinstance(reply, str):
            reply = Reply(text=reply)
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay + reply.delay)
        finally:
            with self._lock:
                self.in_flight -= 1
        if reply.status != 200:
            handler._send(
                reply.status, {"error": {"message": reply.error, "type": "scripted"}}, reply.headers
            )
            return
        model = self.served_as or str(body.get("model"))
        build = {"chat": _chat_body, "completions": _completions_body}.get(protocol, _responses_body)
        payload = build(model, reply.text, count) if reply.raw is None else reply.raw
        handler._send(200, payload, reply.headers, content_type=reply.content_type, drip=reply.drip)

    def _model_card(self, model: str) -> dict[str, Any]:
        card: dict[str, Any] = {"id": model, "object": "model"}
        if self.owned_by is not None:
            card["owned_by"] = self.owned_by
        if self.max_model_len is not None:
            card["max_model_len"] = self.max_model_len
        return card

    def _tokenize(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """vLLM's ``/tokenize`` (chat or text form) and ``/detokenize`` with the real tokenizer."""
        with self._lock:
            self.tokenize_requests.append(body)
        tok = self.tokenizer
        if path == "/detokenize":
            return {"prompt": tok.decode(body["tokens"], skip_special_tokens=False)}
        if "messages" in body:
            text = tok.apply_chat_template(
                body["messages"],
                tokenize=False,
                add_generation_prompt=body.get("add_generation_prompt", True),
                **(body.get("chat_template_kwargs") or {}),
            )
            ids = tok.encode(text, add_special_tokens=body.get("add_special_tokens", False))
        else:
            ids = tok.encode(body["prompt"], add_special_tokens=body.get("add_special_tokens", True))
        return {
            "count": len(ids),
            "max_model_len": self.max_model_len or 0,
            "tokens": ids,
            "token_strs": None,
        }


def serve_forever(port: int = 0, delay: float = 0.0) -> None:  # pragma: no cover - manual use
    """Run an echo server in the foreground (``python tests/llm_server.py``)."""
    with FakeLLMServer(delay=delay) as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":  # pragma: no cover
    serve_forever()
