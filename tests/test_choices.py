"""The multiple-choice method: seeded order, robust reading of the reply, scoring by the letter, positions."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pv4kit.baselines.run import answer
from pv4kit.llm.config import LLMConfig
from pv4kit.scoring.choices import choice_order, parse_choice
from pv4kit.scoring.runs import read_generations, read_run_config
from pv4kit.scoring.score import score_run
from pv4kit.scoring.stats import compare
from tests.llm_server import FakeLLMServer, prompt_of
from tests.test_baselines import _data

SHOWN = ["green tea", "black coffee", "water", "milk", "orange juice, freshly squeezed, no ice"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("B", "B"),
        ("(B)", "B"),
        ("b.", "B"),
        ("**B**", "B"),
        ("Answer: b", "B"),
        ("The answer is B.", "B"),
        ("Option C", "C"),
        ("B. black coffee", "B"),
        ("B. black cof", "B"),  # cut by the output cap
        ("Orange juice, freshly", "E"),  # the beginning of one candidate, cut by the output cap
        ("orange juice with ice", None),  # more than the candidate
        ("green", None),  # too short to name a candidate by its beginning
        ("Black coffee.", "B"),
        ("E\n\nBecause the user likes citrus.", "E"),
        ("B. water", None),  # a letter with another candidate's text: ambiguous
        ("A lovely cup of tea", None),  # prose that starts with a letter is no pick
        ("B or C", None),
        ("", None),
        (None, None),
        ("NONE", None),  # only where the listing offers NONE
    ],
)
def test_replies_are_read_robustly_and_strictly(reply, expected):
    assert parse_choice(reply, SHOWN) == expected


def test_none_is_read_only_where_offered():
    assert parse_choice("NONE", SHOWN, none=True) == "NONE"
    assert parse_choice("Answer: none.", SHOWN, none=True) == "NONE"


def test_the_order_is_seeded_per_question():
    assert choice_order(5, 3, seed=0) == choice_order(5, 3, seed=0)
    assert sorted(choice_order(5, 3, seed=0)) == [0, 1, 2, 3, 4]
    orders = {tuple(choice_order(5, q, seed=0)) for q in range(30)}
    assert len(orders) > 10  # not one fixed shuffle
    assert choice_order(5, 3, seed=1) != choice_order(5, 3, seed=0) or choice_order(
        5, 4, seed=1
    ) != choice_order(5, 4, seed=0)


def _options(prompt: str) -> dict[str, str]:
    block = prompt.split("Options:\n", 1)[1].split("\n\n", 1)[0]
    return {line[3:]: line[0] for line in block.splitlines()}


def _mcq_responder(protocol, body, nth):
    """Question 0: the right letter; 1: the right candidate's text; 2: a wrong letter; user 131's 2: prose."""
    prompt = prompt_of(protocol, body)
    letters = _options(prompt)
    q = int(prompt.split("question ")[1].split()[0])
    user = int(prompt.split("of user ")[1].split("?")[0])
    if q == 0:
        return f"Answer: ({letters['a']})"
    if q == 1:
        return "A."  # the candidate text 'a' (the shown letter of 'a' may differ)
    if user == 131:
        return "I would go with something nice"
    return next(letter for text, letter in letters.items() if text != "a")


def test_mcq_run_is_scored_by_the_letter(tmp_path):
    data = _data()  # 2 users x 3 questions, choices a-e, answer a
    with FakeLLMServer(_mcq_responder) as server:
        llm = LLMConfig(model="fake-model", base_url=server.base_url, protocol="chat", max_retries=0)
        run = answer(data, method="no_docs", mcq=True, llm=llm, run_dir=tmp_path / "mcq", cache=None)
        prompt = next(p for _, p, _ in server.requests if p.startswith("  question 0 of user 130?"))
    assert prompt.startswith("  question 0 of user 130?\n\nOptions:\nA. ") and prompt.endswith(
        "Answer with the letter of the best option (A, B, C, D or E) and nothing else."
    )
    gens = read_generations(run.run_dir)
    config = read_run_config(run.run_dir)
    assert set(gens["method"]) == {"mcq_no_docs"} and config["mcq"]["memory"] == "no_docs"
    keys = zip(gens["user_id"], gens["question_index"], strict=True)
    assert [list(o) for o in gens["choice_order"]] == [choice_order(u, q, seed=0) for u, q in keys]
    predictions, metrics = score_run(run.run_dir, data=data, n_boot=100)
    assert metrics["embedder"] is None and metrics["scored_by"] == "letter"
    # "A." names the candidate text "a" only when "a" is not shown at A: then it is the letter A
    p = predictions.set_index(["user_id", "question_index"])
    order_a = {k: list(o).index(0) for k, o in p["choice_order"].items()}  # where "a" was shown
    right_1 = {u: order_a[(u, 1)] == 0 for u in (130, 131)}
    assert p.loc[(130, 0), "correct"] and p.loc[(131, 0), "correct"]
    assert not p.loc[(130, 2), "correct"] and p.loc[(131, 2), "unparsed"] and not p.loc[(131, 2), "correct"]
    assert metrics["n_unparsed"] == 1
    assert metrics["n_correct"] == 2 + sum(right_1.values())
    positions = pd.DataFrame(metrics["by_position"]).set_index("position")
    assert positions["n"].sum() == 6 and positions["n_correct"].sum() == metrics["n_correct"]
    # comparable with a free-text run of the same questions
    free = tmp_path / "free"
    gens_free = gens[["user_id", "question_index", "split"]].assign(generation="a")
    from pv4kit.scoring.runs import write_generations
    from tests.conftest import FakeEmbedder

    write_generations(free, gens_free, config={"data": None, "method": "no_docs", "model": "m"})
    score_run(free, data=data, embedder=FakeEmbedder(), cache=False, n_boot=100)
    table = compare(run.run_dir, free, n_boot=100).set_index("scope")
    assert table.loc["overall", "accuracy_b"] == 1.0
    assert table.loc["overall", "accuracy_a"] == pytest.approx(metrics["n_correct"] / 6)


def test_the_command_line_takes_mcq_with_a_memory_setting(tmp_path, capsys):
    from pv4kit.cli import main

    with FakeLLMServer(lambda protocol, body, nth: "(C)") as server:
        args = ["answer", "--data", "raw", "--model", "fake-model", "--base-url", server.base_url]
        args += ["--runs-dir", str(tmp_path), "--limit", "4", "--cache", "none", "--max-retries", "0"]
        assert main([*args, "--method", "mcq", "--memory", "persona"]) == 0
        assert main([*args, "--method", "no_docs", "--memory", "rag"]) == 1
    config = read_run_config(tmp_path / "fake-model_mcq_persona")
    assert config["method"] == "mcq_persona" and config["mcq"]["memory"] == "persona"
    assert "--memory is for --method mcq" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "fake-model_mcq_persona"), "--n-boot", "100"]) == 0
    assert "on 4 questions, 1 users" in capsys.readouterr().out  # no embedder loaded for it
    metrics = json.loads((tmp_path / "fake-model_mcq_persona" / "metrics.json").read_text())
    assert metrics["n_unparsed"] == 0 and metrics["scored_by"] == "letter" and metrics["embedder"] is None
