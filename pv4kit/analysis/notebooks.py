"""Run the jupytext notebooks (``notebooks/NN_name.py``) headless, and the helpers the notebooks share.

Parameters reach a notebook as ``PV4KIT_<NAME>`` environment variables, read by :func:`project_paths` and
:func:`load_notebook_data` in its first cell.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pandas as pd

from pv4kit._options import check_number
from pv4kit.dataset.hub import PV4_HUB_ID, HubError
from pv4kit.dataset.load import load
from pv4kit.schema import QUESTION_KEY
from pv4kit.scoring import runs
from pv4kit.scoring.runs import check_same_data

logger = logging.getLogger(__name__)

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class NotebookError(RuntimeError):
    """A notebook cell raised while executing headless."""


def project_paths(start: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """``PROJECT, DATA, RUNS, FIGURES, CACHE, LLM_CACHE`` for a notebook.

    ``PROJECT`` is the nearest folder at or above ``start`` (default: the working directory) holding
    ``pyproject.toml`` and ``pv4kit/``. ``DATA`` is ``$PV4KIT_DATA``, else ``PROJECT/data`` when it holds
    parquet files, else ``PROJECT/raw``; ``RUNS``/``FIGURES`` follow ``$PV4KIT_RUNS``/``$PV4KIT_FIGURES``;
    ``CACHE`` is the embedding cache (``$PV4KIT_CACHE/embeddings``, else
    ``PROJECT/.cache/pv4kit/embeddings``), ``LLM_CACHE`` ``llm.sqlite`` beside it.
    """
    here = Path(start or Path.cwd()).resolve()
    marked = (
        d for d in (here, *here.parents) if (d / "pyproject.toml").is_file() and (d / "pv4kit").is_dir()
    )
    project = next(marked, here.parent if here.name == "notebooks" else here)
    data = Path(os.environ.get("PV4KIT_DATA") or project / "data")
    if not os.environ.get("PV4KIT_DATA") and not any(data.glob("*.parquet")):
        data = project / "raw"
    cache = Path(os.environ.get("PV4KIT_CACHE") or project / ".cache" / "pv4kit")
    return {
        "PROJECT": project,
        "DATA": data,
        "RUNS": Path(os.environ.get("PV4KIT_RUNS") or project / "runs"),
        "FIGURES": Path(os.environ.get("PV4KIT_FIGURES") or project / "figures"),
        "CACHE": cache / "embeddings",
        "LLM_CACHE": cache / "llm.sqlite",
    }


def load_notebook_data(
    source: str | os.PathLike[str] = PV4_HUB_ID,
    *,
    fallback: str | os.PathLike[str] | None = None,
    start: str | os.PathLike[str] | None = None,
) -> Any:
    """The data a notebook analyses: ``$PV4KIT_DATA`` when set (no fallback), else ``source``.

    When ``source`` (default: the release's hub id) is a hub id that cannot be had, a warning names why and
    ``fallback`` is loaded (default :func:`project_paths`' ``DATA``); ``data.source`` says which.
    ``start``: where to look for the project root.
    """
    if os.environ.get("PV4KIT_DATA"):
        return load(os.environ["PV4KIT_DATA"])
    try:
        return load(source)
    except HubError as exc:  # only hub ids raise it
        other = Path(fallback) if fallback is not None else project_paths(start)["DATA"]
        logger.warning("%s could not be loaded (%s): using the sample in %s instead", source, exc, other)
        return load(other)


def load_scored_runs(runs_dir: str | os.PathLike[str], *, force: bool = False) -> dict[str, pd.DataFrame]:
    """Predictions of every scored run under ``runs_dir`` (``{name: predictions}``, sorted by name).

    The generations' extra per-question columns (``retrieved_ids`` ...) are joined on. Runs scored on other
    data than the first are refused (:func:`pv4kit.scoring.runs.check_same_data`; ``force``: a warning).
    """
    root = Path(runs_dir)
    out: dict[str, pd.DataFrame] = {}
    if not root.is_dir():
        return out
    for folder in runs.scored_runs(root, runs.PREDICTIONS_FILE):
        preds = runs.read_predictions(folder)
        gen_path = folder / runs.GENERATIONS_FILE
        if gen_path.is_file():
            gens = pd.read_parquet(gen_path)
            extra = [c for c in gens.columns if c not in preds.columns and c not in ("method", "model")]
            if extra:
                preds = preds.merge(gens[[*QUESTION_KEY, *extra]], on=QUESTION_KEY, how="left")
        out[folder.name] = preds
    names = list(out)
    for name in names[1:]:
        check_same_data(root / names[0], root / name, out[names[0]], out[name], force=force)
    return out


def stack_runs(runs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One long predictions frame with a ``run`` column (empty frame for no runs)."""
    if not runs:
        return pd.DataFrame(columns=["run", "user_id", "question_index", "correct"])
    return pd.concat([p.assign(run=name) for name, p in runs.items()], ignore_index=True)


def list_notebooks(notebooks_dir: str | os.PathLike[str] = "notebooks") -> list[str]:
    """Names (``NN_name``) of the jupytext notebooks in ``notebooks_dir``, in order.

    Raises:
        FileNotFoundError: ``notebooks_dir`` is no folder, or holds no ``NN_name.py`` script.
    """
    folder = Path(notebooks_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"notebooks_dir: {folder}: no such folder")
    names = sorted(p.stem for p in folder.glob("*.py") if re.fullmatch(r"\d\d_[A-Za-z0-9_]+", p.stem))
    if not names:
        raise FileNotFoundError(
            f"notebooks_dir: {folder} holds no notebooks (NN_name.py jupytext scripts, e.g. 01_overview.py)"
        )
    return names


def _cell_error(nb: Any) -> str:
    """Where and why a cell failed, in one line: the cell, the line and its code, the error (no colour)."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") != "error":
                continue
            error = " ".join(_ANSI_RE.sub("", f"{out.get('ename')}: {out.get('evalue')}").split())
            trace = _ANSI_RE.sub("", "\n".join(out.get("traceback", [])))
            found = re.findall(r"Cell In\[\d+\], line (\d+)", trace)  # the cell's own frame is the first
            lines = cell.source.splitlines()
            if found and 0 < int(found[0]) <= len(lines):
                line = int(found[0])
                return f"cell {i} failed at line {line} ({lines[line - 1].strip()[:100]!r}): {error}"
            return f"cell {i} failed: {error}"
    return "a cell failed (no error output was recorded)"


def execute_notebooks(
    names: list[str] | None = None,
    *,
    notebooks_dir: str | os.PathLike[str] = "notebooks",
    timeout: int = 600,
    params: dict[str, Any] | None = None,
    kernel_name: str = "python3",
) -> pd.DataFrame:
    """Convert each notebook to ``.ipynb``, execute it (cwd ``notebooks_dir``) and save it beside the script.

    Args:
        names: Notebook names (``"07_paper_figures"`` or ``"07"``); default: every ``NN_*.py``.
        notebooks_dir: Folder of the jupytext scripts.
        timeout: Seconds allowed per cell.
        params: Values passed to the notebooks as ``PV4KIT_<NAME>`` environment variables.
        kernel_name: Jupyter kernel to run.

    Returns one row per notebook: ``notebook, seconds, cells, output`` (the executed ``.ipynb`` path).

    Raises:
        FileNotFoundError: For an unknown notebook name (the message lists the available ones).
        NotebookError: When a cell fails, naming the notebook, the cell, the line and its code, the error,
            the parameters given and the saved notebook.
    """
    try:
        import jupytext
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError:  # pragma: no cover - the notebooks extra
        raise ImportError(
            "executing notebooks needs jupytext and nbclient: pip install -e '.[notebooks]'"
        ) from None

    check_number(timeout, "timeout", ge=1, integer=True)
    folder = Path(notebooks_dir).resolve()
    available = list_notebooks(folder)
    chosen = []
    for name in names or available:
        match = [a for a in available if a == name or a.split("_", 1)[0] == name or a == Path(name).stem]
        if not match:
            raise FileNotFoundError(f"names: no notebook {name!r} in {folder}; available: {available}")
        chosen.extend(match)
    rows = []
    env = {f"PV4KIT_{k.upper()}": str(v) for k, v in (params or {}).items()}
    with mock.patch.dict(os.environ, env):
        for name in chosen:
            start = time.monotonic()
            nb = jupytext.read(folder / f"{name}.py")
            spec = {"name": kernel_name, "display_name": "Python 3 (pv4kit)", "language": "python"}
            nb.metadata["kernelspec"] = spec
            client = NotebookClient(
                nb, timeout=timeout, kernel_name=kernel_name, resources={"metadata": {"path": str(folder)}}
            )
            logger.info("executing %s", name)
            out_path = folder / f"{name}.ipynb"
            try:
                client.execute()
            except CellExecutionError:
                jupytext.write(nb, out_path)
                given = ", ".join(f"{k}={v}" for k, v in env.items())
                raise NotebookError(
                    f"{name}: {_cell_error(nb)}. Fix what the error names"
                    + (f" (the notebook ran with {given})" if given else "")
                    + f" and run it again; the executed notebook, with the full traceback, is saved to "
                    f"{out_path}"
                ) from None
            jupytext.write(nb, out_path)
            rows.append((name, round(time.monotonic() - start, 1), len(nb.cells), str(out_path)))
    return pd.DataFrame(rows, columns=["notebook", "seconds", "cells", "output"])
