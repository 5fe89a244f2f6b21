"""Category names grouped across users by embedding (each user names their categories differently)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pv4kit.analysis.audit.common import cutoffs, embedder_name
from pv4kit.analysis.fitcache import beside_embeddings, stored_fit
from pv4kit.embeddings.models import embed_texts
from pv4kit.schema import require_columns
from pv4kit.vectors import unit_rows


def category_groups(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, distance: float | None = None
) -> pd.DataFrame:
    """Group similar category names across users (their names differ per user) by embedding.

    Agglomerative clustering (average linkage, cosine distance below ``distance``) of the distinct
    ``(user_id, category_name)`` names; each group is labelled by its member nearest the group mean.
    ``distance`` defaults to the embedder's ``category_distance``
    (:func:`~pv4kit.analysis.audit.common.cutoffs`: 0.55 for MiniLM).
    The labels are kept in ``clusters/`` beside the embedding cache (keyed by the vectors, ``distance``
    and the library versions; :func:`pv4kit.analysis.fitcache.beside_embeddings`) unless ``cache`` is
    off, so a rerun does not import scikit-learn (about 3 s).

    Returns:
        One row per user and category: ``user_id, category, category_name, n_questions, group,
        group_label``, the unit ``vector`` (for maps) and the ``embedder``'s name.
    """
    require_columns(questions, ["user_id", "category", "category_name"], name="questions")
    cats = (
        questions.dropna(subset=["category_name"])
        .groupby(["user_id", "category", "category_name"], sort=True)
        .size()
        .rename("n_questions")
        .reset_index()
    )
    if cats.empty:
        return cats.assign(group=pd.Series(dtype="int64"), group_label=pd.Series(dtype=object))
    distance = cutoffs(embedder)["category_distance"] if distance is None else distance
    vecs = unit_rows(embed_texts(list(cats["category_name"]), embedder=embedder, cache=cache, progress=False))
    if len(cats) == 1:
        labels = np.zeros(1, dtype=int)
    else:
        labels = stored_fit(
            "clusters",
            vecs,
            lambda: _agglomerative(vecs, distance=distance),
            options={"method": "AgglomerativeClustering", "linkage": "average", "distance": distance},
            packages=("scikit-learn", "numpy", "scipy"),
            shape=(len(vecs),),
            cache=beside_embeddings(cache, "clusters"),
        )
    # number groups by size (largest first) so colours are stable across runs
    order = pd.Series(labels).value_counts().index.tolist()
    renum = {g: i for i, g in enumerate(order)}
    cats["group"] = [renum[g] for g in labels]
    names = {}
    for g, members in cats.groupby("group"):
        m = vecs[members.index.to_numpy()]
        centre = unit_rows(m.mean(axis=0, keepdims=True))[0]
        names[g] = members["category_name"].iloc[int((m @ centre).argmax())]
    cats["group_label"] = cats["group"].map(names)
    cats["vector"] = list(vecs)
    return cats.assign(embedder=embedder_name(embedder))


def _agglomerative(vecs: np.ndarray, *, distance: float) -> np.ndarray:
    """Cluster labels: average linkage under cosine distance, merging below ``distance``.

    A zero vector (a name with no token a static embedder knows) has no cosine: it is a group of its own.
    """
    from sklearn.cluster import AgglomerativeClustering

    known = vecs.any(axis=1)
    labels = np.arange(len(vecs)) + len(vecs)  # singletons, numbered after any cluster
    if known.sum() >= 2:
        labels[known] = AgglomerativeClustering(
            n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance
        ).fit_predict(vecs[known])
    return labels


def with_category_groups(frame: pd.DataFrame, categories: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus the ``group`` and ``group_label`` of its ``(user_id, category)``."""
    cols = ["user_id", "category", "group", "group_label"]
    out = frame.drop(columns=[c for c in ("group", "group_label") if c in frame])
    if categories.empty or "category" not in frame:
        return out.assign(group=pd.NA, group_label=None)
    require_columns(categories, cols, name="categories")
    require_columns(frame, ["user_id"], name="frame")
    right = categories[cols].astype({"category": "Int64"})
    return out.astype({"category": "Int64"}).merge(right, on=["user_id", "category"], how="left")
