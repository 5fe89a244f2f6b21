"""The run directory format: ``runs/<name>/`` with generations, config, and (after scoring) predictions.

- ``generations.parquet``: ``user_id, question_index, split, generation`` (required) plus ``method``,
  ``model`` and any extra per-question columns;
- ``config.json``: provenance (:func:`pv4kit._io.provenance`) plus ``data`` (the data source), ``method``,
  ``model`` and options;
- ``predictions.parquet`` and ``metrics.json`` are written by :func:`pv4kit.scoring.score.score_run`;
  both record the SHA-256 of the ``generations.parquet`` they score (``generations_sha256``), and
  :func:`read_predictions` and :func:`read_metrics` refuse them once the generations are others.

A run is written as one unit (:func:`rewrite_run`): under a lock beside it (``.<name>.lock``), into a
folder that replaces it whole, so two processes writing one run, or ``score`` while ``answer`` rewrites
it, never leave files of two writes side by side.

Any directory holding a ``generations.parquet`` with the four required columns can be scored, whoever
wrote it; ``config.json`` is optional for reading.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit._io import atomic_write_json, atomic_write_text, provenance, replace_directory, sha256_file
from pv4kit.schema import QUESTION_KEY

logger = logging.getLogger(__name__)

GENERATION_COLUMNS = ("user_id", "question_index", "split", "generation")
GENERATIONS_FILE = "generations.parquet"
CONFIG_FILE = "config.json"
PREDICTIONS_FILE = "predictions.parquet"
METRICS_FILE = "metrics.json"
#: the folder of ``pv4kit validity`` (:mod:`pv4kit.scoring.validity`), dropped when the run is rescored
VALIDITY_DIR = "validity"
#: the key under which predictions (``attrs``) and metrics record the generations they score
GENERATIONS_SHA = "generations_sha256"


def _int_key(column: pd.Series, *, where: str) -> pd.Series:
    """A key column as int64; a null or non-integer value is an error naming the column and the rows."""
    values = pd.to_numeric(column, errors="coerce")
    null = column.isna().to_numpy()
    bad = ~null & (values.isna() | (values % 1 != 0)).to_numpy()
    for found, mask in (("null", null), ("not an integer", bad)):
        if mask.any():
            rows = mask.nonzero()[0][:5].tolist()
            raise ValueError(
                f"{where}: {column.name} is {found} in {int(mask.sum())} row(s) (row(s) {rows}); expected an "
                "integer in every row (generations are keyed by user_id and question_index)"
            )
    return values.astype("int64")


def _check_generations(frame: pd.DataFrame, *, where: str) -> pd.DataFrame:
    missing = [c for c in GENERATION_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{where}: missing column(s) {missing}; a generations frame needs {list(GENERATION_COLUMNS)}, "
            f"got {list(frame.columns)}"
        )
    out = frame.copy()
    for key in QUESTION_KEY:
        out[key] = _int_key(out[key], where=where)
    out["split"] = out["split"].astype(str)
    gen = out["generation"]
    text = gen.where(gen.notna(), "").astype(str).astype(object)
    if "status" in out.columns:  # a failed request has no generation (pv4kit.scoring.failures)
        text[out["status"].astype("string").fillna("").eq("failed").to_numpy()] = None
    out["generation"] = text
    dup = out.duplicated(QUESTION_KEY, keep=False)
    if dup.any():
        first = out.loc[dup, QUESTION_KEY].head(5).to_dict("records")
        raise ValueError(
            f"{where}: {int(dup.sum())} rows share a (user_id, question_index) key, e.g. {first}"
        )
    return out


@contextlib.contextmanager
def rewrite_run(run_dir: str | os.PathLike[str], *, drop: tuple[str, ...] = ()) -> Iterator[Path]:
    """Lock ``run_dir`` and yield an empty folder that replaces it whole when the block succeeds.

    The lock (``flock`` on ``.<name>.lock`` beside the run) is held until the swap is done, so writers of
    one run take turns; files of the run the block does not write are carried over, but those in
    ``drop``. On an exception nothing in the run changes (:func:`pv4kit._io.replace_directory`).
    """
    run_dir = Path(run_dir)
    if run_dir.is_dir() and not os.access(run_dir, os.W_OK):  # a run kept read-only stays as it is
        raise PermissionError(f"{run_dir}: the run folder is read-only; nothing was written")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    real = run_dir.resolve()  # one lock whatever path or link names the run
    with open(real.parent / f".{real.name}.lock", "a") as lock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: the swap alone
            fcntl = None  # type: ignore[assignment]
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        with replace_directory(run_dir, drop=drop) as tmp:
            yield tmp


def write_generations(
    run_dir: str | os.PathLike[str],
    frame: pd.DataFrame,
    *,
    config: dict[str, Any],
    files: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``frame`` as ``run_dir/generations.parquet`` and ``config`` (with provenance) as ``config.json``.

    The run is replaced as one unit (:func:`rewrite_run`); a ``predictions.parquet`` and ``metrics.json``
    left from scoring earlier generations are dropped in the same step.

    Args:
        run_dir: The run directory (created if needed).
        frame: One row per question with ``user_id, question_index, split, generation``; ``method`` and
            ``model`` columns are filled from ``config`` when absent.
        config: Run settings; should include ``data`` (the data source), ``method`` and ``model``.
        files: More files of the run written in the same step: ``{name: text}``, or JSON for any
            other value (``answer``'s ``context.json``).

    Returns:
        The run directory.
    """
    run_dir = Path(run_dir)
    out = _check_generations(frame, where="frame")
    for key in ("method", "model"):
        if key not in out.columns:
            out[key] = config.get(key)
    front = [*GENERATION_COLUMNS, "method", "model"]
    out = out[front + [c for c in out.columns if c not in front]].reset_index(drop=True)
    # the scores of the previous generations, and their validity report, no longer hold
    scored = (PREDICTIONS_FILE, METRICS_FILE, VALIDITY_DIR)
    with rewrite_run(run_dir, drop=scored) as tmp:
        out.to_parquet(tmp / GENERATIONS_FILE, index=False)
        atomic_write_json(tmp / CONFIG_FILE, provenance(**config))
        for name, content in (files or {}).items():
            if isinstance(content, str):
                atomic_write_text(tmp / name, content)
            else:
                atomic_write_json(tmp / name, content)
        for name in scored:
            if (run_dir / name).exists():
                logger.warning("%s: removing stale %s (rescore the new generations)", run_dir, name)
    return run_dir


