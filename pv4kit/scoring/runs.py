"""The run directory ``runs/<name>/``: generations, config and (once scored) predictions and metrics.

``predictions.parquet`` and ``metrics.json`` record the SHA-256 of the ``generations.parquet`` they score and
are refused once the generations are others. A run is written as one unit (:func:`rewrite_run`): under a
lock beside it, into a folder that replaces it whole.
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
from pv4kit.schema import QUESTION_KEY, require_columns

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
#: a run folder, or its predictions frame
Run = str | os.PathLike[str] | pd.DataFrame
#: a generation's ``status``: a failed request (after its retries) has its ``error`` and no generation
STATUS_OK = "ok"
STATUS_FAILED = "failed"


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


def failed_rows(frame: pd.DataFrame) -> pd.Series:
    """True where a row's request failed (``status == "failed"``)."""
    status = frame["status"] if "status" in frame else pd.Series("", index=frame.index)
    return status.astype("string").fillna("").eq(STATUS_FAILED).astype(bool)


def _check_generations(frame: pd.DataFrame, *, where: str) -> pd.DataFrame:
    require_columns(frame, GENERATION_COLUMNS, name=where)
    out = frame.assign(**{key: _int_key(frame[key], where=where) for key in QUESTION_KEY})
    out["split"] = out["split"].astype(str)
    # a missing generation reads "", a failed request has none
    gen = out["generation"]
    out["generation"] = gen.where(gen.notna(), "").astype(str).astype(object).where(~failed_rows(out), None)
    dup = out.duplicated(QUESTION_KEY, keep=False)
    if dup.any():
        first = out.loc[dup, QUESTION_KEY].head(5).to_dict("records")
        raise ValueError(
            f"{where}: {int(dup.sum())} rows share a (user_id, question_index) key, e.g. {first}"
        )
    return out


@contextlib.contextmanager
def rewrite_run(run_dir: str | os.PathLike[str], *, drop: tuple[str, ...] = ()) -> Iterator[Path]:
    """Lock ``run_dir`` (``flock`` on ``.<name>.lock``) and yield an empty folder that replaces it whole.

    Files the block does not write are carried over, but those in ``drop``; on an exception nothing changes.
    """
    run_dir = Path(run_dir)
    if run_dir.is_dir() and not os.access(run_dir, os.W_OK):  # a run kept read-only stays as it is
        raise PermissionError(f"{run_dir}: the run folder is read-only; nothing was written")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    real = run_dir.resolve()  # one lock whatever path or link names the run
    with open(real.parent / f".{real.name}.lock", "a") as lock:
        import fcntl

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

    Earlier scores are dropped in the same step. ``frame``: ``user_id, question_index, split, generation``
    (``method``, ``model`` filled from ``config``); ``files``: more files, ``{name: text or JSON value}``.
    """
    run_dir = Path(run_dir)
    out = _check_generations(frame, where="frame")
    out = out.assign(**{key: config.get(key) for key in ("method", "model") if key not in out.columns})
    front = [*GENERATION_COLUMNS, "method", "model"]
    out = out[front + [c for c in out.columns if c not in front]].reset_index(drop=True)
    # the scores of the previous generations, and their validity report, no longer hold
    scored = (PREDICTIONS_FILE, METRICS_FILE, VALIDITY_DIR)
    with rewrite_run(run_dir, drop=scored) as tmp:
        out.to_parquet(tmp / GENERATIONS_FILE, index=False)
        atomic_write_json(tmp / CONFIG_FILE, provenance(**config))
        for name, content in (files or {}).items():
            write = atomic_write_text if isinstance(content, str) else atomic_write_json
            write(tmp / name, content)
        for name in scored:
            if (run_dir / name).exists():
                logger.warning("%s: removing stale %s (rescore the new generations)", run_dir, name)
    return run_dir


def read_generations(run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """Read and check ``run_dir/generations.parquet``; a missing generation reads ``""`` unless it failed."""
    path = Path(run_dir) / GENERATIONS_FILE
    if not path.exists():
        raise FileNotFoundError(f"run_dir: no {GENERATIONS_FILE} in {Path(run_dir)}")
    data = path.read_bytes()  # once: the frame and its fingerprint are of the same bytes
    frame = _check_generations(pd.read_parquet(io.BytesIO(data)), where=str(path))
    frame.attrs[GENERATIONS_SHA] = hashlib.sha256(data).hexdigest()
    return frame


def read_run_config(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``run_dir/config.json``; ``{}`` when the run has none."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None


def _read_scored(run_dir: str | os.PathLike[str], name: str) -> Any:
    """``predictions.parquet`` or ``metrics.json``, refused when the generations changed since scoring."""
    path, gens = Path(run_dir) / name, Path(run_dir) / GENERATIONS_FILE
    if not path.exists():
        raise FileNotFoundError(f"run_dir: no {name} in {Path(run_dir)}; run `pv4kit score` first")
    frame = name == PREDICTIONS_FILE
    found = pd.read_parquet(path) if frame else json.loads(path.read_text(encoding="utf-8"))
    recorded = (found.attrs if frame else found).get(GENERATIONS_SHA)  # None: scored before it was kept
    if recorded is not None and gens.exists() and sha256_file(gens) != recorded:
        raise ValueError(
            f"{path}: scored from other generations than {gens} holds now (the run was rewritten after "
            "scoring); score the run again"
        )
    return found


def read_predictions(run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """Read ``run_dir/predictions.parquet`` (refused when the generations changed since scoring)."""
    return _read_scored(run_dir, PREDICTIONS_FILE)


def read_metrics(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``run_dir/metrics.json`` (refused when the generations changed since scoring)."""
    return _read_scored(run_dir, METRICS_FILE)


