"""Every notebook in notebooks/ runs headless on the sample; a failing cell fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from pv4kit.analysis.notebooks import (
    NotebookError,
    execute_notebooks,
    list_notebooks,
    load_notebook_data,
    project_paths,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NAMES = list_notebooks(NOTEBOOKS)


def test_notebooks_found():
    assert {"01_dataset_overview", "05_browser", "07_paper_figures"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name, tmp_path, static_small):
    # figures go to a scratch folder so the test never overwrites figures/; the notebooks default to the
    # release on the hub, so the sample (data/ when built, else raw/) is passed as PV4KIT_DATA; the audits
    # embed with a static model of a small vocabulary (the CPU default distils the full one: minutes)
    params = {"figures": tmp_path, "data": project_paths(NOTEBOOKS)["DATA"]}
    params["embedder"] = f"static:{static_small}"
    table = execute_notebooks([name], notebooks_dir=NOTEBOOKS, timeout=600, params=params)
    assert table["notebook"].tolist() == [name]
    if name == "02_distractor_audit":
        executed = (NOTEBOOKS / f"{name}.ipynb").read_text()
        assert "audit embedder: static:all-MiniLM-L6-v2" in executed
        assert "embedder static:all-MiniLM-L6-v2" in executed  # the summary and the figure titles name it
    if name == "07_paper_figures":
        assert (tmp_path / "category_balance.html").is_file()
        assert "static:all-MiniLM-L6-v2" in (tmp_path / "distractor_similarity.html").read_text()


def test_failing_cell_names_notebook_and_cell(tmp_path):
    (tmp_path / "01_broken.py").write_text("# %%\nx = 1\n\n# %%\nraise ValueError('boom')\n")
    with pytest.raises(NotebookError, match=r"01_broken: cell 1 failed .*raise ValueError"):
        execute_notebooks(notebooks_dir=tmp_path, timeout=60)
    with pytest.raises(FileNotFoundError, match="available"):
        execute_notebooks(["nope"], notebooks_dir=tmp_path)


def test_project_paths(monkeypatch, tmp_path):
    monkeypatch.chdir(NOTEBOOKS)
    paths = project_paths()
    assert paths["PROJECT"] == ROOT and paths["DATA"].name in ("data", "raw")
    monkeypatch.setenv("PV4KIT_DATA", str(tmp_path))
    assert project_paths()["DATA"] == tmp_path


def test_load_notebook_data_falls_back_to_the_sample_when_the_hub_fails(monkeypatch, tmp_path, caplog):
    monkeypatch.delenv("PV4KIT_DATA", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # and an empty hub cache: the release cannot be had
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with caplog.at_level("WARNING"):
        data = load_notebook_data("MemoryAsModality/PersonalizationV4", fallback=ROOT / "raw")
    assert data.kind == "raw" and Path(data.source) == ROOT / "raw" and len(data.questions) > 0
    assert (
        "MemoryAsModality/PersonalizationV4 could not be loaded" in caplog.text
        and "HF_HUB_OFFLINE" in caplog.text
    )
    # an explicit PV4KIT_DATA wins and has no fallback: a bad path fails loudly
    monkeypatch.setenv("PV4KIT_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_notebook_data("MemoryAsModality/PersonalizationV4", fallback=ROOT / "raw")
    # a local folder given as the source is loaded as it is
    monkeypatch.delenv("PV4KIT_DATA")
    assert load_notebook_data(ROOT / "raw").kind == "raw"
