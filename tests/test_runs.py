import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pv4kit.scoring.runs import (
    METRICS_FILE,
    PREDICTIONS_FILE,
    read_generations,
    read_metrics,
    read_predictions,
    read_run_config,
    write_generations,
)

ROOT = Path(__file__).resolve().parents[1]


def _gens():
    return pd.DataFrame(
        {
            "user_id": [1, 1],
            "question_index": [0, 1],
            "split": "test",
            "generation": ["a", None],
            "retrieved_ids": [[1, 2], [3]],
        }
    )


def test_roundtrip(tmp_path):
    run = write_generations(tmp_path / "r", _gens(), config={"data": "data/", "method": "rag", "model": "m"})
    g = read_generations(run)
    assert list(g.columns[:6]) == ["user_id", "question_index", "split", "generation", "method", "model"]
    assert list(g["generation"]) == ["a", ""] and list(g["method"]) == ["rag", "rag"]
    assert list(g["retrieved_ids"].iloc[0]) == [1, 2]
    cfg = read_run_config(run)
    assert cfg["data"] == "data/" and "pv4kit_version" in cfg and "created_utc" in cfg
    assert not list(run.glob(".*tmp"))


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="missing column"):
        write_generations(tmp_path / "r", _gens().drop(columns="split"), config={})
    with pytest.raises(ValueError, match="share a"):
        write_generations(tmp_path / "r", _gens().assign(question_index=0), config={})
    with pytest.raises(FileNotFoundError, match="generations.parquet"):
        read_generations(tmp_path / "nothing")
    assert read_run_config(tmp_path / "nothing") == {}
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{\n oops")
    with pytest.raises(ValueError, match="line 2"):
        read_run_config(tmp_path / "bad")


@pytest.mark.parametrize(
    ("column", "values", "found"),
    [
        ("user_id", [1.0, None], "null"),
        ("question_index", [0.0, float("nan")], "null"),
        ("user_id", [1.5, 1.0], "not an integer"),
        ("user_id", ["u1", "u2"], "not an integer"),
    ],
)
def test_a_bad_key_in_generations_names_the_file_column_and_rows(tmp_path, column, values, found, capsys):
    from pv4kit.cli import main

    (tmp_path / "x").mkdir()
    path = tmp_path / "x" / "generations.parquet"
    _gens().assign(**{column: values}).to_parquet(path)
    message = rf"{path}: {column} is {found} in 1 row\(s\) \(row\(s\) \[\d\]\); expected an integer"
    if column == "user_id" and values[0] == "u1":
        message = message.replace("1 row", "2 row").replace(r"\[\d\]", r"\[0, 1\]")
    with pytest.raises(ValueError, match=message):
        read_generations(tmp_path / "x")
    assert main(["score", str(tmp_path / "x"), "--embedder", "minilm"]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and column in err and "Traceback" not in err


def test_foreign_run_without_config(tmp_path):
    (tmp_path / "x").mkdir()
    _gens().drop(columns="retrieved_ids").to_parquet(tmp_path / "x" / "generations.parquet")
    assert len(read_generations(tmp_path / "x")) == 2
    json.dumps(read_run_config(tmp_path / "x"))


def test_rewriting_generations_drops_stale_scores(tmp_path):
    from pv4kit.scoring.runs import METRICS_FILE, PREDICTIONS_FILE

    write_generations(tmp_path, _gens(), config={"method": "m"})
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"old")
    (tmp_path / METRICS_FILE).write_text("{}")
    write_generations(tmp_path, _gens().assign(generation=["new", "new"]), config={"method": "m"})
    assert not (tmp_path / PREDICTIONS_FILE).exists() and not (tmp_path / METRICS_FILE).exists()


def test_metrics_frame_reads_every_scored_run_as_tidy_rows(tmp_path, make_fake_embedder):
    from pv4kit.pipeline.demo import results_table
    from pv4kit.scoring.runs import METRICS_COLUMNS, metrics_frame, read_metrics
    from pv4kit.scoring.score import score_run
    from tests.test_score import TABLE, _generations, _questions

    runs = tmp_path / "runs"
    for name, method in (("b_rag", "rag"), ("a_none", "no_docs")):
        write_generations(runs / name, _generations(), config={"data": "x", "method": method, "model": "m"})
        score_run(runs / name, data=_questions(), embedder=make_fake_embedder(TABLE), cache=False, n_boot=50)
    write_generations(runs / "unscored", _generations(), config={})  # no metrics.json: left out
    frame = metrics_frame(runs)
    assert list(frame.columns) == list(METRICS_COLUMNS)
    assert list(frame["run"].unique()) == ["a_none", "b_rag"] and set(frame["model"]) == {"m"}
    saved = read_metrics(runs / "b_rag")
    mine = frame[frame["run"] == "b_rag"].set_index(["subset", "group", "metric"])
    overall = mine.loc[("all", "all", "accuracy")]
    assert overall["method"] == "rag" and overall["split"] == "test" and overall["n"] == saved["n"]
    assert [overall["value"], overall["ci_low"], overall["ci_high"]] == [
        saved["accuracy"],
        *saved["accuracy_ci"],
    ]
    hard = mine.loc[("hard", "hard", "accuracy")]
    assert hard["n"] == saved["n_hard"] and hard["value"] == saved["accuracy_hard"]
    for cat in saved["by_category"]:
        row = mine.loc[("category", cat["category_name"], "accuracy")]
        assert (row["value"], row["ci_low"], row["ci_high"], row["n"]) == (
            cat["accuracy"],
            cat["ci_low"],
            cat["ci_high"],
            cat["n"],
        )
    assert mine.loc[("all", "all", "n_ties"), "value"] == saved["n_ties"]
    # a list of run dirs, one scored run dir, an empty folder
    listed = metrics_frame([runs / "b_rag", runs / "a_none"])
    assert list(listed["run"].unique()) == ["b_rag", "a_none"]
    assert metrics_frame(runs / "a_none")["run"].eq("a_none").all()
    (tmp_path / "empty").mkdir()
    empty = metrics_frame(tmp_path / "empty")
    assert empty.empty and list(empty.columns) == list(METRICS_COLUMNS)
    with pytest.raises(FileNotFoundError, match="metrics.json"):
        metrics_frame([runs / "unscored"])
    with pytest.raises(FileNotFoundError, match="no such folder"):
        metrics_frame(tmp_path / "nowhere")
    # the demo's results table reads the same rows
    table = results_table({"a_none": read_metrics(runs / "a_none")})
    acc, (lo, hi) = saved["accuracy"], saved["accuracy_ci"]
    assert table.iloc[0]["accuracy [95% CI]"] == f"{100 * acc:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
    assert table.iloc[0]["n"] == saved["n"] and table.iloc[0]["n_hard"] == saved["n_hard"]


def test_results_table_prints_missing_hard_accuracy_as_na():
    from pv4kit.pipeline.demo import results_table

    m = {
        "accuracy": 0.5,
        "accuracy_ci": [0.25, 0.75],
        "accuracy_hard": None,
        "accuracy_hard_ci": [None, None],
    }
    table = results_table({"run": {**m, "n": 4, "n_hard": 0}})
    assert table.to_dict("records") == [
        {
            "method": "run",
            "accuracy [95% CI]": "50.0 [25.0, 75.0]",
            "accuracy_hard [95% CI]": "n/a",
            "n": 4,
            "n_hard": 0,
        }
    ]


# ------------------------------------------------------------------ one run, several processes (issue 23.3)

_WRITER = """
import sys
import pandas as pd
from pv4kit.scoring.runs import write_generations
run, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    label = f"{tag}{i}"
    rows = 200 + 37 * (i % 5)
    frame = pd.DataFrame(
        {"user_id": 1, "question_index": range(rows), "split": "test", "generation": label * 50}
    )
    write_generations(run, frame, config={"method": label, "n_questions": rows})
"""


def _snapshot(run):
    """``(config's label, generations' label and rows, config's label again)``, or None mid-swap."""
    try:
        before = json.loads((run / "config.json").read_text())
        gens = pd.read_parquet(run / "generations.parquet", columns=["generation"])
        after = json.loads((run / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return before, str(gens["generation"].iloc[0])[: len(before["method"])], len(gens), after


def test_two_processes_writing_one_run_never_leave_a_mix(tmp_path):
    """Generations and config.json always come from the same write, whichever process made it."""
    run = tmp_path / "run"
    write_generations(run, _gens().assign(generation="start"), config={"method": "start", "n_questions": 2})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(run), tag, "20"], env=env) for tag in "AB"]
    mixed, seen = [], 0
    while any(p.poll() is None for p in procs):
        got = _snapshot(run)
        if got is None or got[0] != got[3]:  # config.json changed while we read: no single instant
            continue
        seen += 1
        config, label, rows, _ = got
        if label != config["method"][: len(label)] or rows != config.get("n_questions", rows):
            mixed.append((config["method"], label, rows))
    assert [p.wait() for p in procs] == [0, 0]
    config, label, rows, _ = _snapshot(run)
    assert (label, rows) == (config["method"], config["n_questions"])
    assert seen and not mixed, f"{len(mixed)} of {seen} snapshots mixed two writes, e.g. {mixed[:3]}"
    assert not [p.name for p in tmp_path.iterdir() if p.name != "run" and not p.name.endswith(".lock")]


