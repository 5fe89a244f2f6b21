"""Okapi BM25 scoring and a simple tokenizer, with no dependency beyond numpy.

Used by the Re-Centering stage-2 baseline (prompt -> user attributes) and by retrieval over a user's
chats. The scoring follows Robertson & Zaragoza (2009) with the non-negative IDF used by Lucene::

    idf(t)   = log(1 + (N - n_t + 0.5) / (n_t + 0.5))
    score(d) = sum_{t in q} idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

where ``N`` is the number of documents, ``n_t`` the number of documents containing ``t`` and ``avgdl``
the mean document length in tokens. A query term repeated in the query counts once per occurrence.

Example:
    >>> from pv4kit.bm25 import bm25_scores, tokenize
    >>> docs = [tokenize(d) for d in ["I like hiking in the Alps", "I cook Italian food"]]
    >>> bm25_scores(tokenize("hiking trip"), docs).argmax()
    np.int64(0)
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["ENGLISH_STOPWORDS", "bm25_scores", "tokenize"]

# a short English stop-word list (articles, pronouns, auxiliaries, prepositions); deliberately small
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """a an the and or but if then else of to in on at by for with from as into about over under
    is are was were be been being am do does did doing have has had having i me my mine we our ours you
    your yours he him his she her hers it its they them their theirs this that these those there here
    what which who whom whose when where why how not no nor so than too very can will just should would
    could may might must shall s t""".split()
)

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


def tokenize(
    text: str,
    *,
    lowercase: bool = True,
    stopwords: Iterable[str] | None = ENGLISH_STOPWORDS,
    min_length: int = 1,
) -> list[str]:
    """Split ``text`` into word tokens (letters and digits; an inner apostrophe is kept).

    Args:
        text: The text to split; ``None`` or NaN gives an empty list.
        lowercase: Lower-case the tokens (recommended for BM25).
        stopwords: Tokens to drop, compared after lower-casing; ``None`` keeps every token.
        min_length: Drop tokens shorter than this many characters.

    Returns:
        The tokens in order of appearance.
    """
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return []
    tokens = _TOKEN.findall(str(text))
    if lowercase:
        tokens = [t.lower() for t in tokens]
    stop = frozenset(stopwords) if stopwords is not None else frozenset()
    return [t for t in tokens if len(t) >= min_length and t.lower() not in stop]


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
