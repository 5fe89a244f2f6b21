"""HTTP for the LLM stage: the OpenAI client, :func:`post` of one request body, the one retry loop.

Each attempt ends ``config.timeout`` seconds after it starts, whatever the server does (a server dripping a
byte every half second never trips the SDK's per-read timeout): the client of :func:`make_client` reads and
writes its sockets through :class:`_DeadlineStream`, which also ends the attempt within :data:`_SLICE_S`
seconds once the batch is stopped (Ctrl-C). :func:`call_with_retries` retries connection errors, timeouts,
a reply without an answer, 408/409/425/429 and 5xx with jittered exponential backoff, honouring
``Retry-After`` (capped at ``retry_after_max``, shared with the other workers through a :class:`RetryPause`);
401/403/404 raise :class:`~pv4kit.llm.config.LLMConfigError`. The API key is never stored, logged or put in
an error message. :mod:`pv4kit.embeddings.endpoint` uses the same client and loop.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from pv4kit.llm.config import LLMConfig, LLMConfigError, LLMResponse
from pv4kit.llm.protocols import NoAnswerError, parse_response
from pv4kit.redact import redact_text

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = {408, 409, 425, 429}
_CONFIG_STATUS = {401: "authentication failed", 403: "permission denied", 404: "not found"}
_LONG_PAUSE_S = 10.0  # a Retry-After pause at least this long is logged as a warning
_SLICE_S = 0.25  # a socket read waits at most this long before looking at the deadline and the stop flag
_PATHS = {"responses": "/responses", "completions": "/completions", "chat": "/chat/completions"}

#: ``(monotonic deadline, stop flag)`` of the attempt this thread is sending (``None``: no deadline)
_DEADLINE: contextvars.ContextVar[tuple[float, threading.Event] | None] = contextvars.ContextVar(
    "pv4kit_llm_deadline", default=None
)


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
        pool = getattr(transport, "_pool", None)  # httpx2 internals: tests/test_llm_faults.py checks them
        if pool is not None:
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


def post(client: Any, protocol: str, body: dict[str, Any]) -> Any:
    """Send one request body; the raw answer (the JSON as a dict, or what an injected SDK-like client gives).

    An ``openai`` client posts the body as is (its typed ``create`` would validate the body and build
    pydantic models: milliseconds of CPU per call for nothing); a client without ``post`` is called through
    ``.responses.create`` / ``.completions.create`` / ``.chat.completions.create``.
    """
    if hasattr(client, "post"):
        return client.post(_PATHS[protocol], body=body, cast_to=object)
    api = {"responses": "responses", "completions": "completions"}.get(protocol)
    return (getattr(client, api) if api else client.chat.completions).create(**body)


class RetryPause:
    """A shared 'not before' time and stop flag of the workers of one endpoint (thread-safe).

    A ``Retry-After`` from one worker pauses all; after :meth:`stop`, waits end and no attempt starts.
    """

    def __init__(self) -> None:
        self.until = 0.0
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def stop(self) -> None:
        """Stop every sharer (the batch was interrupted)."""
        self.stopped.set()

    def push(self, seconds: float) -> None:
        """Pause every sharer for at least ``seconds`` from now."""
        with self.lock:
            self.until = max(self.until, time.monotonic() + seconds)

    def wait(self) -> None:
        """Sleep until the pause is over (returns at once when there is none)."""
        self.stopped.wait(max(0.0, self.until - time.monotonic()))


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


def call_with_retries(
    send: Callable[[dict[str, Any]], Any],
    config: LLMConfig,
    request: dict[str, Any],
    *,
    pause: RetryPause | None = None,
    rng: random.Random | None = None,
    parse: Callable[[Any], LLMResponse] | None = None,
) -> LLMResponse:
    """Send ``request`` with ``send`` and parse the answer, retried as the module docstring says.

    Args:
        send: Sends a body and returns the raw answer.
        config: Timeout, retries, backoff, ``retry_after_max``; the model and endpoint named in messages.
        request: The request body.
        pause: The pause and stop flag shared with the other workers (``None``: its own).
        rng: Randomness of the backoff jitter.
        parse: Raw answer -> response (an error it raises counts as one of ``send``); default
            :func:`~pv4kit.llm.protocols.parse_response`.

    Returns:
        The response with ``attempts`` set, or one with ``.error`` set when the request failed for good.

    Raises:
        LLMConfigError: On 401, 403 or 404 (bad key, no access, unknown model or endpoint).
    """
    pause = pause or RetryPause()
    rng = rng or random.Random()
    error = None
    for attempt in range(config.max_retries + 1):
        pause.wait()
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
                capped = (
                    f", capped at retry_after_max={config.retry_after_max:g} s" if wait < retry_after else ""
                )
                message = (
                    "%s at %s asked to wait %g s (Retry-After)%s: pausing every worker of the batch for %g s"
                )
                logger.warning(message, config.model, config.endpoint, retry_after, capped, wait)
            delay = max(delay, wait)
            pause.push(wait)
        logger.debug("retrying %s (%.2fs, attempt %d): %s", config.model, delay, attempt + 1, error)
        pause.stopped.wait(delay)
    n = config.max_retries + 1
    return LLMResponse(error=f"gave up after {n} attempts: {error}", attempts=n)
