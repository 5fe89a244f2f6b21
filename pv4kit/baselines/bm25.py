"""Okapi BM25 through the ``bm25s`` package, on pv4kit's own tokens.

Tokens come from :func:`pv4kit.text.tokenize`; ``bm25s`` scores them as token ids (``method="atire"``,
``idf_method="lucene"``, float64), which is Robertson & Zaragoza (2009) with Lucene's non-negative IDF::

    idf(t)   = log(1 + (N - n_t + 0.5) / (n_t + 0.5))
    score(d) = sum_{t in q} idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["BM25Index", "bm25_scores"]


class BM25Index:
    """A BM25 index of one collection of tokenized documents (its corpus statistics), scored for many queries.

    ``doc_tokens_list``: one token list per document (:func:`pv4kit.text.tokenize`); ``k1 >= 0``:
    term-frequency saturation; ``b`` in ``[0, 1]``: length normalisation.
    """

    def __init__(self, doc_tokens_list: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75):
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1!r}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {b!r}")
        self.n_docs = len(doc_tokens_list)
        self.vocab: dict[str, int] = {}
        ids = [[self.vocab.setdefault(t, len(self.vocab)) for t in doc] for doc in doc_tokens_list]
        self._model = None
        if self.vocab:  # bm25s needs a term; a collection without one scores 0 everywhere
            import bm25s  # heavy (scipy.sparse, numba): only when something is scored

            self._model = bm25s.BM25(k1=k1, b=b, method="atire", idf_method="lucene", dtype="float64")
            self._model.index((ids, self.vocab), create_empty_token=False, show_progress=False)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """``float64`` BM25 score of every document for one tokenized query (0 where no term is shared)."""
        ids = [self.vocab[t] for t in query_tokens if t in self.vocab]
        if self._model is None or not ids:
            return np.zeros(self.n_docs, dtype=np.float64)
        return np.asarray(self._model.get_scores_from_ids(ids), dtype=np.float64)


def bm25_scores(
    query_tokens: Sequence[str], doc_tokens_list: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75
) -> np.ndarray:
    """``float64`` BM25 score of every document for one tokenized query (:class:`BM25Index` for many).

    Example:
        >>> docs = [tokenize(d) for d in ["I like hiking in the Alps", "I cook Italian food"]]
        >>> bm25_scores(tokenize("hiking trip"), docs).argmax()
        np.int64(0)
    """
    return BM25Index(doc_tokens_list, k1=k1, b=b).scores(query_tokens)
