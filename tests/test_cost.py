"""The generation cost estimate: tokens from the rendered prompts, prices from pv4kit/llm/prices.json."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from pv4kit.generation import prompts
from pv4kit.generation.defaults import estimate_user_cost

ROOT = Path(__file__).resolve().parents[1]
PERSONA = "Leo is a 34-year-old nurse in Lyon who cooks on weekends and plans every trip months ahead."


def test_estimate_is_priced_from_the_shipped_table():
    table = json.loads((ROOT / "pv4kit" / "llm" / "prices.json").read_text())["models"]
    est = estimate_user_cost(PERSONA, num_categories=3, num_topics=7, num_questions=4)
    assert est["step"].tolist() == ["categories", "topics", "chats", "questions"]
    assert est["model"].tolist() == ["gpt-5.1", "gpt-5.1", "gpt-5-mini", "gpt-5.1"]
    assert est["calls"].tolist() == [1, 1, 7, 3]  # one chat per topic, one questions call per category
    prompt = len(prompts.categories_messages(PERSONA, n=3)[0]["content"]) / 4
    assert est.loc[0, "prompt_tokens_per_call"] == pytest.approx(prompt)
    assert est["output_tokens_per_call"].tolist() == [12 * 3, 25 * 7, 250, 160 * 4]
    for row in est.itertuples():
        price = table[row.model]
        want = row.calls * (
            row.prompt_tokens_per_call * price["input"] + row.output_tokens_per_call * price["output"]
        )
        assert row.cost_usd == pytest.approx(want / 1e6)
    # more topics mean more chat calls and a higher bill
    assert estimate_user_cost(PERSONA, num_topics=20)["cost_usd"].sum() > est["cost_usd"].sum()


def test_missing_price_is_nan_and_logged(caplog):
    prices = {"models": {"gpt-5.1": {"input": 1.0, "output": 2.0}}}
    with caplog.at_level(logging.WARNING):
        est = estimate_user_cost(PERSONA, chat_model="my-local-model", prices=prices)
    chats = est.set_index("step").loc["chats"]
    assert math.isnan(chats["cost_usd"]) and math.isnan(est["cost_usd"].sum(skipna=False))
    assert "my-local-model" in caplog.text
    questions = est.set_index("step").loc["questions"]
    want = questions["calls"] * (
        questions["prompt_tokens_per_call"] * 1.0 + questions["output_tokens_per_call"] * 2.0
    )
    assert questions["cost_usd"] == pytest.approx(want / 1e6)


@pytest.mark.parametrize("option", ["num_categories", "num_topics", "num_questions"])
def test_counts_must_be_positive(option):
    with pytest.raises(ValueError, match=option):
        estimate_user_cost(PERSONA, **{option: 0})
