"""Inter-rater agreement: Cohen's kappa (plain and weighted), Fleiss' kappa, Krippendorff's alpha.

Everything is plain numpy. Ratings come as an ``items x raters`` table (a DataFrame or 2-D array) in
which a missing rating is ``NaN``/``None``; labels may be strings, booleans or numbers.

* :func:`cohen_kappa` -- two raters, items both rated; ``weights=None`` (plain) or ``"linear"``
  (``"quadratic"`` too) for ordered labels.
* :func:`fleiss_kappa` -- any number of raters, the same number per item (items with a missing rating
  are dropped by default); :func:`fleiss_kappa_counts` takes the ``items x categories`` count table.
* :func:`krippendorff_alpha` -- nominal (or interval) alpha; missing ratings allowed, items with fewer
  than two ratings are not pairable and are ignored.
* :func:`pairwise_cohen` -- every pair of columns, as a tidy frame.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "cohen_kappa",
    "fleiss_kappa",
    "fleiss_kappa_counts",
    "krippendorff_alpha",
    "pairwise_cohen",
]


def _is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _as_table(ratings: Any) -> pd.DataFrame:
    if isinstance(ratings, pd.DataFrame):
        return ratings
    arr = np.asarray(ratings, dtype=object)
    if arr.ndim != 2:
        raise ValueError(f"ratings: expected an items x raters table (2-D), got shape {arr.shape}")
    return pd.DataFrame(arr)


def _categories(values: Sequence[Any], labels: Sequence[Any] | None) -> list[Any]:
    present = [v for v in values if not _is_missing(v)]
    if labels is None:
        try:
            return sorted(set(present))
        except TypeError:
            return sorted(set(present), key=str)
    unknown = sorted({str(v) for v in present if v not in set(labels)})
    if unknown:
        raise ValueError(f"labels: ratings contain values not in labels={list(labels)!r}: {unknown}")
    return list(labels)


def cohen_kappa(
    a: Sequence[Any],
    b: Sequence[Any],
    *,
    weights: str | None = None,
    labels: Sequence[Any] | None = None,
) -> float:
    """Cohen's kappa between two raters over the items both rated.

    Args:
        a: Ratings of the first rater, one per item (missing values are skipped pairwise).
        b: Ratings of the second rater, aligned with ``a``.
        weights: ``None`` for plain kappa, ``"linear"`` or ``"quadratic"`` for weighted kappa; the
            weights use the position of each label in ``labels``.
        labels: The ordered label set. Needed for a meaningful weighted kappa on non-numeric labels;
            defaults to the sorted labels present.

    Returns:
        Kappa in ``[-1, 1]``; ``nan`` when no item was rated by both or when chance agreement is 1 and
        the raters agree (kappa is then undefined).

    Raises:
        ValueError: On unequal lengths, an unknown ``weights`` or ratings outside ``labels``.
    """
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"a and b must have the same length, got {len(a)} and {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (_is_missing(x) or _is_missing(y))]
    if not pairs:
        return float("nan")
    cats = _categories([x for p in pairs for x in p], labels)
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    observed = np.zeros((k, k))
    for x, y in pairs:
        observed[index[x], index[y]] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    grid = np.arange(k)
    if weights is None:
        w = (grid[:, None] != grid[None, :]).astype(float)
    else:
        dist = np.abs(grid[:, None] - grid[None, :]) / max(k - 1, 1)
        w = dist if weights == "linear" else dist**2
    denom = float((w * expected).sum())
    if denom == 0:
        return float("nan")
    return float(1.0 - (w * observed).sum() / denom)


def fleiss_kappa_counts(counts: Any) -> float:
    """Fleiss' kappa from an ``items x categories`` table of rating counts.

    Every row must sum to the same number of raters ``n >= 2``.

    Args:
        counts: Non-negative counts; row ``i``, column ``j`` is how many raters put item ``i`` in
            category ``j``.

    Returns:
        Fleiss' kappa; ``nan`` when expected agreement is 1 (a single category used throughout).

    Raises:
        ValueError: If rows have different totals or fewer than two raters.
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] == 0:
        raise ValueError(f"counts: expected a non-empty items x categories table, got shape {table.shape}")
    totals = table.sum(axis=1)
    if not np.allclose(totals, totals[0]):
        raise ValueError(f"counts: every item needs the same number of raters, got row totals {totals}")
    n = totals[0]
    if n < 2:
        raise ValueError(f"counts: Fleiss' kappa needs at least two raters per item, got {n:g}")
    p_j = table.sum(axis=0) / table.sum()
    p_i = ((table**2).sum(axis=1) - n) / (n * (n - 1))
    p_bar, p_e = float(p_i.mean()), float((p_j**2).sum())
    if p_e == 1.0:
        return float("nan")
    return (p_bar - p_e) / (1.0 - p_e)


