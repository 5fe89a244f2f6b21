from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from pv4kit.related.agreement import (
    cohen_kappa,
    fleiss_kappa,
    fleiss_kappa_counts,
    krippendorff_alpha,
    pairwise_cohen,
)

nan = np.nan


def test_cohen_kappa_textbook_example():
    # Wikipedia: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> p_o = .7, p_e = .5, kappa = .4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_kappa_weighted_by_hand_and_against_sklearn():
    # labels 0<1<2; a=[0,1,2,2], b=[0,2,2,1]: linear weights w=|i-j|/2
    # observed disagreement = (0 + .5 + 0 + .5)/4 = .25; marginals a=(1,1,2)/4, b=(1,1,2)/4
    # expected = sum_ij p_i q_j w_ij = (2*(1*1*.5) + 2*(1*2*1) + 2*(1*2*.5))/16 = 7/16
    a, b = [0, 1, 2, 2], [0, 2, 2, 1]
    assert cohen_kappa(a, b, weights="linear") == pytest.approx(1 - 0.25 / (7 / 16))
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, 60)
    y = np.clip(x + rng.integers(-1, 2, 60), 0, 3)
    for w in (None, "linear", "quadratic"):
        assert cohen_kappa(x, y, weights=w) == pytest.approx(cohen_kappa_score(x, y, weights=w))


def test_cohen_kappa_skips_missing_and_validates():
    assert cohen_kappa(["a", None, "b", "b"], ["a", "b", nan, "b"]) == pytest.approx(1.0)
    assert np.isnan(cohen_kappa([None], ["a"]))
    assert np.isnan(cohen_kappa(["a", "a"], ["a", "a"]))  # undefined: chance agreement is 1
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([1], [1], weights="cubic")
    with pytest.raises(ValueError, match="same length"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError, match="labels"):
        cohen_kappa(["x"], ["y"], labels=["x"])


def test_fleiss_kappa_textbook_example():
    # Fleiss (1971) / Wikipedia: 10 subjects, 14 raters, 5 categories -> kappa = 0.210
    counts = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa_counts(counts) == pytest.approx(0.20993, abs=1e-5)
    with pytest.raises(ValueError, match="same number of raters"):
        fleiss_kappa_counts([[1, 1], [3, 0]])


def test_fleiss_kappa_from_labels_drops_incomplete_items():
    # counts (bad, unsure, ok) = [0,0,3], [0,1,2], [2,1,0]: P_bar = 5/9, P_e = 33/81 -> kappa = 1/4
    ratings = pd.DataFrame(
        {
            "r1": ["ok", "ok", "bad", "ok"],
            "r2": ["ok", "unsure", "bad", None],
            "r3": ["ok", "ok", "unsure", "bad"],
        }
    )
    assert fleiss_kappa(ratings) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="miss a rating"):
        fleiss_kappa(ratings, drop_incomplete=False)


def test_krippendorff_alpha_textbook_example_with_missing_values():
    # Krippendorff (2011) "Computing Krippendorff's alpha-reliability": 4 coders x 12 units, missing
    # values; nominal alpha = 0.743, interval alpha = 0.849
    data = [
        [1, 1, nan, 1],
        [2, 2, 3, 2],
        [3, 3, 3, 3],
        [3, 3, 3, 3],
        [2, 2, 2, 2],
        [1, 2, 3, 4],
        [4, 4, 4, 4],
        [1, 1, 2, 1],
        [2, 2, 2, 2],
        [nan, 5, 5, 5],
        [nan, nan, 1, 1],
        [nan, 3, nan, nan],
    ]
    assert krippendorff_alpha(data) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, level="interval") == pytest.approx(0.849, abs=5e-4)
    assert np.isnan(krippendorff_alpha([[1, nan], [nan, 2]]))
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(data, level="ratio")


