"""Options are keyword-only parameters: a bad value is refused, naming the parameter, before anything runs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pv4kit._options import check_number
from pv4kit.analysis.audit import run_audit
from pv4kit.analysis.notebooks import execute_notebooks
from pv4kit.baselines.attributes import attribute_contexts
from pv4kit.baselines.run import answer
from pv4kit.baselines.tokens import CharEstimate
from pv4kit.dataset.splits import build_dataset
from pv4kit.llm.config import LLMConfig
from pv4kit.pipeline.demo import demo_report, run_demo
from pv4kit.related._common import accuracy_table
from pv4kit.related.recenter import stage2_predictions
from pv4kit.scoring.accuracy import accuracy_table as score_accuracy_table
from pv4kit.scoring.score import score_run
from pv4kit.scoring.stats import bootstrap_ci, compare, grouped_bootstrap_ci, paired_bootstrap


def test_run_demo_rejects_an_unknown_option_before_doing_anything(tmp_path, monkeypatch):
    import inspect

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match="run_demo\\(\\) got an unexpected keyword argument 'max_tokens'"):
        run_demo(max_tokens=16)
    with pytest.raises(TypeError, match="'notebook'"):
        run_demo(limit=1, notebook=False)
    assert not any(Path(tmp_path).iterdir())  # nothing built, nothing started
    params = inspect.signature(run_demo).parameters  # the knobs show, with their defaults
    assert params["max_new_tokens"].default == 32 and params["notebooks"].default is True


def test_demo_report_holds_what_make_demo_prints():
    out = {
        "split": "test",
        "results": pd.DataFrame({"method": ["no_docs"], "accuracy [95% CI]": ["50.0 [40.0, 60.0]"]}),
        "hard_subset": Path("runs/demo_hard_subset.csv"),
        "n_hard": 7,
        "hard": pd.DataFrame({"rule": ["any", "all"], "jaccard": [0.12345, 0.5]}),
        "timings": pd.DataFrame({"stage": ["data", "total"], "seconds": [1.5, 1.5]}),
    }
    text = demo_report(out)
    assert "sample's test split" in text and "accuracy [95% CI]" in text and "50.0 [40.0, 60.0]" in text
    assert "demo_hard_subset.csv: 7 questions" in text and "0.123" in text and "0.12345" not in text
    assert text.index("Hard subset") < text.index("Timings (s):") and "total" in text


def test_attribute_contexts_names_unknown_and_missing_options():
    llm = LLMConfig(model="m", base_url="http://127.0.0.1:9/v1")
    questions = pd.DataFrame({"user_id": [1], "question_index": [0], "question": ["q?"]})
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_attribute'"):
        attribute_contexts(
            None, questions, llm=llm, cache=None, counter=CharEstimate(), budget=100, max_attribute=3
        )
    with pytest.raises(TypeError, match="budget"):
        attribute_contexts(None, questions, llm=llm, cache=None, counter=CharEstimate())
    kw = dict(llm=llm, cache=None, counter=CharEstimate(), budget=100)
    docs, info = attribute_contexts(None, questions.iloc[0:0], **kw)  # no user: no request
    assert docs == {} and info["calls"] == 0 and info["n_attributes_per_question"] == []


def test_related_accuracy_table_takes_keywords():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "set": rng.choice(["a", "b"], 80),
            "tier": rng.choice(["easy", "hard"], 80),
            "user_id": rng.integers(0, 10, 80),
            "correct": rng.random(80) < 0.6,
        }
    )
    kw = {"interval": "bootstrap", "seed": 4, "confidence": 0.9, "chance": 0.25}
    by_keywords = accuracy_table(frame, **kw)
    assert set(by_keywords["chance"]) == {0.25}
    with pytest.raises(TypeError, match="confidance"):
        accuracy_table(frame, confidance=0.9)


def test_check_number_names_the_parameter_the_bound_and_the_value():
    assert check_number(3, "n_boot", ge=1, integer=True) == 3
    assert check_number(None, "temperature", ge=0, allow_none=True) is None
    for value, bounds, message in [
        (0, {"ge": 1, "integer": True}, "n_boot must be an integer >= 1, got 0"),
        (float("nan"), {"gt": 0}, "n_boot must be a number > 0, got nan"),
        (1.5, {"ge": 0, "lt": 1}, "n_boot must be a number >= 0 and < 1, got 1.5"),
        (True, {"ge": 0, "integer": True}, "n_boot must be an integer >= 0, got True"),
        ("3", {"ge": 0}, "n_boot must be a number >= 0, got '3'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            check_number(value, "n_boot", **bounds)


def _preds() -> pd.DataFrame:
    return pd.DataFrame({"user_id": [1, 1, 2], "question_index": [0, 1, 0], "correct": [True, False, True]})


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bootstrap_ci(_preds(), n_boot=0), "n_boot must be an integer >= 1, got 0"),
        (
            lambda: grouped_bootstrap_ci(_preds(), by="user_id", n_boot=-1),
            "n_boot must be an integer >= 1, got -1",
        ),
        (
            lambda: paired_bootstrap(_preds().assign(b=False), a="correct", b="b", n_boot=0),
            "n_boot must be an integer >= 1, got 0",
        ),
        (lambda: compare(_preds(), _preds(), n_boot=-1), "n_boot must be an integer >= 1, got -1"),
        (lambda: score_accuracy_table(_preds(), n_boot=0), "n_boot must be an integer >= 1, got 0"),
        (lambda: score_run("nowhere", n_boot=0), "n_boot must be an integer >= 1, got 0"),
        (lambda: score_run("nowhere", batch_size=0), "batch_size must be an integer >= 1, got 0"),
        (lambda: run_audit(None, n_boot=-1), "n_boot must be an integer >= 1, got -1"),
        (lambda: run_audit(None, seed=-2), "seed must be an integer >= 0, got -2"),
        (lambda: LLMConfig(model="m", timeout=0), "timeout must be a number > 0, got 0"),
        (
            lambda: LLMConfig(model="m", max_output_tokens=-5),
            "max_output_tokens must be an integer >= 1, got -5",
        ),
        (lambda: LLMConfig(model="m", temperature=-1.0), "temperature must be a number >= 0, got -1.0"),
        (
            lambda: answer(None, method="rag", llm=None, max_new_tokens=-5),
            "max_new_tokens must be an integer >= 1",
        ),
        (lambda: answer(None, method="rag", llm=None, margin=-1), "margin must be an integer >= 0, got -1"),
        (
            lambda: answer(None, method="rag", llm=None, max_model_len=0),
            "max_model_len must be an integer >= 1",
        ),
        (
            lambda: build_dataset("raw", "out", validation_fraction=1.5),
            "validation_fraction must be a number >= 0 and < 1",
        ),
        (lambda: stage2_predictions(None, tune_fraction=2.0), "tune_fraction must be a number > 0 and < 1"),
        (
            lambda: execute_notebooks(timeout=0, notebooks_dir="nowhere"),
            "timeout must be an integer >= 1, got 0",
        ),
    ],
)
def test_numeric_parameters_of_the_api_are_range_checked(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
