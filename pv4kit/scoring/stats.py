"""Uncertainty for PV4 accuracies: user-clustered bootstrap CIs, paired bootstrap, exact McNemar, kappa.

Questions of one user share a persona and a chat history, so every bootstrap here resamples **users**
(clusters) with replacement and recomputes the pooled accuracy (total correct / total questions);
intervals are percentile intervals.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._options import check_number
from pv4kit.schema import QUESTION_KEY, require_columns
from pv4kit.scoring.runs import Run, check_same_data, read_predictions

logger = logging.getLogger(__name__)

_COMPARE_COLUMNS = ["scope", "group", "n", "n_users", "accuracy_a", "accuracy_b"]
_MCNEMAR_COLUMNS = ["a_only", "b_only", "mcnemar_p"]


def _check(frame: pd.DataFrame | None, columns: list[str], n_boot: int, seed: int, level: float) -> None:
    check_number(n_boot, "n_boot", ge=1, integer=True)
    check_number(seed, "seed", ge=0, integer=True)
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    if frame is not None:
        require_columns(frame, columns, name="frame")


def _boots(sums: np.ndarray, counts: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray:
    """``(groups, n_boot)`` ratios of per-cluster totals ``(groups, k)``, clusters drawn with ``seed``."""
    k = sums.shape[1]
    idx = np.random.default_rng(seed).integers(0, k, size=(n_boot, k))
    return sums[:, idx].sum(axis=2) / counts[:, idx].sum(axis=2)


def bootstrap_ci(
    frame: pd.DataFrame,
    *,
    value: str = "correct",
    cluster: str = "user_id",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Mean of ``value`` with a percentile CI from a bootstrap that resamples ``cluster`` groups.

    ``{"estimate", "low", "high", "n", "n_clusters", "n_boot", "level"}``; estimate and bounds are ``None``
    when no row has a value.
    """
    one = grouped_bootstrap_ci(  # which checks the arguments
        frame.assign(_all=0), by="_all", value=value, cluster=cluster, n_boot=n_boot, seed=seed, level=level
    )
    row = one.iloc[0] if len(one) else {"estimate": np.nan, "low": np.nan, "high": np.nan, "n_clusters": 0}
    out = {k: None if pd.isna(row[k]) else float(row[k]) for k in ("estimate", "low", "high")}
    return {**out, "n": len(frame), "n_clusters": int(row["n_clusters"]), "n_boot": n_boot, "level": level}


