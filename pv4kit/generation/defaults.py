"""The models and reasoning efforts generation uses unless told otherwise (the reference's choices).

The reference generated PV4 with ``gpt-5.1`` (reasoning effort ``none``) for categories, topics and
questions and ``gpt-5-mini`` (effort ``minimal``) for the chats, both through the Responses API.
:func:`generation_llm_configs` builds the two :class:`~pv4kit.llm.config.LLMConfig` objects of a
:class:`~pv4kit.generation.steps.GenerationConfig` from that policy; ``pv4kit generate`` and the notebooks
call it.
"""

from __future__ import annotations

from typing import Any

from pv4kit.llm.config import LLMConfig, default_protocol

#: Model for categories, topics and questions (steps 1, 2 and 4).
DEFAULT_MODEL = "gpt-5.1"
#: Model for the chats (step 3) when the main model is an OpenAI ``gpt-*`` model at the OpenAI API.
DEFAULT_CHAT_MODEL = "gpt-5-mini"
#: Reasoning effort of the main model with the Responses API (unset with chat, where servers differ).
DEFAULT_REASONING_EFFORT = "none"
#: Reasoning effort of the chat model with the Responses API.
DEFAULT_CHAT_REASONING_EFFORT = "minimal"


def default_chat_model(model: str, *, base_url: str | None = None) -> str:
    """The chat model that goes with ``model``.

    :data:`DEFAULT_CHAT_MODEL` for an OpenAI ``gpt-*`` model at the OpenAI API, else ``model`` itself (one
    local or self-hosted model serves every step).
    """
    return DEFAULT_CHAT_MODEL if base_url is None and model.startswith("gpt-") else model


def generation_llm_configs(
    model: str = DEFAULT_MODEL,
    *,
    chat_model: str | None = None,
    base_url: str | None = None,
    protocol: str | None = None,
    reasoning_effort: str | None = None,
    chat_reasoning_effort: str | None = None,
    **options: Any,
) -> tuple[LLMConfig, LLMConfig]:
    """``(llm, chat_llm)`` for :class:`~pv4kit.generation.steps.GenerationConfig`, with the defaults above.

    Args:
        model: Model for categories, topics and questions.
        chat_model: Model for the chats; ``None``: :func:`default_chat_model`.
        base_url: OpenAI-compatible base URL of both; ``None`` for the OpenAI API.
        protocol: ``"responses"`` or ``"chat"``; ``None``: chat at a base URL, else Responses.
        reasoning_effort: Effort of ``model``; ``None``: :data:`DEFAULT_REASONING_EFFORT` with the
            Responses API, unset with chat.
        chat_reasoning_effort: Effort of the chat model; ``None``: :data:`DEFAULT_CHAT_REASONING_EFFORT`
            with the Responses API, unset with chat.
        **options: Other :class:`~pv4kit.llm.config.LLMConfig` fields for both (``temperature``,
            ``max_output_tokens``, ``max_concurrency``, ``timeout`` ...). The temperature stays the
            server's unless given: generation is sampled, so a re-ask with a new sample index gets a new
            answer.

    Returns:
        The two configs.
    """
    protocol = protocol or default_protocol(base_url)
    responses = protocol == "responses"
    effort = reasoning_effort or (DEFAULT_REASONING_EFFORT if responses else None)
    chat_effort = chat_reasoning_effort or (DEFAULT_CHAT_REASONING_EFFORT if responses else None)
    common = dict(base_url=base_url, protocol=protocol, **options)
    return (
        LLMConfig(model=model, reasoning_effort=effort, **common),
        LLMConfig(
            model=chat_model or default_chat_model(model, base_url=base_url),
            reasoning_effort=chat_effort,
            **common,
        ),
    )