_FIGURE_COLUMNS = ["subset", "group", "metric", "value", "ci_low", "ci_high", "n"]
#: the columns of :func:`metrics_frame`, in order
METRICS_COLUMNS = ("run", "method", "model", "split", *_FIGURE_COLUMNS)
#: the whole-run counts of ``metrics.json`` that :func:`metrics_frame` carries as ``metric`` rows
COUNT_METRICS = (
    "n_users",
    "n_ties",
    "n_empty_generations",
    "n_missing_generations",
    "n_failed",
    "n_unparsed",
)
#: the dtypes of a tidy frame's figures
TIDY_DTYPES = {"value": "float64", "ci_low": "float64", "ci_high": "float64", "n": "Int64"}


def tidy_metrics(metrics: dict[str, Any], *, run: str | None = None) -> pd.DataFrame:
    """One run's ``metrics.json`` as the tidy rows of :func:`metrics_frame` (``run``: default its folder)."""
    name = run if run is not None else Path(str(metrics.get("run", ""))).name
    n = metrics.get("n")
    ci = metrics.get("accuracy_ci") or [None] * 2
    rows = [("all", "all", "accuracy", metrics.get("accuracy"), *ci, n)]
    if "accuracy_hard" in metrics:
        hard_ci = metrics.get("accuracy_hard_ci") or [None] * 2
        rows.append(("hard", "hard", "accuracy", metrics["accuracy_hard"], *hard_ci, metrics.get("n_hard")))
    for c in metrics.get("by_category") or []:
        figures = [c.get(k) for k in ("accuracy", "ci_low", "ci_high", "n")]
        rows.append(("category", c.get("category_name") or str(c.get("category")), "accuracy", *figures))
    rows += [
        ("all", "all", k, metrics[k], None, None, n) for k in COUNT_METRICS if metrics.get(k) is not None
    ]
    out = pd.DataFrame(rows, columns=_FIGURE_COLUMNS).assign(
        run=name,
        method=metrics.get("method"),
        model=metrics.get("model"),
        split="+".join(sorted(metrics.get("splits") or {})) or None,
    )
    return out[list(METRICS_COLUMNS)].astype(TIDY_DTYPES)


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
    """Every scored run's ``metrics.json`` as one tidy frame.

    Args:
        runs: A folder of run directories (unscored ones left out with a warning; the folder itself when
            it is a scored run), or a list of run directories (each must be scored).

    Returns ``run, method, model, split`` (splits joined by ``+``), ``subset`` (``all``, ``hard``,
    ``category``), ``group``, ``metric`` (``accuracy`` or a count of :data:`COUNT_METRICS`), ``value, ci_low,
    ci_high, n``.
    """
    if isinstance(runs, str | os.PathLike):
        root = Path(runs)
        if not root.is_dir():
            raise FileNotFoundError(f"runs: no such folder {root}")
        folders = [root] if (root / METRICS_FILE).is_file() else scored_runs(root, METRICS_FILE)
    else:
        folders = [Path(p) for p in runs]
    frames = [tidy_metrics(read_metrics(folder), run=folder.name) for folder in folders]
    return pd.concat(frames, ignore_index=True) if frames else tidy_metrics({}).iloc[0:0]


def load_questions(
    data: Any, run_dir: Path | None = None, *, splits: list[str] | None = None
) -> tuple[pd.DataFrame, str | None, str | None]:
    """``(questions, source, fingerprint)`` of ``data``: a questions frame, a ``PV4Data`` or a source.

    ``data=None`` loads the ``data`` recorded in ``run_dir``'s ``config.json``.
    """
    if isinstance(data, pd.DataFrame):
        return data, "<DataFrame>", None
    if data is not None and hasattr(data, "questions"):
        return data.questions, getattr(data, "source", None), getattr(data, "fingerprint", None)
    source = data if data is not None else read_run_config(run_dir).get("data")
    if source is None or str(source).startswith("<"):
        raise ValueError(
            f"data: {Path(str(run_dir)) / CONFIG_FILE} records no loadable data source ({source!r}); "
            "pass data=SOURCE"
        )
    from pv4kit.dataset.load import load

    loaded = load(str(source), splits=splits)
    return loaded.questions, str(source), getattr(loaded, "fingerprint", None)


