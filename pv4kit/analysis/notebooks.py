"""Run the analysis notebooks headless, and the small helpers the notebooks share.

The notebooks live in ``notebooks/`` as jupytext percent scripts (``NN_name.py``, the source in git);
:func:`execute_notebooks` converts each to ``.ipynb`` with jupytext, executes it with nbclient (kernel
``python3``, working directory ``notebooks/``) and saves the executed notebook beside the script (the
``.ipynb`` files are git-ignored). A failing cell raises :class:`NotebookError` naming the notebook and
the cell. ``pv4kit notebooks --execute`` and ``make notebooks`` call it; ``pv4kit demo`` calls it last.

Parameters reach a notebook through the environment (``PV4KIT_<NAME>``, e.g. ``params={"data":
"/path"}`` sets ``PV4KIT_DATA``), which the notebooks read in their first cell through
:func:`project_paths` and :func:`load_notebook_data` (the released data first, the sample when the hub
cannot be reached).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit._options import check_number
from pv4kit.dataset.hub import PV4_HUB_ID, HubError, looks_like_hub_id
from pv4kit.dataset.load import load
from pv4kit.scoring import runs
from pv4kit.scoring.samedata import check_same_data

logger = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^\d\d_[A-Za-z0-9_]+$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_LINE_RE = re.compile(r"Cell In\[\d+\], line (\d+)")


class NotebookError(RuntimeError):
    """A notebook cell raised while executing headless."""


def find_project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) with ``pyproject.toml``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file() and (folder / "pv4kit").is_dir():
            return folder
    return here.parent if here.name == "notebooks" else here


def project_paths(start: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """``PROJECT, DATA, RUNS, FIGURES, CACHE, LLM_CACHE`` for a notebook.

    ``DATA`` is ``$PV4KIT_DATA`` when set, else ``PROJECT/data`` when it holds parquet files, else the raw
    tree ``PROJECT/raw``. ``RUNS`` and ``FIGURES`` follow ``$PV4KIT_RUNS`` / ``$PV4KIT_FIGURES``.
    ``CACHE`` is the embedding cache (``$PV4KIT_CACHE/embeddings``, else ``PROJECT/.cache/pv4kit/embeddings``,
    the one the command line uses from the project root); ``LLM_CACHE`` the shared LLM response cache
    (``llm.sqlite`` beside it).
    """
    project = find_project_root(start)
    data = Path(os.environ["PV4KIT_DATA"]) if os.environ.get("PV4KIT_DATA") else project / "data"
    if not os.environ.get("PV4KIT_DATA") and not any(data.glob("*.parquet")):
        data = project / "raw"
    cache = (
        Path(os.environ["PV4KIT_CACHE"]) if os.environ.get("PV4KIT_CACHE") else project / ".cache" / "pv4kit"
    )
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
    """The data a notebook analyses: the released PV4 first, the sample when the hub cannot give it.

    * ``$PV4KIT_DATA`` set (the tests, ``pv4kit demo`` and the benchmarks set it): that folder or id,
      loaded with no fallback (an explicit choice fails loudly);
    * else ``source`` (default the dataset card's hub id ``MemoryAsModality/PersonalizationV4``, or a
      local copy of the release);
    * when ``source`` is a hub id that cannot be had (offline, unreachable, gated, not found): a warning
      naming why, then ``fallback`` (default :func:`project_paths`' ``DATA``: ``data/`` when built, else
      the sample in ``raw/``). ``data.source`` says which was loaded.

    Args:
        source: The release's hub id or a local folder.
        fallback: What to load when the hub fails.
        start: Where to look for the project root (default: the working directory).

    Returns:
        A :class:`~pv4kit.dataset.load.PV4Data`.
    """
    if os.environ.get("PV4KIT_DATA"):
        return load(os.environ["PV4KIT_DATA"])
    try:
        return load(source)
    except HubError as exc:
        if not looks_like_hub_id(source):  # pragma: no cover - only hub ids raise HubError
            raise
        other = Path(fallback) if fallback is not None else project_paths(start)["DATA"]
        logger.warning("%s could not be loaded (%s): using the sample in %s instead", source, exc, other)
        return load(other)


def load_scored_runs(runs_dir: str | os.PathLike[str], *, force: bool = False) -> dict[str, pd.DataFrame]:
    """Predictions of every scored run under ``runs_dir`` (``{name: predictions}``, sorted by name).

    Extra per-question columns of the run's generations (``retrieved_ids``, ``retrieved_scores`` ...) are
    joined on, so the browser can show what a method retrieved. A run without ``predictions.parquet``
    is left out with a warning naming it; an empty dict means nothing is scored yet. Runs scored on other
    data than the first are refused as :func:`pv4kit.scoring.stats.compare` refuses them
    (:func:`pv4kit.scoring.samedata.check_same_data`; ``force``: a warning instead).
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
                preds = preds.merge(
                    gens[["user_id", "question_index", *extra]], on=["user_id", "question_index"], how="left"
                )
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
    names = sorted(p.stem for p in folder.glob("*.py") if _NAME_RE.match(p.stem))
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
            found = _CELL_LINE_RE.findall(trace)  # the cell's own frame is the first
            lines = cell.source.splitlines()
            if found and 0 < int(found[0]) <= len(lines):
                line = int(found[0])
                return f"cell {i} failed at line {line} ({lines[line - 1].strip()[:100]!r}): {error}"
            return f"cell {i} failed: {error}"
    return "a cell failed (no error output was recorded)"


