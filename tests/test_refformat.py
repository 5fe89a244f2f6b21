import json

import pandas as pd

from pv4kit.scoring.refformat import export_reference, import_reference, reference_metrics
from pv4kit.scoring.runs import read_generations, read_run_config, write_generations
from pv4kit.scoring.score import score_run


def _questions():
    return pd.DataFrame(
        {
            "user_id": [1, 1, 2, 3],
            "split": ["test", "test", "test", "train"],
            "question_index": [0, 1, 0, 0],
            "question": ["Same question?", "Other?", "Same question?", "Train?"],
            "choices": [["a", "b", "c", "d", ""]] * 4,
            "answer": ["a", "b", "c", "d"],
            "hard": [True, False, False, False],
            "category": [1, 1, 2, 2],
            "category_name": ["x", "x", "y", "y"],
        }
    )


def test_reference_metrics_percentages():
    p = pd.DataFrame({"correct": [True, True, False], "hard": [False, False, False]})
    assert reference_metrics(p, form="evaluate") == {"accuracy": 66.67, "num_examples": 3}
    assert reference_metrics(p) == {"accuracy": 66.67, "accuracy_hard": 0.0, "num_examples": 3}
    assert reference_metrics(p.assign(hard=[True, False, False]))["accuracy_hard"] == 100.0


def test_export_then_import_roundtrip(tmp_path, make_fake_embedder):
    q = _questions()
    run = tmp_path / "run"
    gens = pd.DataFrame(
        {
            "user_id": [1, 1, 2],
            "question_index": [0, 1, 0],
            "split": "test",
            "generation": ["a<|im_end|>", "zzz", "c"],
        }
    )
    write_generations(run, gens, config={"data": "x"})
    emb = make_fake_embedder()
    score_run(run, data=q, embedder=emb, cache=False, n_boot=50)
    out = export_reference(run, data=q)
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert [x["prediction"] for x in lines] == ["a", "zzz", "c"]
    assert set(lines[0]) == {"question", "answer", "prediction", "choices", "hard"}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_examples"] == 3 and metrics["accuracy_hard"] == 100.0

    # add one row that joins nothing; the repeated question text is matched in order
    with open(out / "predictions.jsonl", "a") as fh:
        fh.write(
            json.dumps(
                {
                    "question": "Unknown?",
                    "answer": "a",
                    "prediction": "p",
                    "choices": ["a"] * 5,
                    "hard": False,
                }
            )
            + "\n"
        )
    run2 = tmp_path / "imported"
    g, unmatched = import_reference(out / "predictions.jsonl", data=q, run_dir=run2, model="elsewhere")
    assert list(zip(g["user_id"], g["question_index"], strict=True)) == [(1, 0), (1, 1), (2, 0)]
    assert list(unmatched["line"]) == [4] and unmatched["reason"][0] == "no question with this text"
    assert read_generations(run2)["generation"].tolist() == ["a", "zzz", "c"]
    assert read_run_config(run2)["n_unmatched"] == 1
    _, m2 = score_run(run2, data=q, embedder=emb, cache=False, n_boot=50)
    assert m2["accuracy"] == json.loads((run / "metrics.json").read_text())["accuracy"]