def test_pairwise_cohen_is_tidy():
    ratings = pd.DataFrame({"a": [1, 0, 1, None], "b": [1, 0, 0, 1], "c": [1, 1, 1, 1]})
    out = pairwise_cohen(ratings)
    assert list(out.columns) == ["rater_a", "rater_b", "n", "agreement", "kappa"]
    assert out[["rater_a", "rater_b"]].values.tolist() == [["a", "b"], ["a", "c"], ["b", "c"]]
    assert out["n"].tolist() == [3, 3, 4]
    assert out.loc[0, "agreement"] == pytest.approx(2 / 3)


# --------------------------------------------------------------------------------------------------
# An independent transcription of the statistics (pv4kit's hand-written versions before the wrappers
# took scikit-learn, statsmodels and krippendorff): the wrappers must agree with it to 1e-12.

AGREE_TOL = 1e-12
RECENTER = Path(__file__).parent / "fixtures" / "recenter"


def _missing(v):
    return v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))


def _sorted_cats(values):
    try:
        return sorted(set(values))
    except TypeError:
        return sorted(set(values), key=str)


def _ref_cohen(a, b, *, weights=None, labels=None):
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (_missing(x) or _missing(y))]
    if not pairs:
        return nan
    cats = list(labels) if labels is not None else _sorted_cats([x for p in pairs for x in p])
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
    return nan if denom == 0 else float(1.0 - (w * observed).sum() / denom)


def _ref_fleiss_counts(counts):
    table = np.asarray(counts, dtype=np.float64)
    n = table.sum(axis=1)[0]
    p_j = table.sum(axis=0) / table.sum()
    p_i = ((table**2).sum(axis=1) - n) / (n * (n - 1))
    p_bar, p_e = float(p_i.mean()), float((p_j**2).sum())
    return nan if p_e == 1.0 else (p_bar - p_e) / (1.0 - p_e)


def _ref_fleiss(ratings, *, labels=None):
    table = pd.DataFrame(np.asarray(ratings, dtype=object))
    table = table[~table.map(_missing).any(axis=1)]
    if table.empty:
        return nan
    cats = list(labels) if labels is not None else _sorted_cats(table.to_numpy().ravel().tolist())
    counts = np.stack([(table == c).sum(axis=1).to_numpy() for c in cats], axis=1)
    return _ref_fleiss_counts(counts)


def _ref_alpha(ratings, *, level="nominal"):
    rows = np.asarray(ratings, dtype=object)
    units = [[v for v in row if not _missing(v)] for row in rows]
    units = [u for u in units if len(u) >= 2]
    if not units:
        return nan
    cats = _sorted_cats([v for u in units for v in u])
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    coincidence = np.zeros((k, k))
    for u in units:
        m = len(u)
        for i in range(m):
            for j in range(m):
                if i != j:
                    coincidence[index[u[i]], index[u[j]]] += 1.0 / (m - 1)
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    if level == "nominal":
        delta = 1.0 - np.eye(k)
    else:
        values = np.asarray(cats, dtype=np.float64)
        delta = (values[:, None] - values[None, :]) ** 2
    d_o = float((coincidence * delta).sum()) / n
    d_e = float((np.outer(n_c, n_c) * delta).sum()) / (n * (n - 1))
    return nan if d_e == 0 else 1.0 - d_o / d_e


def _assert_close(got, want):
    if np.isnan(want):
        assert np.isnan(got)
        return 0.0
    diff = abs(got - want)
    assert diff <= AGREE_TOL, (got, want)
    return diff


def _random_ratings(rng, *, items, raters, cats, missing):
    data = rng.integers(0, cats, size=(items, raters)).astype(object)
    data[rng.random((items, raters)) < missing] = None
    return data


def _compare_all(wide, *, labels=None, interval=False):
    """Largest |wrapper - transcription| over every statistic pv4kit computes on ``wide``."""
    wide = pd.DataFrame(np.asarray(wide, dtype=object))
    diffs = [
        _assert_close(fleiss_kappa(wide, labels=labels), _ref_fleiss(wide, labels=labels)),
        _assert_close(krippendorff_alpha(wide), _ref_alpha(wide)),
    ]
    if interval:
        diffs.append(
            _assert_close(krippendorff_alpha(wide, level="interval"), _ref_alpha(wide, level="interval"))
        )
    for i in range(wide.shape[1]):
        for j in range(i + 1, wide.shape[1]):
            for w in (None, "linear", "quadratic"):
                got = cohen_kappa(wide[i], wide[j], weights=w, labels=labels)
                diffs.append(_assert_close(got, _ref_cohen(wide[i], wide[j], weights=w, labels=labels)))
    return max(diffs)


