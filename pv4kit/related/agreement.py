"""Inter-rater agreement: tidy wrappers around scikit-learn, statsmodels and ``krippendorff``.

Ratings are an ``items x raters`` table in which a missing rating is ``NaN``/``None``; labels of any type
are coded by their position in the sorted or given label set. Undefined cases give ``nan``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.related._common import check_choice

_NAN = float("nan")


def _as_table(ratings: Any) -> pd.DataFrame:
    if isinstance(ratings, pd.DataFrame):
        return ratings
    arr = np.asarray(ratings, dtype=object)
    if arr.ndim != 2:
        raise ValueError(f"ratings: expected an items x raters table (2-D), got shape {arr.shape}")
    return pd.DataFrame(arr)


def _categories(values: Sequence[Any], labels: Sequence[Any] | None) -> list[Any]:
    present = [v for v in values if not pd.isna(v)]
    if labels is None:
        try:
            return sorted(set(present))
        except TypeError:
            return sorted(set(present), key=str)
    if unknown := sorted({str(v) for v in present if v not in set(labels)}):
        raise ValueError(f"labels: ratings contain values not in labels={list(labels)!r}: {unknown}")
    return list(labels)


def _codes(values: Sequence[Any], cats: Sequence[Any]) -> np.ndarray:
    index = {c: i for i, c in enumerate(cats)}
    return np.array([index[v] for v in values], dtype=np.int64)


def cohen_kappa(
    a: Sequence[Any], b: Sequence[Any], *, weights: str | None = None, labels: Sequence[Any] | None = None
) -> float:
    """Cohen's kappa between the ratings ``a`` and ``b`` over the items both rated.

    ``weights`` is ``None`` (plain), ``"linear"`` or ``"quadratic"``, on the positions in ``labels`` (the
    ordered label set; default: the sorted labels present). Returns ``nan`` when no item was rated by both
    or both used one and the same category throughout.
    """
    check_choice(weights, "weights", (None, "linear", "quadratic"))
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"a and b must have the same length, got {len(a)} and {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (pd.isna(x) or pd.isna(y))]
    used = [x for p in pairs for x in p]
    cats = _categories(used, labels)
    if len(set(used)) < 2:
        return _NAN
    from sklearn.metrics import cohen_kappa_score

    codes_a, codes_b = _codes([x for x, _ in pairs], cats), _codes([y for _, y in pairs], cats)
    return float(cohen_kappa_score(codes_a, codes_b, labels=np.arange(len(cats)), weights=weights))


def fleiss_kappa_counts(counts: Any) -> float:
    """Fleiss' kappa from an ``items x categories`` count table; every row sums to the same ``n >= 2``.

    Returns ``nan`` when a single category is used throughout.
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] == 0:
        raise ValueError(f"counts: expected a non-empty items x categories table, got shape {table.shape}")
    if (table < 0).any():
        raise ValueError(f"counts: expected non-negative counts, got minimum {table.min():g}")
    totals = table.sum(axis=1)
    if not (totals == totals[0]).all():
        raise ValueError(f"counts: every item needs the same number of raters, got row totals {totals}")
    if totals[0] < 2:
        raise ValueError(f"counts: Fleiss' kappa needs at least two raters per item, got {totals[0]:g}")
    if np.count_nonzero(table.sum(axis=0)) < 2:
        return _NAN
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    return float(sm_fleiss_kappa(table, method="fleiss"))


def fleiss_kappa(ratings: Any, *, labels: Sequence[Any] | None = None, drop_incomplete: bool = True) -> float:
    """Fleiss' kappa of an ``items x raters`` table of labels over its complete items (``nan`` if none).

    ``labels`` is the label set (default: the labels present); with ``drop_incomplete=False`` an item
    missing a rating raises instead of being dropped.
    """
    table = _as_table(ratings)
    incomplete = table.isna().any(axis=1)
    if incomplete.any():
        if not drop_incomplete:
            bad = list(table.index[incomplete])
            raise ValueError(f"ratings: items {bad} miss a rating; pass drop_incomplete=True to drop them")
        table = table[~incomplete]
    if table.empty:
        return _NAN
    values = table.to_numpy().ravel().tolist()
    cats = _categories(values, labels)
    from statsmodels.stats.inter_rater import aggregate_raters

    counts, _ = aggregate_raters(_codes(values, cats).reshape(table.shape), n_cat=len(cats))
    return fleiss_kappa_counts(counts)


def krippendorff_alpha(ratings: Any, *, level: str = "nominal") -> float:
    """Krippendorff's alpha of an ``items x raters`` table, missing ratings allowed.

    ``level`` is ``"nominal"`` (any labels) or ``"interval"`` (numeric labels). Items with fewer than two
    ratings are not pairable; ``nan`` when no item is or a single value is used throughout.
    """
    check_choice(level, "level", ("nominal", "interval"))
    units = [[v for v in row if not pd.isna(v)] for row in _as_table(ratings).itertuples(index=False)]
    units = [u for u in units if len(u) >= 2]
    cats = _categories([v for u in units for v in u], None)
    if len(cats) < 2:
        return _NAN
    if level == "nominal":
        domain = np.arange(len(cats), dtype=np.float64)
    else:
        try:
            domain = np.asarray(cats, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"level='interval' needs numeric ratings, got values {cats[:5]!r}") from exc
    value_counts = np.array([np.bincount(_codes(u, cats), minlength=len(cats)) for u in units], dtype=float)
    import krippendorff

    alpha = krippendorff.alpha(value_counts=value_counts, value_domain=domain, level_of_measurement=level)
    return float(alpha)


def pairwise_cohen(
    ratings: pd.DataFrame,
    *,
    weights: str | None = None,
    labels: Sequence[Any] | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> pd.DataFrame:
    """Cohen's kappa and raw agreement for every pair of rater columns (or the given ``pairs``).

    Returns ``rater_a, rater_b, n`` (items both rated), ``agreement, kappa``.
    """
    rows = []
    for ra, rb in itertools.combinations(ratings.columns, 2) if pairs is None else pairs:
        both = ratings[[ra, rb]].dropna()
        agree = float((both[ra] == both[rb]).mean()) if len(both) else _NAN
        kappa = cohen_kappa(both[ra], both[rb], weights=weights, labels=labels) if len(both) else _NAN
        rows.append({"rater_a": ra, "rater_b": rb, "n": len(both), "agreement": agree, "kappa": kappa})
    return pd.DataFrame(rows, columns=["rater_a", "rater_b", "n", "agreement", "kappa"])