def read_generations(run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """Read and check ``run_dir/generations.parquet``.

    A missing generation reads as ``""``, except on rows with ``status == "failed"`` (a request that failed,
    see :mod:`pv4kit.scoring.failures`), which keep ``None``.
    """
    path = Path(run_dir) / GENERATIONS_FILE
    if not path.exists():
        raise FileNotFoundError(f"run_dir: no {GENERATIONS_FILE} in {Path(run_dir)}")
    data = path.read_bytes()  # once: the frame and its fingerprint are of the same bytes
    frame = _check_generations(pd.read_parquet(io.BytesIO(data)), where=str(path))
    frame.attrs[GENERATIONS_SHA] = hashlib.sha256(data).hexdigest()
    return frame


def check_scored_generations(run_dir: str | os.PathLike[str], recorded: str | None, *, what: str) -> None:
    """Refuse ``what`` (a file of scores) when the generations it records are not those of ``run_dir`` now.

    ``recorded`` is ``None`` for runs scored before pv4kit recorded it (nothing to check).

    Raises:
        ValueError: Naming both files.
    """
    path = Path(run_dir) / GENERATIONS_FILE
    if recorded is not None and path.exists() and sha256_file(path) != recorded:
        raise ValueError(
            f"{Path(run_dir) / what}: scored from other generations than {path} holds now (the run was "
            "rewritten after scoring); score the run again"
        )


def read_run_config(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``run_dir/config.json``; ``{}`` when the run has none."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None


def read_predictions(run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """Read ``run_dir/predictions.parquet`` written by :func:`pv4kit.scoring.score.score_run`."""
    path = Path(run_dir) / PREDICTIONS_FILE
    if not path.exists():
        raise FileNotFoundError(
            f"run_dir: no {PREDICTIONS_FILE} in {Path(run_dir)}; run `pv4kit score` first"
        )
    frame = pd.read_parquet(path)
    check_scored_generations(run_dir, frame.attrs.get(GENERATIONS_SHA), what=PREDICTIONS_FILE)
    return frame


def read_metrics(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``run_dir/metrics.json`` written by :func:`pv4kit.scoring.score.score_run`."""
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"run_dir: no {METRICS_FILE} in {Path(run_dir)}; run `pv4kit score` first")
    metrics = json.loads(path.read_text(encoding="utf-8"))
    check_scored_generations(run_dir, metrics.get(GENERATIONS_SHA), what=METRICS_FILE)
    return metrics


#: the columns of :func:`metrics_frame`, in order
METRICS_COLUMNS = (
    "run", "method", "model", "split", "subset", "group", "metric", "value", "ci_low", "ci_high", "n"
)  # fmt: skip
#: the whole-run counts of ``metrics.json`` that :func:`metrics_frame` carries as ``metric`` rows
COUNT_METRICS = (
    "n_users", "n_ties", "n_empty_generations", "n_missing_generations", "n_failed", "n_unparsed"
)  # fmt: skip


def tidy_metrics(metrics: dict[str, Any], *, run: str | None = None) -> pd.DataFrame:
    """One run's ``metrics.json`` (as :func:`read_metrics` returns it) as tidy rows.

    Args:
        metrics: The metrics dict of :func:`pv4kit.scoring.score.score_run`.
        run: The run's name (default: the last part of the ``run`` path it records).

    Returns:
        The columns of :func:`metrics_frame`: accuracy on ``subset`` ``"all"``, ``"hard"`` and each
        ``"category"`` (``group`` its name), then the counts of :data:`COUNT_METRICS` that the file holds.
    """
    name = run if run is not None else Path(str(metrics.get("run", ""))).name
    head = {
        "run": name,
        "method": metrics.get("method"),
        "model": metrics.get("model"),
        "split": "+".join(sorted(metrics.get("splits") or {})) or None,
    }
    lo, hi = metrics.get("accuracy_ci") or (None, None)
    rows = [{"subset": "all", "group": "all", "metric": "accuracy", "value": metrics.get("accuracy")}]
    rows[0].update(ci_low=lo, ci_high=hi, n=metrics.get("n"))
    if "accuracy_hard" in metrics:
        hlo, hhi = metrics.get("accuracy_hard_ci") or (None, None)
        rows.append(
            {"subset": "hard", "group": "hard", "metric": "accuracy", "value": metrics["accuracy_hard"]}
        )
        rows[-1].update(ci_low=hlo, ci_high=hhi, n=metrics.get("n_hard"))
    for cat in metrics.get("by_category") or []:
        group = cat.get("category_name") or str(cat.get("category"))
        rows.append(
            {"subset": "category", "group": group, "metric": "accuracy", "value": cat.get("accuracy")}
        )
        rows[-1].update(ci_low=cat.get("ci_low"), ci_high=cat.get("ci_high"), n=cat.get("n"))
    for key in COUNT_METRICS:
        if metrics.get(key) is not None:
            rows.append({"subset": "all", "group": "all", "metric": key, "value": metrics[key]})
            rows[-1].update(ci_low=None, ci_high=None, n=metrics.get("n"))
    out = pd.DataFrame([{**head, **row} for row in rows], columns=list(METRICS_COLUMNS))
    for col in ("value", "ci_low", "ci_high"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("float64")
    out["n"] = out["n"].astype("Int64")
    return out


def scored_runs(root: Path, needed: str) -> list[Path]:
    """The run folders under ``root`` that hold ``needed``, sorted; a run without it is named in a warning."""
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if (folder / needed).is_file():
            found.append(folder)
        elif (folder / GENERATIONS_FILE).is_file():
            logger.warning(
                "%s: no %s (not scored yet, or its scoring did not finish): left out", folder, needed
            )
    return found


def metrics_frame(runs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> pd.DataFrame:
    """Every scored run's ``metrics.json`` as one tidy frame (nothing to flatten by hand).

    Args:
        runs: A folder of run directories (those holding a ``metrics.json``, sorted by name; the folder
            itself when it is a scored run), or a list of run directories (each must be scored).

    Returns:
        ``run, method, model, split`` (the scored splits joined by ``+``), ``subset`` (``all``, ``hard``,
        ``category``), ``group`` (the category's name), ``metric`` (``accuracy``, or a count of
        :data:`COUNT_METRICS`), ``value``, ``ci_low``, ``ci_high`` (the user-bootstrap interval of an
        accuracy) and ``n`` (questions in the subset); empty with those columns when nothing is scored.

    A run of the folder (a directory with ``generations.parquet``) that has no ``metrics.json`` is left
    out with a warning naming it.

    Raises:
        FileNotFoundError: A listed run directory has no ``metrics.json``, or the folder does not exist.
    """
    if isinstance(runs, str | os.PathLike):
        root = Path(runs)
        if not root.is_dir():
            raise FileNotFoundError(f"runs: no such folder {root}")
        folders = [root] if (root / METRICS_FILE).is_file() else scored_runs(root, METRICS_FILE)
    else:
        folders = [Path(p) for p in runs]
    frames = [tidy_metrics(read_metrics(folder), run=folder.name) for folder in folders]
    if not frames:
        return tidy_metrics({}).iloc[0:0]
    return pd.concat(frames, ignore_index=True)
