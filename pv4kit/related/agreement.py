"""Inter-rater agreement: Cohen's kappa (plain and weighted), Fleiss' kappa, Krippendorff's alpha.

pv4kit's tidy wrappers around well-kept implementations: scikit-learn's ``cohen_kappa_score``,
statsmodels' ``fleiss_kappa`` (with ``aggregate_raters``) and the ``krippendorff`` package's ``alpha``.
The wrappers take ratings as an ``items x raters`` table (a DataFrame or 2-D array) in which a missing
rating is ``NaN``/``None``; labels may be strings, booleans or numbers (they are coded as the positions
of the sorted or given label set before the libraries see them). The undefined cases (no item rated
twice, a single category used throughout) give ``nan`` here rather than a library's warning or error.

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

import krippendorff
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


def _codes(values: Sequence[Any], cats: Sequence[Any]) -> np.ndarray:
    """The position of each value in ``cats`` (values already checked to be in ``cats``)."""
    index = {c: i for i, c in enumerate(cats)}
    return np.array([index[v] for v in values], dtype=np.int64)


def cohen_kappa(
    a: Sequence[Any],
    b: Sequence[Any],
    *,
    weights: str | None = None,
    labels: Sequence[Any] | None = None,
) -> float:
    """Cohen's kappa between two raters over the items both rated (scikit-learn's ``cohen_kappa_score``).

    Args:
        a: Ratings of the first rater, one per item (missing values are skipped pairwise).
        b: Ratings of the second rater, aligned with ``a``.
        weights: ``None`` for plain kappa, ``"linear"`` or ``"quadratic"`` for weighted kappa; the
            weights use the position of each label in ``labels``.
        labels: The ordered label set. Needed for a meaningful weighted kappa on non-numeric labels;
            defaults to the sorted labels present.

    Returns:
        Kappa in ``[-1, 1]``; ``nan`` when no item was rated by both or when both raters used one and
        the same category throughout (chance agreement is 1, kappa is undefined).

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
    used = [x for p in pairs for x in p]
    cats = _categories(used, labels)
    if len(set(used)) < 2:
        return float("nan")
    from sklearn.metrics import cohen_kappa_score

    codes_a = _codes([x for x, _ in pairs], cats)
    codes_b = _codes([y for _, y in pairs], cats)
    return float(cohen_kappa_score(codes_a, codes_b, labels=np.arange(len(cats)), weights=weights))


def fleiss_kappa_counts(counts: Any) -> float:
    """Fleiss' kappa from an ``items x categories`` table of rating counts (statsmodels' ``fleiss_kappa``).

    Every row must sum to the same number of raters ``n >= 2``.

    Args:
        counts: Non-negative counts; row ``i``, column ``j`` is how many raters put item ``i`` in
            category ``j``.

    Returns:
        Fleiss' kappa; ``nan`` when expected agreement is 1 (a single category used throughout).

    Raises:
        ValueError: If the table is empty, holds a negative count, rows have different totals or there
            are fewer than two raters.
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] == 0:
        raise ValueError(f"counts: expected a non-empty items x categories table, got shape {table.shape}")
    if (table < 0).any():
        raise ValueError(f"counts: expected non-negative counts, got minimum {table.min():g}")
    totals = table.sum(axis=1)
    if not (totals == totals[0]).all():
        raise ValueError(f"counts: every item needs the same number of raters, got row totals {totals}")
    n = totals[0]
    if n < 2:
        raise ValueError(f"counts: Fleiss' kappa needs at least two raters per item, got {n:g}")
    if np.count_nonzero(table.sum(axis=0)) < 2:
        return float("nan")
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    return float(sm_fleiss_kappa(table, method="fleiss"))


def fleiss_kappa(ratings: Any, *, labels: Sequence[Any] | None = None, drop_incomplete: bool = True) -> float:
    """Fleiss' kappa from an ``items x raters`` table of labels (statsmodels' ``aggregate_raters``).

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
    values = table.to_numpy().ravel().tolist()
    cats = _categories(values, labels)
    from statsmodels.stats.inter_rater import aggregate_raters

    counts, _ = aggregate_raters(_codes(values, cats).reshape(table.shape), n_cat=len(cats))
    return fleiss_kappa_counts(counts)


def krippendorff_alpha(ratings: Any, *, level: str = "nominal") -> float:
    """Krippendorff's alpha for an ``items x raters`` table with missing ratings allowed.

    The ``krippendorff`` package's ``alpha`` on the ``items x values`` count table of the pairable
    items (those with ``m_u >= 2`` ratings; Krippendorff 2011, "Computing Krippendorff's
    alpha-reliability").

    Args:
        ratings: Labels; a missing rating is ``NaN``/``None``.
        level: ``"nominal"`` (any labels) or ``"interval"`` (numeric labels).

    Returns:
        Alpha; ``nan`` when no item has two ratings or a single value is used throughout (expected
        disagreement is 0).

    Raises:
        ValueError: On an unknown ``level``, or non-numeric ratings with ``level="interval"``.
    """
    if level not in ("nominal", "interval"):
        raise ValueError(f"level must be 'nominal' or 'interval', got {level!r}")
    table = _as_table(ratings)
    units = [[v for v in row if not _is_missing(v)] for row in table.itertuples(index=False)]
    units = [u for u in units if len(u) >= 2]
    if not units:
        return float("nan")
    cats = _categories([v for u in units for v in u], None)
    if len(cats) < 2:
        return float("nan")
    if level == "nominal":
        domain = np.arange(len(cats), dtype=np.float64)
    else:
        try:
            domain = np.asarray(cats, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"level='interval' needs numeric ratings, got values {cats[:5]!r}") from exc
    value_counts = np.zeros((len(units), len(cats)))
    for row, unit in enumerate(units):
        np.add.at(value_counts[row], _codes(unit, cats), 1.0)
    return float(
        krippendorff.alpha(value_counts=value_counts, value_domain=domain, level_of_measurement=level)
    )


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
