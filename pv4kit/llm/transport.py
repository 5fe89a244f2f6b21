"""HTTP for the LLM stage: the OpenAI client, the sender of one request body, the one retry loop.

**Deadline.** Each HTTP attempt must be over ``config.timeout`` seconds after it starts, whatever the
server does: the SDK's timeouts are per phase (a server dripping a byte every half second never trips the
read timeout), so the client :func:`make_client` builds reads and writes its sockets through
:class:`_DeadlineBackend`, which ends the attempt with a timeout when the wall clock says so (or when the
batch is stopped, within :data:`_SLICE_S` seconds: how Ctrl-C ends a run that waits on a slow server).

**Retries** (:func:`call_with_retries`). Connection errors, timeouts, a reply without an answer
(:class:`~pv4kit.llm.protocols.NoAnswerError`: an HTTP 200 carrying an error object or an HTML page),
408/409/425/429 and 5xx are retried with exponential backoff and full jitter, honouring ``Retry-After``
(which also pauses the other workers sharing a :class:`RetryPause`), capped at ``retry_after_max`` seconds
(600) on both; a pause of 10 s or more, or a capped one, is logged with its length. 401, 403 and 404 raise
:class:`~pv4kit.llm.config.LLMConfigError` naming the model and the base URL (credentials redacted,
:mod:`pv4kit.redact`). Other errors, and failures left after ``max_retries``, give an
:class:`~pv4kit.llm.config.LLMResponse` with ``.error`` set.

The API key is read from the environment variable named in the config and is never stored, logged or
put in an error message. :mod:`pv4kit.embeddings.endpoint` sends its embedding requests through the same
client and loop.
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
from collections.abc import Callable, Iterator
from typing import Any

from pv4kit.llm.config import LLMConfig, LLMConfigError, LLMResponse
from pv4kit.llm.protocols import NoAnswerError, parse_response
from pv4kit.redact import redact_text

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = {408, 409, 425, 429}
_CONFIG_STATUS = {401: "authentication failed", 403: "permission denied", 404: "not found"}
_LONG_PAUSE_S = 10.0  # a Retry-After pause at least this long is logged as a warning
_SLICE_S = 0.25  # a socket read waits at most this long before looking at the deadline and the stop flag

#: ``(monotonic deadline, stop flag)`` of the attempt this thread is sending (``None``: no deadline)
_DEADLINE: contextvars.ContextVar[tuple[float, threading.Event] | None] = contextvars.ContextVar(
    "pv4kit_llm_deadline", default=None
)


def _redact(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    text = redact_text(text)
    return re.sub(r"\b(sk|key|api)[-_][A-Za-z0-9_\-*]{6,}", r"\1-***", text)


def make_client(config: LLMConfig) -> Any:
    """An ``openai.OpenAI`` client for the endpoint of ``config``, with the SDK's own retries off.

    Args:
        config: Its ``base_url``, ``api_key_env`` and ``timeout`` are used.

    Returns:
        The client; its sockets keep the deadline of each attempt (see the module docstring), and plain
        ``http://`` endpoints skip loading the CA bundle.

    Raises:
        LLMConfigError: The OpenAI API without a key in ``$<api_key_env>`` (a base URL works without one).
    """
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a dependency
        raise ImportError("pv4kit.llm needs the openai package: pip install openai") from None
    key = os.environ.get(config.api_key_env)
    if not key:
        if config.base_url is None:
            raise LLMConfigError(
                f"no API key for model {config.model!r} at {config.endpoint}: set the environment variable "
                f"{config.api_key_env} (or pass base_url for a local server)"
            )
        key = "EMPTY"  # local OpenAI-compatible servers accept any key
    # Plain HTTP never uses TLS: skip loading the CA bundle (~30 ms of CPU per client).
    plain = (config.base_url or "").lower().startswith("http://")
    http_client = openai.DefaultHttpxClient(**({"verify": False} if plain else {}))
    transports = [getattr(http_client, "_transport", None), *getattr(http_client, "_mounts", {}).values()]
    for transport in transports:  # the default one, and one per proxy from the environment
        pool = getattr(transport, "_pool", None)  # httpx2 internals: tests/test_llm_faults.py checks them
        if pool is not None:
            pool._network_backend = _DeadlineBackend(pool._network_backend)
    return openai.OpenAI(
        api_key=key, base_url=config.base_url, max_retries=0, timeout=config.timeout, http_client=http_client
    )


@contextlib.contextmanager
def _deadline(seconds: float, stop: threading.Event) -> Iterator[None]:
    """Give the sockets this thread uses :class:`_DeadlineBackend`'s deadline ``seconds`` from now."""
    token = _DEADLINE.set((time.monotonic() + seconds, stop))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None) -> float | None:
    """Seconds the current attempt has left (at most ``timeout``); raises a timeout once there are none."""
    import httpcore2

    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    end, stop = deadline
    if stop.is_set():
        raise httpcore2.ReadTimeout("stopped (the batch was interrupted)")
    left = end - time.monotonic()
    if left <= 0:
        raise httpcore2.ReadTimeout("the request ran past its deadline (timeout)")
    return left if timeout is None else min(left, timeout)