def test_score_refuses_to_write_when_the_generations_change_while_it_scores(tmp_path, make_fake_embedder):
    """``answer`` (another process) rewrites the run while ``score`` embeds: score writes nothing."""
    from pv4kit.scoring.score import score_run
    from tests.test_score import TABLE, _generations, _questions

    run = tmp_path / "run"
    write_generations(run, _generations(), config={"data": "x", "method": "m", "model": "m"})
    embedder = make_fake_embedder(TABLE)
    encode = embedder.encode

    def encode_while_rewritten(texts, **kw):
        if len(embedder.calls) == 0:
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            subprocess.run([sys.executable, "-c", _WRITER, str(run), "C", "1"], env=env, check=True)
        return encode(texts, **kw)

    embedder.encode = encode_while_rewritten
    with pytest.raises(
        RuntimeError, match=r"generations.parquet changed while it was scored.*score it again"
    ):
        score_run(run, data=_questions(), embedder=embedder, cache=False, n_boot=20)
    assert not (run / PREDICTIONS_FILE).exists() and not (run / METRICS_FILE).exists()
    assert read_run_config(run)["method"] == "C0"


def test_predictions_and_metrics_of_other_generations_are_refused(tmp_path, make_fake_embedder):
    """A run whose generations.parquet was replaced behind pv4kit's back is not read as scored."""
    from pv4kit.scoring.refformat import export_reference
    from pv4kit.scoring.score import score_run
    from tests.test_score import TABLE, _generations, _questions

    run = tmp_path / "run"
    write_generations(run, _generations(), config={"data": "x", "method": "m", "model": "m"})
    predictions, metrics = score_run(run, data=_questions(), embedder=make_fake_embedder(TABLE), cache=False)
    assert metrics["generations_sha256"] == predictions.attrs["generations_sha256"]
    assert len(read_predictions(run)) == len(predictions)
    _generations().iloc[:1].to_parquet(run / "generations.parquet")  # a copy tool, an old pv4kit...
    for read in (read_predictions, read_metrics, lambda r: export_reference(r, data=_questions())):
        with pytest.raises(ValueError, match=r"scored from other generations.*score the run again"):
            read(run)
    assert not (run / "reference").exists()


def test_metrics_frame_and_load_scored_runs_say_which_runs_they_leave_out(tmp_path, caplog):
    from pv4kit.analysis.notebooks import load_scored_runs
    from pv4kit.scoring.runs import metrics_frame

    write_generations(tmp_path / "unscored", _gens(), config={"method": "m"})
    (tmp_path / "notes").mkdir()  # not a run: nothing to say
    with caplog.at_level("WARNING"):
        assert metrics_frame(tmp_path).empty
        assert load_scored_runs(tmp_path) == {}
    warned = [r.getMessage() for r in caplog.records if "unscored" in r.getMessage()]
    assert len(warned) == 2, caplog.text
    assert all(m.endswith("left out") for m in warned)
    assert "no metrics.json" in warned[0] and "no predictions.parquet" in warned[1]
    assert "notes" not in caplog.text
