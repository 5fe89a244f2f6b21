"""The three protocols on the wire, without a network: request bodies, the cache key, response parsing.

``"responses"`` (the OpenAI Responses API: system messages become ``instructions``), ``"chat"`` (Chat
Completions: vLLM, llama.cpp, Ollama, most providers) and ``"completions"`` (one raw prompt: the message's
``prompt_token_ids`` when given, else its ``content``). The cache key hashes what changes the output, never
the endpoint, key, timeouts, retries or concurrency; a greedy call ignores ``sample_index``. A reply without
the shape of an answer raises :class:`NoAnswerError`. All pure functions.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pv4kit.llm.config import LLMConfig, LLMResponse, Message

_KEY_VERSION = 1

#: The :class:`~pv4kit.llm.config.LLMConfig` fields that can change the cache key.
KEY_FIELDS = (
    "protocol",
    "model",
    "reasoning_effort",
    "temperature",
    "max_output_tokens",
    "assume_greedy",
    "chat_template_kwargs",
)


def cache_key(messages: Sequence[Message], config: LLMConfig, *, sample_index: int = 0) -> str:
    """SHA-256 over everything that changes the output of one request (never the endpoint or key)."""
    payload = {
        "v": _KEY_VERSION,
        "protocol": config.protocol,
        "model": config.model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "reasoning_effort": config.reasoning_effort,
        "temperature": config.temperature,
        "max_output_tokens": config.max_output_tokens,
        "sample": None if config.greedy else int(sample_index),
    }
    ids = [m.get("prompt_token_ids") for m in messages]  # absent unless set, so older keys stay valid
    if any(i is not None for i in ids):
        payload["prompt_token_ids"] = [None if i is None else [int(t) for t in i] for i in ids]
    if config.chat_template_kwargs:
        payload["chat_template_kwargs"] = dict(config.chat_template_kwargs)
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def build_request(messages: Sequence[Message], config: LLMConfig) -> dict[str, Any]:
    """The JSON body of one request of ``config.protocol``.

    Raises:
        ValueError: A message that is not ``{"role": system|user|assistant, "content": str}``, or for
            ``"completions"`` not exactly one message with ``prompt_token_ids`` or a str ``content``.
    """
    kwargs: dict[str, Any] = {"model": config.model}
    if config.protocol == "completions":
        if len(messages) != 1:
            raise ValueError(f"protocol 'completions' takes one prompt message, got {len(messages)}")
        m, ids = messages[0], messages[0].get("prompt_token_ids")
        if ids is None and not isinstance(m.get("content"), str):
            raise ValueError(f"messages[0] must have 'prompt_token_ids' or a str 'content', got {m!r}")
        kwargs["prompt"] = [int(t) for t in ids] if ids is not None else m["content"]
        tokens = {"max_tokens": config.max_output_tokens}
    else:
        for i, m in enumerate(messages):
            if m.get("role") not in ("system", "developer", "user", "assistant") or not isinstance(
                m.get("content"), str
            ):
                raise ValueError(
                    f"messages[{i}] must be {{'role': system|user|assistant, 'content': str}}, got {m!r}"
                )
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        if config.protocol == "responses":
            system = [m["content"] for m in plain if m["role"] == "system"]
            if system:
                kwargs["instructions"] = "\n\n".join(system)
            kwargs["input"] = [m for m in plain if m["role"] != "system"]
            if config.reasoning_effort is not None:
                kwargs["reasoning"] = {"effort": config.reasoning_effort}
            tokens = {"max_output_tokens": config.max_output_tokens}
        else:
            kwargs["messages"] = plain
            tokens = {"reasoning_effort": config.reasoning_effort, "max_tokens": config.max_output_tokens}
            if config.chat_template_kwargs:
                tokens["chat_template_kwargs"] = dict(config.chat_template_kwargs)
    tokens["temperature"] = config.temperature
    return kwargs | {k: v for k, v in tokens.items() if v is not None}


class NoAnswerError(ValueError):
    """An HTTP 200 without the shape of an answer (an error object, an HTML page); quotes the server."""


def _no_answer(raw: Any, protocol: str) -> str | None:
    """The server's words when ``raw`` is not an answer of ``protocol``; ``None`` when it is one."""
    if isinstance(raw, (str, bytes)):  # a non-JSON body: an HTML page, plain text
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        return " ".join(re.sub(r"<[^>]*>", " ", text).split())[:300] or "an empty body"
    error = raw.get("error") if isinstance(raw, Mapping) else None
    if error:
        return str(error.get("message") or error if isinstance(error, Mapping) else error)[:300]
    if isinstance(raw, Mapping) and protocol == "responses":
        if isinstance(raw.get("output"), list) or isinstance(raw.get("output_text"), str):
            return None
    elif isinstance(raw, Mapping):
        choices = raw.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        if isinstance(first, Mapping) and (
            "text" in first if protocol == "completions" else first.get("message") is not None
        ):
            return None
    shown = json.dumps(raw, default=str)[:300] if isinstance(raw, (Mapping, list)) else repr(raw)[:300]
    return f"no {'output' if protocol == 'responses' else 'choices'} in {shown}"


def parse_response(raw: Any, protocol: str) -> LLMResponse:
    """Turn a response (its JSON as a dict, or an SDK object) into an :class:`~pv4kit.llm.config.LLMResponse`.

    Raises:
        NoAnswerError: ``raw`` has not the shape of an answer (an error object, an HTML page ...).
    """
    raw = raw.model_dump() if hasattr(raw, "model_dump") else raw
    words = _no_answer(raw, protocol)
    if words is not None:
        raise NoAnswerError(f"HTTP 200 without an answer: {words}")
    usage = raw.get("usage") or {}
    if protocol == "responses":
        text = raw.get("output_text")
        if text is None:
            parts = [c for item in raw["output"] or [] for c in (item or {}).get("content") or []]
            text = "".join(c.get("text", "") for c in parts if c.get("type") == "output_text")
        reason = (raw.get("incomplete_details") or {}).get("reason")
        finish = f"{raw.get('status')}:{reason}" if reason else raw.get("status")
        names, details = ("input_tokens", "output_tokens"), usage.get("output_tokens_details")
    else:
        first = raw["choices"][0]
        text = first.get("text") if protocol == "completions" else first["message"].get("content")
        finish = first.get("finish_reason")
        names, details = ("prompt_tokens", "completion_tokens"), usage.get("completion_tokens_details")
    return LLMResponse(
        text=text or "",
        usage={
            "prompt_tokens": int(usage.get(names[0]) or 0),
            "completion_tokens": int(usage.get(names[1]) or 0),
            "reasoning_tokens": int((details or {}).get("reasoning_tokens") or 0),
        },
        response_id=raw.get("id"),
        model=raw.get("model"),
        finish_reason=finish,
    )
