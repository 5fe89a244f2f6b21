"""End to end on the real local model (llama.cpp server + SmolLM2-135M): opt in with ``pytest -m slow``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from pv4kit.baselines.run import answer
from pv4kit.llm.config import LLMConfig
from tests.test_baselines import _data

pytestmark = pytest.mark.slow
RAW = Path(__file__).resolve().parents[1] / "raw"


@pytest.fixture(scope="module")
def local_url():
    pytest.importorskip("llama_cpp")
    from pv4kit.llm.local import local_server

    with local_server(n_ctx=2048) as url:
        yield url


def test_rag_through_the_real_local_server(local_url, tmp_path, fake_embedder):
    from pv4kit.baselines.prompting import get_token_counter
    from pv4kit.llm.local import LOCAL_MODEL_ID

    llm = LLMConfig(model=LOCAL_MODEL_ID, base_url=local_url, protocol="chat", max_concurrency=1, timeout=300)
    counter = get_token_counter(None, base_url=local_url)
    assert counter.name.startswith("llama.cpp")
    kw = dict(
        method="rag",
        top_k=2,
        llm=llm,
        embedder=fake_embedder,
        cache=tmp_path / "llm.sqlite",
        token_counter=counter,
        max_new_tokens=24,
        limit=2,
        progress=False,
    )
    run = answer(_data(), run_dir=tmp_path / "run", **kw)
    assert run.calls == 2 and run.errors == 0
    assert all(g.strip() for g in run.generations["generation"])
    # the server's /extras/tokenize counts (llama-cpp-python cannot render its template: an estimate)
    pv = run.context["pv4kit"]
    assert pv["token_counter"] == "estimate: llama.cpp /extras/tokenize + template overhead"
    assert pv["exact"] is False and pv["server_kind"] == "llama-cpp-python"
    assert run.context["max_model_len"] == 8192
    assert all(len(ids) == 2 for ids in run.generations["retrieved_ids"])
    again = answer(_data(), run_dir=tmp_path / "run", **kw)
    assert again.calls == 0 and again.cached == 2
    pd.testing.assert_series_equal(again.generations["generation"], run.generations["generation"])


@pytest.mark.skipif(not (RAW / "users").is_dir(), reason="no sample raw/ tree")
def test_demo_pipeline_on_the_sample(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    from pv4kit.pipeline.demo import demo_report, run_demo

    shutil.copytree(RAW, tmp_path / "raw")
    monkeypatch.chdir(tmp_path)
    kw = dict(
        raw="raw",
        data="data",
        runs_dir="runs",
        limit=2,
        max_new_tokens=16,
        servers=1,
        notebooks=False,
        progress=False,
    )
    out = run_demo(**kw)
    assert list(out["results"]["method"]) == ["no_docs", "rag_top1", "rag_top5", "persona", "mcq_no_docs"]
    assert (tmp_path / "runs" / "demo_no_docs" / "validity" / "summary.json").is_file()
    assert (tmp_path / "runs" / "demo_hard_subset.csv").is_file()
    assert not (tmp_path / "raw" / "hard_subset.csv").read_text() == ""  # untouched
    assert set(out["hard"]["rule"]) == {"any", "all"}
    text = demo_report(out)
    assert "accuracy [95% CI]" in text and "Timings" in text and "Scorer validity of" in text
    again = run_demo(**kw)  # warm: data up to date, every answer cached
    pd.testing.assert_frame_equal(again["results"], out["results"])
    assert all(c["called"] == 0 for c in again["calls"].values())
    assert "data" in again["timings"]["stage"].tolist()
