import json

import pandas as pd
import pytest

from pv4kit.scoring.runs import read_generations, read_run_config, write_generations


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