def grouped_bootstrap_ci(
    frame: pd.DataFrame,
    *,
    by: str | list[str],
    value: str = "correct",
    cluster: str = "user_id",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """:func:`bootstrap_ci` for every group of ``by`` (missing keys kept), the seed restarted per group.

    One row per group (sorted): the ``by`` columns, then ``estimate, low, high, n, n_clusters``;
    ``estimate``/``low``/``high`` are NaN for a group with no value.
    """
    by = [by] if isinstance(by, str) else list(by)
    _check(frame, [value, cluster, *by], n_boot, seed, level)
    sizes = frame.groupby(by, sort=True, dropna=False).size().rename("n")
    valid = frame[frame[value].notna()].astype({value: float})  # booleans, 0/1 or numbers as text
    totals = valid.groupby([*by, cluster], sort=True, dropna=False)[value].agg(["sum", "count"]).reset_index()
    alpha = (1 - level) / 2
    gid = totals.groupby(by, sort=True, dropna=False).ngroup().to_numpy()  # sorted, as the rows are
    sizes_k = np.bincount(gid)
    starts = np.concatenate([[0], np.cumsum(sizes_k)]).astype(np.int64)
    all_sums, all_counts = (totals[c].to_numpy(np.float64) for c in ("sum", "count"))
    est, low, high = (np.full(len(sizes_k), np.nan) for _ in range(3))
    for k in np.unique(sizes_k):  # groups with as many clusters share one draw (the seed restarts)
        members = np.flatnonzero(sizes_k == k)
        pos = starts[members][:, None] + np.arange(k)[None, :]
        sums, counts = all_sums[pos], all_counts[pos]
        boots = _boots(sums, counts, n_boot=n_boot, seed=seed)
        est[members] = sums.sum(axis=1) / counts.sum(axis=1)
        low[members], high[members] = np.quantile(boots, [alpha, 1 - alpha], axis=1)
    found = totals[by].iloc[starts[:-1]].assign(estimate=est, low=low, high=high, n_clusters=sizes_k)
    out = sizes.reset_index().merge(found, on=by, how="left")  # NaN keys match NaN keys
    out["n_clusters"] = out["n_clusters"].fillna(0).astype("int64")
    return out[[*by, "estimate", "low", "high", "n", "n_clusters"]]


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (decisions independent; NaNs when ``n == 0``)."""
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_bootstrap(
    frame: pd.DataFrame,
    *,
    a: str,
    b: str,
    cluster: str = "user_id",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Mean paired difference ``a - b`` (same rows) with a cluster-resampling bootstrap CI.

    ``{"diff", "low", "high", "p_boot", "n", "n_clusters"}``; ``p_boot`` is the two-sided share of
    replicates on the other side of zero (a rough check; use McNemar for the test).
    """
    _check(frame, [a, b, cluster], n_boot, seed, level)
    paired = frame[[a, b, cluster]].dropna()
    a, b = (paired[c].to_numpy() for c in (a, b))
    uniq, inverse = np.unique(paired[cluster].to_numpy(), return_inverse=True)
    out = {"diff": None, "low": None, "high": None, "p_boot": None, "n": len(a), "n_clusters": len(uniq)}
    if not len(a):
        return out
    sums = np.bincount(inverse, weights=a.astype(float) - b.astype(float), minlength=len(uniq))
    counts = np.bincount(inverse, minlength=len(uniq)).astype(np.float64)
    boots = _boots(sums[None], counts[None], n_boot=n_boot, seed=seed)[0]
    alpha = (1 - level) / 2
    low, high = np.quantile(boots, [alpha, 1 - alpha])
    p = min(1.0, 2 * min(float(np.mean(boots <= 0)), float(np.mean(boots >= 0))))
    diff = float(sums.sum() / counts.sum())
    return {**out, "diff": diff, "low": float(low), "high": float(high), "p_boot": p}


def mcnemar_exact(a: np.ndarray | pd.Series, b: np.ndarray | pd.Series) -> dict[str, Any]:
    """Exact McNemar test on paired booleans: ``{"a_only", "b_only", "pvalue"}`` (1.0 if no pair differs)."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    a_only, b_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
    n = a_only + b_only
    p = 1.0 if n == 0 else float(binomtest(a_only, n, 0.5, alternative="two-sided").pvalue)
    return {"a_only": a_only, "b_only": b_only, "pvalue": p}


def compare(
    run_a: Run, run_b: Run, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95, force: bool = False
) -> pd.DataFrame:
    """Paired comparison of two scored runs (directories or predictions frames): overall, hard, per category.

    Users are resampled with pairs kept together (``n_boot``, ``seed``, ``level``). ``force`` compares runs
    made on different data with a warning (:func:`pv4kit.scoring.runs.check_same_data`).

    Returns one row per scope (``overall``, ``hard``, ``category``) and group with ``n, n_users, accuracy_a,
    accuracy_b, diff, diff_low, diff_high, a_only, b_only, mcnemar_p``, on the questions scored in both runs;
    ``attrs`` holds ``only_in_a``, ``only_in_b`` and ``data_differs``.
    """
    _check(None, [], n_boot, seed, level)
    pa, pb = (r if isinstance(r, pd.DataFrame) else read_predictions(Path(r)) for r in (run_a, run_b))
    data_differs = check_same_data(run_a, run_b, pa, pb, force=force)
    cols = [c for c in ("category", "category_name", "hard") if c in pa.columns]
    merged = pa[[*QUESTION_KEY, *cols, "correct"]].merge(
        pb[[*QUESTION_KEY, "correct"]], on=QUESTION_KEY, how="outer", suffixes=("_a", "_b"), indicator=True
    )
    only_a, only_b = (int(merged["_merge"].eq(side).sum()) for side in ("left_only", "right_only"))
    both = merged[merged["_merge"] == "both"].drop(columns="_merge").reset_index(drop=True)
    if only_a or only_b:
        logger.warning(
            "compare: %d questions only in run A, %d only in run B; comparing the %d in both",
            *(only_a, only_b, len(both)),
        )
    groups: list[tuple[str, Any, np.ndarray]] = [("overall", "all", np.arange(len(both)))]
    if "hard" in both.columns:
        groups.append(("hard", "hard", np.flatnonzero(both["hard"].fillna(False).astype(bool).to_numpy())))
    if "category" in both.columns:
        label = "category_name" if "category_name" in both.columns else "category"
        by_label = both.groupby(both[label].astype(object).fillna("(none)"), sort=True)
        groups += [("category", name, by_label.indices[name]) for name in by_label.size().index]
    both = both.astype({"correct_a": bool, "correct_b": bool})  # the bootstrap pairs the same booleans
    ca, cb = (both[c].to_numpy() for c in ("correct_a", "correct_b"))
    boot = {"n_boot": n_boot, "seed": seed, "level": level}
    rows = []
    for scope, group, idx in groups:
        a, b = ca[idx], cb[idx]
        paired = paired_bootstrap(both.iloc[idx], a="correct_a", b="correct_b", **boot)
        mc = mcnemar_exact(a, b) if len(idx) else {"a_only": 0, "b_only": 0, "pvalue": None}
        accuracy = [float(x.mean()) if len(idx) else None for x in (a, b)]
        figures = [paired["diff"], paired["low"], paired["high"], mc["a_only"], mc["b_only"], mc["pvalue"]]
        rows.append([scope, group, len(idx), paired["n_clusters"], *accuracy, *figures])
    out = pd.DataFrame(rows, columns=[*_COMPARE_COLUMNS, "diff", "diff_low", "diff_high", *_MCNEMAR_COLUMNS])
    out.attrs.update(only_in_a=only_a, only_in_b=only_b, **boot, data_differs=data_differs)
    return out


def _kappa(counts: np.ndarray) -> np.ndarray:
    """Cohen's kappa of confusion tables ``(..., L, L)``; NaN where chance agreement is 1 or no item."""
    n = counts.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(counts, axis1=-2, axis2=-1) / n
        chance = (counts.sum(axis=-1) * counts.sum(axis=-2)).sum(axis=-1) / n**2
        return np.where(chance < 1, (observed - chance) / (1 - chance), np.nan)


def cohen_kappa_ci(
    frame: pd.DataFrame,
    *,
    a: str,
    b: str,
    labels: list[Any],
    cluster: str = "user_id",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Cohen's kappa between the ratings in columns ``a`` and ``b``, with a cluster-bootstrap interval.

    Rows missing either rating are left out; each replicate resamples ``cluster`` groups and recomputes
    kappa from the pooled confusion table. ``labels``: every label either rater may use (another is a
    ``ValueError``).

    Returns ``{"estimate", "low", "high", "n", "n_clusters"}``; ``None`` estimate and bounds when no item has
    both ratings or chance agreement is 1; replicates where it is 1 are left out of the interval.
    """
    _check(frame, [a, b, cluster], n_boot, seed, level)
    both = frame[[a, b, cluster]].dropna()
    out: dict[str, Any] = {"estimate": None, "low": None, "high": None, "n": int(len(both)), "n_clusters": 0}
    if both.empty:
        return out
    index = {label: i for i, label in enumerate(labels)}
    if unknown := sorted({str(v) for v in pd.concat([both[a], both[b]]) if v not in index}):
        raise ValueError(f"labels: ratings {unknown} are not among labels={list(labels)!r}")
    k = len(labels)
    uniq, inverse = np.unique(both[cluster].to_numpy(), return_inverse=True)
    cell = np.array([index[x] for x in both[a]]) * k + np.array([index[y] for y in both[b]])
    counts = np.zeros((len(uniq), k * k))
    np.add.at(counts, (inverse, cell), 1.0)
    estimate = float(_kappa(counts.sum(axis=0).reshape(k, k)))
    idx = np.random.default_rng(seed).integers(0, len(uniq), size=(n_boot, len(uniq)))
    weights = np.stack([np.bincount(row, minlength=len(uniq)) for row in idx]).astype(np.float64)
    boots = _kappa((weights @ counts).reshape(n_boot, k, k))
    boots = boots[~np.isnan(boots)]
    out["n_clusters"] = int(len(uniq))
    if not np.isnan(estimate):
        out["estimate"] = estimate
        if len(boots):
            alpha = (1 - level) / 2
            out["low"], out["high"] = (float(x) for x in np.quantile(boots, [alpha, 1 - alpha]))
    return out