def fleiss_kappa(ratings: Any, *, labels: Sequence[Any] | None = None, drop_incomplete: bool = True) -> float:
    """Fleiss' kappa from an ``items x raters`` table of labels.

    Args:
        ratings: Labels; a missing rating is ``NaN``/``None``.
        labels: The label set (defaults to the labels present).
        drop_incomplete: Drop items missing any rating (Fleiss' kappa needs a constant number of raters
            per item). With ``False`` a missing rating raises.

    Returns:
        Fleiss' kappa over the complete items (``nan`` if none).
    """
    table = _as_table(ratings)
    missing = table.map(_is_missing)
    if missing.to_numpy().any():
        if not drop_incomplete:
            bad = list(table.index[missing.any(axis=1)])
            raise ValueError(f"ratings: items {bad} miss a rating; pass drop_incomplete=True to drop them")
        table = table[~missing.any(axis=1)]
    if table.empty:
        return float("nan")
    cats = _categories(table.to_numpy().ravel().tolist(), labels)
    counts = np.stack([(table == c).sum(axis=1).to_numpy() for c in cats], axis=1)
    return fleiss_kappa_counts(counts)


def krippendorff_alpha(ratings: Any, *, level: str = "nominal") -> float:
    """Krippendorff's alpha for an ``items x raters`` table with missing ratings allowed.

    Built from the coincidence matrix (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"):
    every ordered pair of ratings within an item with ``m_u >= 2`` ratings adds ``1 / (m_u - 1)``.

    Args:
        ratings: Labels; a missing rating is ``NaN``/``None``.
        level: ``"nominal"`` (any labels) or ``"interval"`` (numeric labels).

    Returns:
        Alpha; ``nan`` when fewer than two pairable ratings exist or expected disagreement is 0.
    """
    if level not in ("nominal", "interval"):
        raise ValueError(f"level must be 'nominal' or 'interval', got {level!r}")
    table = _as_table(ratings)
    units = [[v for v in row if not _is_missing(v)] for row in table.itertuples(index=False)]
    units = [u for u in units if len(u) >= 2]
    if not units:
        return float("nan")
    cats = _categories([v for u in units for v in u], None)
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    coincidence = np.zeros((k, k))
    for u in units:
        m = len(u)
        idx = [index[v] for v in u]
        for i, j in itertools.permutations(range(m), 2):
            coincidence[idx[i], idx[j]] += 1.0 / (m - 1)
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    if level == "nominal":
        delta = 1.0 - np.eye(k)
    else:
        values = np.asarray(cats, dtype=np.float64)
        delta = (values[:, None] - values[None, :]) ** 2
    d_o = float((coincidence * delta).sum()) / n
    d_e = float((np.outer(n_c, n_c) * delta).sum()) / (n * (n - 1))
    if d_e == 0:
        return float("nan")
    return 1.0 - d_o / d_e


def pairwise_cohen(
    ratings: pd.DataFrame,
    *,
    weights: str | None = None,
    labels: Sequence[Any] | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> pd.DataFrame:
    """Cohen's kappa and raw agreement for every pair of rater columns.

    Args:
        ratings: ``items x raters`` frame; column names are the rater names.
        weights: Passed to :func:`cohen_kappa`.
        labels: Passed to :func:`cohen_kappa`.
        pairs: The rater pairs to compare (default: every unordered pair of columns).

    Returns:
        Tidy frame ``rater_a, rater_b, n, agreement, kappa`` (``n`` = items both rated).
    """
    if pairs is None:
        pairs = list(itertools.combinations(ratings.columns, 2))
    rows = []
    for ra, rb in pairs:
        both = ratings[[ra, rb]].dropna()
        n = len(both)
        agree = float((both[ra] == both[rb]).mean()) if n else float("nan")
        kappa = cohen_kappa(both[ra], both[rb], weights=weights, labels=labels) if n else float("nan")
        rows.append({"rater_a": ra, "rater_b": rb, "n": n, "agreement": agree, "kappa": kappa})
    return pd.DataFrame(rows, columns=["rater_a", "rater_b", "n", "agreement", "kappa"])
