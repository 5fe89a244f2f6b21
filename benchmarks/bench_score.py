"""CPU scoring benchmark: pv4kit's cached scorer vs a naive scorer that re-embeds everything.

Full-size synthetic test split (30 users x 141 questions, ~300-char questions, 5 choices of ~80 chars,
~200-char generations), all-MiniLM-L6-v2 on CPU, all in one process:

1. pv4kit ``score_frame``, first run (cold embedding cache: generations + all candidates);
2. pv4kit ``score_frame``, second run with new generations (warm cache: only generations are embedded);
3. naive: embed the generation and the five candidates of every question on every run (no dedup, no cache).

Usage: ``python benchmarks/bench_score.py [--users 30] [--per-user 141] [--batch-size 64]``
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time

import numpy as np
import pandas as pd

WORDS = (
    "the a my your our weekend morning evening coffee tea garden hiking trail book novel jazz piano guitar "
    "recipe pasta curry bread bike commute office meeting project deadline sister brother friend dog cat "
    "travel beach mountain city museum film series podcast running yoga swim budget savings apartment "
    "kitchen plants music quiet loud early late prefer usually often never always enjoy avoid because "
    "with without during after before about really quite simple detailed short long warm cold spicy sweet "
    "vintage modern classic local organic homemade weekly daily vacation camping photography painting"
).split()


def _text(rng: np.random.Generator, n_chars: int) -> str:
    words = []
    total = 0
    while total < n_chars:
        w = WORDS[rng.integers(len(WORDS))]
        words.append(w)
        total += len(w) + 1
    return " ".join(words).capitalize() + "."


def synthetic_split(n_users: int, per_user: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        for i in range(per_user):
            choices = [_text(rng, int(rng.normal(80, 15))) for _ in range(5)]
            a = int(rng.integers(5))
            rows.append(
                {
                    "user_id": 126 + u,
                    "split": "test",
                    "question_index": i,
                    "category": int(rng.integers(1, 11)),
                    "category_name": None,
                    "question": _text(rng, int(rng.normal(300, 40))),
                    "choices": choices,
                    "answer": choices[a],
                    "answer_letter": "ABCDE"[a],
                    "hard": bool(rng.random() < 0.2),
                    "rationale": None,
                }
            )
    return pd.DataFrame(rows)


def synthetic_generations(questions: pd.DataFrame, seed: int, chars: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return questions[["user_id", "question_index", "split"]].assign(
        generation=[_text(rng, int(rng.normal(chars, chars * 0.15))) for _ in range(len(questions))]
    )


def naive_score(questions: pd.DataFrame, gens: pd.DataFrame, embedder, batch_size: int) -> np.ndarray:
    """The reference's shape without its caching gaps fixed: 6 texts per question, every run."""
    texts = []
    for g, choices in zip(gens["generation"], questions["choices"], strict=True):
        texts.append(g.strip())
        texts.extend(choices)
    vecs = embedder.encode(texts, batch_size=batch_size).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs.reshape(len(questions), 6, -1)
    sims = np.einsum("nd,nkd->nk", vecs[:, 0], vecs[:, 1:])
    return sims.argmax(axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--per-user", type=int, default=141)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--generation-chars", type=int, default=200, help="mean generation length")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import torch

    from pv4kit.embeddings.cache import EmbeddingCache
    from pv4kit.embeddings.models import get_embedder
    from pv4kit.scoring.score import score_frame

    t0 = time.perf_counter()
    embedder = get_embedder("minilm", device="cpu", batch_size=args.batch_size)
    load_s = time.perf_counter() - t0
    questions = synthetic_split(args.users, args.per_user)
    gens1 = synthetic_generations(questions, 1, args.generation_chars)
    gens2 = synthetic_generations(questions, 2, args.generation_chars)
    n = len(questions)
    print(
        f"questions: {n} ({args.users} users x {args.per_user}); torch threads {torch.get_num_threads()}; "
        f"model load {load_s:.2f} s"
    )
    for col, frame in (("question", questions), ("generation", gens1)):
        print(f"  mean {col} length: {frame[col].str.len().mean():.0f} chars")
    print(f"  mean choice length: {np.mean([len(c) for cs in questions['choices'] for c in cs]):.0f} chars")

    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(tmp)
        t = time.perf_counter()
        p1 = score_frame(questions, gens1, embedder=embedder, cache=cache, progress=False)
        first = time.perf_counter() - t
        t = time.perf_counter()
        p2 = score_frame(questions, gens2, embedder=embedder, cache=cache, progress=False)
        second = time.perf_counter() - t
        rows = cache.count(embedder.cache_key)
    t = time.perf_counter()
    naive_pred = naive_score(questions, gens2, embedder, args.batch_size)
    naive = time.perf_counter() - t
    agree = float(np.mean(np.array(["ABCDE"[i] for i in naive_pred]) == p2["predicted_letter"].to_numpy()))

    print(f"pv4kit first run (cold cache):  {first:7.2f} s  ({6 * n / first:6.0f} texts/s of {6 * n})")
    print(f"pv4kit second run (warm cache): {second:7.2f} s")
    print(f"naive (6 texts/question):       {naive:7.2f} s")
    print(f"speed-up second run vs naive:   {naive / second:7.2f} x")
    # a warm run still encodes every generation: the best it can do is naive's tokens over the generations'
    tok = embedder.model.tokenizer
    gen_tokens = sum(len(tok(t)["input_ids"]) for t in gens2["generation"])
    all_tokens = gen_tokens + sum(len(tok(c)["input_ids"]) for cs in questions["choices"] for c in cs)
    print(
        f"token-volume bound on that speed-up (naive / generation tokens): {all_tokens / gen_tokens:5.2f} x"
    )
    print(
        f"cache rows after two runs: {rows}; naive/pv4kit prediction agreement: {agree:.4f}; "
        f"accuracy run1 {p1['correct'].mean():.3f}, run2 {p2['correct'].mean():.3f}"
    )


if __name__ == "__main__":
    main()
