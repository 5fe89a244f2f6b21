"""``make demo`` end to end on the sample, on its own vLLM servers (opt in with ``pytest -m slow``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
RAW = Path(__file__).resolve().parents[1] / "raw"


@pytest.mark.skipif(not (RAW / "users").is_dir(), reason="no sample raw/ tree")
def test_demo_pipeline_on_the_sample(tmp_path, monkeypatch):
    from pv4kit.llm.local import smollm2_dir, vllm_python

    try:
        vllm_python(), smollm2_dir()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    from pv4kit.pipeline.demo import demo_report, run_demo

    monkeypatch.setenv("PV4KIT_CACHE", str(smollm2_dir().parents[1]))  # where the model was prepared
    shutil.copytree(RAW, tmp_path / "raw")
    monkeypatch.chdir(tmp_path)
    kw = dict(raw="raw", data="data", runs_dir="runs", cache=tmp_path / "llm.sqlite", limit=4)
    out = run_demo(**kw, max_new_tokens=16, notebooks=False, progress=False)
    assert list(out["results"]["method"]) == ["no_docs", "rag_top1", "rag_top5", "persona", "mcq_no_docs"]
    assert (tmp_path / "runs" / "demo_no_docs" / "validity" / "summary.json").is_file()
    assert "Scorer validity of" in demo_report(out)
    assert all(c["errors"] == 0 for c in out["calls"].values())
    config = json.loads((tmp_path / "runs" / "demo_rag_top1" / "config.json").read_text())
    assert config["server_kind"] == "vllm" and config["server_version"] == "0.32.0"
    assert config["token_counter"] == "vllm /tokenize" and config["served_from"] == str(smollm2_dir())
    e = out["endpoint_scoring"]
    assert e["n"] == 4 and e["n_equal"] == 4 and e["max_abs_sim_diff"] < 1e-4
    assert (tmp_path / "runs" / "demo_hard_subset.csv").is_file()
    assert "scored through vLLM's /v1/embeddings: 4 of 4" in demo_report(out)
    # warm: every run complete with these settings, so no server starts and the tables are the same
    again = run_demo(**kw, max_new_tokens=16, notebooks=False, progress=False)
    assert all(c["kept"] == 1 for c in again["calls"].values())
    assert not {"server start", "answer no_docs", "answer mcq_no_docs"} & set(again["timings"]["stage"])
    assert again["results"].equals(out["results"]) and again["endpoint_scoring"] == e
    # another output cap is another run: answered again
    third = run_demo(**kw, max_new_tokens=8, notebooks=False, progress=False, endpoint_scoring=False)
    assert all(c["kept"] == 0 and c["called"] == 4 for c in third["calls"].values())
