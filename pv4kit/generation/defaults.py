"""The models generation uses unless told otherwise (the reference's choices), and what a user costs.

The reference used ``gpt-5.1`` (effort ``none``) for categories, topics and questions and ``gpt-5-mini``
(effort ``minimal``) for the chats, both through the Responses API.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pv4kit._options import check_number
from pv4kit.generation import prompts
from pv4kit.llm.config import LLMConfig, default_protocol

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)

#: Model for categories, topics and questions (steps 1, 2 and 4).
DEFAULT_MODEL = "gpt-5.1"
#: Model for the chats (step 3) when the main model is an OpenAI ``gpt-*`` model at the OpenAI API.
DEFAULT_CHAT_MODEL = "gpt-5-mini"
#: Reasoning effort of the main model with the Responses API (unset with chat, where servers differ).
DEFAULT_REASONING_EFFORT = "none"
#: Reasoning effort of the chat model with the Responses API.
DEFAULT_CHAT_REASONING_EFFORT = "minimal"


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
    """``(llm, chat_llm)`` for :func:`~pv4kit.generation.steps.generate_users`, with the defaults above.

    Args:
        model: Model for categories, topics and questions.
        chat_model: Model for the chats; ``None``: :data:`DEFAULT_CHAT_MODEL` for an OpenAI ``gpt-*`` model
            at the OpenAI API, else ``model`` itself (one local or self-hosted model serves every step).
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
    """
    protocol = protocol or default_protocol(base_url)
    responses = protocol == "responses"
    effort = reasoning_effort or (DEFAULT_REASONING_EFFORT if responses else None)
    chat_effort = chat_reasoning_effort or (DEFAULT_CHAT_REASONING_EFFORT if responses else None)
    if not chat_model:
        chat_model = DEFAULT_CHAT_MODEL if base_url is None and model.startswith("gpt-") else model
    common = dict(base_url=base_url, protocol=protocol, **options)
    return (
        LLMConfig(model=model, reasoning_effort=effort, **common),
        LLMConfig(model=chat_model, reasoning_effort=chat_effort, **common),
    )


#: Typical output tokens per item a step asks for: per category, topic, chat or question (steps 1-4).
OUTPUT_TOKENS_PER_ITEM = {"categories": 12, "topics": 25, "chats": 250, "questions": 160}
#: Characters per token of the prompt estimate.
CHARS_PER_TOKEN = 4


def estimate_user_cost(
    persona: str,
    *,
    model: str = DEFAULT_MODEL,
    chat_model: str = DEFAULT_CHAT_MODEL,
    num_categories: int = 10,
    num_topics: int = 200,
    num_questions: int = 15,
    prices: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Calls, tokens and cost of generating one user from ``persona``, one row per step (before any call).

    Columns ``step, model, calls, prompt_tokens_per_call, output_tokens_per_call, prompt_tokens,
    output_tokens, input_usd_per_1m, output_usd_per_1m, cost_usd``; ``cost_usd`` is NaN for a model missing
    from the table (logged), so a sum over steps is NaN rather than too low. Reasoning tokens are not
    estimated.

    Args:
        persona: The persona text the prompts are rendered with.
        model: Model of steps 1, 2 and 4 (the reference's: ``gpt-5.1``).
        chat_model: Model of step 3, the chats (the reference's: ``gpt-5-mini``).
        num_categories: Categories per user (step 4 makes one call per category).
        num_topics: Topics per user (step 3 makes one call per topic).
        num_questions: Questions per category.
        prices: Price table (see :func:`pv4kit.llm.store.load_prices`; default the shipped example).
    """
    import pandas as pd

    from pv4kit.llm.store import load_prices

    counts = dict(num_categories=num_categories, num_topics=num_topics, num_questions=num_questions)
    for name, value in counts.items():
        check_number(value, name, integer=True, ge=1)
    steps = [  # step, model, calls (a chat per topic, a questions call per category), items asked, list item
        ("categories", model, 1, num_categories, ""),
        ("topics", model, 1, num_topics, ""),
        ("chats", chat_model, num_topics, 1, "x" * 120),  # a typical topic: one sentence
        ("questions", model, num_categories, num_questions, "x" * 40),  # a typical category name
    ]
    frame = pd.DataFrame(steps, columns=["step", "model", "calls", "n", "item"])
    frame["prompt_tokens_per_call"] = [
        len(prompts.render(step, persona, n, item)[0]["content"]) / CHARS_PER_TOKEN
        for step, _, _, n, item in steps
    ]
    frame["output_tokens_per_call"] = (frame["step"].map(OUTPUT_TOKENS_PER_ITEM) * frame["n"]).astype(float)
    frame = frame.drop(columns=["n", "item"])
    table = load_prices(prices)
    if missing := sorted(set(frame["model"]) - set(table)):
        logger.warning("cost estimate: no price for %s in the price table; their cost is NaN", missing)
    frame["prompt_tokens"] = frame["calls"] * frame["prompt_tokens_per_call"]
    frame["output_tokens"] = frame["calls"] * frame["output_tokens_per_call"]
    for side in ("input", "output"):
        frame[f"{side}_usd_per_1m"] = [table.get(m, {}).get(side, math.nan) for m in frame["model"]]
    frame["cost_usd"] = (
        frame["prompt_tokens"] * frame["input_usd_per_1m"]
        + frame["output_tokens"] * frame["output_usd_per_1m"]
    ) / 1e6
    return frame
