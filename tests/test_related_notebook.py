from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_notebook_08_runs_headless_on_fixtures(monkeypatch):
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.delenv("PV4KIT_BASE_URL", raising=False)
    monkeypatch.delenv("PV4KIT_RELATED_DATA", raising=False)
    nb = jupytext.read(NOTEBOOKS / "08_related_benchmarks.py")
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # a failing cell raises CellExecutionError
    outputs = "".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
    )
    assert "skipping the LLM judge" in outputs
    assert "bradley_terry" in outputs and "fleiss_kappa" in outputs
    assert "paper: 8,298" in outputs and "human (any)" in outputs and "personalised_side" in outputs
