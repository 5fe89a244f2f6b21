"""Re-Centering Humans in LLM Personalization (leczhang/recenter-personalization): metrics.

The loaders and data classes live in :mod:`pv4kit.related.recenter_io` and are re-exported here, so
``from pv4kit.related.recenter import load_stage1`` works.

* **Stage 1** (attribute extraction): an attribute is *accepted* when strictly more than half of the
  annotators who judged it said ``ok`` (``unsure`` and ``bad`` are not acceptance; a 1-1 split between
  two annotators is not accepted). Agreement: Fleiss' kappa, Krippendorff's alpha, pairwise Cohen's
  kappa (plain, linear-weighted on ``bad < unsure < ok``, and binary ok-vs-not).
* **Stage 2** (relevance of an attribute to a prompt): on the binary labels of
  :func:`~pv4kit.related.recenter_io.relevance_label` (``optional`` is relevant, as the authors
  binarise), the human label is the majority with **ties -> relevant** (as in the data card); a pair
  no annotator rated keeps a missing label and is left out of the metrics, counted. Each rater's
  yes-rate is :func:`stage2_yes_rates`. Each LLM's judgments, the coarse filter, an
  all-MiniLM-L6-v2 similarity baseline and BM25 (thresholds chosen on a seeded split of prompts) get
  precision, recall and F1 against it.
* **Stage 3** (generic vs personalised response, rated 1 = prefer generic .. 5 = prefer personalised):
  rating distributions, the share not preferred (rating <= 3), and each LLM judge's Spearman
  correlation with the human mean per (item, attribute); :func:`stage3_pairs` keeps every pair (unrated
  ones with a missing mean) and :func:`stage3_orientation` compares ratings by the side that showed the
  personalised response.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.related._common import encode
from pv4kit.related.agreement import fleiss_kappa, krippendorff_alpha, pairwise_cohen
from pv4kit.related.recenter_io import (
    CONDITIONS,
    HUB_ID,
    RELEVANCE_LABELS,
    STAGE1_LABELS,
    Stage1Data,
    Stage2Data,
    Stage3Data,
    load_stage1,
    load_stage2,
    load_stage3,
    personalised_side,
    relevance_label,
    same_model,
)

__all__ = [
    "CONDITIONS",
    "HUB_ID",
    "RELEVANCE_LABELS",
    "STAGE1_LABELS",
    "Stage1Data",
    "Stage2Data",
    "Stage3Data",
    "choose_threshold",
    "load_stage1",
    "load_stage2",
    "load_stage3",
    "personalised_side",
    "relevance_label",
    "same_model",
    "stage1_acceptance",
    "stage1_agreement",
    "stage2_agreement",
    "stage2_labels",
    "stage2_metrics",
    "stage2_predictions",
    "stage2_yes_rates",
    "stage3_correlation",
    "stage3_distribution",
    "stage3_orientation",
    "stage3_pairs",
    "stage3_ratings",
    "stage3_summary",
]


# ------------------------------------------------------------------------------------------ stage 1


def stage1_acceptance(data: Stage1Data) -> pd.DataFrame:
    """Per attribute: judgment counts, acceptance by majority, and whether it matches the release label.

    Returns:
        ``item_index, user_id, source, attr_index, attribute, n_ratings, n_ok, n_unsure, n_bad,
        accepted`` (``n_ok > n_ratings / 2``), ``ground_truth``, ``matches_release``.
    """
    counts = data.annotations.pivot_table(
        index=["item_index", "attr_index"],
        columns="judgment",
        values="annotator",
        aggfunc="count",
        fill_value=0,
    ).reindex(columns=list(STAGE1_LABELS), fill_value=0)
    counts.columns = [f"n_{c}" for c in counts.columns]
    out = data.items.merge(counts.reset_index(), on=["item_index", "attr_index"], how="left")
    for col in ("n_ok", "n_unsure", "n_bad"):
        out[col] = out[col].fillna(0).astype(int)
    out["n_ratings"] = out[["n_ok", "n_unsure", "n_bad"]].sum(axis=1)
    out["accepted"] = (2 * out["n_ok"] > out["n_ratings"]) & (out["n_ratings"] > 0)
    gt = pd.to_numeric(out["ground_truth"], errors="coerce")
    out["matches_release"] = (gt == out["accepted"].astype(int)).where(gt.notna())
    cols = [
        "item_index",
        "user_id",
        "source",
        "attr_index",
        "attribute",
        "n_ratings",
        "n_ok",
        "n_unsure",
        "n_bad",
        "accepted",
        "ground_truth",
        "matches_release",
    ]
    return out[cols]


def _agreement_rows(
    wide: pd.DataFrame, *, scale: str, labels: list[Any] | None, weighted: bool = False
) -> list[dict[str, Any]]:
    complete = wide.dropna()
    rows = [
        {
            "metric": "fleiss_kappa",
            "scale": scale,
            "raters": "all",
            "n_items": len(complete),
            "value": fleiss_kappa(wide, labels=labels),
        },
        {
            "metric": "krippendorff_alpha",
            "scale": scale,
            "raters": "all",
            "n_items": int((wide.notna().sum(axis=1) >= 2).sum()),
            "value": krippendorff_alpha(wide),
        },
    ]
    for weights in [None, "linear"] if weighted else [None]:
        pair = pairwise_cohen(wide, weights=weights, labels=labels)
        name = "cohen_kappa" if weights is None else "cohen_kappa_linear"
        for rec in pair.to_dict("records"):
            rows.append(
                {
                    "metric": name,
                    "scale": scale,
                    "raters": f"{rec['rater_a']}-{rec['rater_b']}",
                    "n_items": rec["n"],
                    "value": rec["kappa"],
                }
            )
        rows.append(
            {
                "metric": f"mean_{name}",
                "scale": scale,
                "raters": "pairs",
                "n_items": len(complete),
                "value": float(pair["kappa"].mean()) if len(pair) else float("nan"),
            }
        )
    return rows


def stage1_agreement(data: Stage1Data) -> pd.DataFrame:
    """Annotator agreement on stage 1: 3-way (ok/unsure/bad) and binary (ok vs not).

    Returns:
        Tidy ``metric, scale, raters, n_items, value``; Fleiss' kappa uses items every annotator judged,
        Krippendorff's alpha every item with >= 2 judgments, Cohen's kappa the items both judged.
    """
    wide = data.annotations.pivot(index=["item_index", "attr_index"], columns="annotator", values="judgment")
    binary = wide.map(lambda v: v if pd.isna(v) else v == "ok")
    rows = _agreement_rows(wide, scale="ok/unsure/bad", labels=list(STAGE1_LABELS), weighted=True)
    rows += _agreement_rows(binary, scale="ok vs not", labels=[False, True])
    return pd.DataFrame(rows, columns=["metric", "scale", "raters", "n_items", "value"])


# ------------------------------------------------------------------------------------------ stage 2


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
    from pv4kit.answer.bm25 import bm25_scores, tokenize

    methods = set(methods)
    unknown = methods - {"llm", "coarse_filter", "embedding", "bm25"}
    if unknown:
        raise ValueError(f"methods: unknown {sorted(unknown)}")
    labels = stage2_labels(data)
    labels = labels[labels["human"].notna()].reset_index(drop=True)
    labels["human"] = labels["human"].astype(bool)
    base = labels[["item_index", "prompt_index", "attribute", "human"]].copy()
    base["split"] = _prompt_split(labels["prompt_index"], tune_fraction=tune_fraction, seed=seed).to_numpy()
    frames = []
    if "llm" in methods:
        for model, part in data.judgments.groupby("model", sort=True):
            merged = base.merge(
                part[["item_index", "attribute", "relevant"]], on=["item_index", "attribute"], how="left"
            )
            merged["missing"] = merged["relevant"].isna()
            merged["pred"] = merged["relevant"].fillna(False).astype(bool)
            frames.append(
                merged.drop(columns="relevant").assign(
                    method=model, score=merged["pred"] * 1.0, threshold=np.nan
                )
            )
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
    scored: dict[str, np.ndarray] = {}
    if "embedding" in methods:
        prompts = labels["prompt_text"].astype(str).tolist()
        vec = encode(prompts + labels["attribute"].tolist(), embedder=embedder, cache=cache)
        scored["embedding"] = np.einsum("ij,ij->i", vec[: len(labels)], vec[len(labels) :]).astype(float)
    if "bm25" in methods:
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
    for method, score in scored.items():
        tune = (base["split"] == "tune").to_numpy()
        threshold = choose_threshold(score[tune], base["human"].to_numpy()[tune])
        frames.append(
            base.assign(
                method=method, score=score, threshold=threshold, pred=score >= threshold, missing=False
            )
        )
    cols = [
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
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def stage2_metrics(predictions: pd.DataFrame, *, subset: str = "test") -> pd.DataFrame:
    """Precision, recall, F1 and accuracy per method against the human majority.

    Args:
        predictions: From :func:`stage2_predictions`.
        subset: ``"test"`` (the held-out prompts; the fair comparison for threshold methods),
            ``"tune"`` or ``"all"``.

    Returns:
        ``method, subset, n, n_missing, tp, fp, fn, tn, precision, recall, f1, accuracy,
        positive_rate, human_positive_rate, threshold``.
    """
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


# ------------------------------------------------------------------------------------------ stage 3


def stage3_ratings(data: Stage3Data) -> pd.DataFrame:
    """All stage-3 ratings in one long frame.

    Returns:
        ``kind`` (human | llm), ``rater``, ``item_index``, ``attribute``, ``model_tag``, ``is_relevant``
        (from the items), ``rating`` and ``personalised_side`` (from the rater's display_assignment).
    """
    human = data.annotations.rename(columns={"annotator": "rater"}).assign(kind="human")
    llm = data.judgments.rename(columns={"model": "rater"}).assign(kind="llm")
    ratings = pd.concat([human, llm], ignore_index=True)
    info = data.items[["item_index", "attribute", "model_tag", "is_relevant"]].drop_duplicates(
        ["item_index", "attribute"]
    )
    out = ratings.merge(info, on=["item_index", "attribute"], how="left")
    cols = ["kind", "rater", "item_index", "attribute", "model_tag", "is_relevant", "rating"]
    if "personalised_side" in out.columns:
        cols.append("personalised_side")
    return out[cols]


def stage3_pairs(data: Stage3Data) -> pd.DataFrame:
    """Every (item, attribute) pair of the stage-3 items with its human and LLM ratings summarised.

    Returns:
        ``item_index, prompt_id, model_tag, attribute, is_relevant, n_human, human_mean, n_llm, llm_mean``;
        a pair nobody rated has ``n_human == 0`` and a missing ``human_mean`` (never dropped).
    """
    key = ["item_index", "attribute"]
    pairs = data.items[["item_index", "prompt_id", "model_tag", "attribute", "is_relevant"]]
    human = data.annotations.groupby(key)["rating"].agg(n_human="size", human_mean="mean")
    llm = data.judgments.groupby(key)["rating"].agg(n_llm="size", llm_mean="mean")
    out = pairs.merge(human.reset_index(), on=key, how="left").merge(llm.reset_index(), on=key, how="left")
    for col in ("n_human", "n_llm"):
        out[col] = out[col].fillna(0).astype(int)
    return out


def stage3_orientation(ratings: pd.DataFrame) -> pd.DataFrame:
    """Ratings split by the side that showed the personalised response (from ``display_assignment``).

    The card says ratings are stored in canonical orientation (1 = prefer generic, 5 = prefer
    personalised) whatever side the rater saw. If they were stored as seen instead, the ratings given
    with the personalised response on side A would mirror those given with it on side B (mean near
    ``6 - mean``); with canonical ratings and a random assignment the two sides agree up to noise.

    Returns:
        ``kind, personalised_side, n, mean_rating, share_prefer_personalised`` (rating >= 4),
        ``share_prefer_generic`` (rating <= 2); rows without a display_assignment have side ``"?"``.
    """
    if "personalised_side" not in ratings.columns:
        raise ValueError("ratings: no personalised_side column (use stage3_ratings on loaded data)")
    frame = ratings.assign(personalised_side=ratings["personalised_side"].fillna("?"))
    out = frame.groupby(["kind", "personalised_side"], sort=True)["rating"].agg(
        n="size",
        mean_rating="mean",
        share_prefer_personalised=lambda r: float((r >= 4).mean()),
        share_prefer_generic=lambda r: float((r <= 2).mean()),
    )
    return out.reset_index()


def stage3_distribution(ratings: pd.DataFrame) -> pd.DataFrame:
    """Rating distribution per rater and for all humans pooled: ``kind, rater, rating, count, share``."""
    pooled = ratings[ratings["kind"] == "human"].assign(rater="humans (pooled)")
    frame = pd.concat([pooled, ratings], ignore_index=True)
    counts = frame.groupby(["kind", "rater", "rating"]).size().rename("count")
    full = counts.unstack("rating", fill_value=0).reindex(columns=[1.0, 2.0, 3.0, 4.0, 5.0], fill_value=0)
    out = full.stack().rename("count").reset_index()
    out["share"] = out["count"] / out.groupby(["kind", "rater"])["count"].transform("sum")
    return out


def _human_mean(ratings: pd.DataFrame) -> pd.Series:
    return ratings[ratings["kind"] == "human"].groupby(["item_index", "attribute"])["rating"].mean()


def stage3_summary(ratings: pd.DataFrame) -> pd.DataFrame:
    """Mean rating and share not preferred (rating <= 3) per rater, humans pooled, and per pair.

    The row ``human mean per pair`` averages the human ratings of each (item, attribute) first and
    counts the pair as not preferred when that mean is <= 3.

    Returns:
        ``kind, rater, n, mean_rating, share_not_preferred, share_prefer_personalised`` (rating >= 4).
    """
    mean = _human_mean(ratings).reset_index().assign(kind="human", rater="human mean per pair")
    pooled = ratings[ratings["kind"] == "human"].assign(rater="humans (pooled)")
    frame = pd.concat([mean, pooled, ratings], ignore_index=True)
    out = frame.groupby(["kind", "rater"], sort=False)["rating"].agg(
        n="size",
        mean_rating="mean",
        share_not_preferred=lambda r: float((r <= 3).mean()),
        share_prefer_personalised=lambda r: float((r >= 4).mean()),
    )
    return out.reset_index()


def stage3_correlation(ratings: pd.DataFrame) -> pd.DataFrame:
    """Spearman correlation of each rater with the human mean per (item, attribute).

    LLM judges are compared with the mean of all humans; each human with the mean of the *other*
    humans (leave-one-out, a human ceiling).

    Returns:
        ``kind, rater, n, spearman_rho, p_value``.
    """
    from scipy.stats import spearmanr

    key = ["item_index", "attribute"]
    human = ratings[ratings["kind"] == "human"]
    rows = []
    for (kind, rater), part in ratings.groupby(["kind", "rater"], sort=True):
        ref = human[human["rater"] != rater] if kind == "human" else human
        target = ref.groupby(key)["rating"].mean().rename("human_mean")
        joined = part.set_index(key)[["rating"]].join(target, how="inner").dropna()
        n = len(joined)
        if n >= 3 and joined["rating"].nunique() > 1 and joined["human_mean"].nunique() > 1:
            res = spearmanr(joined["rating"], joined["human_mean"])
            rho, p = float(res.statistic), float(res.pvalue)
        else:
            rho = p = float("nan")
        rows.append({"kind": kind, "rater": rater, "n": n, "spearman_rho": rho, "p_value": p})
    return pd.DataFrame(rows, columns=["kind", "rater", "n", "spearman_rho", "p_value"])
