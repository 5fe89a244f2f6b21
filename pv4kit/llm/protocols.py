"""The three protocols on the wire, without a network: request bodies, the cache key, response parsing.

* ``"responses"``: the OpenAI Responses API (``reasoning.effort``, as the reference used with gpt-5.1 and
  gpt-5-mini). System messages become the request's ``instructions`` (joined by blank lines); the other
  messages become ``input`` items with their role.
* ``"chat"``: Chat Completions (vLLM, llama.cpp server, Ollama, most providers). Messages are sent as
  given; ``max_output_tokens`` is sent as ``max_tokens`` and ``reasoning_effort`` only when set;
  ``chat_template_kwargs`` (vLLM's ``{"enable_thinking": false}``) only when set.
* ``"completions"``: the legacy Completions endpoint with a raw prompt: one message whose
  ``prompt_token_ids`` (a list of ints, how vLLM and llama.cpp take an exact token prompt) or else
  ``content`` is sent as ``prompt``. The baselines use it for front-truncated prompts.

**The cache key** is a SHA-256 over what changes the output: protocol, model, messages, reasoning effort,
temperature, token cap and, for a sampled call, the sample index (:data:`KEY_FIELDS`). The base URL, key,
timeouts, retries and concurrency are not in the key (a local server on a random port still hits its
cache). The greedy rule: a call is greedy when ``temperature == 0``, or when ``temperature is None`` and
the caller sets ``assume_greedy=True`` (server default taken as deterministic); a greedy call ignores
``sample_index``.

**An answer** has the shape of one: a first choice with a ``message`` (chat) or a ``text`` (completions),
or an ``output`` list (Responses), and no ``error``. Anything else that comes back with HTTP 200 (an OpenAI
error object from a proxy or gateway, an HTML page, other JSON) raises :class:`NoAnswerError` with the
server's words: :mod:`pv4kit.llm.transport` retries it like a 5xx and it is never cached. An answer whose
text is empty (``content: null`` with ``finish_reason: content_filter``) is an answer.

Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pv4kit.llm.config import LLMConfig, LLMResponse, Message

_KEY_VERSION = 1

#: The :class:`~pv4kit.llm.config.LLMConfig` fields that can change the cache key (``assume_greedy``
#: through the greedy rule); configs equal on these are interchangeable endpoints of one model.
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
    _extend_key(payload, messages, config)
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _extend_key(payload: dict[str, Any], messages: Sequence[Message], config: LLMConfig) -> None:
    """Key fields that exist only for some requests (absent otherwise, so older keys stay valid)."""
    ids = [m.get("prompt_token_ids") for m in messages]
    if any(i is not None for i in ids):
        payload["prompt_token_ids"] = [None if i is None else [int(t) for t in i] for i in ids]
    if config.chat_template_kwargs:
        payload["chat_template_kwargs"] = dict(config.chat_template_kwargs)


def _completions_request(messages: Sequence[Message], config: LLMConfig) -> dict[str, Any]:
    """The body of a ``/completions`` request: one raw prompt (token ids when given, else text)."""
    if len(messages) != 1:
        raise ValueError(f"protocol 'completions' takes one prompt message, got {len(messages)}")
    m = messages[0]
    ids = m.get("prompt_token_ids")
    if ids is None and not isinstance(m.get("content"), str):
        raise ValueError(f"messages[0] must have 'prompt_token_ids' or a str 'content', got {m!r}")
    kwargs: dict[str, Any] = {
        "model": config.model,
        "prompt": [int(t) for t in ids] if ids is not None else m["content"],
    }
    if config.max_output_tokens is not None:
        kwargs["max_tokens"] = config.max_output_tokens
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    return kwargs


def build_request(messages: Sequence[Message], config: LLMConfig) -> dict[str, Any]:
    """The keyword arguments of ``client.responses.create`` or ``client.chat.completions.create``."""
    if config.protocol == "completions":
        return _completions_request(messages, config)
    for i, m in enumerate(messages):
        if m.get("role") not in ("system", "developer", "user", "assistant") or not isinstance(
            m.get("content"), str
        ):
            raise ValueError(
                f"messages[{i}] must be {{'role': system|user|assistant, 'content': str}}, got {m!r}"
            )
    kwargs: dict[str, Any] = {"model": config.model}
    if config.protocol == "responses":
        system = [m["content"] for m in messages if m["role"] == "system"]
        if system:
            kwargs["instructions"] = "\n\n".join(system)
        kwargs["input"] = [
            {"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"
        ]
        if config.reasoning_effort is not None:
            kwargs["reasoning"] = {"effort": config.reasoning_effort}
        if config.max_output_tokens is not None:
            kwargs["max_output_tokens"] = config.max_output_tokens
    else:
        kwargs["messages"] = [{"role": m["role"], "content": m["content"]} for m in messages]
        if config.reasoning_effort is not None:
            kwargs["reasoning_effort"] = config.reasoning_effort
        if config.max_output_tokens is not None:
            kwargs["max_tokens"] = config.max_output_tokens
        if config.chat_template_kwargs:
            kwargs["chat_template_kwargs"] = dict(config.chat_template_kwargs)
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    return kwargs


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


class NoAnswerError(ValueError):
    """A reply without the shape of an answer (see the module docstring); its message quotes the server."""


def _has(obj: Any, name: str) -> bool:
    return name in obj if isinstance(obj, Mapping) else hasattr(obj, name)


def _no_answer(raw: Any, protocol: str) -> str | None:
    """The server's words when ``raw`` is not an answer of ``protocol``; ``None`` when it is one."""
    if isinstance(raw, (str, bytes)):  # a non-JSON body: an HTML page, plain text
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        return " ".join(re.sub(r"<[^>]*>", " ", text).split())[:300] or "an empty body"
    error = _get(raw, "error")
    if error:
        return str(_get(error, "message") or error)[:300] if isinstance(error, Mapping) else str(error)[:300]
    if protocol == "responses":
        shaped = isinstance(_get(raw, "output"), list) or isinstance(_get(raw, "output_text"), str)
    else:
        choices = _get(raw, "choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        shaped = first is not None and (
            _has(first, "text") if protocol == "completions" else _get(first, "message") is not None
        )
    if shaped:
        return None
    shown = json.dumps(raw, default=str)[:300] if isinstance(raw, (Mapping, list)) else repr(raw)[:300]
    return f"no {'output' if protocol == 'responses' else 'choices'} in {shown}"


