"""Okapi BM25 scoring and a simple tokenizer, with no dependency beyond numpy.

Used by the Re-Centering stage-2 baseline (prompt -> user attributes) and by retrieval over a user's
chats. The scoring follows Robertson & Zaragoza (2009) with the non-negative IDF used by Lucene::

    idf(t)   = log(1 + (N - n_t + 0.5) / (n_t + 0.5))
    score(d) = sum_{t in q} idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

where ``N`` is the number of documents, ``n_t`` the number of documents containing ``t`` and ``avgdl``
the mean document length in tokens. A query term repeated in the query counts once per occurrence.

Example:
    >>> from pv4kit.answer.bm25 import bm25_scores, tokenize
    >>> docs = [tokenize(d) for d in ["I like hiking in the Alps", "I cook Italian food"]]
    >>> bm25_scores(tokenize("hiking trip"), docs).argmax()
    np.int64(0)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from pv4kit.text import STOPWORDS, tokenize

__all__ = ["ENGLISH_STOPWORDS", "bm25_scores", "tokenize"]

ENGLISH_STOPWORDS = STOPWORDS  # the name pv4kit 0.1 used


def bm25_scores(
    query_tokens: Sequence[str],
    doc_tokens_list: Sequence[Sequence[str]],
    *,
    k1: float = 1.5,
    b: float = 0.75,
) -> np.ndarray:
    """BM25 score of every document for one query.

    The corpus statistics (document frequencies, mean length) come from ``doc_tokens_list`` itself, so
    score a query against the whole collection it should be compared within.

    Args:
        query_tokens: The query, already tokenized (see :func:`tokenize`).
        doc_tokens_list: One token list per document.
        k1: Term-frequency saturation, ``>= 0``.
        b: Length normalisation, in ``[0, 1]``.

    Returns:
        ``float64`` array with one score per document (0 for documents sharing no term with the query;
        an empty corpus gives an empty array).

    Raises:
        ValueError: If ``k1`` or ``b`` is out of range.
    """
    if k1 < 0:
        raise ValueError(f"k1 must be >= 0, got {k1!r}")
    if not 0.0 <= b <= 1.0:
        raise ValueError(f"b must be in [0, 1], got {b!r}")
    n_docs = len(doc_tokens_list)
    scores = np.zeros(n_docs, dtype=np.float64)
    if n_docs == 0 or not query_tokens:
        return scores
    counts = [Counter(doc) for doc in doc_tokens_list]
    lengths = np.array([len(doc) for doc in doc_tokens_list], dtype=np.float64)
    avgdl = float(lengths.mean()) or 1.0
    norm = k1 * (1.0 - b + b * lengths / avgdl)
    df: Counter[str] = Counter()
    for c in counts:
        df.update(c.keys())
    for term in query_tokens:
        n_t = df.get(term, 0)
        if n_t == 0:
            continue
        idf = math.log(1.0 + (n_docs - n_t + 0.5) / (n_t + 0.5))
        tf = np.array([c.get(term, 0) for c in counts], dtype=np.float64)
        scores += idf * tf * (k1 + 1.0) / (tf + norm)
    return scores
