"""One accuracy table: accuracy with an interval per group, as tidy rows.

Scoring (``metrics.json``), the audits' solver accuracy, the related benchmarks and the notebooks all call
:func:`accuracy_table`. Its intervals come from :mod:`pv4kit.scoring.stats`: the user-clustered percentile
bootstrap (:func:`~pv4kit.scoring.stats.grouped_bootstrap_ci`, which gives every group exactly what
:func:`~pv4kit.scoring.stats.bootstrap_ci` gives its rows, in one pass), the Wilson score interval for
decisions that are independent, or none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pv4kit.scoring.stats import grouped_bootstrap_ci, wilson_interval

INTERVALS = ("bootstrap", "wilson", "none")
#: the columns after the ``by`` columns, in order
COLUMNS = ("metric", "n", "n_correct", "accuracy", "ci_low", "ci_high")
_VALUE = "__accuracy_value__"
_ALL = "__accuracy_all__"


def accuracy_table(
    frame: pd.DataFrame,
    *,
    by: str | Sequence[str] | Mapping[str, str] = (),
    value: str | Sequence[str] = "correct",
    interval: str = "bootstrap",
    cluster: str = "user_id",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Accuracy of ``value`` per ``by`` group with an interval: one row per group and metric.

    Args:
        frame: One row per decision (a question, a pair) with a boolean (or 0/1) ``value`` column; missing
            values are left out of the accuracy but counted in ``n``.
        by: Grouping column(s); ``()`` gives one row for the whole frame. A mapping ``{name: column}``
            groups by ``column`` and names it ``name`` in the result (``{"solver": "run"}``). Groups are
            sorted and missing keys kept (``groupby(..., sort=True, dropna=False)``).
        value: The column to average, or several (one row per group and column, the column's name in
            ``metric``).
        interval: ``"bootstrap"`` (default: percentile interval from resampling ``cluster`` groups with
            replacement, the ``seed`` restarted for every group), ``"wilson"`` (binomial, decisions
            independent) or ``"none"`` (NaN bounds).
        cluster: The column whose groups the bootstrap resamples (users).
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed; the same frame and seed give the same interval.
        level: Interval level.

    Returns:
        ``*by, metric, n, n_correct, accuracy, ci_low, ci_high`` (``n``: rows in the group; ``accuracy``
        and the bounds are NaN for a group with no value). With ``by=()`` an empty frame gives one row
        with ``n == 0``.

    Raises:
        ValueError: An unknown ``interval``, a ``level`` outside (0, 1) or a column not in ``frame``.
    """
    if interval not in INTERVALS:
        raise ValueError(f"interval: expected one of {list(INTERVALS)}, got {interval!r}")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    names, columns = _names_and_columns(by)
    values = [value] if isinstance(value, str) else list(value)
    need = [*columns, *values, *([cluster] if interval == "bootstrap" else [])]
    missing = [c for c in dict.fromkeys(need) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"accuracy_table: column(s) {missing} not in frame; columns are {list(frame.columns)}"
        )
    keys = names or [_ALL]
    base = pd.DataFrame(
        {name: frame[col].reset_index(drop=True) for name, col in zip(names, columns, strict=True)},
        index=pd.RangeIndex(len(frame)),
    )
    if not names:
        base[_ALL] = np.zeros(len(frame), dtype=np.int64)
    resample = _ALL + cluster if cluster in keys else cluster
    if interval == "bootstrap":
        base[resample] = frame[cluster].reset_index(drop=True)
    tables = [
        _one_metric(
            base.assign(**{_VALUE: frame[col].astype(float).to_numpy()}),
            keys,
            metric=col,
            interval=interval,
            cluster=resample,
            boot=(n_boot, seed, level),
        )
        for col in values
    ]
    out = pd.concat(tables, ignore_index=True)
    if not names:
        if out.empty:
            out = pd.DataFrame([{"metric": v, "n": 0, "n_correct": 0} for v in values])
            out = out.assign(accuracy=np.nan, ci_low=np.nan, ci_high=np.nan)
        out = out.drop(columns=_ALL, errors="ignore")
    out["n"] = out["n"].astype("int64")
    out["n_correct"] = out["n_correct"].astype("int64")
    return out[[*names, *COLUMNS]]


def _names_and_columns(by: str | Sequence[str] | Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The output names and the frame's columns of ``by``."""
    if isinstance(by, Mapping):
        return list(by), list(by.values())
    names = [by] if isinstance(by, str) else list(by)
    return names, names


def _one_metric(
    work: pd.DataFrame,
    keys: list[str],
    *,
    metric: str,
    interval: str,
    cluster: str,
    boot: tuple[int, int, float],
) -> pd.DataFrame:
    """The rows of one value column (``work[_VALUE]``, NaN when missing); ``boot``: n_boot, seed, level."""
    grouped = work.groupby(keys, sort=True, dropna=False)[_VALUE]
    counts = grouped.agg(n="size", n_valid="count", n_correct="sum").reset_index()
    k = counts["n_correct"].to_numpy(dtype=np.float64)
    valid = counts["n_valid"].to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(valid > 0, k / np.where(valid > 0, valid, 1), np.nan)
    n_boot, seed, level = boot
    low = high = np.full(len(counts), np.nan)
    if interval == "bootstrap":
        ci = grouped_bootstrap_ci(
            work, by=keys, value=_VALUE, cluster=cluster, n_boot=n_boot, seed=seed, level=level
        )
        accuracy, low, high = (ci[c].to_numpy(dtype=np.float64) for c in ("estimate", "low", "high"))
    elif interval == "wilson":
        bounds = [wilson_interval(int(a), int(b), confidence=level) for a, b in zip(k, valid, strict=True)]
        low = np.array([b[0] for b in bounds], dtype=np.float64)
        high = np.array([b[1] for b in bounds], dtype=np.float64)
    return counts[keys].assign(
        metric=metric,
        n=counts["n"].to_numpy(),
        n_correct=np.rint(k).astype(np.int64),
        accuracy=accuracy,
        ci_low=low,
        ci_high=high,
    )
