"""Re-Centering stage 3 metrics: rating distributions, preference shares, judge-human correlation.

Ratings run 1 = prefer generic .. 5 = prefer personalised: rating distributions, the share not
preferred (rating <= 3), and each LLM judge's Spearman correlation with the human mean per (item,
attribute); :func:`stage3_pairs` keeps every pair (unrated ones with a missing mean) and
:func:`stage3_orientation` compares ratings by the side that showed the personalised response.
"""

from __future__ import annotations

import pandas as pd

from pv4kit.related.recenter.stage3_io import Stage3Data

__all__ = [
    "stage3_correlation",
    "stage3_distribution",
    "stage3_orientation",
    "stage3_pairs",
    "stage3_ratings",
    "stage3_summary",
]


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
