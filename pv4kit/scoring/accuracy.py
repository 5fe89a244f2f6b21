"""One accuracy table: accuracy with an interval per group, as tidy rows (scoring, audits, notebooks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pv4kit.schema import require_columns
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

    Returns ``*by, metric, n, n_correct, accuracy, ci_low, ci_high``; accuracy and bounds NaN for a group
    with no value. With ``by=()`` an empty frame gives one row with ``n == 0``.

    Args:
        frame: One row per decision with a boolean (or 0/1) ``value`` column; missing values are left out
            of the accuracy but counted in ``n``.
        by: Grouping column(s), sorted with missing keys kept; ``()``: one row for the whole frame. A
            mapping ``{name: column}`` groups by ``column`` and names it ``name`` (``{"solver": "run"}``).
        value: The column to average, or several (one row per group and column, named in ``metric``).
        interval: ``"bootstrap"`` (resampling ``cluster`` groups, the ``seed`` restarted per group),
            ``"wilson"`` (decisions independent) or ``"none"`` (NaN bounds).
        cluster: The column the bootstrap resamples (users).
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed.
        level: Interval level.
    """
    if interval not in INTERVALS:
        raise ValueError(f"interval: expected one of {list(INTERVALS)}, got {interval!r}")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    names = [by] if isinstance(by, str) else list(by)  # a mapping's keys
    columns = list(by.values()) if isinstance(by, Mapping) else names
    values = [value] if isinstance(value, str) else list(value)
    need = [*columns, *values, *([cluster] if interval == "bootstrap" else [])]
    require_columns(frame, list(dict.fromkeys(need)), name="frame")
    keys = names or [_ALL]
    base = frame[columns].set_axis(names, axis=1).reset_index(drop=True)
    base[_ALL] = 0  # the key of the whole frame, when no ``by`` column groups it
    resample = _ALL + cluster if cluster in keys else cluster
    if interval == "bootstrap":
        base[resample] = frame[cluster].reset_index(drop=True)
    tables = []
    for col in values:
        work = base.assign(**{_VALUE: frame[col].astype(float).to_numpy()})
        counts = work.groupby(keys, sort=True, dropna=False)[_VALUE].agg(n="size", valid="count", k="sum")
        counts = counts.reset_index()
        k, valid = counts["k"].to_numpy(np.float64), counts["valid"].to_numpy(np.float64)
        accuracy = np.where(valid > 0, k / np.where(valid > 0, valid, 1), np.nan)
        low = high = np.full(len(counts), np.nan)
        if interval == "bootstrap":
            ci = grouped_bootstrap_ci(
                work, by=keys, value=_VALUE, cluster=resample, n_boot=n_boot, seed=seed, level=level
            )
            accuracy, low, high = (ci[c].to_numpy(dtype=np.float64) for c in ("estimate", "low", "high"))
        elif interval == "wilson":
            bounds = [
                wilson_interval(int(a), int(b), confidence=level) for a, b in zip(k, valid, strict=True)
            ]
            low, high = np.array(bounds, dtype=np.float64).reshape(-1, 2).T
        table = counts[keys].assign(metric=col, n=counts["n"], n_correct=np.rint(k).astype(np.int64))
        tables.append(table.assign(accuracy=accuracy, ci_low=low, ci_high=high))
    out = pd.concat(tables, ignore_index=True)
    if not names:
        if out.empty:
            out = pd.DataFrame([{"metric": v, "n": 0, "n_correct": 0} for v in values])
            out = out.assign(accuracy=np.nan, ci_low=np.nan, ci_high=np.nan)
        out = out.drop(columns=_ALL, errors="ignore")
    return out.astype({"n": "int64", "n_correct": "int64"})[[*names, *COLUMNS]]