class _DeadlineStream:
    """A network stream whose reads and writes end at the attempt's deadline (see the module docstring)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        import httpcore2

        if _DEADLINE.get() is None:
            return self._stream.read(max_bytes, timeout)
        while True:  # short waits, so that the deadline and the stop flag are seen within _SLICE_S
            wait = min(_left(None) or 0.0, _SLICE_S)  # raises once the time is up
            with contextlib.suppress(httpcore2.ReadTimeout):
                return self._stream.read(max_bytes, wait)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout))

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None):
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, _left(timeout)))

    def close(self) -> None:
        self._stream.close()

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    """httpcore2's network backend whose streams are :class:`_DeadlineStream` s."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> Any:
        return _DeadlineStream(self._backend.connect_tcp(host, port, _left(timeout), **kwargs))

    def connect_unix_socket(self, path: str, timeout: float | None = None, **kwargs: Any) -> Any:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _left(timeout), **kwargs))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def make_sender(client: Any, protocol: str, *, made: bool) -> Callable[[dict[str, Any]], Any]:
    """The function that sends one request body and returns the raw response (SDK object or dict).

    For a client :func:`make_client` built (``made=True``), the body (already in the wire format) is
    posted as is and the JSON comes back as a dict: the SDK's typed ``create`` would validate and transform
    the body and build pydantic models, several milliseconds of CPU per call for nothing
    :func:`~pv4kit.llm.protocols.parse_response` needs. The SDK still adds the headers, applies the
    timeout and raises its usual errors. An injected client is called through ``.responses.create`` /
    ``.chat.completions.create`` / ``.completions.create``.
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


class RetryPause:
    """A shared 'not before' time: a ``Retry-After`` from one worker pauses every worker sharing it.

    Also the sharers' stop flag: after :meth:`stop`, waits end at once, no attempt starts and the
    attempts in flight end within a fraction of a second (on a client :func:`make_client` built).
    One per endpoint and batch; thread-safe.
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
        delay = self.until - time.monotonic()
        if delay > 0:
            self.stopped.wait(delay)


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


def _failure(exc: Exception, config: LLMConfig) -> tuple[str, bool, float | None]:
    """``(error text, retryable, Retry-After seconds)`` of a failed attempt; raises for 401/403/404."""
    status, retry_after = _status_and_retry_after(exc)
    if status in _CONFIG_STATUS:
        raise LLMConfigError(
            f"{_CONFIG_STATUS[status]} (HTTP {status}) for model {config.model!r} "
            f"at {config.endpoint}: check the model id, base URL and key (${config.api_key_env})"
        ) from None
    retryable = (
        _is_connection_error(exc)
        or isinstance(exc, (NoAnswerError, json.JSONDecodeError))  # HTTP 200 without an answer
        or status in _RETRYABLE_STATUS
        or (status or 0) >= 500
    )
    name = type(exc).__name__
    error = f"{name}: HTTP {status}: {exc}" if status else f"{name}: {exc}"
    return _redact(error, os.environ.get(config.api_key_env))[:500], retryable, retry_after


def call_with_retries(
    send: Callable[[dict[str, Any]], Any],
    config: LLMConfig,
    request: dict[str, Any],
    *,
    pause: RetryPause | None = None,
    rng: random.Random | None = None,
    parse: Callable[[Any], LLMResponse] | None = None,
) -> LLMResponse:
    """Send one request with ``send`` (see :func:`make_sender`), retried as the module docstring says.

    Each attempt has ``config.timeout`` seconds, start to last byte (see the module docstring).

    Args:
        send: Sends a body and returns the raw answer.
        config: Timeout, retries, backoff, ``retry_after_max``, and the model and endpoint named in messages.
        request: The request body.
        pause: The pause (and stop flag) shared with the other workers of the batch (``None``: its own).
        rng: Randomness of the backoff jitter (``None``: a fresh ``random.Random()``).
        parse: Turns the raw answer into the response; an error it raises is classified like one of
            ``send``. Default: :func:`~pv4kit.llm.protocols.parse_response` with ``config.protocol``.

    Returns:
        The parsed response with ``attempts`` set, or one with ``.error`` set when the request failed
        for good (a non-retryable error, or ``max_retries`` retries used up).

    Raises:
        LLMConfigError: On 401, 403 or 404 (bad key, no access, unknown model or endpoint).
    """
    pause = pause if pause is not None else RetryPause()
    rng = rng if rng is not None else random.Random()
    parse = parse if parse is not None else (lambda raw: parse_response(raw, config.protocol))
    error = None
    for attempt in range(config.max_retries + 1):
        pause.wait()
        if pause.stopped.is_set():
            return LLMResponse(error=f"stopped (interrupted) after {attempt} attempts", attempts=attempt)
        try:
            with _deadline(config.timeout, pause.stopped):
                raw = send(request)
            resp = parse(raw)
            resp.attempts = attempt + 1
            return resp
        except Exception as exc:  # noqa: BLE001 - classified by _failure
            error, retryable, retry_after = _failure(exc, config)
            if not retryable:
                return LLMResponse(error=error, attempts=attempt + 1)
            if attempt == config.max_retries:
                break
            delay = rng.uniform(0, min(config.backoff_max, config.backoff_base * 2**attempt))
            if retry_after is not None:
                wait = _retry_after_wait(retry_after, config)
                delay = max(delay, wait)
                pause.push(wait)
            logger.debug(
                "retrying %s after %s (%.2fs, attempt %d)",
                config.model,
                type(exc).__name__,
                delay,
                attempt + 1,
            )
            pause.stopped.wait(delay)
    return LLMResponse(
        error=f"gave up after {config.max_retries + 1} attempts: {error}", attempts=config.max_retries + 1
    )