def parse_response(raw: Any, protocol: str) -> LLMResponse:
    """Turn an SDK response object (or its dict) into an :class:`~pv4kit.llm.config.LLMResponse`.

    Raises:
        NoAnswerError: ``raw`` has not the shape of an answer (an error object, an HTML page ...).
    """
    words = _no_answer(raw, protocol)
    if words is not None:
        raise NoAnswerError(f"HTTP 200 without an answer: {words}")
    usage = _get(raw, "usage")
    if protocol == "responses":
        text = _get(raw, "output_text")
        if text is None:  # a dict, or an SDK without the convenience property
            parts = []
            for item in _get(raw, "output", []) or []:
                for content in _get(item, "content", []) or []:
                    if _get(content, "type") == "output_text":
                        parts.append(_get(content, "text", ""))
            text = "".join(parts)
        status = _get(raw, "status")
        reason = _get(_get(raw, "incomplete_details"), "reason")
        finish = f"{status}:{reason}" if reason else status
        tokens = {
            "prompt_tokens": _get(usage, "input_tokens", 0) or 0,
            "completion_tokens": _get(usage, "output_tokens", 0) or 0,
            "reasoning_tokens": _get(_get(usage, "output_tokens_details"), "reasoning_tokens", 0) or 0,
        }
    else:
        choices = _get(raw, "choices", []) or []
        first = choices[0] if choices else None
        text = (
            _get(first, "text") if protocol == "completions" else _get(_get(first, "message"), "content")
        ) or ""
        finish = _get(first, "finish_reason")
        tokens = {
            "prompt_tokens": _get(usage, "prompt_tokens", 0) or 0,
            "completion_tokens": _get(usage, "completion_tokens", 0) or 0,
            "reasoning_tokens": _get(_get(usage, "completion_tokens_details"), "reasoning_tokens", 0) or 0,
        }
    return LLMResponse(
        text=text or "",
        usage={k: int(v) for k, v in tokens.items()},
        response_id=_get(raw, "id"),
        model=_get(raw, "model"),
        finish_reason=finish,
    )
