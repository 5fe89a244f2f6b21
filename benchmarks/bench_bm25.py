"""BM25 ranking of one release-sized user: ``bm25s`` (pv4kit today) against the hand-written loop it replaced.

The user is grown from one sample user the way :mod:`grow` grows the tree: 200 chats (the sample's chats
repeated, each with a ``(u<id> t<i>)`` variant tag, so every text is unique) and 150 questions (10
categories x 15, the sample's questions repeated with a ``(u<id> c<c> q<j>)`` tag). Both sides rank every
chat for every question (the full ranking ``full --truncation relevance`` needs; ``rag`` keeps its top k)
from the same pv4kit tokens; the timing covers indexing and scoring, tokenizing included, after one
warm-up run (``import bm25s`` is timed on its own). The rankings are checked to be identical.

Usage: ``python benchmarks/bench_bm25.py [--raw raw] [--user 131] [--chats 200] [--questions 150]
[--repeats 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.test_bm25 import handwritten_bm25  # noqa: E402  (the old loop, kept as the tests' check)


def grown_user(raw: str, user: int, *, n_chats: int, n_questions: int) -> tuple[list[str], list[str]]:
    """The chats and questions of ``user`` grown to ``n_chats`` and ``n_questions`` (variant-tagged)."""
    from pv4kit.dataset.load import load

    data = load(raw)
    chats = data.documents(user)
    questions = data.questions.loc[data.questions["user_id"] == user, "question"].tolist()
    grown_chats = [chats[i % len(chats)].rstrip() + f" (u{user} t{i})" for i in range(n_chats)]
    per_category = 15
    grown_questions = [
        f"{questions[k % len(questions)].strip()} (u{user} c{k // per_category} q{k % per_category})"
        for k in range(n_questions)
    ]
    return grown_chats, grown_questions


def handwritten_matrix(queries: list[str], documents: list[str]) -> np.ndarray:
    """What ``bm25_matrix`` did before: tokens once, then the loop over the corpus for every query."""
    from pv4kit.text import tokenize

    doc_tokens = [tokenize(d) for d in documents]
    out = np.zeros((len(queries), len(documents)), dtype=np.float32)
    for i, q in enumerate(queries):
        out[i] = handwritten_bm25(tokenize(q), doc_tokens)
    return out


def _timed(fn, repeats: int) -> tuple[float, np.ndarray]:
    result = fn()  # warm-up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--raw", default=str(ROOT / "raw"))
    p.add_argument("--user", type=int, default=131)
    p.add_argument("--chats", type=int, default=200)
    p.add_argument("--questions", type=int, default=150)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    chats, questions = grown_user(args.raw, args.user, n_chats=args.chats, n_questions=args.questions)
    start = time.perf_counter()
    import bm25s  # noqa: F401

    import_s = time.perf_counter() - start
    from pv4kit.baselines.retrieve import bm25_matrix, stable_ranking

    new_s, new = _timed(lambda: bm25_matrix(questions, chats), args.repeats)
    old_s, old = _timed(lambda: handwritten_matrix(questions, chats), args.repeats)
    same = all(
        stable_ranking(a).tolist() == stable_ranking(b).tolist() for a, b in zip(new, old, strict=True)
    )
    chars = sum(map(len, chats))
    print(
        f"user {args.user} grown to {len(chats)} chats ({chars / len(chats):.0f} chars each on average), "
        f"{len(questions)} questions; median of {args.repeats} runs after a warm-up"
    )
    print(f"  bm25s (pv4kit.baselines.retrieve.bm25_matrix): {new_s * 1000:9.1f} ms")
    print(f"  hand-written loop (pv4kit 0.1):            {old_s * 1000:9.1f} ms")
    print(f"  speed-up {old_s / new_s:.1f}x; import bm25s once: {import_s * 1000:.0f} ms")
    print(f"  rankings identical: {same}; max |score difference| {float(np.abs(new - old).max()):.2e}")


if __name__ == "__main__":
    main()
