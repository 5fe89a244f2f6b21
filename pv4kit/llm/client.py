"""The one LLM call of pv4kit: cached, retried, bounded and metered.

Every model call in pv4kit goes through :func:`complete`. It speaks two protocols:

* ``"responses"``: the OpenAI Responses API (``reasoning.effort``, as the reference used with gpt-5.1 and
  gpt-5-mini). System messages become the request's ``instructions`` (joined by blank lines); the other
  messages become ``input`` items with their role.
* ``"chat"``: Chat Completions (vLLM, llama.cpp server, Ollama, most providers). Messages are sent as
  given; ``max_output_tokens`` is sent as ``max_tokens`` and ``reasoning_effort`` only when set;
  ``chat_template_kwargs`` (vLLM's ``{"enable_thinking": false}``) only when set.
* ``"completions"``: the legacy Completions endpoint with a raw prompt: one message whose
  ``prompt_token_ids`` (a list of ints, how vLLM and llama.cpp take an exact token prompt) or else
  ``content`` is sent as ``prompt``. The baselines use it for front-truncated prompts.

**Cache.** Responses are stored in SQLite as they arrive, keyed by a SHA-256 over what changes the
output: protocol, model, messages, reasoning effort, temperature, token cap and, for a sampled call, the
sample index. The base URL, key, timeouts, retries and concurrency are not in the key (a local server on
a random port still hits its cache). The greedy rule: a call is greedy when ``temperature == 0``, or
when ``temperature is None`` and the caller sets ``assume_greedy=True`` (server default taken as
deterministic); a greedy call ignores ``sample_index``. Everything else is sampled, so asking again
with a new ``sample_index`` gets a fresh response (that is how :mod:`pv4kit.generation.steps` re-asks after
a malformed output).

**Retries.** Connection errors, timeouts, 408/409/429 and 5xx are retried with exponential backoff and
full jitter, honouring ``Retry-After`` (which also pauses the other workers of the batch), capped at
``retry_after_max`` seconds (600) on both; a pause of 10 s or more, or a capped one, is logged with its
length. 401, 403 and 404 raise :class:`LLMConfigError` naming the model and the base URL (credentials
redacted, :mod:`pv4kit.redact`). Other errors, and failures left after
``max_retries``, give an :class:`LLMResponse` with ``.error`` set and the batch goes on.

**Ledger.** Each call (cached or not) adds a row to a ``usage`` table in the cache file; read it with
:func:`usage_frame`, which prices tokens with ``pv4kit/llm/prices.json`` (editable, example prices). The
cache file, the ledger and the prices live in :mod:`pv4kit.llm.store` (re-exported here).

The API key is read from the environment variable named in the config and is never stored, logged or
put in an exception message.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# The cache and ledger live in pv4kit.llm.store; these re-exports keep `from pv4kit.llm.client import
# usage_frame` (and generate.py's `_Store`) working.
from pv4kit._io import default_llm_cache
from pv4kit.llm.store import LEDGER_COLUMNS as LEDGER_COLUMNS
from pv4kit.llm.store import _ledger_row, _Store
from pv4kit.llm.store import load_prices as load_prices
from pv4kit.llm.store import usage_frame as usage_frame
from pv4kit.llm.store import usage_summary as usage_summary
from pv4kit.redact import redact_text, redact_url

logger = logging.getLogger(__name__)

Message = dict[str, str]
PROTOCOLS = ("responses", "chat", "completions")
_KEY_VERSION = 1
_RETRYABLE_STATUS = {408, 409, 425, 429}
_CONFIG_STATUS = {401: "authentication failed", 403: "permission denied", 404: "not found"}


class LLMConfigError(RuntimeError):
    """A request that retrying cannot fix: bad key, no access, unknown model or endpoint."""


@dataclass(frozen=True, kw_only=True)
class LLMConfig:
    """Where and how to call a model.

    Attributes:
        model: Model id sent to the server (also part of the cache key).
        base_url: OpenAI-compatible base URL (``None``: the OpenAI API).
        protocol: ``"responses"`` (OpenAI Responses API) or ``"chat"`` (Chat Completions).
        api_key_env: Environment variable holding the key; a local ``base_url`` works without it.
        reasoning_effort: ``reasoning.effort`` (``"none"``, ``"minimal"``, ...); not sent when ``None``.
        temperature: Sampling temperature; ``None`` leaves the server default.
        max_output_tokens: Output token cap; ``None`` leaves the server default.
        max_concurrency: Requests in flight at once.
        max_retries: Retries of a request after a retryable failure.
        timeout: Seconds per HTTP request.
        retry_after_max: Longest wait in seconds that a server's ``Retry-After`` may impose, on the request
            and on the pause it gives the other workers; a longer ask is capped and logged.
        assume_greedy: Treat ``temperature=None`` as deterministic for the cache key.
        backoff_base: First backoff delay in seconds (doubles per retry, full jitter).
        backoff_max: Largest backoff delay in seconds.
        chat_template_kwargs: Sent with ``"chat"`` requests (vLLM: ``{"enable_thinking": False}``); part
            of the cache key when set.
    """

    model: str
    base_url: str | None = None
    protocol: Literal["responses", "chat", "completions"] = "responses"
    api_key_env: str = "OPENAI_API_KEY"
    reasoning_effort: str | None = None
    temperature: float | None = None
    max_output_tokens: int | None = None
    max_concurrency: int = 8
    max_retries: int = 6
    timeout: float = 120.0
    retry_after_max: float = 600.0
    assume_greedy: bool = False
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    chat_template_kwargs: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if not self.model:
            raise ValueError("model must be a non-empty model id")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    @property
    def greedy(self) -> bool:
        """Whether the cache key ignores ``sample_index`` (see the module docstring)."""
        return self.temperature == 0 or (self.temperature is None and self.assume_greedy)

    @property
    def endpoint(self) -> str:
        """The base URL for messages, credentials redacted (``"the OpenAI API"`` when unset)."""
        return redact_url(self.base_url) or "the OpenAI API"


@dataclass
class LLMResponse:
    """One model answer (or the reason there is none).

    Attributes:
        text: The output text ("" on error).
        cached: Whether it came from the cache.
        usage: ``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``.
        response_id: The server's response id.
        model: The model the server reports.
        finish_reason: ``stop``, ``length``, ``completed``, ``incomplete:<reason>`` ...
        error: ``None``, or why the request failed after its retries.
        key: The cache key.
        attempts: HTTP attempts made (0 when cached).
    """

    text: str = ""
    cached: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    response_id: str | None = None
    model: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    key: str = ""
    attempts: int = 0


# --------------------------------------------------------------------------- request building (pure)


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


def parse_response(raw: Any, protocol: str) -> LLMResponse:
    """Turn an SDK response object (or its dict) into an :class:`LLMResponse`."""
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


# --------------------------------------------------------------------------- HTTP calls with retries


def _redact(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    text = redact_text(text)
    return re.sub(r"\b(sk|key|api)[-_][A-Za-z0-9_\-*]{6,}", r"\1-***", text)


def _make_client(config: LLMConfig) -> Any:
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a dependency
        raise ImportError("pv4kit.llm.client needs the openai package: pip install openai") from None
    key = os.environ.get(config.api_key_env)
    if not key:
        if config.base_url is None:
            raise LLMConfigError(
                f"no API key for model {config.model!r} at {config.endpoint}: set the environment variable "
                f"{config.api_key_env} (or pass base_url for a local server)"
            )
        key = "EMPTY"  # local OpenAI-compatible servers accept any key
    http_client = None
    if (config.base_url or "").lower().startswith("http://"):
        # Plain HTTP never uses TLS: skip loading the CA bundle (~30 ms of CPU per client).
        http_client = openai.DefaultHttpxClient(verify=False)
    return openai.OpenAI(
        api_key=key, base_url=config.base_url, max_retries=0, timeout=config.timeout, http_client=http_client
    )


def _sender(client: Any, protocol: str, *, made: bool) -> Callable[[dict[str, Any]], Any]:
    """The function that sends one request body and returns the raw response (SDK object or dict).

    For a client :func:`_make_client` built, the body (already in the wire format) is posted as is and the
    JSON comes back as a dict: the SDK's typed ``create`` would validate and transform the body and build
    pydantic models, several milliseconds of CPU per call for nothing :func:`parse_response` needs. The
    SDK still adds the headers, applies the timeout and raises its usual errors. An injected client is
    called through ``.responses.create`` / ``.chat.completions.create``.
    """
    if made:
        path = {"responses": "/responses", "completions": "/completions"}.get(protocol, "/chat/completions")
        return lambda request: client.post(path, body=request, cast_to=object)
    if protocol == "responses":
        return lambda request: client.responses.create(**request)
    if protocol == "completions":
        return lambda request: client.completions.create(**request)
    return lambda request: client.chat.completions.create(**request)


def _status_and_retry_after(exc: BaseException) -> tuple[int | None, float | None]:
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    retry_after = None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name) if hasattr(headers, "get") else None
        if value is not None:
            try:
                retry_after = float(value) * scale
                break
            except ValueError:
                continue
    return status, retry_after


def _is_connection_error(exc: BaseException) -> bool:
    try:
        import openai

        if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(exc, (ConnectionError, TimeoutError))


class _Pause:
    """A shared 'not before' time: a Retry-After from one worker pauses the whole batch."""

    def __init__(self) -> None:
        self.until = 0.0
        self.lock = threading.Lock()

    def push(self, seconds: float) -> None:
        with self.lock:
            self.until = max(self.until, time.monotonic() + seconds)

    def wait(self) -> None:
        delay = self.until - time.monotonic()
        if delay > 0:
            time.sleep(delay)


_LONG_PAUSE_S = 10.0  # a Retry-After pause at least this long is logged as a warning


def _retry_after_wait(retry_after: float, config: LLMConfig) -> float:
    """The wait a ``Retry-After`` of ``retry_after`` seconds gets: capped at ``config.retry_after_max``.

    The same capped value pauses the other workers of the batch; a long one is logged with its length.
    """
    wait = max(0.0, min(retry_after, config.retry_after_max))
    if wait >= _LONG_PAUSE_S or wait < retry_after:
        capped = f", capped at retry_after_max={config.retry_after_max:g} s" if wait < retry_after else ""
        logger.warning(
            "%s at %s asked to wait %g s (Retry-After)%s: pausing every worker of the batch for %g s",
            config.model,
            config.endpoint,
            retry_after,
            capped,
            wait,
        )
    return wait


def _call(
    send: Callable[[dict[str, Any]], Any],
    config: LLMConfig,
    request: dict[str, Any],
    pause: _Pause,
    rng: random.Random,
) -> LLMResponse:
    """One request (sent with ``send``, see :func:`_sender`) with retries; raises :class:`LLMConfigError`."""
    secret = os.environ.get(config.api_key_env)
    error = None
    for attempt in range(config.max_retries + 1):
        pause.wait()
        try:
            resp = parse_response(send(request), config.protocol)
            resp.attempts = attempt + 1
            return resp
        except Exception as exc:  # noqa: BLE001 - classified below
            status, retry_after = _status_and_retry_after(exc)
            name = type(exc).__name__
            if status in _CONFIG_STATUS:
                raise LLMConfigError(
                    f"{_CONFIG_STATUS[status]} (HTTP {status}) for model {config.model!r} "
                    f"at {config.endpoint}: check the model id, base URL and key (${config.api_key_env})"
                ) from None
            retryable = _is_connection_error(exc) or status in _RETRYABLE_STATUS or (status or 0) >= 500
            error = _redact(f"{name}: HTTP {status}: {exc}" if status else f"{name}: {exc}", secret)[:500]
            if not retryable:
                return LLMResponse(error=error, attempts=attempt + 1)
            if attempt == config.max_retries:
                break
            delay = rng.uniform(0, min(config.backoff_max, config.backoff_base * 2**attempt))
            if retry_after is not None:
                wait = _retry_after_wait(retry_after, config)
                delay = max(delay, wait)
                pause.push(wait)
            logger.debug("retrying %s after %s (%.2fs, attempt %d)", config.model, name, delay, attempt + 1)
            time.sleep(delay)
    return LLMResponse(
        error=f"gave up after {config.max_retries + 1} attempts: {error}", attempts=config.max_retries + 1
    )


# --------------------------------------------------------------------------- the public call


def _per_item(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name}: expected one value per request ({n}), got {len(value)}")
        return list(value)
    return [value] * n


def complete(
    requests: Sequence[Sequence[Message]],
    *,
    config: LLMConfig | Sequence[LLMConfig],
    cache: str | os.PathLike[str] | bool | None = None,
    step: str | Sequence[str] | None = None,
    user_id: int | None = None,
    sample_index: int | Sequence[int] = 0,
    progress: bool = True,
    client: Any = None,
    ledger: str | os.PathLike[str] | None = None,
    on_result: Callable[[int, LLMResponse], None] | None = None,
) -> list[LLMResponse]:
    """Run a batch of chat requests through the cache, with retries and bounded concurrency.

    Args:
        requests: One message list per request (``[{"role": ..., "content": ...}, ...]``).
        config: One :class:`LLMConfig` for all requests, or one per request (the pool size is the
            largest ``max_concurrency`` among them).
        cache: SQLite file for responses and the usage ledger; ``True`` for the shared default
            (``$PV4KIT_CACHE/llm.sqlite``, else ``.cache/pv4kit/llm.sqlite``); ``None`` disables caching.
        step: Label for the ledger and progress bars (one, or one per request).
        user_id: User id for the ledger.
        sample_index: Sample number for sampled calls (one, or one per request); ignored when greedy.
        progress: Show a ``tqdm`` bar per step.
        client: An OpenAI-SDK-like client (``.responses.create`` / ``.chat.completions.create``);
            default: built lazily from ``openai`` for each distinct endpoint.
        ledger: SQLite file for the usage rows when it differs from ``cache``.
        on_result: Called as ``on_result(i, response)`` as each response arrives, from worker threads
            (cached ones are submitted first).

    Returns:
        One :class:`LLMResponse` per request, in input order.

    Raises:
        LLMConfigError: On 401/403/404 (bad key, no access, unknown model) or a missing key.
    """
    n = len(requests)
    configs = _per_item(config, n, "config")
    steps = _per_item(step, n, "step")
    samples = _per_item(sample_index, n, "sample_index")
    keys = [cache_key(m, c, sample_index=s) for m, c, s in zip(requests, configs, samples, strict=True)]
    bodies = [build_request(m, c) for m, c in zip(requests, configs, strict=True)]
    results: list[LLMResponse | None] = [None] * n
    if cache is True:
        cache = default_llm_cache()
    store = _Store(cache) if cache not in (None, False) else None
    ledger_store = (
        _Store(ledger) if ledger is not None and (cache is None or Path(ledger) != Path(cache)) else store
    )
    try:
        hits = store.get_many(keys) if store else {}
        todo = [i for i in range(n) if keys[i] not in hits]
        label = ", ".join(sorted({str(s) for s in steps if s})) or "llm"
        user_txt = f"user {user_id} " if user_id is not None else ""
        logger.info("%s%s: %d requests, %d cached, %d to call", user_txt, label, n, n - len(todo), len(todo))
        bars = _bars(steps, progress, user_id)
        cached_rows = []
        for i in range(n):
            if keys[i] in hits:
                hit = hits[keys[i]]
                results[i] = LLMResponse(**{**hit.__dict__, "usage": dict(hit.usage)})
                cached_rows.append(_ledger_row(results[i], configs[i], steps[i], user_id, 0.0))
        if ledger_store:
            ledger_store.log(cached_rows)
        hit_idx = [i for i in range(n) if results[i] is not None]
        if on_result is None:
            for i in hit_idx:
                _tick(bars, steps[i])
        if todo or (on_result is not None and hit_idx):
            _run_calls(
                todo,
                hit_idx,
                configs,
                bodies,
                keys,
                steps,
                user_id,
                results,
                store,
                ledger_store,
                client,
                bars,
                on_result,
            )
        for bar in bars.values():
            bar.close()
    finally:
        if store:
            store.close()
        if ledger_store is not None and ledger_store is not store:
            ledger_store.close()
    failed = sum(r.error is not None for r in results if r)
    if failed:
        logger.warning(
            "%s%d of %d requests failed after retries",
            f"user {user_id}: " if user_id is not None else "",
            failed,
            n,
        )
    return results  # type: ignore[return-value]


def _run_calls(
    todo,
    hit_idx,
    configs,
    bodies,
    keys,
    steps,
    user_id,
    results,
    store,
    ledger_store,
    client,
    bars,
    on_result,
):
    """Call the misses in a bounded pool; cached hits' callbacks run there too (parallel writes)."""
    clients: dict[tuple, Any] = {}
    senders: dict[tuple, Callable[[dict[str, Any]], Any]] = {}
    pause, rng = _Pause(), random.Random()
    for i in todo:
        c = configs[i]
        ident = (c.base_url, c.api_key_env, c.timeout)
        if ident not in clients:
            clients[ident] = client if client is not None else _make_client(c)
        if ident + (c.protocol,) not in senders:
            senders[ident + (c.protocol,)] = _sender(clients[ident], c.protocol, made=client is None)
    workers = max(1, min(len(todo) + len(hit_idx), max(c.max_concurrency for c in configs)))

    def replay(i: int) -> LLMResponse:
        on_result(i, results[i])
        return results[i]

    def work(i: int) -> LLMResponse:
        c = configs[i]
        start = time.monotonic()
        resp = _call(senders[(c.base_url, c.api_key_env, c.timeout, c.protocol)], c, bodies[i], pause, rng)
        resp.key = keys[i]
        row = _ledger_row(resp, c, steps[i], user_id, time.monotonic() - start)
        if store is not None and resp.error is None:
            store.put(c, bodies[i], resp, row)
            if ledger_store is not store and ledger_store is not None:
                ledger_store.log([row])
        elif ledger_store is not None:
            ledger_store.log([row])
        results[i] = resp
        if on_result:
            on_result(i, resp)
        return resp

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pv4kit-llm") as pool:
        futures = {pool.submit(replay, i): i for i in hit_idx} if on_result is not None else {}
        futures.update({pool.submit(work, i): i for i in todo})
        try:
            for fut in as_completed(futures):
                fut.result()
                _tick(bars, steps[futures[fut]])
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _bars(steps: list, progress: bool, user_id: int | None) -> dict:
    if not progress:
        return {}
    from tqdm.auto import tqdm

    counts: dict[Any, int] = {}
    for s in steps:
        counts[s] = counts.get(s, 0) + 1
    prefix = f"user {user_id} " if user_id is not None else ""
    disable = not logger.isEnabledFor(logging.INFO)
    return {
        s: tqdm(total=k, desc=f"{prefix}{s or 'llm'}", leave=False, disable=disable)
        for s, k in counts.items()
    }


def _tick(bars: dict, step: Any) -> None:
    if step in bars:
        bars[step].update(1)
