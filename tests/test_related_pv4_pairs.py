from types import SimpleNamespace

import pandas as pd
import pytest

from pv4kit.related import personafeedback as pf
from pv4kit.related.pv4_pairs import pv4_pairs


def _questions():
    return pd.DataFrame(
        {
            "user_id": [6, 6, 7],
            "split": ["train", "test", "test"],
            "question_index": [0, 1, 0],
            "question": ["q0", "q1", "q2"],
            "choices": [
                ["r0", "d1", "d2", "d3", "d4"],
                ["x1", "ref1", "", "x3", "x4"],
                ["ref2", "", "", "", ""],
            ],
            "answer": ["r0", "ref1", "ref2"],
            "answer_letter": ["A", "B", "A"],
            "hard": [False, True, False],
        }
    )


def test_pv4_pairs_one_distractor_seeded():
    users = pd.DataFrame({"user_id": [6, 7], "persona": ["I like tea.", None]})
    out = pv4_pairs(_questions(), users, seed=1)
    assert len(out) == 2  # the third question has no non-empty distractor
    assert out["chosen"].tolist() == ["r0", "ref1"] and out["tier"].tolist() == ["standard", "hard"]
    assert out["rejected"].iloc[0] in {"d1", "d2", "d3", "d4"} and out["rejected"].iloc[1] in {
        "x1",
        "x3",
        "x4",
    }
    assert out["persona"].tolist() == ["I like tea.", "I like tea."] and set(out["set"]) == {"pv4"}
    assert out.equals(pv4_pairs(_questions(), users, seed=1))
    assert out["pair_id"].iloc[1] == f"pv4/6/1/{out['distractor_letter'].iloc[1]}"


def test_pv4_pairs_all_distractors_and_judge_runs_on_them():
    users = pd.DataFrame({"user_id": [6, 7], "persona": ["I like tea.", "I run."]})
    out = pv4_pairs(_questions(), users, distractors="all", splits=["test"])
    assert out["rejected"].tolist() == ["x1", "x3", "x4"]

    def complete(requests, **kw):
        return [SimpleNamespace(text="A", error=None, cached=False) for _ in requests]

    preds = pf.judge_pairs(out, config=None, complete_fn=complete, both_orders=True)
    assert len(preds) == 6 and preds["correct"].sum() == 3
    with pytest.raises(ValueError, match="distractors"):
        pv4_pairs(_questions(), distractors="some")


def test_load_pv4_pairs_reads_a_built_dataset(tmp_path):
    from pv4kit.dataset.load import load
    from pv4kit.dataset.splits import build_dataset
    from pv4kit.related.pv4_pairs import load_pv4_pairs
    from tests.rawtree import make_tree

    tree = make_tree(tmp_path / "raw", train=[6], test=[126], n_categories=2, per_category=2)
    build_dataset(tree / "users", tmp_path / "data", progress=False)
    data = load(tmp_path / "data")
    got = load_pv4_pairs(tmp_path / "data", seed=3, splits=["test"])
    pd.testing.assert_frame_equal(got, pv4_pairs(data.questions, data.users, seed=3, splits=["test"]))
    assert len(got) and set(got["set"]) == {"pv4"}
