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


def test_dense_order_and_top_k_stable_option(make_fake_embedder):
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
    full = rank_questions(data, q, embedder=emb, cache=False, dense_ranking="stable")
    assert full["ranked_ids"].iloc[0] == [2, 1, 0, 3]  # the 0/3 tie keeps chat order
    top = retrieve(data, q, top_k=2, embedder=emb, cache=False, dense_ranking="stable")
    assert top["retrieved_ids"].iloc[0] == [2, 1]
    assert top["retrieved_scores"].iloc[0][0] == pytest.approx(1 / np.sqrt(1.01))  # float32, not rounded
    assert len(retrieve(data, q, top_k=10, embedder=emb, cache=False)["retrieved_ids"].iloc[0]) == 4
    ref = retrieve(data, q, top_k=2, embedder=emb, cache=False)  # the reference's float16 store
    assert ref["retrieved_ids"].iloc[0] == [2, 1]
    assert ref["retrieved_scores"].iloc[0][0] == pytest.approx(1 / np.sqrt(1 + np.float16(0.1) ** 2))


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


# --------------------------------------------------------------------------- the reference's ranking


class _Chats:
    """A data object with one user's chats (what rank_questions reads)."""

    def __init__(self, chats):
        self.chats = list(chats)

    def documents(self, uid):
        return self.chats


def _reference_top_k(doc_vectors, question_vector, top_k):
    """A transcription of the reference's ``evaluate_baselines.py: retrieve`` lines on its float16 store."""
    import torch
    import torch.nn.functional as F

    documents = F.normalize(torch.from_numpy(doc_vectors.astype(np.float16)).float(), dim=1)
    question = F.normalize(torch.from_numpy(question_vector.astype(np.float16)).float().unsqueeze(0), dim=1)
    similarities = (documents @ question.T).squeeze(1)
    return similarities.argsort(descending=True)[: min(top_k, len(doc_vectors))].tolist()


def test_tied_chats_fall_as_the_reference_on_this_torch_build(make_fake_embedder):
    import torch

    chats = ["the same chat"] * 17
    emb = make_fake_embedder({"the same chat": [1.0, 2.0, 3.0, 4.0], "q": [4.0, 3.0, 2.0, 1.0]})
    q = _questions(None, 7, ["q"])
    got = retrieve(_Chats(chats), q, top_k=5, embedder=emb, cache=False)["retrieved_ids"].iloc[0]
    assert got == _reference_top_k(np.array([[1.0, 2.0, 3.0, 4.0]] * 17), np.array([4.0, 3.0, 2.0, 1.0]), 5)
    if torch.__version__.startswith("2.13."):  # the reference's lines run on torch 2.13.0+cpu: chat 8 first
        assert got == [8, 16, 15, 14, 13]
    stable = retrieve(_Chats(chats), q, top_k=5, embedder=emb, cache=False, dense_ranking="stable")
    assert stable["retrieved_ids"].iloc[0] == [0, 1, 2, 3, 4]  # pv4kit's option: ties in chat order
    # top_k past the number of chats keeps them all, min(top_k, n) as the reference
    assert len(retrieve(_Chats(chats), q, top_k=40, embedder=emb, cache=False)["retrieved_ids"].iloc[0]) == 17


def test_near_ties_rank_as_the_reference_from_float16_vectors(make_fake_embedder):
    rng = np.random.default_rng(0)
    base = rng.standard_normal(64)
    docs = (base + 1e-3 * rng.standard_normal((40, 64))).astype(np.float32)
    questions = (base + 1e-3 * rng.standard_normal((60, 64))).astype(np.float32)
    table = {f"chat {i}": v for i, v in enumerate(docs)}
    table |= {f"question {j}": v for j, v in enumerate(questions)}
    emb = make_fake_embedder(table)
    data = _Chats([f"chat {i}" for i in range(40)])
    q = _questions(None, 7, [f"question {j}" for j in range(60)])
    got = retrieve(data, q, top_k=5, embedder=emb, cache=False)
    want = [_reference_top_k(docs, v, 5) for v in questions]
    assert got["retrieved_ids"].tolist() == want
    stable = retrieve(data, q, top_k=5, embedder=emb, cache=False, dense_ranking="stable")
    assert stable["retrieved_ids"].tolist() != want  # float32 and a stable sort rank these otherwise
    with pytest.raises(ValueError, match="dense_ranking"):
        retrieve(data, q, embedder=emb, dense_ranking="float32")
