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
from pv4kit.cli import main

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


def test_failing_cell_names_the_line_and_the_real_error_without_colour(tmp_path):
    # the cell's first line is an import; the error is raised four lines down, inside a function
    (tmp_path / "02_data.py").write_text(
        "# %% [markdown]\n# title\n\n# %%\nimport os\n\n\ndef load_it(path):\n"
        "    raise FileNotFoundError(f'{path}: found no parquet files')\n\n\n"
        "data = load_it(os.environ['PV4KIT_DATA'])\ndata\n"
    )
    with pytest.raises(NotebookError) as exc:
        execute_notebooks(notebooks_dir=tmp_path, timeout=60, params={"data": tmp_path / "none"})
    message = str(exc.value)
    assert "\x1b[" not in message and "\n" not in message  # one paragraph, no ANSI colour
    assert """02_data: cell 1 failed at line 8 ("data = load_it(os.environ['PV4KIT_DATA'])")""" in message
    assert f"FileNotFoundError: {tmp_path / 'none'}: found no parquet files" in message
    assert "import os" not in message
    assert f"PV4KIT_DATA={tmp_path / 'none'}" in message and "02_data.ipynb" in message


def test_notebooks_dir_that_is_missing_or_holds_no_notebook_is_an_error(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match=r"notebooks_dir: .*nowhere: no such folder"):
        list_notebooks(tmp_path / "nowhere")
    assert main(["notebooks", "--notebooks-dir", str(tmp_path / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match=r"holds no notebooks \(NN_name\.py"):
        execute_notebooks(notebooks_dir=tmp_path)


def test_param_without_equals_names_the_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["notebooks", "--execute", "--param", "data"])
    assert exc.value.code == 2
    assert (
        "argument --param: expected NAME=VALUE (e.g. data=/path/to/data), got 'data'"
        in capsys.readouterr().err
    )


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
