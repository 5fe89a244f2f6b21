"""A Bradley-Terry reward-model baseline for pairwise personalisation data, trained on CPU.

The encoder is frozen (sentence embeddings) and a linear head ``r(x, y) = w . [e(y), e(x) * e(y)]`` is
learned with PersonaFeedback's loss ``-log sigmoid(r(x, chosen) - r(x, rejected))`` plus ``l2/2 |w|^2``
(convex, L-BFGS, deterministic). ``x`` is persona plus question, ``y`` a response, ``e`` the unit embedding.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._options import check_number
from pv4kit.related._common import accuracy_table, encode

logger = logging.getLogger(__name__)


def _features(context: np.ndarray, response: np.ndarray) -> np.ndarray:
    return np.concatenate([response, context * response], axis=1).astype(np.float64)


@dataclass
class BradleyTerryHead:
    """A linear reward head.

    ``weights`` over ``[e(y), e(x) * e(y)]``, its ``l2`` penalty, the mean training loss at the optimum
    (without the penalty) and ``n_train``, the number of training pairs.
    """

    weights: np.ndarray
    l2: float
    train_loss: float
    n_train: int

    def reward(self, context: np.ndarray, response: np.ndarray) -> np.ndarray:
        """Rewards for aligned rows of context and response embeddings."""
        return _features(context, response) @ self.weights


def fit_bradley_terry(
    context: np.ndarray, chosen: np.ndarray, rejected: np.ndarray, *, l2: float = 1e-2, max_iter: int = 500
) -> BradleyTerryHead:
    """Fit the head on ``n x dim`` embeddings of ``context`` and ``chosen`` and ``rejected`` responses.

    ``l2 > 0`` keeps the optimum finite on separable data; ``max_iter`` bounds the L-BFGS iterations.
    """
    from scipy.optimize import minimize

    check_number(l2, "l2", gt=0)
    if not len(context) == len(chosen) == len(rejected) > 0:
        raise ValueError(
            f"rows: need equal non-zero counts, got {len(context)}, {len(chosen)}, {len(rejected)}"
        )
    diff = _features(context, chosen) - _features(context, rejected)

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        margin = diff @ w
        grad_margin = -1.0 / (1.0 + np.exp(np.clip(margin, -500, 500)))  # d(-log sigmoid) / d margin
        value = float(np.logaddexp(0.0, -margin).mean() + 0.5 * l2 * w @ w)
        return value, diff.T @ grad_margin / len(diff) + l2 * w

    start, options = np.zeros(diff.shape[1]), {"maxiter": max_iter}
    result = minimize(objective, start, jac=True, method="L-BFGS-B", options=options)
    train_loss = float(np.logaddexp(0.0, -(diff @ result.x)).mean())
    logger.info("Bradley-Terry head: %d pairs, train loss %.4f (%s)", len(diff), train_loss, result.message)
    return BradleyTerryHead(weights=result.x, l2=l2, train_loss=train_loss, n_train=len(diff))


def split_pairs(pairs: pd.DataFrame, *, test_fraction: float = 0.5, seed: int = 0) -> pd.Series:
    """Seeded ``"train"``/``"test"`` labels per ``set`` x ``tier``; >= 2 pairs keep >= 1 on each side."""
    check_number(test_fraction, "test_fraction", gt=0, lt=1)
    rng = np.random.default_rng(seed)
    split = pd.Series("train", index=pairs.index, dtype=object)
    for idx in pairs.groupby(["set", "tier"], sort=True).groups.values():
        idx = np.asarray(idx)
        n_test = int(round(len(idx) * test_fraction))
        if len(idx) >= 2:
            n_test = min(max(n_test, 1), len(idx) - 1)
        split.loc[idx[rng.permutation(len(idx))[:n_test]]] = "test"
    return split


def reward_model_baseline(
    pairs: pd.DataFrame,
    *,
    embedder: Any = None,
    cache: Any = True,
    test_fraction: float = 0.5,
    seed: int = 0,
    l2: float = 1e-2,
) -> tuple[pd.DataFrame, pd.DataFrame, BradleyTerryHead]:
    """Train the head on a seeded split and score every pair, with an untrained ``cosine`` floor.

    Pairs without a persona are dropped. Returns ``(predictions, accuracy, head)``: per pair and method
    ``split, reward_chosen, reward_rejected, margin, correct``; the test split's accuracy per method x set x
    tier.

    Args:
        pairs: PersonaFeedback pairs (``pv4kit.related.personafeedback.load_personafeedback``).
        embedder: The frozen encoder (see :func:`pv4kit.related._common.encode`).
        cache: The embedding cache (see :func:`pv4kit.related._common.encode`).
        test_fraction: The share of each set x tier held out for the accuracy.
        seed: Seed of the split.
        l2: The head's L2 penalty.
    """
    usable = pairs[pairs["persona"].notna()].reset_index(drop=True)
    if usable.empty:
        raise ValueError("pairs: no rows with a persona to train on")
    split = split_pairs(usable, test_fraction=test_fraction, seed=seed)
    context = "Persona:\n" + usable["persona"].astype(str) + "\n\nQuestion: " + usable["question"].astype(str)
    texts = context.tolist() + usable["chosen"].tolist() + usable["rejected"].tolist()
    ctx, cho, rej = np.split(encode(texts, embedder=embedder, cache=cache), 3)
    train = (split == "train").to_numpy()
    head = fit_bradley_terry(ctx[train], cho[train], rej[train], l2=l2)
    base = usable[[c for c in ("set", "tier", "user_id", "pair_id") if c in usable.columns]].copy()
    base["split"] = split.to_numpy()
    frames = []
    for method, rc, rr in (
        ("bradley_terry", head.reward(ctx, cho), head.reward(ctx, rej)),
        ("cosine", np.einsum("ij,ij->i", ctx, cho), np.einsum("ij,ij->i", ctx, rej)),
    ):
        f = base.assign(method=method, reward_chosen=rc.astype(float), reward_rejected=rr.astype(float))
        f["margin"] = f["reward_chosen"] - f["reward_rejected"]
        frames.append(f.assign(correct=f["margin"] > 0))
    predictions = pd.concat(frames, ignore_index=True)
    test = predictions[predictions["split"] == "test"]
    accuracy = accuracy_table(test, outer=["method"]) if not test.empty else pd.DataFrame()
    return predictions, accuracy, head
