"""A loopback OpenAI-compatible embeddings server for tests and benchmarks (stdlib + numpy).

It serves what the openai SDK and pv4kit ask of a real server:

* ``GET /v1/models``: ``{"object": "list", "data": [{"id", "object": "model", "created", "owned_by",
  "root", "parent", "max_model_len"}]}`` (the shape vLLM answers; ``revision`` is added when set, as a
  server that reports one would);
* ``POST /v1/embeddings`` with ``{"model", "input": str | [str], "encoding_format": "float" | "base64",
  "dimensions"?}``: ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
  "usage": {"prompt_tokens", "total_tokens"}}``; ``float`` (the default when absent, as on OpenAI) gives
  lists of numbers, ``base64`` the little-endian float32 bytes, as the openai SDK requests by default.

Vectors come from ``encode(list_of_texts) -> (n, dim) array`` (the tests pass the installed MiniLM), called
once per request on that request's inputs, in order. Scriptable faults:

* ``faults``: a queue of :class:`Fault` served first, one per embeddings request (429 + Retry-After, 500,
  a delay longer than the client's timeout ...);
* ``max_batch``: more inputs than this in one request answer 413, as text-embeddings-inference does;
* ``max_chars``: an input longer than this answers 400 with vLLM's context-length message;
* ``list_models=False``: ``/v1/models`` answers 404, as some servers do;
* ``api_key``: requests without ``Authorization: Bearer <api_key>`` answer 401.

Every embeddings request is recorded in ``requests`` (its body) and ``statuses`` (the status sent).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from tests.loopback import LoopbackServer


@dataclass
class Fault:
    """One scripted answer to an embeddings request (``status`` 200 with ``delay``: a slow success)."""

    status: int = 500
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "scripted error"


class FakeEmbeddingServer(LoopbackServer):
    """A threaded loopback embeddings server; use as a context manager."""

    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray],
        *,
        model: str = "test-embedder",
        root: str | None = None,
        revision: str | None = None,
        max_batch: int | None = None,
        max_chars: int | None = None,
        api_key: str | None = None,
        delay: float = 0.0,
        list_models: bool = True,
    ) -> None:
        self.encode = encode
        self.list_models = list_models
        self.model = model
        self.root = root or model
        self.revision = revision
        self.max_batch = max_batch
        self.max_chars = max_chars
        self.api_key = api_key
        self.delay = delay
        self.faults: list[Fault] = []
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FakeEmbeddingServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    pass

            def authorised(self) -> bool:
                if owner.api_key is None or self.headers.get("Authorization") == f"Bearer {owner.api_key}":
                    return True
                self.send(
                    401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
                )
                return False

            def do_GET(self) -> None:
                if not self.authorised():
                    return
                if self.path.rstrip("/") != "/v1/models" or not owner.list_models:
                    self.send(404, {"error": {"message": f"unknown path {self.path}"}})
                    return
                entry = {
                    "id": owner.model,
                    "object": "model",
                    "created": 1_700_000_000,
                    "owned_by": "pv4kit-tests",
                    "root": owner.root,
                    "parent": None,
                    "max_model_len": 512,
                }
                if owner.revision:
                    entry["revision"] = owner.revision
                self.send(200, {"object": "list", "data": [entry]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.rstrip("/") != "/v1/embeddings":
                    self.send(404, {"error": {"message": f"unknown path {self.path}"}})
                    return
                if not self.authorised():
                    return
                status, payload, headers = owner._answer(body)
                with owner._lock:
                    owner.statuses.append(status)
                self.send(status, payload, headers)

        self._serve(Handler, queue=256)
        return self

    def _answer(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        with self._lock:
            self.requests.append(body)
            fault = self.faults.pop(0) if self.faults else None
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay + (fault.delay if fault else 0.0))
            if fault is not None and fault.status != 200:
                return fault.status, {"error": {"message": fault.message, "type": "scripted"}}, fault.headers
            return self._embeddings(body)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        if body.get("model") != self.model:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}, {}
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return 400, {"error": {"message": "input must be a string or a non-empty list of strings"}}, {}
        fmt = body.get("encoding_format") or "float"
        if fmt not in ("float", "base64"):
            return 400, {"error": {"message": f"unknown encoding_format {fmt!r}"}}, {}
        if self.max_batch is not None and len(texts) > self.max_batch:
            message = f"batch size {len(texts)} > maximum allowed batch size {self.max_batch}"
            return 413, {"error": {"message": message, "type": "validation"}}, {}
        if self.max_chars is not None and max(len(t) for t in texts) > self.max_chars:
            message = (
                f"This model's maximum context length is {self.max_chars} tokens. However, you requested "
                f"{max(len(t) for t in texts)} tokens in the input for embedding generation."
            )
            return 400, {"error": {"message": message, "type": "BadRequestError"}}, {}
        with self._encode_lock:
            vectors = np.asarray(self.encode(texts), dtype=np.float32)
        if body.get("dimensions"):
            vectors = vectors[:, : int(body["dimensions"])]
        data = []
        for i, vec in enumerate(vectors):
            if fmt == "base64":
                value: Any = base64.b64encode(vec.astype("<f4").tobytes()).decode("ascii")
            else:
                value = [float(x) for x in vec]  # float32 -> float64 -> JSON repr: exact round trip
            data.append({"object": "embedding", "index": i, "embedding": value})
        tokens = sum(len(t.split()) for t in texts)
        payload = {
            "object": "list",
            "data": data,
            "model": self.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return 200, payload, {}
