"""Re-Centering stage 1 metrics: majority acceptance of attributes and annotator agreement.

An attribute is *accepted* when strictly more than half of the annotators who judged it said ``ok``
(``unsure`` and ``bad`` are not acceptance; a 1-1 split between two annotators is not accepted).
Agreement: Fleiss' kappa, Krippendorff's alpha, pairwise Cohen's kappa (plain, linear-weighted on
``bad < unsure < ok``, and binary ok-vs-not).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pv4kit.related.agreement import fleiss_kappa, krippendorff_alpha, pairwise_cohen
from pv4kit.related.recenter.stage1_io import STAGE1_LABELS, Stage1Data

__all__ = ["acceptance_by_source", "stage1_acceptance", "stage1_agreement"]


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


def acceptance_by_source(acceptance: pd.DataFrame) -> pd.DataFrame:
    """Attributes and the share accepted per ``source`` (the extraction source; NA kept as a group).

    Args:
        acceptance: From :func:`stage1_acceptance`.

    Returns:
        ``source, n, accepted`` (the share of the source's attributes accepted by majority).
    """
    return (
        acceptance.groupby("source", dropna=False)
        .agg(n=("accepted", "size"), accepted=("accepted", "mean"))
        .reset_index()
    )