def previous_answers(run_dir: Any) -> dict[str, tuple[str, Any]]:
    """``request_key -> (generation, finish_reason)`` of the answered rows of a run (for resuming)."""
    path = Path(run_dir) / GENERATIONS_FILE
    if not path.exists():
        return {}
    try:
        old = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        logger.warning("%s: unreadable (%s); every question is asked again", path, exc)
        return {}
    if "request_key" not in old.columns or "status" not in old.columns:
        return {}
    ok = old[old["status"].astype("string").fillna("").eq(STATUS_OK) & old["generation"].notna()]
    finish = ok["finish_reason"] if "finish_reason" in ok.columns else pd.Series(None, index=ok.index)
    return {
        str(k): (str(g), f)
        for k, g, f in zip(ok["request_key"], ok["generation"], finish, strict=True)
        if isinstance(k, str) and k
    }


def data_fingerprint(run: Run) -> str | None:
    """The ``data_fingerprint`` a scored run recorded (``None`` when unknown)."""
    if isinstance(run, pd.DataFrame):
        return run.attrs.get("data_fingerprint")
    try:
        metrics = json.loads((Path(run) / METRICS_FILE).read_text(encoding="utf-8"))
        return metrics["provenance"]["data_fingerprint"]
    except (OSError, ValueError, LookupError, TypeError):  # no metrics, or none recorded
        return None


def _norm(field: str, value: Any) -> Any:
    if field == "choices":
        return None if value is None else tuple("" if c is None else str(c) for c in value)
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def question_differences(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Questions in both frames whose text, choices or answer differ: ``user_id, question_index, fields``."""
    fields = [c for c in ("question", "choices", "answer") if c in a.columns and c in b.columns]
    both = a[[*QUESTION_KEY, *fields]].merge(
        b[[*QUESTION_KEY, *fields]], on=QUESTION_KEY, suffixes=("_a", "_b")
    )
    rows = []
    for rec in both.sort_values(QUESTION_KEY, kind="stable").to_dict("records"):
        differ = [f for f in fields if _norm(f, rec[f"{f}_a"]) != _norm(f, rec[f"{f}_b"])]
        if differ:
            rows.append((rec["user_id"], rec["question_index"], ", ".join(differ)))
    return pd.DataFrame(rows, columns=[*QUESTION_KEY, "fields"])


def differences_text(diff: pd.DataFrame) -> str:
    """The first five rows of :func:`question_differences` as text, then how many more."""
    shown = [f"user {r.user_id} question {r.question_index} ({r.fields})" for r in diff.head(5).itertuples()]
    return "; ".join(shown) + (f" and {len(diff) - 5} more" if len(diff) > 5 else "")


def check_same_data(run_a: Run, run_b: Run, a: pd.DataFrame, b: pd.DataFrame, *, force: bool = False) -> bool:
    """Refuse to pair two runs made on different data, naming the questions that differ.

    ``run_a``, ``run_b``: directories or frames; ``a``, ``b``: their predictions. The data differ when the
    recorded fingerprints differ, or a question in both has another text, choices or answer. Returns whether
    they differ (``True`` only with ``force``, which warns instead of raising).

    Raises:
        ValueError: The data differ, naming the questions, and ``force`` is false.
    """
    fa, fb = data_fingerprint(run_a), data_fingerprint(run_b)
    diff = question_differences(a, b)
    by_fingerprint = fa is not None and fb is not None and fa != fb
    if not by_fingerprint and diff.empty:
        return False
    keys_a, keys_b = (set(map(tuple, f[QUESTION_KEY].to_numpy().tolist())) for f in (a, b))
    label_a = "A" if isinstance(run_a, pd.DataFrame) else f"A ({run_a})"
    label_b = "B" if isinstance(run_b, pd.DataFrame) else f"B ({run_b})"
    msg = f"runs {label_a} and {label_b} were scored on different data"
    if by_fingerprint:
        msg += f" (data_fingerprint {fa[:12]}... vs {fb[:12]}...)"
    if len(diff):
        msg += (
            f": {len(diff)} of the {len(keys_a & keys_b)} questions in both differ: {differences_text(diff)}"
        )
    else:
        msg += (
            ": no question in both runs differs in its text, choices or answer, so the chats or other "
            "files of the data differ"
        )
    only_a, only_b = len(keys_a - keys_b), len(keys_b - keys_a)
    if only_a or only_b:
        msg += f"; {only_a} questions only in A, {only_b} only in B"
    if force:
        logger.warning("%s; using them together anyway (force)", msg)
        return True
    raise ValueError(f"{msg}. Pass force=True to use them together anyway.")
