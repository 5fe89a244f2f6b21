"""Retrieval: stable ranking, dense and BM25 order, top-k, and chats embedded once through the cache."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pv4kit.baselines.retrieve import dense_scores, rank_questions, retrieve, stable_ranking
from tests.test_baselines import _data


def _questions(data, uid, texts):
    return pd.DataFrame({"user_id": uid, "question_index": range(len(texts)), "question": texts})


def test_stable_ranking_breaks_ties_by_chat_index():
    assert stable_ranking(np.array([0.5, 0.9, 0.5, 0.9, 0.1])).tolist() == [1, 3, 0, 2, 4]
    assert stable_ranking(np.array([np.nan, 0.0, 0.0])).tolist() == [1, 2, 0]
    assert stable_ranking(np.zeros(4)).tolist() == [0, 1, 2, 3]


def test_dense_scores_are_cosines():
    s = dense_scores(np.array([[2.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 3.0], [1.0, 1.0]]))
    assert s.dtype == np.float32
    np.testing.assert_allclose(s[0], [1.0, 0.0, np.sqrt(0.5)], rtol=1e-6)
    with pytest.raises(ValueError, match="same width"):
        dense_scores(np.ones((1, 2)), np.ones((2, 3)))


def test_dense_order_and_top_k(make_fake_embedder):
    data = _data()
    emb = make_fake_embedder(
        {
            "where do I live": [1, 0],
            "I am vegan.": [0, 1],
            "I play chess online.": [0.5, 0.5],
            "I live in Oslo.": [1, 0.1],
            "I teach piano.": [0, 1],  # ties with "I am vegan."
        }
    )
    q = _questions(data, 131, ["  where do I live  "])  # stripped before embedding
    full = rank_questions(data, q, embedder=emb, cache=False)
    assert full["ranked_ids"].iloc[0] == [2, 1, 0, 3]  # the 0/3 tie keeps chat order
    top = retrieve(data, q, top_k=2, embedder=emb, cache=False)
    assert top["retrieved_ids"].iloc[0] == [2, 1]
    assert top["retrieved_scores"].iloc[0][0] == pytest.approx(1 / np.sqrt(1.01))
    assert len(retrieve(data, q, top_k=10, embedder=emb, cache=False)["retrieved_ids"].iloc[0]) == 4


def test_bm25_order():
    data = _data()
    q = _questions(data, 130, ["my dog at the beach", "bike repair"])
    out = retrieve(data, q, top_k=3, retriever="bm25")
    assert out["retrieved_ids"].iloc[0][0] == 1
    assert out["retrieved_ids"].iloc[1][0] == 2
    # chats without a query term score 0 and keep chat order behind the match
    assert out["retrieved_ids"].iloc[1] == [2, 0, 1]


def test_chats_are_embedded_once_through_the_cache(tmp_path, fake_embedder):
    data = _data()
    q1 = _questions(data, 130, ["first question"])
    q2 = _questions(data, 130, ["second question", "third question"])
    rank_questions(data, q1, embedder=fake_embedder, cache=tmp_path)
    assert fake_embedder.n_encoded == 3 + 1
    rank_questions(data, q2, embedder=fake_embedder, cache=tmp_path)
    assert fake_embedder.n_encoded == 3 + 1 + 2  # only the new questions
    rank_questions(data, q2, embedder=fake_embedder, cache=tmp_path)
    assert fake_embedder.n_encoded == 6


def test_bad_arguments():
    data = _data()
    q = _questions(data, 130, ["x"])
    with pytest.raises(ValueError, match="retriever"):
        rank_questions(data, q, retriever="splade")
    with pytest.raises(ValueError, match="embedder"):
        rank_questions(data, q)
    with pytest.raises(ValueError, match="top_k"):
        rank_questions(data, q, retriever="bm25", top_k=0)
