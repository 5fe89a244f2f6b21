"""Re-Centering stage 2 metrics: human majority labels, rater yes-rates, relevance predictions, agreement.

On the binary labels of :func:`~pv4kit.related.recenter.stage2_io.relevance_label` (``optional`` is
relevant, as the authors binarise), the human label is the majority with **ties -> relevant** (as in
the data card); a pair no annotator rated keeps a missing label and is left out of the metrics, counted.
Each rater's yes-rate is :func:`stage2_yes_rates`. Each LLM's judgments, the coarse filter, an
all-MiniLM-L6-v2 similarity baseline and BM25 (thresholds chosen on a seeded split of prompts) get
precision, recall and F1 against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._options import check_number
from pv4kit.related._common import encode
from pv4kit.related.agreement import fleiss_kappa, krippendorff_alpha, pairwise_cohen
from pv4kit.related.recenter.stage2_io import Stage2Data

__all__ = [
    "agreement_summary",
    "choose_threshold",
    "stage2_agreement",
    "stage2_labels",
    "stage2_metrics",
    "stage2_predictions",
    "stage2_yes_rates",
]


def stage2_labels(data: Stage2Data) -> pd.DataFrame:
    """Human majority per (item, attribute): ties -> relevant; every pair of the items is kept.

    Returns:
        ``item_index, prompt_index, prompt_text, user_id, attribute, ground_truth`` (the release's
        label), ``coarse_filter``, ``n_ratings, n_relevant, human`` (a nullable boolean: NA for a pair no
        annotator rated, e.g. an attribute text the tool showed under another user's item of the same
        prompt).
    """
    votes = (
        data.annotations.groupby(["item_index", "attribute"])["relevant"]
        .agg(n_ratings="size", n_relevant="sum")
        .reset_index()
    )
    out = data.items.merge(votes, on=["item_index", "attribute"], how="left")
    out["n_ratings"] = out["n_ratings"].fillna(0).astype(int)
    out["n_relevant"] = out["n_relevant"].fillna(0).astype(int)
    human = pd.array(2 * out["n_relevant"] >= out["n_ratings"], dtype="boolean")
    human[(out["n_ratings"] == 0).to_numpy()] = pd.NA
    out["human"] = human
    return out


def stage2_yes_rates(data: Stage2Data) -> pd.DataFrame:
    """Share of pairs each rater marked relevant (the "YES rate" of the authors' agreement script).

    Returns:
        ``kind`` (human | llm), ``rater``, ``n`` (pairs with a label), ``n_yes``, ``yes_rate``, plus one
        ``llm (mean)`` row averaging the LLMs' rates.
    """
    rows = []
    for kind, frame, who in (("human", data.annotations, "annotator"), ("llm", data.judgments, "model")):
        rated = frame.dropna(subset=["relevant"])
        for rater, part in rated.groupby(who, sort=True):
            n, yes = len(part), int(part["relevant"].astype(bool).sum())
            rows.append({"kind": kind, "rater": rater, "n": n, "n_yes": yes, "yes_rate": yes / n})
    out = pd.DataFrame(rows, columns=["kind", "rater", "n", "n_yes", "yes_rate"])
    llm = out[out["kind"] == "llm"]
    if len(llm):
        mean = {
            "kind": "llm",
            "rater": "llm (mean)",
            "n": int(llm["n"].sum()),
            "n_yes": int(llm["n_yes"].sum()),
        }
        mean["yes_rate"] = float(llm["yes_rate"].mean())
        out = pd.concat([out, pd.DataFrame([mean])], ignore_index=True)
    return out


def choose_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold maximising F1 of ``score >= threshold`` (ties: the highest such threshold)."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    best, best_f1 = float("inf"), -1.0
    for t in np.unique(scores)[::-1]:
        pred = scores >= t
        tp = int((pred & labels).sum())
        f1 = 2 * tp / (pred.sum() + labels.sum()) if (pred.sum() + labels.sum()) else 0.0
        if f1 > best_f1 + 1e-12:
            best, best_f1 = float(t), f1
    return best


def _prompt_split(prompt_index: pd.Series, *, tune_fraction: float, seed: int) -> pd.Series:
    prompts = np.array(sorted(prompt_index.dropna().unique()))
    rng = np.random.default_rng(seed)
    n_tune = min(max(int(round(len(prompts) * tune_fraction)), 1), max(len(prompts) - 1, 1))
    tune = set(rng.permutation(prompts)[:n_tune].tolist())
    return prompt_index.map(lambda p: "tune" if p in tune else "test")


def stage2_predictions(
    data: Stage2Data,
    *,
    embedder: Any = "minilm",
    cache: Any = True,
    seed: int = 0,
    tune_fraction: float = 0.5,
    methods: Iterable[str] = ("llm", "coarse_filter", "embedding", "bm25"),
) -> pd.DataFrame:
    """Relevance predictions of every method, aligned with the human majority.

    Only pairs with a human label take part (see :func:`stage2_labels`). Prompts are split (seeded)
    into ``tune`` and ``test``; the embedding and BM25 thresholds are the F1-best on ``tune``. An LLM
    that gave no judgment for a pair predicts "not relevant" and the row is flagged ``missing``.

    Args:
        data: Stage-2 data.
        embedder: For the similarity baseline (default all-MiniLM-L6-v2); see ``_common.encode``.
        cache: Embedding cache.
        seed: Split seed.
        tune_fraction: Share of prompts used to choose thresholds.
        methods: Any of ``"llm"``, ``"coarse_filter"``, ``"embedding"``, ``"bm25"``.

    Returns:
        Long frame ``method, item_index, prompt_index, attribute, split, score, threshold, pred, human,
        missing``.
    """
    check_number(tune_fraction, "tune_fraction", gt=0, lt=1)
    methods = set(methods)
    unknown = methods - {"llm", "coarse_filter", "embedding", "bm25"}
    if unknown:
        raise ValueError(f"methods: unknown {sorted(unknown)}")
    labels = stage2_labels(data)
    labels = labels[labels["human"].notna()].reset_index(drop=True)
    labels["human"] = labels["human"].astype(bool)
    base = labels[["item_index", "prompt_index", "attribute", "human"]].copy()
    base["split"] = _prompt_split(labels["prompt_index"], tune_fraction=tune_fraction, seed=seed).to_numpy()
    frames = _llm_predictions(base, data.judgments) if "llm" in methods else []
    if "coarse_filter" in methods and labels["coarse_filter"].any():
        frames.append(
            base.assign(
                method="coarse_filter",
                pred=labels["coarse_filter"].to_numpy(),
                score=labels["coarse_filter"].to_numpy() * 1.0,
                threshold=np.nan,
                missing=False,
            )
        )
    tune = (base["split"] == "tune").to_numpy()
    for method, score in _similarity_scores(labels, methods, embedder=embedder, cache=cache).items():
        threshold = choose_threshold(score[tune], base["human"].to_numpy()[tune])
        frames.append(
            base.assign(
                method=method, score=score, threshold=threshold, pred=score >= threshold, missing=False
            )
        )
    return (
        pd.concat(frames, ignore_index=True)[_PREDICTION_COLUMNS]
        if frames
        else pd.DataFrame(columns=_PREDICTION_COLUMNS)
    )


_PREDICTION_COLUMNS = [
    "method",
    "item_index",
    "prompt_index",
    "attribute",
    "split",
    "score",
    "threshold",
    "pred",
    "human",
    "missing",
]


def _llm_predictions(base: pd.DataFrame, judgments: pd.DataFrame) -> list[pd.DataFrame]:
    """One frame per LLM: its judgment of each labelled pair (none: "not relevant", flagged missing)."""
    frames = []
    for model, part in judgments.groupby("model", sort=True):
        merged = base.merge(
            part[["item_index", "attribute", "relevant"]], on=["item_index", "attribute"], how="left"
        )
        merged["missing"] = merged["relevant"].isna()
        merged["pred"] = merged["relevant"].fillna(False).astype(bool)
        frames.append(
            merged.drop(columns="relevant").assign(method=model, score=merged["pred"] * 1.0, threshold=np.nan)
        )
    return frames


def _similarity_scores(
    labels: pd.DataFrame, methods: set[str], *, embedder: Any, cache: Any
) -> dict[str, np.ndarray]:
    """Prompt-attribute similarity per pair: embedding cosine and/or BM25 of the prompt over attributes."""
    scored: dict[str, np.ndarray] = {}
    if "embedding" in methods:
        prompts = labels["prompt_text"].astype(str).tolist()
        vec = encode(prompts + labels["attribute"].tolist(), embedder=embedder, cache=cache)
        scored["embedding"] = np.einsum("ij,ij->i", vec[: len(labels)], vec[len(labels) :]).astype(float)
    if "bm25" in methods:
        from pv4kit.baselines.bm25 import bm25_scores
        from pv4kit.text import tokenize

        attrs = sorted(set(labels["attribute"]))
        corpus = [tokenize(a) for a in attrs]
        position = {a: i for i, a in enumerate(attrs)}
        by_prompt = {p: bm25_scores(tokenize(p), corpus) for p in labels["prompt_text"].astype(str).unique()}
        scored["bm25"] = np.array(
            [
                by_prompt[str(p)][position[a]]
                for p, a in zip(labels["prompt_text"], labels["attribute"], strict=True)
            ]
        )
    return scored


def stage2_metrics(predictions: pd.DataFrame, *, subset: str | Sequence[str] = "test") -> pd.DataFrame:
    """Precision, recall, F1 and accuracy per method against the human majority.

    Args:
        predictions: From :func:`stage2_predictions`.
        subset: ``"test"`` (the held-out prompts; the fair comparison for threshold methods),
            ``"tune"`` or ``"all"``; a list of them gives their rows one after the other.

    Returns:
        ``method, subset, n, n_missing, tp, fp, fn, tn, precision, recall, f1, accuracy,
        positive_rate, human_positive_rate, threshold``.
    """
    if not isinstance(subset, str):
        return pd.concat([stage2_metrics(predictions, subset=s) for s in subset], ignore_index=True)
    if subset not in ("test", "tune", "all"):
        raise ValueError(f"subset must be 'test', 'tune' or 'all', got {subset!r}")
    frame = predictions if subset == "all" else predictions[predictions["split"] == subset]
    rows = []
    for method, part in frame.groupby("method", sort=False):
        p, h = part["pred"].astype(bool).to_numpy(), part["human"].astype(bool).to_numpy()
        tp, fp = int((p & h).sum()), int((p & ~h).sum())
        fn, tn = int((~p & h).sum()), int((~p & ~h).sum())
        prec = tp / (tp + fp) if tp + fp else float("nan")
        rec = tp / (tp + fn) if tp + fn else float("nan")
        f1 = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else float("nan")
        rows.append(
            {
                "method": method,
                "subset": subset,
                "n": len(part),
                "n_missing": int(part["missing"].sum()),
                "tp": tp,
                "fp": fp,
                "fn": fn,
                "tn": tn,
                "precision": prec,
                "recall": rec,
                "f1": f1,
                "accuracy": (tp + tn) / len(part),
                "positive_rate": float(p.mean()),
                "human_positive_rate": float(h.mean()),
                "threshold": part["threshold"].iloc[0],
            }
        )
    return pd.DataFrame(rows)


def stage2_agreement(data: Stage2Data) -> pd.DataFrame:
    """Agreement on binary relevance between humans, LLMs and the human majority.

    Pairwise Cohen's kappa for human-human, LLM-LLM, LLM-human and LLM-majority pairs, then Fleiss'
    kappa and Krippendorff's alpha over all raters of each family with at least two raters.

    Args:
        data: Stage-2 data.

    Returns:
        Tidy frame, one row per statistic: ``group`` (``human-human``, ``llm-llm``, ``llm-human``,
        ``llm-majority``, ``human (all)``, ``llm (all)``), ``statistic`` (``cohen_kappa``,
        ``fleiss_kappa`` or ``krippendorff_alpha``), ``rater_a, rater_b`` (NA for the multi-rater
        statistics), ``value``, ``n`` (items both rated for Cohen's kappa, items every rater of the
        family rated for Fleiss' kappa, items with >= 2 ratings for Krippendorff's alpha) and
        ``agreement`` (raw share of agreement, Cohen rows only).
    """
    cols = ["group", "statistic", "rater_a", "rater_b", "value", "n", "agreement"]
    key = ["item_index", "attribute"]
    humans = data.annotations.pivot_table(index=key, columns="annotator", values="relevant", aggfunc="first")
    llms = data.judgments.dropna(subset=["relevant"]).pivot_table(
        index=key, columns="model", values="relevant", aggfunc="first"
    )
    labels = stage2_labels(data).set_index(key)["human"].astype(object).rename("majority")
    wide = humans.join(llms, how="outer").join(labels, how="left").astype(object)
    wide = wide.where(wide.notna(), None)
    h, m = list(humans.columns), list(llms.columns)
    groups = {
        "human-human": [(a, b) for i, a in enumerate(h) for b in h[i + 1 :]],
        "llm-llm": [(a, b) for i, a in enumerate(m) for b in m[i + 1 :]],
        "llm-human": [(a, b) for a in m for b in h],
        "llm-majority": [(a, "majority") for a in m],
    }
    frames = [
        pairwise_cohen(wide, pairs=pairs)
        .rename(columns={"kappa": "value"})
        .assign(group=g, statistic="cohen_kappa")
        for g, pairs in groups.items()
        if pairs
    ]
    multi = []
    for fam, raters in (("human", h), ("llm", m)):
        if len(raters) >= 2:
            sub = wide[raters]
            multi.append(
                {
                    "group": f"{fam} (all)",
                    "statistic": "fleiss_kappa",
                    "value": fleiss_kappa(sub, labels=[False, True]),
                    "n": len(sub.dropna()),
                }
            )
            multi.append(
                {
                    "group": f"{fam} (all)",
                    "statistic": "krippendorff_alpha",
                    "value": krippendorff_alpha(sub),
                    "n": int((sub.notna().sum(axis=1) >= 2).sum()),
                }
            )
    frames.append(pd.DataFrame(multi, columns=cols))
    frames = [f.reindex(columns=cols) for f in frames if len(f)]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    return out.astype({"n": int})


def agreement_summary(agreement: pd.DataFrame) -> pd.DataFrame:
    """Mean raw agreement and mean Cohen's kappa per group of :func:`stage2_agreement`'s pairs.

    Returns:
        ``group, agreement, cohen_kappa`` in the groups' order of appearance.
    """
    pairs = agreement[agreement["statistic"] == "cohen_kappa"]
    summary = pairs.groupby("group", sort=False)[["agreement", "value"]].mean().reset_index()
    return summary.rename(columns={"value": "cohen_kappa"})
