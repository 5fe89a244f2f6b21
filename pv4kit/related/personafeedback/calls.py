"""The LLM calls of the PersonaFeedback judge and generator: one place that reaches ``pv4kit.llm``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pv4kit.llm.client import complete

__all__ = ["complete_messages", "reply_columns"]


def complete_messages(
    messages: list[Any],
    *,
    step: str,
    llm: dict[str, Any],
) -> list[Any]:
    """Responses for ``messages`` from ``llm["complete_fn"]`` (default ``pv4kit.llm.client.complete``).

    Args:
        messages: One chat (a list of messages) per request.
        step: The ledger step name (``pf_judge``, ``pf_generate``).
        llm: ``config``, ``cache``, ``client``, ``progress`` and ``complete_fn`` as the public functions
            take them.
    """
    complete_fn: Callable[..., Any] = llm.get("complete_fn") or complete
    return list(
        complete_fn(
            messages,
            llm=llm["config"],
            cache=llm.get("cache"),
            step=step,
            progress=llm.get("progress", True),
            client=llm.get("client"),
        )
    )


def reply_columns(responses: list[Any]) -> dict[str, list[Any]]:
    """``reply`` (text), ``error`` and ``cached`` of each response, as frame columns."""
    return {
        "reply": [getattr(r, "text", None) for r in responses],
        "error": [getattr(r, "error", None) for r in responses],
        "cached": [bool(getattr(r, "cached", False)) for r in responses],
    }
