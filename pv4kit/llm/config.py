"""What an LLM call needs and gives back (:class:`LLMConfig`, :class:`LLMResponse`, errors, the policy)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pv4kit._options import check_number
from pv4kit.redact import redact_url

Message = dict[str, str]
PROTOCOLS = ("responses", "chat", "completions")


class LLMConfigError(RuntimeError):
    """A request that retrying cannot fix: bad key, no access, unknown model or endpoint."""


@dataclass(frozen=True, kw_only=True)
class LLMConfig:
    """Where and how to call a model: the endpoint description written to run configs.

    Attributes:
        model: Model id sent to the server (part of the cache key).
        base_url: OpenAI-compatible base URL (``None``: the OpenAI API).
        protocol: ``"responses"`` (OpenAI Responses API), ``"chat"`` or ``"completions"`` (a raw prompt).
        api_key_env: Environment variable holding the key; a local ``base_url`` works without it.
        reasoning_effort: ``reasoning.effort``; not sent when ``None``.
        temperature: Sampling temperature; ``None`` leaves the server default.
        max_output_tokens: Output token cap; ``None`` leaves the server default.
        max_concurrency: Requests in flight at once.
        max_retries: Retries of a request after a retryable failure.
        timeout: Seconds an HTTP attempt may take, from sending to the last byte of the answer.
        retry_after_max: Longest wait a server's ``Retry-After`` may impose on every worker (capped, logged).
        assume_greedy: Treat ``temperature=None`` as deterministic for the cache key.
        backoff_base: First backoff delay in seconds (doubles per retry, full jitter).
        backoff_max: Largest backoff delay in seconds.
        chat_template_kwargs: Sent with ``"chat"`` requests (vLLM: ``{"enable_thinking": False}``).
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
        check_number(self.max_concurrency, "max_concurrency", ge=1, integer=True)
        check_number(self.max_retries, "max_retries", ge=0, integer=True)
        check_number(self.timeout, "timeout", gt=0)
        check_number(self.max_output_tokens, "max_output_tokens", ge=1, integer=True, allow_none=True)
        check_number(self.temperature, "temperature", ge=0, allow_none=True)

    @property
    def greedy(self) -> bool:
        """Whether the cache key ignores ``sample_index``."""
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
        usage: ``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``.
        model: The model the server reports.
        finish_reason: ``stop``, ``length``, ``completed``, ``incomplete:<reason>`` ...
        error: ``None``, or why the request failed after its retries.
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


def default_protocol(base_url: str | None) -> str:
    """``"chat"`` at a base URL (OpenAI-compatible servers), else ``"responses"`` (the reference's)."""
    return "chat" if base_url else "responses"


def endpoint_config(
    model: str, *, base_url: str | None = None, protocol: str | None = None, **options: Any
) -> LLMConfig:
    """The :class:`LLMConfig` of ``model`` at ``base_url`` (or the OpenAI API), under pv4kit's one policy.

    ``protocol`` ``None`` gives :func:`default_protocol`; ``temperature`` defaults to ``0.0`` at a base URL
    (greedy, cached once whatever the ``sample_index``) and to the server's at the OpenAI API, whose
    reasoning models refuse one. ``**options`` are other :class:`LLMConfig` fields (``TypeError`` otherwise).
    """
    options.setdefault("temperature", 0.0 if base_url else None)
    return LLMConfig(
        model=model, base_url=base_url or None, protocol=protocol or default_protocol(base_url), **options
    )
