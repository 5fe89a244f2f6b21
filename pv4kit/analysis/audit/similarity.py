"""Embedding-based distractor checks: similarity to the reference, the rationale, duplicate questions.

How close the distractors sit to the reference and to each other, the rationale scored as if it were a
generation, and near-duplicate questions within a user.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pv4kit.analysis.audit.common import _base, _candidate_vectors, cutoffs, embedder_name
from pv4kit.embeddings.models import embed_texts
from pv4kit.schema import LETTERS, QUESTION_KEY, answer_indices, require_columns
from pv4kit.scoring.score import score_frame
from pv4kit.vectors import unit_rows


def similarity_audit(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, near_duplicate: float | None = None
) -> pd.DataFrame:
    """How close the distractors sit to the reference and to each other; the rationale as a generation.

    Args:
        questions: The questions frame (``rationale`` used when present).
        embedder: Any :class:`~pv4kit.embeddings.models.Embedder`.
        cache: Embedding cache.
        near_duplicate: Cosine at or above which two candidates count as near-duplicates (default: the
            embedder's, :func:`~pv4kit.analysis.audit.common.cutoffs`; 0.9 for MiniLM).

    Returns:
        Key columns plus ``ref_nearest_distractor`` (max cosine reference-distractor),
        ``nearest_distractor_letter``, ``ref_mean_distractor``, ``max_pair`` (closest pair of any two
        candidates), ``max_pair_letters``, ``near_duplicate_candidates``, ``ref_near_duplicate`` (the
        reference has a near-duplicate distractor), and, with rationales, ``rationale_pick``,
        ``rationale_correct``, ``rationale_margin``; and the ``embedder``'s name.
    """
    near_duplicate = cutoffs(embedder)["near_duplicate"] if near_duplicate is None else near_duplicate
    idx = answer_indices(questions)
    cand = _candidate_vectors(questions, embedder=embedder, cache=cache)
    sims = np.einsum("nkd,njd->nkj", cand, cand)
    n = len(questions)
    eye = np.eye(5, dtype=bool)
    present = np.array([[isinstance(c, str) and bool(c.strip()) for c in cs] for cs in questions["choices"]])
    both = present[:, :, None] & present[:, None, :]
    pair = np.where(eye[None] | ~both, -np.inf, sims)  # empty candidates pair with nothing
    flat = pair.reshape(n, 25).argmax(axis=1)
    ref_row = sims[np.arange(n), idx]  # (n, 5)
    mask = present.copy()  # the non-empty distractors
    mask[np.arange(n), idx] = False
    ref_d = np.where(mask, ref_row, -np.inf)
    nearest = ref_d.argmax(axis=1)
    out = _base(questions).assign(
        ref_nearest_distractor=ref_d.max(axis=1),
        nearest_distractor_letter=[LETTERS[j] for j in nearest],
        ref_mean_distractor=np.where(mask, ref_row, 0).sum(axis=1) / np.maximum(mask.sum(axis=1), 1),
        max_pair=pair.max(axis=(1, 2)),
        max_pair_letters=[LETTERS[f // 5] + LETTERS[f % 5] for f in flat],
    )
    out["near_duplicate_candidates"] = out["max_pair"] >= near_duplicate
    out["ref_near_duplicate"] = out["ref_nearest_distractor"] >= near_duplicate
    if "rationale" in questions and questions["rationale"].notna().any():
        has = questions["rationale"].notna().to_numpy()
        gens = questions.loc[has, QUESTION_KEY].assign(generation=questions.loc[has, "rationale"].astype(str))
        scored = score_frame(questions, gens, embedder=embedder, cache=cache, progress=False)
        scored = scored[[*QUESTION_KEY, "predicted_letter", "correct", "margin"]].rename(
            columns={
                "predicted_letter": "rationale_pick",
                "correct": "rationale_correct",
                "margin": "rationale_margin",
            }
        )
        out = out.merge(scored, on=QUESTION_KEY, how="left")
    return out.assign(embedder=embedder_name(embedder))


def duplicate_questions(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, threshold: float | None = None
) -> pd.DataFrame:
    """Pairs of questions of the same user whose cosine similarity is at least ``threshold``.

    ``threshold`` defaults to the embedder's ``duplicate_question`` cut-off
    (:func:`~pv4kit.analysis.audit.common.cutoffs`; 0.9 for MiniLM).

    Returns:
        ``user_id, question_index_a, question_index_b, similarity, question_a, question_b, embedder``
        sorted by similarity (highest first); empty when nothing crosses the threshold.
    """
    require_columns(questions, [*QUESTION_KEY, "question"], name="questions")
    threshold = cutoffs(embedder)["duplicate_question"] if threshold is None else threshold
    vecs = unit_rows(embed_texts(list(questions["question"]), embedder=embedder, cache=cache, progress=False))
    q = questions.reset_index(drop=True)
    left, right, sims = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
    for pos in q.groupby("user_id", sort=True).indices.values():  # positions, in row order, per user
        s = vecs[pos] @ vecs[pos].T
        a, b = np.nonzero(np.triu(s >= threshold, k=1))
        left.append(pos[a])
        right.append(pos[b])
        sims.append(s[a, b].astype(np.float64))
    a, b = np.concatenate(left), np.concatenate(right)
    column = {c: q[c].to_numpy() for c in ("user_id", "question_index", "question")}
    out = pd.DataFrame(
        {
            "user_id": column["user_id"][a].astype(np.int64),
            "question_index_a": column["question_index"][a].astype(np.int64),
            "question_index_b": column["question_index"][b].astype(np.int64),
            "similarity": np.concatenate(sims),
            "question_a": column["question"][a].astype(object),
            "question_b": column["question"][b].astype(object),
        }
    ).sort_values("similarity", ascending=False, ignore_index=True)
    return out.assign(embedder=embedder_name(embedder))
