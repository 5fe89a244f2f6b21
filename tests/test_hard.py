"""Hard subset: both rules on hand-made runs, overlap with an existing subset, the CLI."""

from __future__ import annotations

import pandas as pd
import pytest

from pv4kit.baselines.hard import (
    derive_hard_subset,
    hard_flags,
    hard_report,
    overlap,
    read_subset,
    write_subset,
)
from pv4kit.cli import main

# (user, question): correct closed book, correct with RAG top-1
CASES = {
    (131, 0): (True, True),
    (131, 1): (False, True),
    (131, 2): (True, False),
    (131, 3): (False, False),
    (147, 0): (False, False),
    (147, 1): (True, True),
}


def _preds(which: int, *, extra=None) -> pd.DataFrame:
    rows = [{"user_id": u, "question_index": q, "correct": c[which]} for (u, q), c in CASES.items()]
    rows += extra or []
    return pd.DataFrame(rows)


def _keys(frame):
    return list(zip(frame["user_id"], frame["question_index"], strict=True))


def test_rules():
    a, b = _preds(0), _preds(1)
    assert _keys(derive_hard_subset(a, b, rule="any")) == [(131, 1), (131, 2), (131, 3), (147, 0)]
    assert _keys(derive_hard_subset(a, b, rule="all")) == [(131, 3), (147, 0)]
    with pytest.raises(ValueError, match="rule"):
        derive_hard_subset(a, b, rule="most")


def test_only_questions_in_both_runs_count():
    a = _preds(0, extra=[{"user_id": 150, "question_index": 0, "correct": False}])
    flags = hard_flags(a, _preds(1))
    assert len(flags) == 6 and flags.attrs["only_in_no_docs"] == 1
    with pytest.raises(ValueError, match="score the run first"):
        hard_flags(a.drop(columns="correct"), _preds(1))


def test_overlap_and_jaccard():
    derived = pd.DataFrame({"user_id": [1, 1, 2], "question_index": [0, 1, 0]})
    existing = pd.DataFrame({"user_id": [1, 2, 9], "question_index": [1, 5, 9]})
    universe = pd.DataFrame({"user_id": [1, 1, 2, 2], "question_index": [0, 1, 0, 5]})
    o = overlap(derived, existing, universe=universe)
    assert o == {
        "n_derived": 3,
        "n_existing": 2,
        "n_both": 1,
        "n_only_derived": 2,
        "n_only_existing": 1,
        "jaccard": 0.25,
        "n_existing_outside": 1,
    }
    empty = derived.iloc[0:0]
    assert overlap(empty, empty)["jaccard"] is None


def test_report_and_csv_roundtrip(tmp_path):
    existing = pd.DataFrame({"user_id": [131, 147], "question_index": [3, 0]})
    write_subset(existing, tmp_path / "old.csv")
    assert (tmp_path / "old.csv").read_text().splitlines()[0] == "user_id,question_index"
    report = hard_report(_preds(0), _preds(1), existing=tmp_path / "old.csv").set_index("rule")
    assert report.loc["any", "n_hard"] == 4 and report.loc["all", "n_hard"] == 2
    assert report.loc["all", "jaccard"] == 1.0 and report.loc["any", "jaccard"] == 0.5
    assert report.loc["any", "accuracy_no_docs"] == pytest.approx(0.5)
    assert _keys(read_subset(tmp_path / "old.csv")) == [(131, 3), (147, 0)]
    with pytest.raises(FileNotFoundError, match="existing"):
        read_subset(tmp_path / "missing.csv")


def test_cli_on_run_directories(tmp_path, capsys):
    for name, which in (("nd", 0), ("rag1", 1)):
        (tmp_path / name).mkdir()
        _preds(which).to_parquet(tmp_path / name / "predictions.parquet")
    pd.DataFrame({"user_id": [131], "question_index": [3]}).to_csv(tmp_path / "old.csv", index=False)
    out = tmp_path / "hard.csv"
    rc = main(
        [
            "hard",
            "--no-docs",
            str(tmp_path / "nd"),
            "--rag",
            str(tmp_path / "rag1"),
            "--rule",
            "all",
            "--output",
            str(out),
            "--existing",
            str(tmp_path / "old.csv"),
        ]
    )
    assert rc == 0
    assert _keys(read_subset(out)) == [(131, 3), (147, 0)]
    text = capsys.readouterr().out
    assert "2 hard questions (rule all)" in text and "jaccard" in text


def _questions(hard):
    return pd.DataFrame(
        {"user_id": [131, 131, 147], "question_index": [0, 1, 0], "question": ["a", "b", "c"], "hard": hard}
    )


def test_with_fallback_subset_keeps_the_data_flags_then_uses_a_derived_subset(tmp_path):
    from pv4kit.baselines.hard import with_fallback_subset

    derived = write_subset(pd.DataFrame({"user_id": [147], "question_index": [0]}), tmp_path / "d.csv")
    # the data marks some question hard: its flags win, the derived file is not read
    q, note = with_fallback_subset(_questions([True, False, False]), derived)
    assert q["hard"].tolist() == [True, False, False] and note.startswith("1 of 3") and "data's flags" in note
    # none marked: the derived subset's questions become hard
    q, note = with_fallback_subset(_questions([False, False, False]), derived)
    assert q["hard"].tolist() == [False, False, True] and "derived subset d.csv" in note
    # none marked and no derived file: nothing is invented, and the note says so
    q, note = with_fallback_subset(_questions([False, False, False]), tmp_path / "absent.csv")
    assert not q["hard"].any() and note.startswith("0 of 3") and "absent.csv" in note
    q, note = with_fallback_subset(_questions([False, False, False]).drop(columns="hard"), None)
    assert (
        q["hard"].tolist() == [False, False, False]
        and note == "0 of 3 questions are hard: the data marks none"
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("user,question\n1,2\n")
    with pytest.raises(ValueError, match="derived"):
        with_fallback_subset(_questions([False, False, False]), bad)