def test_wrappers_agree_with_transcription_on_recenter_fixtures():
    from pv4kit.related import recenter as rc

    s1 = rc.load_stage1(RECENTER)
    wide = s1.annotations.pivot(index=["item_index", "attr_index"], columns="annotator", values="judgment")
    labels = list(rc.STAGE1_LABELS)
    binary = wide.map(lambda v: v if pd.isna(v) else v == "ok")
    s2 = rc.load_stage2(RECENTER)
    humans = s2.annotations.pivot_table(
        index=["item_index", "attribute"], columns="annotator", values="relevant", aggfunc="first"
    ).astype(object)
    worst = max(
        _compare_all(wide, labels=labels),
        _compare_all(binary, labels=[False, True]),
        _compare_all(humans.where(humans.notna(), None), labels=[False, True]),
    )
    assert worst <= AGREE_TOL


def test_wrappers_agree_with_transcription_on_random_ratings_with_missing_values():
    rng = np.random.default_rng(14)
    worst = 0.0
    for trial in range(40):
        data = _random_ratings(
            rng,
            items=int(rng.integers(2, 60)),
            raters=int(rng.integers(2, 6)),
            cats=int(rng.integers(1, 6)),
            missing=[0.0, 0.1, 0.4][trial % 3],
        )
        worst = max(worst, _compare_all(data, interval=True))
    for _ in range(20):
        counts = rng.multinomial(
            int(rng.integers(2, 15)), rng.dirichlet(np.ones(4)), size=int(rng.integers(1, 30))
        )
        worst = max(worst, _assert_close(fleiss_kappa_counts(counts), _ref_fleiss_counts(counts)))
    assert worst <= AGREE_TOL


def test_agreement_edge_cases():
    # all raters agree on several categories: every statistic is 1
    same = [["a", "a", "a"], ["b", "b", "b"], ["c", "c", None]]
    assert fleiss_kappa(same) == pytest.approx(1.0)
    assert krippendorff_alpha(same) == pytest.approx(1.0)
    assert cohen_kappa(["a", "b", "c"], ["a", "b", "c"], weights="linear") == pytest.approx(1.0)
    # one category throughout: chance agreement is 1 and every statistic is undefined (nan, no error)
    one = [["x", "x"], ["x", "x"], ["x", None]]
    assert np.isnan(fleiss_kappa(one)) and np.isnan(krippendorff_alpha(one))
    assert np.isnan(fleiss_kappa_counts([[3, 0], [3, 0]]))
    assert np.isnan(cohen_kappa(["x", "x"], ["x", "x"], labels=["x", "y"], weights="quadratic"))
    # a second value only in an item rated once does not count (the item is not pairable)
    assert np.isnan(krippendorff_alpha([["x", "x"], ["y", None]]))
    # missing ratings: no complete item / no pairable item -> nan
    assert np.isnan(fleiss_kappa([[1, None], [None, 2]]))
    assert np.isnan(krippendorff_alpha([[None, None], [1, None]]))
    # mixed label types are coded by position, not handed to the libraries as is
    assert cohen_kappa(["a", 1, "a", 1], ["a", 1, 1, 1]) == pytest.approx(
        _ref_cohen(["a", 1, "a", 1], ["a", 1, 1, 1])
    )
    # the clear errors where a library would refuse or silently mis-count
    with pytest.raises(ValueError, match="interval.*numeric"):
        krippendorff_alpha([["a", "b"], ["b", "b"]], level="interval")
    with pytest.raises(ValueError, match="non-negative"):
        fleiss_kappa_counts([[3, -1], [1, 1]])
    with pytest.raises(ValueError, match="at least two raters"):
        fleiss_kappa_counts([[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="2-D"):
        krippendorff_alpha([1, 2, 3])