def _choose_notebooks(names: list[str] | None, folder: Path) -> list[str]:
    """The notebooks ``names`` asks for (``"07_paper_figures"`` or ``"07"``), in order; all without."""
    available = list_notebooks(folder)
    if not names:
        return available
    chosen = []
    for name in names:
        match = [a for a in available if a == name or a.split("_", 1)[0] == name or a == Path(name).stem]
        if not match:
            raise FileNotFoundError(f"names: no notebook {name!r} in {folder}; available: {available}")
        chosen.extend(match)
    return chosen


@contextlib.contextmanager
def _notebook_env(params: dict[str, Any] | None) -> Iterator[None]:
    """``PV4KIT_<NAME>`` set from ``params`` for the kernels started inside; restored afterwards."""
    backup = {}
    for key, value in (params or {}).items():
        var = f"PV4KIT_{key.upper()}"
        backup[var] = os.environ.get(var)
        os.environ[var] = str(value)
    try:
        yield
    finally:
        for var, old in backup.items():
            if old is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = old


def execute_notebooks(
    names: list[str] | None = None,
    *,
    notebooks_dir: str | os.PathLike[str] = "notebooks",
    timeout: int = 600,
    params: dict[str, Any] | None = None,
    kernel_name: str = "python3",
) -> pd.DataFrame:
    """Convert, execute and save each notebook; raise on the first failing cell.

    Args:
        names: Notebook names (``"07_paper_figures"`` or ``"07"``); default: every ``NN_*.py``.
        notebooks_dir: Folder of the jupytext scripts; also the kernel's working directory.
        timeout: Seconds allowed per cell.
        params: Values passed to the notebooks as ``PV4KIT_<NAME>`` environment variables.
        kernel_name: Jupyter kernel to run (``python3`` is the project's venv kernel).

    Returns:
        One row per notebook: ``notebook, seconds, cells, output`` (the executed ``.ipynb`` path).

    Raises:
        FileNotFoundError: For an unknown notebook name (the message lists the available ones).
        NotebookError: When a cell fails: one paragraph naming the notebook, the cell, the line that
            raised and its code, the error, the parameters given and the saved notebook.
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
    chosen = _choose_notebooks(names, folder)
    rows = []
    with _notebook_env(params):
        for name in chosen:
            start = time.monotonic()
            nb = jupytext.read(folder / f"{name}.py")
            nb.metadata["kernelspec"] = {
                "name": kernel_name,
                "display_name": "Python 3 (pv4kit)",
                "language": "python",
            }
            client = NotebookClient(
                nb, timeout=timeout, kernel_name=kernel_name, resources={"metadata": {"path": str(folder)}}
            )
            logger.info("executing %s", name)
            out_path = folder / f"{name}.ipynb"
            try:
                client.execute()
            except CellExecutionError:
                jupytext.write(nb, out_path)
                given = ", ".join(f"PV4KIT_{k.upper()}={v}" for k, v in (params or {}).items())
                raise NotebookError(
                    f"{name}: {_cell_error(nb)}. Fix what the error names"
                    + (f" (the notebook ran with {given})" if given else "")
                    + f" and run it again; the executed notebook, with the full traceback, is saved to "
                    f"{out_path}"
                ) from None
            jupytext.write(nb, out_path)
            seconds = time.monotonic() - start
            logger.info("%s: %d cells in %.1fs", name, len(nb.cells), seconds)
            rows.append(
                {
                    "notebook": name,
                    "seconds": round(seconds, 1),
                    "cells": len(nb.cells),
                    "output": str(out_path),
                }
            )
    return pd.DataFrame(rows, columns=["notebook", "seconds", "cells", "output"])
