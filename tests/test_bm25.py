import math

import numpy as np
import pytest

from pv4kit.answer.bm25 import bm25_scores, tokenize


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
