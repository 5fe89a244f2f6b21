from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pv4kit.related import personafeedback as pf
from pv4kit.related.reward_model import fit_bradley_terry, reward_model_baseline, split_pairs

FIXTURE = Path(__file__).parent / "fixtures" / "personafeedback"


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bradley_terry_learns_a_persona_match(seed):
    # chosen responses align with their context, rejected ones are random: the interaction term learns it
    rng = np.random.default_rng(seed)
    ctx = _unit(rng.standard_normal((300, 6)))
    cho = _unit(ctx + 0.3 * rng.standard_normal((300, 6)))
    rej = _unit(rng.standard_normal((300, 6)))
    head = fit_bradley_terry(ctx[:200], cho[:200], rej[:200], l2=1e-3)
    margin = head.reward(ctx[200:], cho[200:]) - head.reward(ctx[200:], rej[200:])
    assert (margin > 0).mean() > 0.9
    assert head.train_loss < np.log(2) and head.weights.shape == (12,)


def test_bradley_terry_loss_and_gradient_match_the_formula():
    # one pair, one feature dim: with l2 the optimum solves mean(-sigmoid(-w d) d) + l2 w = 0
    ctx, cho, rej = np.array([[1.0]]), np.array([[1.0]]), np.array([[0.0]])
    head = fit_bradley_terry(ctx, cho, rej, l2=0.1)
    d = np.array([1.0, 1.0])  # features [y, x*y] of chosen minus rejected
    w = head.weights
    grad = -d / (1 + np.exp(w @ d)) + 0.1 * w
    np.testing.assert_allclose(grad, 0, atol=1e-5)
    assert head.train_loss == pytest.approx(np.log1p(np.exp(-(w @ d))))
    with pytest.raises(ValueError, match="l2"):
        fit_bradley_terry(ctx, cho, rej, l2=0)


def test_split_is_seeded_and_stratified():
    frame = pd.DataFrame({"set": ["a"] * 6 + ["b"] * 3, "tier": ["x"] * 9})
    s = split_pairs(frame, test_fraction=0.5, seed=4)
    assert s.equals(split_pairs(frame, test_fraction=0.5, seed=4))
    assert (s[frame["set"] == "a"] == "test").sum() == 3 and (s[frame["set"] == "b"] == "test").sum() == 2
    with pytest.raises(ValueError, match="test_fraction"):
        split_pairs(frame, test_fraction=1.0)


def test_reward_model_baseline_on_fixture(make_fake_embedder):
    data = pf.load_personafeedback(FIXTURE)
    preds, acc, head = reward_model_baseline(
        data.pairs, embedder=make_fake_embedder(dim=8), cache=None, seed=0
    )
    assert set(preds["method"]) == {"bradley_terry", "cosine"} and len(preds) == 2 * 22
    assert head.n_train == (preds.query("method == 'cosine'")["split"] == "train").sum() == 10
    assert {"method", "set", "tier", "n", "accuracy", "ci_low", "ci_high", "chance"} <= set(acc.columns)
    total = acc[(acc["set"] == "all") & (acc["tier"] == "all")]
    assert total["n"].tolist() == [12, 12] and sorted(total["method"]) == ["bradley_terry", "cosine"]
