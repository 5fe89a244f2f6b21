import math

import numpy as np
import pytest

from pv4kit.baselines.bm25 import bm25_scores
from pv4kit.text import tokenize


def test_tokenize_lowercases_drops_stopwords_and_keeps_apostrophes():
    assert tokenize("The user's Dog, and 2 CATS!") == ["user's", "dog", "2", "cats"]
    assert tokenize("The dog", stopwords=None) == ["the", "dog"]
    assert tokenize("Ab c", min_length=2, stopwords=None, lowercase=False) == ["Ab"]
    assert tokenize(None) == [] and tokenize(float("nan")) == []


def test_bm25_matches_hand_computation():
    docs = [["hiking", "alps", "hiking"], ["cooking", "pasta"], ["hiking"]]
    k1, b = 1.5, 0.75
    scores = bm25_scores(["hiking"], docs, k1=k1, b=b)
    # N=3, n_t=2 -> idf = log(1 + (3-2+0.5)/(2+0.5)) = log(1.6); avgdl = 2
    idf = math.log(1.6)
    d0 = idf * 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 3 / 2))
    d2 = idf * 1 * (k1 + 1) / (1 + k1 * (1 - b + b * 1 / 2))
    np.testing.assert_allclose(scores, [d0, 0.0, d2])
    # a repeated query term counts twice; unknown terms add nothing
    np.testing.assert_allclose(bm25_scores(["hiking", "hiking", "zzz"], docs), 2 * scores)


def test_bm25_edge_cases_and_parameter_errors():
    assert bm25_scores(["a"], []).shape == (0,)
    assert bm25_scores([], [["a"]]).tolist() == [0.0]
    assert bm25_scores(["a"], [[], ["a"]])[1] > 0
    with pytest.raises(ValueError, match="k1"):
        bm25_scores(["a"], [["a"]], k1=-1)
    with pytest.raises(ValueError, match="b must"):
        bm25_scores(["a"], [["a"]], b=2)


# --------------------------------------------------------------------------- the hand-written formula


def handwritten_bm25(query_tokens, doc_tokens_list, *, k1=1.5, b=0.75):
    """pv4kit 0.1's own BM25 loop (Lucene IDF, k1 + 1 in the numerator), kept here as the check."""
    from collections import Counter

    n_docs = len(doc_tokens_list)
    scores = np.zeros(n_docs, dtype=np.float64)
    if n_docs == 0 or not query_tokens:
        return scores
    counts = [Counter(doc) for doc in doc_tokens_list]
    lengths = np.array([len(doc) for doc in doc_tokens_list], dtype=np.float64)
    avgdl = float(lengths.mean()) or 1.0
    norm = k1 * (1.0 - b + b * lengths / avgdl)
    df = Counter()
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


def test_bm25s_agrees_with_the_handwritten_formula_on_the_sample():
    """Every test user's chats ranked for each of their questions: same order, scores within 1e-6."""
    from pv4kit.baselines.bm25 import BM25Index
    from pv4kit.baselines.retrieve import bm25_matrix, stable_ranking
    from tests.answer_cases import sample_data

    data = sample_data()
    questions = data.split("test")
    n_compared = 0
    for uid, rows in questions.groupby("user_id"):
        docs = data.documents(int(uid))
        doc_tokens = [tokenize(d) for d in docs]
        index = BM25Index(doc_tokens)
        texts = [str(q).strip() for q in rows["question"]]
        matrix = bm25_matrix(texts, docs)
        for text, row in zip(texts, matrix, strict=True):
            want = handwritten_bm25(tokenize(text), doc_tokens)
            got = index.scores(tokenize(text))
            assert stable_ranking(got).tolist() == stable_ranking(want).tolist(), (uid, text)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
            np.testing.assert_allclose(bm25_scores(tokenize(text), doc_tokens), want, rtol=0, atol=1e-6)
            assert row.tolist() == want.astype(np.float32).tolist()  # what retrieval keeps, bit for bit
            assert (want > 0).sum() > 0
            n_compared += 1
    assert n_compared == len(questions) == 56


@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (0.0, 0.0), (2.0, 1.0), (1.2, 0.3)])
def test_bm25s_agrees_on_repeats_empty_documents_and_parameters(k1, b):
    docs = [["hiking", "alps", "hiking"], [], ["cooking", "pasta", "pasta", "hiking"], ["alps"], ["x"] * 9]
    for query in (["hiking", "hiking", "zzz"], ["alps", "pasta"], ["zzz"], ["x", "alps", "x"]):
        got = bm25_scores(query, docs, k1=k1, b=b)
        with np.errstate(invalid="ignore"):
            want = handwritten_bm25(query, docs, k1=k1, b=b)
        assert not np.isnan(got).any()
        if np.isnan(want).any():  # k1 = 0, or b = 1 with an empty document: the loop divided 0 by 0 where
            assert k1 == 0 or b == 1  # a term is absent; such a term adds 0, as documented
            with np.errstate(invalid="ignore"):
                per_term = [handwritten_bm25([t], docs, k1=k1, b=b) for t in query]
            want = np.sum([np.nan_to_num(s, nan=0.0) for s in per_term], axis=0)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert bm25_scores(["a"], [[], []]).tolist() == [0.0, 0.0]  # no term in the collection at all
