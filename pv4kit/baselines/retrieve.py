"""Retrieval over one user's chats: dense (cosine of embeddings) or BM25.

As in the reference, a document is one whole chat and the query ``str(question).strip()``. Dense ranks as the
reference does (``dense_ranking="reference"``) or by float32 cosines with a stable sort (``"stable"``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.baselines.bm25 import BM25Index
from pv4kit.embeddings.models import embed_texts
from pv4kit.text import tokenize
from pv4kit.vectors import unit_rows

RETRIEVERS = ("dense", "bm25")
#: how dense similarities are ranked: the reference's (float16 vectors, torch's sort) or float32, stably
DENSE_RANKINGS = ("reference", "stable")


def stable_ranking(scores: np.ndarray) -> np.ndarray:
    """Positions by descending score; ties keep ascending position (a stable sort).

    Example:
        >>> stable_ranking(np.array([0.1, 0.5, 0.5, 0.2])).tolist()
        [1, 2, 3, 0]
    """
    scores = np.asarray(scores, dtype=np.float64)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    return np.argsort(-scores, kind="stable")


def dense_scores(query_vectors: np.ndarray, doc_vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity (float32) of each query to each document: shape ``(n_queries, n_docs)``."""
    q, d = unit_rows(query_vectors), unit_rows(doc_vectors)
    if q.ndim != 2 or d.ndim != 2 or q.shape[1] != d.shape[1]:
        raise ValueError(f"vectors: expected 2-D arrays of the same width, got {q.shape} and {d.shape}")
    return q @ d.T


def reference_ranking(
    query_vectors: np.ndarray, doc_vectors: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The reference's dense ranking of each question: ``(positions most similar first, similarities)``.

    ``evaluate_baselines.py: retrieve`` on float16 vectors, one question at a time; the similarities
    (float32) are per document, not in ranked order.
    """
    import torch
    import torch.nn.functional as F

    docs = F.normalize(torch.from_numpy(np.asarray(doc_vectors, dtype=np.float16)).float(), dim=1)
    out = []
    for vector in np.asarray(query_vectors, dtype=np.float16):
        question = F.normalize(torch.from_numpy(vector).float().unsqueeze(0), dim=1)
        similarities = (docs @ question.T).squeeze(1)
        out.append((similarities.argsort(descending=True).numpy(), similarities.numpy()))
    return out


def bm25_matrix(queries: Sequence[str], documents: Sequence[str], **kwargs: Any) -> np.ndarray:
    """BM25 scores of each query against the documents: ``(n_queries, n_docs)``."""
    index = BM25Index([tokenize(d) for d in documents], **kwargs)
    rows = [index.scores(tokenize(q)) for q in queries]
    return np.array(rows, dtype=np.float32).reshape(len(queries), len(documents))


def rank_questions(
    data: Any,
    questions: pd.DataFrame,
    *,
    retriever: str = "dense",
    embedder: Any = None,
    cache: str | os.PathLike[str] | bool | Any = True,
    top_k: int | None = None,
    dense_ranking: str = "reference",
) -> pd.DataFrame:
    """Each question's user's chats by similarity to the question, in the input row order.

    Returns ``user_id, question_index, ranked_ids`` (chat positions, most similar first, the first ``top_k``
    when given) and ``ranked_scores`` (their similarities). ``cache`` is the embedding cache
    (:func:`~pv4kit.embeddings.models.embed_texts`); ``dense_ranking``: see the module.
    """
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if retriever not in RETRIEVERS:
        raise ValueError(f"retriever must be one of {RETRIEVERS}, got {retriever!r}")
    if dense_ranking not in DENSE_RANKINGS:
        raise ValueError(f"dense_ranking must be one of {DENSE_RANKINGS}, got {dense_ranking!r}")
    if retriever == "dense" and embedder is None:
        raise ValueError("retriever='dense' needs an embedder (pv4kit.get_embedder('qwen3'))")
    frame = questions.reset_index(drop=True)
    ids_col: list[list[int]] = [[] for _ in range(len(frame))]
    score_col: list[list[float]] = [[] for _ in range(len(frame))]
    for uid, rows in frame.groupby("user_id", sort=True):
        docs = data.documents(int(uid))
        texts = [str(q).strip() for q in rows["question"]]
        if retriever == "dense" and docs:
            doc_vecs = embed_texts(list(docs), embedder=embedder, cache=cache, progress=False)
            q_vecs = embed_texts(texts, embedder=embedder, cache=cache, progress=False)
            if dense_ranking == "reference":
                ranked = reference_ranking(q_vecs, doc_vecs)
            else:
                ranked = [(stable_ranking(row), row) for row in dense_scores(q_vecs, doc_vecs)]
        else:  # BM25, or no chat to rank
            scores = bm25_matrix(texts, docs) if retriever == "bm25" else np.zeros((len(texts), 0))
            ranked = [(stable_ranking(row), row) for row in scores]
        for pos, (order, row_scores) in zip(rows.index, ranked, strict=True):
            order = order[:top_k]
            ids_col[pos] = [int(i) for i in order]
            score_col[pos] = [float(row_scores[i]) for i in order]
    out = frame[["user_id", "question_index"]].astype("int64")
    return out.assign(ranked_ids=ids_col, ranked_scores=score_col)


def retrieve(
    data: Any,
    questions: pd.DataFrame,
    *,
    top_k: int = 5,
    retriever: str = "dense",
    embedder: Any = None,
    cache: Any = True,
    dense_ranking: str = "reference",
) -> pd.DataFrame:
    """The top-``k`` chats per question: ``user_id, question_index, retrieved_ids, retrieved_scores``.

    ``k`` is ``min(top_k, number of chats)``, most similar first, as in the reference (``dense_ranking``: see
    :func:`rank_questions`).
    """
    options = dict(retriever=retriever, embedder=embedder, cache=cache, dense_ranking=dense_ranking)
    ranked = rank_questions(data, questions, top_k=top_k, **options)
    return ranked.rename(columns={"ranked_ids": "retrieved_ids", "ranked_scores": "retrieved_scores"})
