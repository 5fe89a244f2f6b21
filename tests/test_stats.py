import numpy as np
import pandas as pd
import pytest

from pv4kit.scoring.stats import bootstrap_ci, compare, mcnemar_exact, paired_bootstrap


def _frame(seed, n_users=20, per_user=15, p=0.6):
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(n_users), per_user)
    return pd.DataFrame(
        {
            "user_id": users,
            "question_index": np.tile(np.arange(per_user), n_users),
            "correct": rng.random(len(users)) < p,
        }
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_ci_contains_estimate_and_is_deterministic(seed):
    f = _frame(seed)
    ci = bootstrap_ci(f, n_boot=500, seed=seed)
    assert ci["low"] <= ci["estimate"] <= ci["high"]
    assert ci["estimate"] == pytest.approx(f["correct"].mean())
    assert ci["n"] == 300 and ci["n_clusters"] == 20
    assert bootstrap_ci(f, n_boot=500, seed=seed) == ci


def test_bootstrap_ci_clustered_is_wider_than_iid():
    # users that are all-right or all-wrong: the clustered interval must reflect 10 users, not 300 rows
    f = pd.DataFrame({"user_id": np.repeat(np.arange(10), 30), "correct": np.repeat([True, False] * 5, 30)})
    clustered = bootstrap_ci(f, n_boot=1000)
    rowwise = bootstrap_ci(f.assign(user_id=np.arange(300)), n_boot=1000)
    assert clustered["high"] - clustered["low"] > 2 * (rowwise["high"] - rowwise["low"])


def test_bootstrap_ci_empty_is_null():
    ci = bootstrap_ci(pd.DataFrame({"user_id": [], "correct": []}))
    assert ci["estimate"] is None and ci["low"] is None and ci["n"] == 0
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci(_frame(0), level=95)


def test_mcnemar_exact():
    a = np.array([1, 1, 1, 1, 0, 0, 1, 0], bool)
    b = np.array([0, 0, 0, 0, 0, 0, 1, 0], bool)
    r = mcnemar_exact(a, b)
    assert (r["a_only"], r["b_only"]) == (4, 0)
    assert r["pvalue"] == pytest.approx(0.125)
    assert mcnemar_exact(a, a)["pvalue"] == 1.0


def test_paired_bootstrap_and_compare():
    fa = _frame(0, p=0.8).assign(
        category=lambda d: d["question_index"] % 3, hard=lambda d: d["question_index"] < 3
    )
    fb = fa.assign(correct=np.zeros(len(fa), bool))
    pb = paired_bootstrap(fa.assign(b=fb["correct"]), a="correct", b="b", n_boot=300)
    assert pb["low"] <= pb["diff"] <= pb["high"] and pb["diff"] == pytest.approx(fa["correct"].mean())
    out = compare(fa, fb.iloc[:-5], n_boot=300)
    assert list(out["scope"]) == ["overall", "hard", "category", "category", "category"]
    overall = out.iloc[0]
    assert overall["n"] == len(fa) - 5 and overall["b_only"] == 0 and overall["mcnemar_p"] < 1e-6
    assert out.attrs["only_in_a"] == 5 and out.attrs["only_in_b"] == 0


def test_bootstrap_ci_unknown_column_names_it():
    frame = pd.DataFrame({"user_id": [1, 2], "correct": [True, False]})
    with pytest.raises(ValueError, match=r"frame: missing column\(s\) \['corect'\]"):
        bootstrap_ci(frame, value="corect")
    with pytest.raises(ValueError, match=r"frame: missing column\(s\) \['user'\]"):
        bootstrap_ci(frame.iloc[0:0], cluster="user")


@pytest.mark.parametrize("seed", [0, 5])
def test_grouped_bootstrap_ci_equals_bootstrap_ci_per_group(seed):
    from pv4kit.scoring.stats import grouped_bootstrap_ci

    rng = np.random.default_rng(seed)
    n = 1500
    f = pd.DataFrame(
        {
            "user_id": rng.integers(0, 30, n),
            "g": rng.choice(np.array(["a", "b", "c", None], dtype=object), n),
            "h": rng.integers(0, 3, n),
            "v": (rng.random(n) < 0.4).astype(float),
        }
    )
    f.loc[rng.random(n) < 0.05, "v"] = np.nan
    f.loc[f["g"] == "c", "v"] = np.nan  # groups with no value at all
    out = grouped_bootstrap_ci(f, by=["g", "h"], value="v", n_boot=300, seed=seed)
    assert len(out) == 12 and list(out.columns) == ["g", "h", "estimate", "low", "high", "n", "n_clusters"]
    for r in out.itertuples(index=False):
        in_g = f["g"].isna() if pd.isna(r.g) else f["g"] == r.g
        ci = bootstrap_ci(f[in_g & (f["h"] == r.h)], value="v", n_boot=300, seed=seed)
        assert (ci["n"], ci["n_clusters"]) == (r.n, r.n_clusters)
        if ci["estimate"] is None:
            assert np.isnan(r.estimate) and np.isnan(r.low) and np.isnan(r.high)
        else:  # the very same numbers, not just close
            assert (ci["estimate"], ci["low"], ci["high"]) == (r.estimate, r.low, r.high)


def test_grouped_bootstrap_ci_names_a_missing_column():
    from pv4kit.scoring.stats import grouped_bootstrap_ci

    with pytest.raises(ValueError, match=r"frame: missing column\(s\) \['nope'\]"):
        grouped_bootstrap_ci(_frame(0), by="nope")


def test_grouped_bootstrap_ci_on_an_empty_frame():
    from pv4kit.scoring.stats import grouped_bootstrap_ci

    out = grouped_bootstrap_ci(pd.DataFrame({"user_id": [], "g": [], "correct": []}), by="g")
    assert out.empty and list(out.columns) == ["g", "estimate", "low", "high", "n", "n_clusters"]


@pytest.mark.parametrize("seed", [0, 3])
def test_compare_rows_are_paired_bootstrap_and_mcnemar_of_each_group(seed):
    """compare's one-pass totals give, bit for bit, what the public functions give on each group's rows."""
    rng = np.random.default_rng(seed)
    n = 900
    fa = pd.DataFrame(
        {
            "user_id": rng.choice([3, 11, 7, 42, 5, 19, 8], size=n),  # unsorted ids, uneven sizes
            "question_index": np.arange(n),
            "category": rng.integers(0, 6, size=n),
            "category_name": pd.Series(rng.choice(["b", "a", "c", None], size=n), dtype=object),
            "hard": rng.random(n) < 0.2,
            "correct": rng.random(n) < 0.6,
        }
    )
    fb = fa.assign(correct=rng.random(n) < 0.5)
    out = compare(fa, fb, n_boot=200, seed=seed)
    pairs = fa.assign(correct_b=fb["correct"])
    label = pairs["category_name"].astype(object).fillna("(none)")
    expected = [("overall", "all", pairs), ("hard", "hard", pairs[pairs["hard"]])]
    expected += [("category", name, sub) for name, sub in pairs.groupby(label, sort=True)]
    assert list(zip(out["scope"], out["group"], strict=True)) == [(s, g) for s, g, _ in expected]
    for (_, _, sub), (_, row) in zip(expected, out.iterrows(), strict=True):
        pb = paired_bootstrap(sub, a="correct", b="correct_b", n_boot=200, seed=seed)
        mc = mcnemar_exact(sub["correct"], sub["correct_b"])
        assert (row["diff"], row["diff_low"], row["diff_high"]) == (pb["diff"], pb["low"], pb["high"])
        assert (row["a_only"], row["b_only"], row["mcnemar_p"]) == (mc["a_only"], mc["b_only"], mc["pvalue"])
        assert row["n"] == len(sub) and row["n_users"] == sub["user_id"].nunique()
        assert row["accuracy_a"] == sub["correct"].mean() and row["accuracy_b"] == sub["correct_b"].mean()
