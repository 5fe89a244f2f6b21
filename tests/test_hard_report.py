"""Notebook 03's tables read from notebook 02's stored audit equal the ones computed from scratch."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pv4kit.analysis.audit import SOLVERS, hard_subset_tables, run_audit, stored_audit
from pv4kit.baselines.hard import write_subset
from pv4kit.dataset.load import load

RAW = Path(__file__).resolve().parents[1] / "raw"


@pytest.fixture(scope="module")
def sample():
    return load(RAW)


def _assert_same_tables(a: dict, b: dict) -> None:
    for name in ("questions", "categories", "lengths", "solvers"):
        pd.testing.assert_frame_equal(a[name], b[name], check_dtype=True, obj=name)
    assert a["note"] == b["note"]


@pytest.mark.parametrize("flags", ["data", "derived"])
def test_stored_audit_gives_the_tables_computing_gives(tmp_path, sample, make_fake_embedder, flags):
    q = sample.questions
    derived = write_subset(q.iloc[::7][["user_id", "question_index"]], tmp_path / "derived.csv")
    if flags == "data":  # the data's own flags win over the derived file
        q = q.assign(hard=(q.index % 5 == 0))
    else:  # the data marks none hard: the derived subset's flags must reach the stored tables
        q = q.assign(hard=False)
    data = type(sample)(**{**vars(sample), "questions": q})
    store = tmp_path / "audits"
    computed = hard_subset_tables(data, derived=derived, embedder=make_fake_embedder(), cache=False)
    assert computed["source"] == "computed"
    assert stored_audit(data, embedder=make_fake_embedder(), store=store, n_boot=50) is None
    run_audit(data, embedder=make_fake_embedder(), cache=False, n_boot=50, store=store)  # notebook 02
    reader = make_fake_embedder()
    kept = hard_subset_tables(data, derived=derived, embedder=reader, cache=False, store=store, n_boot=50)
    assert kept["source"].startswith("stored audit") and reader.n_encoded == 0  # nothing embedded
    _assert_same_tables(kept, computed)
    assert set(kept["solvers"]["solver"]) == set(SOLVERS)
    hard = kept["questions"].set_index(["user_id", "question_index"])["hard"]
    assert hard.sum() == (len(q.iloc[::7]) if flags == "derived" else q["hard"].sum()) > 0
    # another option is another stored result: computed again, never mixed up
    other = make_fake_embedder()
    again = hard_subset_tables(data, derived=derived, embedder=other, cache=False, store=store, n_boot=51)
    assert again["source"] == "computed" and other.n_encoded > 0
    _assert_same_tables(again, computed)
