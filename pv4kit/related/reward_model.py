"""A Bradley-Terry reward-model baseline for pairwise personalisation data, trained on CPU.

PersonaFeedback trains reward models with the Bradley-Terry objective
``loss = -log sigmoid(r(x, chosen) - r(x, rejected))``. Here the encoder is frozen (sentence
embeddings) and only a linear reward head is learned::

    r(x, y) = w . [e(y), e(x) * e(y)]

where ``x`` is the persona plus question, ``y`` a response, ``e`` the L2-normalised embedding and ``*``
the element-wise product (the product lets a linear head reward a response for matching the persona;
``e(y)`` alone could only learn persona-independent style). The loss plus an L2 penalty
``l2/2 * |w|^2`` is convex and minimised with L-BFGS, so training is deterministic.

The train/test split is seeded and stratified by ``set x tier``; accuracy is reported on the test part
per tier. An untrained ``cosine`` reward ``r = e(x) . e(y)`` is reported alongside as a floor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.related._common import accuracy_table, encode

logger = logging.getLogger(__name__)

__all__ = ["BradleyTerryHead", "fit_bradley_terry", "reward_model_baseline", "split_pairs"]


@dataclass
class BradleyTerryHead:
    """A linear reward head on frozen embeddings.

    Attributes:
        weights: ``2 * dim`` weights over ``[e(y), e(x) * e(y)]``.
        l2: The L2 penalty it was trained with.
        train_loss: Mean Bradley-Terry loss on the training pairs at the optimum (without the penalty).
        n_train: Number of training pairs.
    """

    weights: np.ndarray
    l2: float
    train_loss: float
    n_train: int

    def reward(self, context: np.ndarray, response: np.ndarray) -> np.ndarray:
        """Rewards for aligned rows of context and response embeddings."""
        return _features(context, response) @ self.weights


def _features(context: np.ndarray, response: np.ndarray) -> np.ndarray:
    return np.concatenate([response, context * response], axis=1).astype(np.float64)


def fit_bradley_terry(
    context: np.ndarray,
    chosen: np.ndarray,
    rejected: np.ndarray,
    *,
    l2: float = 1e-2,
    max_iter: int = 500,
) -> BradleyTerryHead:
    """Fit the linear head by minimising ``mean(-log sigmoid(r(x, c) - r(x, r))) + l2/2 |w|^2``.

    Args:
        context: ``n x dim`` context embeddings.
        chosen: ``n x dim`` chosen-response embeddings.
        rejected: ``n x dim`` rejected-response embeddings.
        l2: L2 penalty, ``> 0`` (keeps the optimum finite on separable data).
        max_iter: L-BFGS iterations.

    Returns:
        The fitted :class:`BradleyTerryHead`.
    """
    from scipy.optimize import minimize

    if l2 <= 0:
        raise ValueError(f"l2 must be > 0, got {l2!r}")
    if not (len(context) == len(chosen) == len(rejected)) or len(context) == 0:
        raise ValueError(
            f"need equal, non-zero numbers of rows, got {len(context)}, {len(chosen)}, {len(rejected)}"
        )
    diff = _features(context, chosen) - _features(context, rejected)

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        margin = diff @ w
        loss = np.logaddexp(0.0, -margin)  # -log sigmoid(margin), stable
        grad_margin = -1.0 / (1.0 + np.exp(np.clip(margin, -500, 500)))  # d loss / d margin
        value = float(loss.mean() + 0.5 * l2 * w @ w)
        grad = diff.T @ grad_margin / len(diff) + l2 * w
        return value, grad

    w0 = np.zeros(diff.shape[1])
    result = minimize(objective, w0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    w = result.x
    train_loss = float(np.logaddexp(0.0, -(diff @ w)).mean())
    logger.info("Bradley-Terry head: %d pairs, train loss %.4f (%s)", len(diff), train_loss, result.message)
    return BradleyTerryHead(weights=w, l2=l2, train_loss=train_loss, n_train=len(diff))


def split_pairs(
    pairs: pd.DataFrame,
    *,
    test_fraction: float = 0.5,
    seed: int = 0,
    stratify: Sequence[str] = ("set", "tier"),
) -> pd.Series:
    """Seeded train/test split, stratified; every stratum with >= 2 pairs keeps >= 1 on each side.

    Returns:
        A ``"train"``/``"test"`` Series aligned with ``pairs.index``.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    rng = np.random.default_rng(seed)
    split = pd.Series("train", index=pairs.index, dtype=object)
    keys = list(stratify) if stratify else None
    groups = pairs.groupby(keys, sort=True).groups.values() if keys else [pairs.index]
    for idx in groups:
        idx = np.asarray(list(idx))
        n = len(idx)
        n_test = int(round(n * test_fraction))
        if n >= 2:
            n_test = min(max(n_test, 1), n - 1)
        chosen = rng.permutation(n)[:n_test]
        split.loc[idx[chosen]] = "test"
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
    """Train the Bradley-Terry head on a seeded split and score the held-out pairs.

    Args:
        pairs: Pairs frame with ``persona, question, chosen, rejected, pair_id`` (rows without a
            persona are dropped).
        embedder: See :func:`pv4kit.related._common.encode`.
        cache: Embedding cache for ``pv4kit.embeddings.models.embed_texts``.
        test_fraction: Share of each ``set x tier`` stratum held out.
        seed: Split seed.
        l2: L2 penalty of the head.

    Returns:
        ``(predictions, accuracy, head)``: ``predictions`` has one row per pair and method
        (``bradley_terry``, ``cosine``) with ``split, reward_chosen, reward_rejected, margin, correct``
        (a tie is wrong); ``accuracy`` is per method x set x tier on the test split, with Wilson
        intervals and chance 0.5.
    """
    usable = pairs[pairs["persona"].notna()].reset_index(drop=True)
    if usable.empty:
        raise ValueError("pairs: no rows with a persona to train on")
    split = split_pairs(usable, test_fraction=test_fraction, seed=seed)
    context_text = (
        "Persona:\n" + usable["persona"].astype(str) + "\n\nQuestion: " + usable["question"].astype(str)
    ).tolist()
    n = len(usable)
    vectors = encode(
        context_text + usable["chosen"].tolist() + usable["rejected"].tolist(), embedder=embedder, cache=cache
    )
    ctx, cho, rej = vectors[:n], vectors[n : 2 * n], vectors[2 * n :]
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
        f["correct"] = f["margin"] > 0
        frames.append(f)
    predictions = pd.concat(frames, ignore_index=True)
    test = predictions[predictions["split"] == "test"]
    accuracy = (
        accuracy_table(test, by=["set", "tier"], outer=["method"]) if not test.empty else pd.DataFrame()
    )
    return predictions, accuracy, head
