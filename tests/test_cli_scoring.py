"""The scoring commands end to end through the CLI, with the real offline MiniLM model."""

import json

import pandas as pd
import pytest

from pv4kit.cli import main
from pv4kit.dataset.load import load
from pv4kit.dataset.splits import build_dataset
from pv4kit.scoring.runs import write_generations
from tests.rawtree import make_tree


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    tree = make_tree(root / "raw", train=[6], test=[126, 127], n_categories=2, per_category=4)
    build_dataset(tree / "users", root / "data", progress=False)
    test = load(root / "data").split("test")
    # run a answers with the reference text (always right), run b with a fixed wrong choice
    a = test[["user_id", "question_index", "split"]].assign(generation=test["answer"])
    wrong = [c[(list(c).index(ans) + 1) % 5] for c, ans in zip(test["choices"], test["answer"], strict=True)]
    b = test[["user_id", "question_index", "split"]].assign(generation=wrong)
    for name, frame in {"a": a, "b": b}.items():
        write_generations(
            root / "runs" / name, frame, config={"data": str(root / "data"), "method": name, "model": "hand"}
        )
    assert (
        main(
            [
                "-q",
                "score",
                str(root / "runs" / "a"),
                str(root / "runs" / "b"),
                "--embedder",
                "minilm",
                "--n-boot",
                "200",
            ]
        )
        == 0
    )
    return root


def test_score_writes_predictions_and_metrics(scored):
    ma = json.loads((scored / "runs" / "a" / "metrics.json").read_text())
    mb = json.loads((scored / "runs" / "b" / "metrics.json").read_text())
    assert ma["accuracy"] == 1.0 and mb["accuracy"] == 0.0
    assert ma["n"] == 16 and ma["accuracy_hard"] is None
    preds = pd.read_parquet(scored / "runs" / "a" / "predictions.parquet")
    assert {"predicted_letter", "correct", "sim_A", "margin", "tie"} <= set(preds.columns)


def test_compare_export_import(scored, capsys):
    out_csv = scored / "cmp.csv"
    assert (
        main(
            [
                "-q",
                "compare",
                str(scored / "runs" / "a"),
                str(scored / "runs" / "b"),
                "--n-boot",
                "200",
                "-o",
                str(out_csv),
            ]
        )
        == 0
    )
    table = pd.read_csv(out_csv)
    assert len(table) >= 1
    assert main(["-q", "export", str(scored / "runs" / "a")]) == 0
    ref = scored / "runs" / "a" / "reference"
    metrics = json.loads((ref / "metrics.json").read_text())
    assert metrics["accuracy"] == 100.0 and metrics["num_examples"] == 16
    assert (
        main(
            [
                "-q",
                "import",
                str(ref / "predictions.jsonl"),
                str(scored / "runs" / "imported"),
                "--data",
                str(scored / "data"),
            ]
        )
        == 0
    )
    gens = pd.read_parquet(scored / "runs" / "imported" / "generations.parquet")
    assert len(gens) == 16


def test_score_errors_are_one_line(scored, capsys):
    assert main(["score", str(scored / "runs" / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pv4kit score: error:") and "Traceback" not in err
