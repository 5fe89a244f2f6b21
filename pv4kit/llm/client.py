"""The one LLM call of pv4kit, top to bottom: :func:`complete` -> :func:`call_with_retries` -> :func:`post`.

Cache keys (:func:`cache_key`) hash what changes the output, never the endpoint, key, timeouts or retries.
Retried: connection errors, timeouts, a reply without an answer, 408/409/425/429 and 5xx (jittered backoff,
``Retry-After`` shared per endpoint); 401/403/404 raise :class:`~pv4kit.llm.config.LLMConfigError`. The API
key is never stored, logged or put in a message.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from typing import Any

from pv4kit._io import default_llm_cache, sha256_text
from pv4kit.llm.config import LLMConfig, LLMConfigError, LLMResponse, Message
from pv4kit.llm.store import ResponseStore, _ledger_row
from pv4kit.redact import redact_text

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = {408, 409, 425, 429}
_CONFIG_STATUS = {401: "authentication failed", 403: "permission denied", 404: "not found"}
_LONG_PAUSE_S = 10.0  # a Retry-After pause at least this long is logged as a warning
_SLICE_S = 0.25  # a socket read waits at most this long before looking at the deadline and the stop flag
_PATHS = {"responses": "/responses", "completions": "/completions", "chat": "/chat/completions"}
_KEY_VERSION = 1
_ROLES = ("system", "developer", "user", "assistant")
#: The :class:`~pv4kit.llm.config.LLMConfig` fields that can change the cache key.
KEY_FIELDS = ("protocol", "model", "reasoning_effort", "temperature", "max_output_tokens", "assume_greedy")
KEY_FIELDS += ("chat_template_kwargs",)
#: ``(monotonic deadline, stop flag)`` of the attempt this thread is sending (``None``: no deadline)
_DEADLINE: contextvars.ContextVar = contextvars.ContextVar("pv4kit_llm_deadline", default=None)


def complete(
    requests: Sequence[Sequence[Message]],
    *,
    llm: LLMConfig | Sequence[LLMConfig],
    cache: str | os.PathLike[str] | bool | None = None,
    step: str | Sequence[str] | None = None,
    user_id: int | None = None,
    sample_index: int | Sequence[int] = 0,
    progress: bool = True,
    client: Any = None,
    on_result: Callable[[int, LLMResponse], None] | None = None,
) -> list[LLMResponse]:
    """Run a batch of chat requests through the cache, with retries, bounded concurrency and sharding.

    Returns one :class:`LLMResponse` per request, in input order.

    Args:
        requests: One message list per request (``[{"role": ..., "content": ...}, ...]``).
        llm: An :class:`LLMConfig`, or a list: request ``i`` is sent with ``llm[i % len(llm)]``. One per
            request gives each its own; a shorter list shards the requests round-robin over equivalent
            endpoints (equal :data:`KEY_FIELDS`: two vLLM servers of one model), cached alike. Each base URL
            gets a worker pool as wide as its largest ``max_concurrency`` and its own ``Retry-After`` pause.
        cache: SQLite file of responses and usage ledger; ``True`` for the shared default
            (``$PV4KIT_CACHE/llm.sqlite``, else ``.cache/pv4kit/llm.sqlite``); ``None`` disables caching.
        step: Label for the ledger and progress bars (one, or one per request).
        user_id: User id for the ledger.
        sample_index: Sample number of sampled calls (one, or one per request); ignored when greedy.
        progress: Show a ``tqdm`` bar per step.
        client: An OpenAI-SDK-like client used for every endpoint (default: an ``openai`` client each).
        on_result: Called as ``on_result(i, response)`` as each response arrives, from worker threads.

    Raises:
        LLMConfigError: On 401/403/404 (bad key, no access, unknown model) or a missing key.
        TypeError: An ``llm`` that is not an :class:`LLMConfig` or a list of them.
        ValueError: A per-request list of the wrong length, or endpoints to shard over not equivalent.
    """
    n, where = len(requests), f"user {user_id} " if user_id is not None else ""
    configs = _configs(llm, n)
    steps, samples = _per_item(step, n, "step"), _per_item(sample_index, n, "sample_index")
    bodies = [build_request(m, c) for m, c in zip(requests, configs, strict=True)]
    keys = [cache_key(m, c, sample_index=s) for m, c, s in zip(requests, configs, samples, strict=True)]
    with contextlib.ExitStack() as stack:
        cache = default_llm_cache() if cache is True else cache
        store = stack.enter_context(contextlib.closing(ResponseStore(cache))) if cache else None
        hits = store.get_many(keys) if store else {}
        results: list[Any] = [
            replace(hits[k], usage=dict(hits[k].usage)) if k in hits else None for k in keys
        ]
        replays, todo = [i for i in range(n) if results[i]], [i for i in range(n) if not results[i]]
        label, urls = ", ".join(sorted({str(s) for s in steps if s})) or "llm", {c.base_url for c in configs}
        over = f" over {len(urls)} endpoints" if len(urls) > 1 else ""
        logger.info(
            "%s%s: %d requests, %d cached, %d to call%s", where, label, n, len(replays), len(todo), over
        )
        if store:
            store.log([_ledger_row(results[i], configs[i], steps[i], user_id, 0.0) for i in replays])
        bars = _bars(steps, progress, user_id)
        for bar in bars.values():
            stack.callback(bar.close)
        endpoints = {(c.base_url, c.api_key_env, c.timeout): c for c in (configs[i] for i in todo)}
        clients = {k: client or make_client(c) for k, c in endpoints.items()}  # one per endpoint
        rng = random.Random()

        def call(i: int, pause: RetryPause) -> None:
            c, start = configs[i], time.monotonic()
            send = functools.partial(post, clients[c.base_url, c.api_key_env, c.timeout], c.protocol)
            results[i] = resp = call_with_retries(send, c, bodies[i], pause=pause, rng=rng)
            resp.key = keys[i]
            if store is not None:  # the answer (unless it failed) and its ledger row, in one commit
                store.put(
                    c, bodies[i], resp, _ledger_row(resp, c, steps[i], user_id, time.monotonic() - start)
                )
            if on_result:
                on_result(i, resp)

        if not on_result:  # cached answers are done; else their callbacks run in the pools, first
            for i in replays:
                bars[steps[i]].update(1)
            replays = []
        futures, pauses = {}, []
        for url in dict.fromkeys(configs[i].base_url for i in replays + todo):  # one pool per endpoint
            again, calls = ([i for i in ids if configs[i].base_url == url] for ids in (replays, todo))
            width = min(len(again) + len(calls), max(c.max_concurrency for c in configs if c.base_url == url))
            pool = stack.enter_context(
                ThreadPoolExecutor(width, thread_name_prefix=f"pv4kit-llm-{len(pauses)}")
            )
            pauses.append(RetryPause())
            futures.update({pool.submit(on_result, i, results[i]): i for i in again})
            futures.update({pool.submit(call, i, pauses[-1]): i for i in calls})
        try:
            for future in as_completed(futures):
                future.result()
                bars[steps[futures[future]]].update(1)
        except BaseException:
            for future in futures:
                future.cancel()
            for pause in pauses:
                pause.stop()
            raise
    if failed := sum(r.error is not None for r in results):
        logger.warning("%s%d of %d requests failed after retries", where and where[:-1] + ": ", failed, n)
    return results


def _per_item(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name}: expected one value per request ({n}), got {len(value)}")
        return list(value)
    return [value] * n


def _configs(llm: Any, n: int) -> list[LLMConfig]:
    """The config of each request: ``llm[i % len(llm)]``, the endpoints to shard over checked equivalent."""
    endpoints = [llm] if isinstance(llm, LLMConfig) else list(llm)
    if not endpoints:
        raise ValueError("llm: expected an LLMConfig or a non-empty list of them, got an empty list")
    for j, c in enumerate(endpoints):
        if not isinstance(c, LLMConfig):
            raise TypeError(f"llm[{j}]: expected an LLMConfig, got {type(c).__name__}")
        key = [f for f in KEY_FIELDS if _key_fields(c)[f] != _key_fields(endpoints[0])[f]]
        if key and len(endpoints) != n:
            raise ValueError(
                f"llm: endpoints to shard over must give the same cache key (equal {', '.join(KEY_FIELDS)});"
                f" llm[{j}] has {key[0]}={getattr(c, key[0])!r}, llm[0] has {getattr(endpoints[0], key[0])!r}"
            )
    return [endpoints[i % len(endpoints)] for i in range(n)]


def _key_fields(config: LLMConfig) -> dict[str, Any]:
    fields = {f: getattr(config, f) for f in KEY_FIELDS}
    return fields | {"chat_template_kwargs": dict(config.chat_template_kwargs or {})}  # None and {}: one key


def _bars(steps: list, progress: bool, user_id: int | None) -> dict:
    """A ``tqdm`` bar per step (disabled unless ``progress`` and logging at INFO)."""
    from tqdm.auto import tqdm

    prefix = f"user {user_id} " if user_id is not None else ""
    disable = not progress or not logger.isEnabledFor(logging.INFO)
    return {
        s: tqdm(total=steps.count(s), desc=f"{prefix}{s or 'llm'}", leave=False, disable=disable)
        for s in dict.fromkeys(steps)
    }


def call_with_retries(
    send: Callable[[dict[str, Any]], Any],
    config: LLMConfig,
    request: dict[str, Any],
    *,
    pause: RetryPause | None = None,
    rng: random.Random | None = None,
    parse: Callable[[Any], LLMResponse] | None = None,
) -> LLMResponse:
    """Send ``request`` with ``send`` (body -> raw answer) and parse the answer, retried (module docstring).

    Args:
        send: Sends a body and returns the raw answer.
        config: Timeout, retries, backoff, ``retry_after_max``; the model and endpoint named in messages.
        request: The request body.
        pause: The pause and stop flag shared with the other workers of the endpoint (``None``: its own).
        rng: Randomness of the backoff jitter.
        parse: Raw answer -> response (its errors count as ``send``'s); default :func:`parse_response`.

    Returns the response with ``attempts`` set, or one with ``.error`` set when the request failed for good.

    Raises:
        LLMConfigError: On 401, 403 or 404 (bad key, no access, unknown model or endpoint).
    """
    pause = pause or RetryPause()
    rng = rng or random.Random()
    error = None
    for attempt in range(config.max_retries + 1):
        pause.stopped.wait(max(0.0, pause.until - time.monotonic()))
        if pause.stopped.is_set():
            return LLMResponse(error=f"stopped (interrupted) after {attempt} attempts", attempts=attempt)
        token = _DEADLINE.set((time.monotonic() + config.timeout, pause.stopped))
        try:
            raw = send(request)
            resp = parse(raw) if parse else parse_response(raw, config.protocol)
            resp.attempts = attempt + 1
            return resp
        except Exception as exc:  # noqa: BLE001 - classified by _failure
            error, retryable, retry_after = _failure(exc, config)
            if not retryable:
                return LLMResponse(error=error, attempts=attempt + 1)
        finally:
            _DEADLINE.reset(token)
        if attempt == config.max_retries:
            break
        delay = rng.uniform(0, min(config.backoff_max, config.backoff_base * 2**attempt))
        if retry_after is not None:
            wait = max(0.0, min(retry_after, config.retry_after_max))
            if wait >= _LONG_PAUSE_S or wait < retry_after:
                capped = f", capped at retry_after_max={config.retry_after_max:g} s" * (wait < retry_after)
                message = (
                    "%s at %s asked to wait %g s (Retry-After)%s: pausing every worker of the batch for %g s"
                )
                logger.warning(message, config.model, config.endpoint, retry_after, capped, wait)
            delay = max(delay, wait)
            with pause.lock:
                pause.until = max(pause.until, time.monotonic() + wait)
        logger.debug("retrying %s (%.2fs, attempt %d): %s", config.model, delay, attempt + 1, error)
        pause.stopped.wait(delay)
    n = config.max_retries + 1
    return LLMResponse(error=f"gave up after {n} attempts: {error}", attempts=n)


def _failure(exc: Exception, config: LLMConfig) -> tuple[str, bool, float | None]:
    """``(error text, retryable, Retry-After seconds)`` of a failed attempt; raises for 401/403/404."""
    import openai

    status = getattr(exc, "status_code", None)
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    retry_after = None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        with contextlib.suppress(TypeError, ValueError):
            retry_after = float(headers.get(name)) * scale
            break
    if status in _CONFIG_STATUS:
        raise LLMConfigError(
            f"{_CONFIG_STATUS[status]} (HTTP {status}) for model {config.model!r} "
            f"at {config.endpoint}: check the model id, base URL and key (${config.api_key_env})"
        ) from None
    retryable = isinstance(
        exc, (openai.APIConnectionError, ConnectionError, TimeoutError, NoAnswerError, json.JSONDecodeError)
    ) or (status in _RETRYABLE_STATUS or (status or 0) >= 500)
    error = f"{type(exc).__name__}: HTTP {status}: {exc}" if status else f"{type(exc).__name__}: {exc}"
    secret = os.environ.get(config.api_key_env)
    error = redact_text(error.replace(secret, "***") if secret else error)
    return re.sub(r"\b(sk|key|api)[-_][A-Za-z0-9_\-*]{6,}", r"\1-***", error)[:500], retryable, retry_after


class RetryPause:
    """The shared 'not before' time (a ``Retry-After`` pauses every worker) and stop flag of one endpoint."""

    def __init__(self) -> None:
        self.until, self.lock, self.stopped = 0.0, threading.Lock(), threading.Event()

    def stop(self) -> None:
        """Stop every sharer: waits end at once and no attempt starts (the batch was interrupted)."""
        self.stopped.set()


def post(client: Any, protocol: str, body: dict[str, Any]) -> Any:
    """Send one request body; the raw answer (the JSON as a dict, or what an injected SDK-like client gives).

    An ``openai`` client posts the body as is (no typed ``create``, no pydantic models); a client without
    ``post`` is called through ``.responses.create`` / ``.completions.create`` / ``.chat.completions.create``.
    """
    if hasattr(client, "post"):
        return client.post(_PATHS[protocol], body=body, cast_to=object)
    api = {"responses": "responses", "completions": "completions"}.get(protocol)
    return (getattr(client, api) if api else client.chat.completions).create(**body)


def make_client(config: LLMConfig) -> Any:
    """An ``openai.OpenAI`` client for ``config``'s endpoint: SDK retries off, each attempt's deadline kept.

    Raises:
        LLMConfigError: The OpenAI API without a key in ``$<api_key_env>`` (a base URL works without one).
    """
    import openai

    key = os.environ.get(config.api_key_env)
    if not key and config.base_url is None:
        raise LLMConfigError(
            f"no API key for model {config.model!r} at {config.endpoint}: set the environment variable "
            f"{config.api_key_env} (or pass base_url for a local server)"
        )
    plain = (config.base_url or "").lower().startswith("http://")  # no TLS: skip loading the CA bundle
    http_client = openai.DefaultHttpxClient(**({"verify": False} if plain else {}))
    for transport in [http_client._transport, *http_client._mounts.values()]:  # one per proxy too
        # httpx2 internals: tests/test_llm_faults.py checks them
        if (pool := getattr(transport, "_pool", None)) is not None:
            pool._network_backend = _DeadlineStream(pool._network_backend)
    options = {"max_retries": 0, "timeout": config.timeout, "http_client": http_client}
    return openai.OpenAI(api_key=key or "EMPTY", base_url=config.base_url, **options)


def _left(timeout: float | None) -> float | None:
    """Seconds the current attempt has left (at most ``timeout``); raises a timeout once there are none."""
    import httpcore2

    if _DEADLINE.get() is None:
        return timeout
    end, stop = _DEADLINE.get()
    if stop.is_set():
        raise httpcore2.ReadTimeout("stopped (the batch was interrupted)")
    left = end - time.monotonic()
    if left <= 0:
        raise httpcore2.ReadTimeout("the request ran past its deadline (timeout)")
    return left if timeout is None else min(left, timeout)


class _DeadlineStream:
    """httpcore2's network backend, and its streams, ending each read and write at the attempt's deadline."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:  # close, get_extra_info, sleep, connect_unix_socket
        return getattr(self._inner, name)

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> Any:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _left(timeout), **kwargs))

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        import httpcore2

        if _DEADLINE.get() is None:
            return self._inner.read(max_bytes, timeout)
        while True:  # short waits, so that the deadline and the stop flag are seen within _SLICE_S
            wait = min(_left(None) or 0.0, _SLICE_S)  # raises once the time is up
            with contextlib.suppress(httpcore2.ReadTimeout):
                return self._inner.read(max_bytes, wait)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout))

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None):
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout)))


