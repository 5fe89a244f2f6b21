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
