"""``accuracy_table``: the one accuracy-with-interval computation, equal to the three it replaced.

Each ``_old_*`` function below is an independent transcription of what pv4kit computed before the table
existed (per-group ``bootstrap_ci`` loops in ``compute_metrics``, ``audit.solver_accuracy`` and
``related._common.accuracy_table``); the new code must give the very same numbers, not close ones.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, norm

from pv4kit.analysis import audit
from pv4kit.related._common import accuracy_table as related_accuracy_table
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.score import compute_metrics
from pv4kit.scoring.stats import bootstrap_ci


def _predictions(seed: int = 0, n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    category = pd.array(rng.integers(1, 5, n), dtype="Int64")
    category[rng.random(n) < 0.05] = pd.NA
    names = {1: "food", 2: "travel", 3: "work", 4: "pets"}
    return pd.DataFrame(
        {
            "user_id": rng.integers(0, 25, n),
            "question_index": np.arange(n),
            "split": rng.choice(["train", "test"], n),
            "category": category,
            "category_name": [None if pd.isna(c) else names[int(c)] for c in category],
            "hard": pd.array(rng.random(n) < 0.3, dtype="boolean"),
            "generation": rng.choice(["", "an answer"], n, p=[0.05, 0.95]),
            "correct": rng.random(n) < 0.55,
            "tie": rng.random(n) < 0.02,
        }
    )


def _old_compute_metrics(predictions: pd.DataFrame, *, n_boot: int, seed: int) -> dict[str, Any]:
    """compute_metrics as it was: bootstrap_ci per group."""
    overall = bootstrap_ci(predictions, value="correct", n_boot=n_boot, seed=seed)
    hard = predictions[predictions["hard"].fillna(False).astype(bool)]
    hard_ci = bootstrap_ci(hard, value="correct", n_boot=n_boot, seed=seed)
    by_category = []
    for key, sub in predictions.groupby(["category", "category_name"], dropna=False, sort=True):
        ci = bootstrap_ci(sub, value="correct", n_boot=n_boot, seed=seed)
        by_category.append(
            {
                "category": None if pd.isna(key[0]) else int(key[0]),
                "category_name": None if pd.isna(key[1]) else str(key[1]),
                "n": ci["n"],
                "n_correct": int(sub["correct"].sum()),
                "accuracy": ci["estimate"],
                "ci_low": ci["low"],
                "ci_high": ci["high"],
            }
        )
    by_user = [
        {
            "user_id": int(u),
            "n": len(s),
            "n_correct": int(s["correct"].sum()),
            "accuracy": float(s["correct"].mean()),
        }
        for u, s in predictions.groupby("user_id", sort=True)
    ]
    return {
        "accuracy": overall["estimate"],
        "accuracy_ci": [overall["low"], overall["high"]],
        "accuracy_hard": hard_ci["estimate"],
        "accuracy_hard_ci": [hard_ci["low"], hard_ci["high"]],
        "n_correct": int(predictions["correct"].sum()),
        "n_hard_correct": int(hard["correct"].sum()),
        "by_category": by_category,
        "by_user": by_user,
    }


@pytest.mark.parametrize("seed", [0, 3])
def test_compute_metrics_gives_the_numbers_of_the_per_group_loops(seed):
    preds = _predictions(seed)
    got = compute_metrics(preds, n_boot=300, seed=seed)
    want = _old_compute_metrics(preds, n_boot=300, seed=seed)
    assert json.dumps({k: got[k] for k in want}) == json.dumps(want)  # the bytes metrics.json holds
    none_hard = compute_metrics(preds.assign(hard=False), n_boot=50, seed=seed)
    assert none_hard["accuracy_hard"] is None and none_hard["accuracy_hard_ci"] == [None, None]


def _old_related(frame, *, by, outer=(), extra_counts=(), confidence=0.95, interval="wilson", seed=0):
    """related._common.accuracy_table as it was: a loop over groups, Wilson or bootstrap_ci per row."""

    def wilson(k, n):
        if n == 0:
            return float("nan"), float("nan")
        z = float(norm.ppf(0.5 + confidence / 2))
        p = k / n
        denom = 1 + z**2 / n
        centre = (p + z**2 / (2 * n)) / denom
        half = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
        return max(0.0, centre - half), min(1.0, centre + half)

    rows = []
    for okey, oframe in frame.groupby(list(outer), sort=True) if outer else [((), frame)]:
        okey = okey if isinstance(okey, tuple) else (okey,)
        groups = [
            (k if isinstance(k, tuple) else (k,), p) for k, p in oframe.groupby(by, sort=True, dropna=False)
        ]
        groups += [((k, *["all"] * (len(by) - 1)), p) for k, p in oframe.groupby(by[0], sort=True)]
        groups.append((tuple(["all"] * len(by)), oframe))
        for key, part in groups:
            n, k = len(part), int(part["correct"].astype(bool).sum())
            if interval == "bootstrap":
                ci = bootstrap_ci(
                    part.assign(_c=part["correct"].astype(float)), value="_c", seed=seed, level=confidence
                )
                lo, hi = ci["low"], ci["high"]
            else:
                lo, hi = wilson(k, n)
            row = {**dict(zip(outer, okey, strict=True)), **dict(zip(by, key, strict=True))}
            row.update(n=n, n_correct=k, accuracy=k / n, ci_low=lo, ci_high=hi, chance=0.5)
            row.update({c: int(part[c].astype(bool).sum()) for c in extra_counts})
            rows.append(row)
    return pd.DataFrame(rows)


def _pairs(seed=0, n=400):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user_id": rng.integers(0, 40, n),
            "order": rng.choice(["ab", "ba"], n),
            "set": rng.choice(["specific", "general"], n),
            "tier": rng.choice(["easy", "medium", "hard"], n),
            "correct": rng.random(n) < 0.7,
            "unparsed": rng.random(n) < 0.1,
        }
    )


@pytest.mark.parametrize("interval", ["wilson", "bootstrap"])
@pytest.mark.parametrize("outer", [(), ("order",)])
def test_related_accuracy_table_gives_the_numbers_of_the_old_loop(interval, outer):
    frame = _pairs()
    kw = {
        "outer": outer,
        "extra_counts": ["unparsed"],
        "interval": interval,
        "seed": 2,
    }
    got = related_accuracy_table(frame, **kw)
    want = _old_related(frame, by=["set", "tier"], **kw)
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_solver_accuracy_is_the_table_plus_the_chance_test():
    preds = _predictions(1).dropna(subset=["category_name"])
    preds = preds.assign(solver=np.where(preds["user_id"] % 2, "longest", "random"))
    got = audit.solver_accuracy(preds, by="category_name", n_boot=200, seed=5)
    assert len(got) == 8  # two solvers x four categories
    for r in got.itertuples(index=False):
        sub = preds[(preds["solver"] == r.solver) & (preds["category_name"].astype(str) == r.group)]
        ci = bootstrap_ci(sub, value="correct", n_boot=200, seed=5)
        assert (r.n, r.n_correct) == (len(sub), int(sub["correct"].sum()))
        assert (r.accuracy, r.ci_low, r.ci_high) == (ci["estimate"], ci["low"], ci["high"])
        assert r.binom_p == pytest.approx(binomtest(r.n_correct, r.n, 0.2, alternative="greater").pvalue)


def test_accuracy_table_rows_columns_and_options():
    preds = _predictions(2)
    table = accuracy_table(
        preds, by={"run": "split", "group": "category_name"}, value=["correct", "tie"], n_boot=100
    )
    assert list(table.columns) == [
        "run",
        "group",
        "metric",
        "n",
        "n_correct",
        "accuracy",
        "ci_low",
        "ci_high",
    ]
    assert list(table["metric"].unique()) == ["correct", "tie"]
    first = table.iloc[0]
    sub = preds[(preds["split"] == first["run"]) & (preds["category_name"] == first["group"])]
    ci = bootstrap_ci(sub, n_boot=100)
    assert (first["accuracy"], first["ci_low"], first["ci_high"]) == (ci["estimate"], ci["low"], ci["high"])
    whole = accuracy_table(preds, interval="none")
    assert len(whole) == 1 and whole["n"].iloc[0] == len(preds) and np.isnan(whole["ci_low"].iloc[0])
    assert whole["accuracy"].iloc[0] == preds["correct"].mean()
    empty = accuracy_table(preds.iloc[0:0])
    assert empty["n"].tolist() == [0] and np.isnan(empty["accuracy"].iloc[0])
    per_user = accuracy_table(preds, by="user_id", n_boot=50)  # the cluster is also the key: one user each
    assert (per_user["ci_low"] == per_user["accuracy"]).all()
    with pytest.raises(ValueError, match=r"frame: missing column\(s\) \['corect'\]"):
        accuracy_table(preds, value="corect")
    with pytest.raises(ValueError, match="interval: expected one of"):
        accuracy_table(preds, interval="normal")
    with pytest.raises(ValueError, match="level"):
        accuracy_table(preds, level=95)