def cache_key(messages: Sequence[Message], config: LLMConfig, *, sample_index: int = 0) -> str:
    """SHA-256 over everything that changes the output of one request (never the endpoint or key)."""
    # chat_template_kwargs (the last of KEY_FIELDS) below: absent when unset, so older keys stay valid
    payload = {"v": _KEY_VERSION} | {f: getattr(config, f) for f in KEY_FIELDS[:5]}
    payload["messages"] = [{"role": m["role"], "content": m["content"]} for m in messages]
    payload["sample"] = None if config.greedy else int(sample_index)  # assume_greedy counts here
    ids = [m.get("prompt_token_ids") for m in messages]  # absent unless set, so older keys stay valid
    if any(i is not None for i in ids):
        payload["prompt_token_ids"] = [None if i is None else [int(t) for t in i] for i in ids]
    if config.chat_template_kwargs:
        payload["chat_template_kwargs"] = dict(config.chat_template_kwargs)
    return sha256_text(json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


def build_request(messages: Sequence[Message], config: LLMConfig) -> dict[str, Any]:
    """The JSON body of one request of ``config.protocol``.

    Raises:
        ValueError: A message that is not ``{"role": system|user|assistant, "content": str}``, or for
            ``"completions"`` not exactly one message with ``prompt_token_ids`` or a str ``content``.
    """
    body: dict[str, Any] = {"model": config.model}  # the keys in the order sent; None values are left out
    if config.protocol == "completions":
        if len(messages) != 1:
            raise ValueError(f"protocol 'completions' takes one prompt message, got {len(messages)}")
        m, ids = messages[0], messages[0].get("prompt_token_ids")
        if ids is None and not isinstance(m.get("content"), str):
            raise ValueError(f"messages[0] must have 'prompt_token_ids' or a str 'content', got {m!r}")
        body |= {"prompt": [int(t) for t in ids] if ids is not None else m["content"]}
        body["max_tokens"] = config.max_output_tokens
    else:
        for i, m in enumerate(messages):
            if m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
                raise ValueError(
                    f"messages[{i}] must be {{'role': system|user|assistant, 'content': str}}, got {m!r}"
                )
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        if config.protocol == "responses":
            system, effort = [m["content"] for m in plain if m["role"] == "system"], config.reasoning_effort
            body["instructions"] = "\n\n".join(system) if system else None
            body["input"] = [m for m in plain if m["role"] != "system"]
            body["reasoning"] = {"effort": effort} if effort is not None else None
            body["max_output_tokens"] = config.max_output_tokens
        else:
            body |= {"messages": plain, "reasoning_effort": config.reasoning_effort}
            body["max_tokens"] = config.max_output_tokens
            body["chat_template_kwargs"] = dict(config.chat_template_kwargs or {}) or None
    body["temperature"] = config.temperature
    return {k: v for k, v in body.items() if v is not None}


class NoAnswerError(ValueError):
    """An HTTP 200 without the shape of an answer (an error object, an HTML page); quotes the server."""


def parse_response(raw: Any, protocol: str) -> LLMResponse:
    """Turn a response (its JSON as a dict, or an SDK object) into an :class:`~pv4kit.llm.config.LLMResponse`.

    Raises:
        NoAnswerError: ``raw`` has not the shape of an answer (an error object, an HTML page ...).
    """
    raw = raw.model_dump() if hasattr(raw, "model_dump") else raw
    if isinstance(raw, (str, bytes)):  # a non-JSON body: an HTML page, plain text
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        words = " ".join(re.sub(r"<[^>]*>", " ", text).split())[:300] or "an empty body"
        raise NoAnswerError(f"HTTP 200 without an answer: {words}")
    if error := (raw.get("error") if isinstance(raw, Mapping) else None):
        words = str(error.get("message") or error if isinstance(error, Mapping) else error)[:300]
        raise NoAnswerError(f"HTTP 200 without an answer: {words}")
    try:  # a missing or mistyped part of the answer's shape: no answer
        if protocol == "responses":
            text = raw.get("output_text")
            if not isinstance(text, str):
                parts = [c for item in raw["output"] for c in (item or {}).get("content") or []]
                text = "".join(c.get("text", "") for c in parts if c.get("type") == "output_text")
            reason = (raw.get("incomplete_details") or {}).get("reason")
            finish = f"{raw.get('status')}:{reason}" if reason else raw.get("status")
        else:
            first = raw["choices"][0]
            text = first["text"] if protocol == "completions" else first["message"].get("content")
            finish = first.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        shown = json.dumps(raw, default=str) if isinstance(raw, (Mapping, list)) else repr(raw)
        what = "output" if protocol == "responses" else "choices"
        raise NoAnswerError(f"HTTP 200 without an answer: no {what} in {shown[:300]}") from None
    usage = raw.get("usage") or {}
    sides = ("input", "output") if protocol == "responses" else ("prompt", "completion")
    tokens = [int(usage.get(f"{side}_tokens") or 0) for side in sides]
    tokens.append(int((usage.get(f"{sides[1]}_tokens_details") or {}).get("reasoning_tokens") or 0))
    tokens = dict(zip(("prompt_tokens", "completion_tokens", "reasoning_tokens"), tokens, strict=True))
    return LLMResponse(text or "", False, tokens, raw.get("id"), raw.get("model"), finish)
