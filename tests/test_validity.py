"""Scorer validity against a loopback judge with scripted answers, checked against hand-computed values."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pv4kit.llm.config import LLMConfig
from pv4kit.scoring.runs import write_generations
from pv4kit.scoring.score import score_run
from pv4kit.scoring.stats import cohen_kappa_ci
from pv4kit.scoring.validity import compare_agreed, read_validity, validity
from tests.conftest import FakeEmbedder
from tests.llm_server import FakeLLMServer, Reply, prompt_of

LETTERS = "ABCDE"
# (user, question) -> (the candidate the generation repeats, what judge "judge-a" does)
# "agree": the scorer's pick; ("other", k): candidate k; "none"; "garbage" (unparseable); "fail" (HTTP 500)
SCRIPT = {
    (1, 0): (0, "agree"),
    (1, 1): (1, "agree"),
    (1, 2): (0, ("other", 1)),
    (1, 3): (2, "none"),
    (2, 0): (0, "agree"),
    (2, 1): (0, "agree"),
    (2, 2): (3, ("other", 0)),
    (2, 3): (1, "garbage"),
    (3, 0): (4, "agree"),
    (3, 1): (0, "none"),
    (3, 2): (0, "agree"),
    (3, 3): (2, "fail"),
}


def _choice(u: int, q: int, k: int) -> str:
    return f"user {u} question {q} option {k}"


def _questions() -> pd.DataFrame:
    rows = []
    for (u, q), _ in SCRIPT.items():
        choices = [_choice(u, q, k) for k in range(5)]
        rows.append(
            {
                "user_id": u,
                "question_index": q,
                "split": "test",
                "category": q % 2,
                "category_name": f"cat{q % 2}",
                "hard": False,
                "question": f"What does user {u} want ({q})?",
                "choices": choices,
                "answer": choices[0],
            }
        )
    return pd.DataFrame(rows)


SAID = " (said)"


class _Echo(FakeEmbedder):
    """The scorer's embedder: an answer ``<candidate> (said)`` gets its candidate's vector."""

    def vector(self, text: str) -> np.ndarray:
        return super().vector(text.removesuffix(SAID))


def _generations() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"user_id": u, "question_index": q, "split": "test", "generation": _choice(u, q, k) + SAID}
            for (u, q), (k, _) in SCRIPT.items()
        ]
    )


def _judge(protocol: str, body: dict, nth: int) -> Reply | str:
    """judge-a follows SCRIPT; judge-b always names the candidate the answer repeats (the scorer's pick)."""
    prompt = prompt_of(protocol, body)
    answer = prompt.split("# Answer\n", 1)[1].split("\n\n# Options\n", 1)[0].removesuffix(SAID)
    lines = prompt.split("# Options\n", 1)[1].split("\n\n", 1)[0].splitlines()
    letter = {line[3:]: line[0] for line in lines if line[1:3] == ". "}
    u, q = int(answer.split()[1]), int(answer.split()[3])
    k, act = SCRIPT[(u, q)]
    if body["model"] == "judge-b" or act == "agree":
        return f"Answer: {letter[answer].lower()}"
    if act == "none":
        return "NONE"
    if act == "garbage":
        return "I think the user likes options."
    if act == "fail":
        return Reply(status=500, error="scripted failure")
    return f"({letter[_choice(u, q, act[1])]})"


@pytest.fixture
def scored(tmp_path):
    run = tmp_path / "run"
    write_generations(run, _generations(), config={"data": None, "method": "no_docs", "model": "m"})
    emb = _Echo(name="echo")
    score_run(run, data=_questions(), embedder=emb, cache=False, n_boot=200)
    return run, emb


@pytest.fixture
def server():
    with FakeLLMServer(_judge) as s:
        yield s


def _llm(server: FakeLLMServer, model: str) -> LLMConfig:
    return LLMConfig(model=model, base_url=server.base_url, protocol="chat", max_retries=0)


def test_agreement_kappa_and_none_rate_match_the_hand_computed_values(scored, server, tmp_path):
    run, emb = scored
    out = validity(
        run, judges=[_llm(server, "judge-a")], embedder=emb, llm_cache=None, embed_cache=False, n_boot=300
    )
    a = out["judges"]["judge-a"]
    # 12 questions: 1 unparsed reply and 1 failed request are left out, 10 read
    assert a["n_judged"]["value"] == 12 and a["n_unparsed"]["value"] == 1 and a["n_failed"]["value"] == 1
    assert a["agreement"]["value"] == pytest.approx(6 / 10) and a["agreement"]["n"] == 12
    assert a["none_rate"]["value"] == pytest.approx(2 / 10)
    assert a["judge_accuracy"]["value"] == pytest.approx(5 / 10)
    assert a["scorer_accuracy"]["value"] == pytest.approx(6 / 10)
    # scorer marginals A6 B1 C1 D1 E1; judge A5 B2 E1 NONE2; observed 0.6, chance 0.33
    assert a["kappa"]["value"] == pytest.approx((0.6 - 0.33) / (1 - 0.33))
    judgments = read_validity(run)["judgments"]
    bad = judgments[judgments["status"] == "unparsed"].iloc[0]
    assert bad["reply"] == "I think the user likes options." and pd.isna(bad["judge_pick"])
    failed = judgments[judgments["status"] == "failed"].iloc[0]
    assert pd.isna(failed["judge_pick"]) and "scripted failure" in failed["error"]
    text = (run / "validity" / "summary.txt").read_text()
    assert (
        "1 unparsed replies, 1 failed requests" in text and "agreement with the scorer's pick 60.0%" in text
    )


def test_intervals_resample_users(scored, server):
    run, emb = scored
    out = validity(run, judges=[_llm(server, "judge-a")], numerics=False, llm_cache=None, n_boot=500, seed=3)
    got = out["judges"]["judge-a"]
    # per user (agreements, readings): user 1 (2, 4), user 2 (2, 3), user 3 (2, 3)
    sums, counts = np.array([2.0, 2, 2]), np.array([4.0, 3, 3])
    idx = np.random.default_rng(3).integers(0, 3, size=(500, 3))
    boots = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    assert got["agreement"]["ci_low"] == pytest.approx(np.quantile(boots, 0.025))
    assert got["agreement"]["ci_high"] == pytest.approx(np.quantile(boots, 0.975))
    # kappa: each replicate's kappa from the resampled users' pooled ratings (scikit-learn's formula)
    from sklearn.metrics import cohen_kappa_score

    j = read_validity(run)["judgments"].query("status in ['picked', 'none']")
    preds = pd.read_parquet(run / "predictions.parquet")
    rows = j.merge(preds[["user_id", "question_index", "predicted_letter"]])
    users = [rows[rows["user_id"] == u] for u in (1, 2, 3)]
    kappas = []
    for draw in idx:
        pooled = pd.concat([users[i] for i in draw])
        with np.errstate(invalid="ignore", divide="ignore"):
            kappas.append(cohen_kappa_score(pooled["predicted_letter"], pooled["judge_pick"]))
    kappas = np.array(kappas)
    kappas = kappas[~np.isnan(kappas)]
    assert got["kappa"]["ci_low"] == pytest.approx(np.quantile(kappas, 0.025))
    assert got["kappa"]["ci_high"] == pytest.approx(np.quantile(kappas, 0.975))
    assert got["kappa"]["value"] == pytest.approx(
        cohen_kappa_score(rows["predicted_letter"], rows["judge_pick"])
    )


def test_two_judges_agree_with_each_other_as_one_agrees_with_the_scorer(scored, server):
    run, emb = scored
    judges = [_llm(server, "judge-a"), _llm(server, "judge-b")]
    out = validity(run, judges=judges, numerics=False, llm_cache=None, n_boot=200)
    b = out["judges"]["judge-b"]
    assert b["agreement"]["value"] == 1.0 and b["n_unparsed"]["value"] == 0 and b["n_failed"]["value"] == 0
    pair = out["judges"]["judge-a vs judge-b"]
    assert pair["agreement"]["value"] == pytest.approx(0.6)
    assert pair["kappa"]["value"] == pytest.approx(0.27 / 0.67)
    positions = read_validity(run)["judge_positions"]
    a = positions[positions["judge"] == "judge-a"]
    assert a["n"].sum() == 10 and a["share_picked"].sum() == pytest.approx(0.8)  # NONE takes 0.2
    accuracy = out["judges"]["judge-a"]["judge_accuracy"]["value"]  # the position table counts the same hits
    assert a["n_correct"].sum() == 5 == accuracy * a["n"].sum()


class _Swapped(_Echo):
    """Another embedder: user 1 question 0's answer lands on option 3 (one flip, right to wrong)."""

    def vector(self, text: str) -> np.ndarray:
        return super().vector(_choice(1, 0, 3) if text == _choice(1, 0, 0) + SAID else text)


def test_sensitivity_counts_flips_and_tests_them(scored):
    run, emb = scored
    out = validity(run, against=[_Swapped(name="swapped")], embedder=emb, embed_cache=False, n_boot=200)
    sens = out["tables"]["sensitivity"].set_index("variant")
    assert list(sens.index) == ["as scored", "float32", "against swapped"]
    assert sens.loc["float32", "n_flips"] == 0
    s = sens.loc["against swapped"]
    assert s["n_flips"] == 1 and s["run_only"] == 1 and s["variant_only"] == 0 and s["mcnemar_p"] == 1.0
    assert s["diff"] == pytest.approx(-1 / 12)
    assert s["accuracy"] == pytest.approx(sens.loc["as scored", "accuracy"] - 1 / 12)
    margins = out["tables"]["margins"]
    assert margins[margins["metric"] == "accuracy"]["share"].sum() == pytest.approx(1.0)
    assert json.loads((run / "validity" / "summary.json").read_text())["sensitivity"][2]["n_flips"] == 1


def test_kappa_ci_refuses_unknown_labels_and_handles_one_label():
    frame = pd.DataFrame({"a": ["A", "A"], "b": ["A", "A"], "user_id": [1, 2]})
    assert cohen_kappa_ci(frame, a="a", b="b", labels=["A", "B"])["estimate"] is None
    with pytest.raises(ValueError, match="labels"):
        cohen_kappa_ci(frame.assign(b=["A", "Z"]), a="a", b="b", labels=["A", "B"])


def test_compare_keeps_the_questions_the_judge_agrees_on(scored, server, tmp_path):
    run, emb = scored
    validity(run, judges=[_llm(server, "judge-a")], numerics=False, llm_cache=None, n_boot=100)
    other = tmp_path / "other"
    gens = _generations().assign(generation=[_choice(u, q, 0) + SAID for (u, q) in SCRIPT])  # all right
    write_generations(other, gens, config={"data": None, "method": "no_docs", "model": "m"})
    score_run(other, data=_questions(), embedder=emb, cache=False, n_boot=100)
    with pytest.raises(FileNotFoundError, match="pv4kit validity"):
        compare_agreed(run, other, n_boot=100)
    validity(other, judges=[_llm(server, "judge-b")], numerics=False, llm_cache=None, n_boot=100)
    table = compare_agreed(run, other, judge=None, n_boot=100).set_index("scope")
    # judge-a agrees on 6 questions of run; judge-b on all 12 of other: 6 in both, run right on 4 of them
    assert table.loc["overall", "n"] == 12 and table.loc["overall", "n_agreed"] == 6
    assert table.loc["overall", "diff_agreed"] == pytest.approx(4 / 6 - 1)
    assert table.loc["overall", "diff"] == pytest.approx(6 / 12 - 1)


def test_the_command_line_writes_the_report(scored, server, capsys):
    from pv4kit.cli import main

    run, emb = scored
    code = main(
        ["validity", str(run), "--judge-model", "judge-a", "--judge-base-url", server.base_url,
         "--no-numerics", "--cache", "none", "--n-boot", "100", "--judge-max-retries", "0"]
    )  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "judge judge-a: 12 judged, 1 unparsed replies, 1 failed requests" in out
    assert sorted(p.name for p in (run / "validity").iterdir()) == [
        "agreement.csv", "judge_positions.csv", "judgments.parquet", "margins.csv", "summary.json",
        "summary.txt",
    ]  # fmt: skip


def test_rescoring_the_run_drops_its_report(scored):
    run, emb = scored
    validity(run, embedder=emb, embed_cache=False, n_boot=50)
    assert (run / "validity" / "summary.json").is_file()
    score_run(run, data=_questions(), embedder=emb, cache=False, n_boot=50)
    assert not (run / "validity").exists()  # a report on the scores before
