"""A rough token and cost estimate of generating users (steps 1-4) before calling any model.

:func:`estimate_user_cost` renders each step's prompt for one persona, counts prompt tokens as characters
/ 4 and output tokens as a typical size per item the step asks for (:data:`OUTPUT_TOKENS_PER_ITEM`), and
prices them with the table of :func:`pv4kit.llm.store.load_prices` (``pv4kit/llm/prices.json``: example
prices, check your provider's). What a run really spent is in the usage ledger
(:func:`pv4kit.llm.store.usage_frame`).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pv4kit.generation import prompts
from pv4kit.llm.store import load_prices

logger = logging.getLogger(__name__)

#: Typical output tokens per item a step asks for: per category (step 1), per topic (step 2), per chat
#: (step 3, one call per topic) and per question (step 4, one call per category).
OUTPUT_TOKENS_PER_ITEM = {"categories": 12, "topics": 25, "chats": 250, "questions": 160}
#: Characters per token of the prompt estimate.
CHARS_PER_TOKEN = 4
_TOPIC = "x" * 120  # a topic of typical length (one sentence), for the chat prompt
_CATEGORY = "x" * 40  # a category name of typical length, for the questions prompt


def _tokens(messages: list[dict[str, str]]) -> float:
    return sum(len(m["content"]) for m in messages) / CHARS_PER_TOKEN


def estimate_user_cost(
    persona: str,
    *,
    model: str = "gpt-5.1",
    chat_model: str = "gpt-5-mini",
    num_categories: int = 10,
    num_topics: int = 200,
    num_questions: int = 15,
    prices: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Calls, tokens and cost of generating one user from ``persona``, one row per step.

    Args:
        persona: The persona text the prompts are rendered with.
        model: Model of steps 1, 2 and 4 (the reference's: ``gpt-5.1``).
        chat_model: Model of step 3, the chats (the reference's: ``gpt-5-mini``).
        num_categories: Categories per user (step 4 makes one call per category).
        num_topics: Topics per user (step 3 makes one call per topic).
        num_questions: Questions per category.
        prices: Price table (see :func:`pv4kit.llm.store.load_prices`; default the shipped example).

    Returns:
        ``step, model, calls, prompt_tokens_per_call, output_tokens_per_call, prompt_tokens,
        output_tokens, input_usd_per_1m, output_usd_per_1m, cost_usd``; ``cost_usd`` is NaN for a model
        missing from the table (exact model ids; logged), so a sum over steps is NaN rather than too
        low. Reasoning tokens are not estimated (billed as output, they add to the output side).
    """
    counts = {"num_categories": num_categories, "num_topics": num_topics, "num_questions": num_questions}
    for name, value in counts.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive whole number, got {value!r}")
    per_item = OUTPUT_TOKENS_PER_ITEM
    rows = [
        ("categories", model, 1, prompts.categories_messages(persona, n=num_categories),
         per_item["categories"] * num_categories),
        ("topics", model, 1, prompts.topics_messages(persona, n=num_topics), per_item["topics"] * num_topics),
        ("chats", chat_model, num_topics, prompts.chat_messages(persona, _TOPIC), per_item["chats"]),
        ("questions", model, num_categories, prompts.questions_messages(persona, _CATEGORY, n=num_questions),
         per_item["questions"] * num_questions),
    ]  # fmt: skip
    table = load_prices(prices)
    missing = sorted({m for _, m, *_ in rows if m not in table})
    if missing:
        logger.warning("cost estimate: no price for %s in the price table; their cost is NaN", missing)
    frame = pd.DataFrame(
        [(step, m, calls, _tokens(msgs), float(out)) for step, m, calls, msgs, out in rows],
        columns=["step", "model", "calls", "prompt_tokens_per_call", "output_tokens_per_call"],
    )
    frame["prompt_tokens"] = frame["calls"] * frame["prompt_tokens_per_call"]
    frame["output_tokens"] = frame["calls"] * frame["output_tokens_per_call"]
    frame["input_usd_per_1m"] = [table.get(m, {}).get("input", math.nan) for m in frame["model"]]
    frame["output_usd_per_1m"] = [table.get(m, {}).get("output", math.nan) for m in frame["model"]]
    frame["cost_usd"] = (
        frame["prompt_tokens"] * frame["input_usd_per_1m"]
        + frame["output_tokens"] * frame["output_usd_per_1m"]
    ) / 1e6
    return frame
