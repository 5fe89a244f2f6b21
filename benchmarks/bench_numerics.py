"""How many predictions change between the reference's float16 cosine and pv4kit's float32 option.

Two measurements, both CPU-only:

1. **The sample** (``raw/``, all 168 questions of its six users) with the real all-MiniLM-L6-v2 model:
   every question is answered with two generations that need no LLM, its own question text and its
   rationale, and scored with ``numerics="float16"`` (the default) and ``"float32"``. ``--run DIR`` (any
   number) adds the generations of scored runs, e.g. ``runs/demo_*`` after ``make demo``.
2. **Synthetic 2,560-wide vectors** (Qwen3-Embedding-4B's width), unit length like its output, in two
   shapes: ``related`` (each candidate's cosine to the generation drawn from N(0.6, 0.05), the spread of
   five related answers) and ``random`` (independent Gaussian directions, cosines near 0); ``--n`` questions
   (default 4,237, the release's test split) per seed, seeds 0-2.

For each: the number of questions whose predicted letter differs, and the ties (equal best similarity) in
each arithmetic. Usage: ``python benchmarks/bench_numerics.py [--n 4237] [--run runs/demo_no_docs]``.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import pandas as pd

DIM = 2560


def _compare(sims16: np.ndarray, sims32: np.ndarray, mask: np.ndarray) -> dict[str, int]:
    s16 = np.where(mask, sims16, -np.inf)
    s32 = np.where(mask, sims32, -np.inf)
    p16, p32 = s16.argmax(axis=1), s32.argmax(axis=1)
    ties16 = (s16 == s16.max(axis=1, keepdims=True)).sum(axis=1) > 1
    ties32 = (s32 == s32.max(axis=1, keepdims=True)).sum(axis=1) > 1
    return {
        "n": len(p16),
        "differ": int((p16 != p32).sum()),
        "ties_float16": int(ties16.sum()),
        "ties_float32": int(ties32.sum()),
    }


def synthetic(n: int, *, shape: str, seed: int) -> dict[str, int]:
    """Score ``n`` synthetic questions (five candidates each) in both numerics."""
    from pv4kit.scoring.score import candidate_similarities

    rng = np.random.default_rng(seed)
    totals = {"n": 0, "differ": 0, "ties_float16": 0, "ties_float32": 0}
    for start in range(0, n, 500):
        m = min(500, n - start)
        q = rng.standard_normal((m, DIM)).astype(np.float32)
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        noise = rng.standard_normal((m, 5, DIM)).astype(np.float32)
        if shape == "related":
            noise -= np.einsum("ijd,id->ij", noise, q)[..., None] * q[:, None, :]
            noise /= np.linalg.norm(noise, axis=2, keepdims=True)
            cos = np.clip(rng.normal(0.6, 0.05, (m, 5)), -1, 1).astype(np.float32)[..., None]
            cand = cos * q[:, None, :] + np.sqrt(1 - cos**2) * noise
        else:
            cand = noise / np.linalg.norm(noise, axis=2, keepdims=True)
        cand = cand.reshape(m * 5, DIM)
        mask = np.ones((m, 5), dtype=bool)
        got = _compare(
            candidate_similarities(q, cand, mask, numerics="float16"),
            candidate_similarities(q, cand, mask, numerics="float32"),
            mask,
        )
        totals = {k: totals[k] + got[k] for k in totals}
    return totals


def sample(raw: str, runs: list[str]) -> pd.DataFrame:
    """Score the sample's questions with MiniLM in both numerics, per generation source."""
    from pv4kit.dataset.load import load
    from pv4kit.embeddings.models import get_embedder
    from pv4kit.scoring.runs import read_generations
    from pv4kit.scoring.score import score_frame

    data = load(raw)
    q = data.questions
    sources = {
        "question text": q["question"].astype(str),
        "rationale": q["rationale"].fillna("").astype(str),
    }
    frames = {
        name: q[["user_id", "question_index", "split"]].assign(generation=gen.to_numpy())
        for name, gen in sources.items()
    }
    for run in runs:
        frames[run] = read_generations(run)
    embedder = get_embedder("minilm", device="cpu")
    rows = []
    for name, gens in frames.items():
        p16 = score_frame(q, gens, embedder=embedder, cache=False, progress=False)
        p32 = score_frame(q, gens, embedder=embedder, cache=False, progress=False, numerics="float32")
        rows.append(
            {
                "generations": name,
                "n": len(p16),
                "differ": int((p16["predicted_letter"] != p32["predicted_letter"]).sum()),
                "correct_float16": int(p16["correct"].sum()),
                "correct_float32": int(p32["correct"].sum()),
                "ties_float16": int(p16["tie"].sum()),
                "ties_float32": int(p32["tie"].sum()),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", default="raw", help="the sample's raw tree")
    parser.add_argument("--run", action="append", default=[], help="also measure a run's generations")
    parser.add_argument("--n", type=int, default=4237, help="synthetic questions per seed")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    t0 = time.perf_counter()
    print("sample, all-MiniLM-L6-v2 (384-d):")
    print(sample(args.raw, args.run).to_string(index=False))
    print(f"  ({time.perf_counter() - t0:.1f} s)")
    for shape in ("related", "random"):
        t0 = time.perf_counter()
        rows = [synthetic(args.n, shape=shape, seed=s) | {"seed": s} for s in range(args.seeds)]
        table = pd.DataFrame(rows)
        total = table[["n", "differ", "ties_float16", "ties_float32"]].sum()
        print(f"\nsynthetic {DIM}-d, {shape}:")
        print(table.to_string(index=False))
        print(
            f"  total: {total['differ']} of {total['n']} predictions differ "
            f"({100 * total['differ'] / total['n']:.2f}%); ties float16 {total['ties_float16']}, "
            f"float32 {total['ties_float32']} ({time.perf_counter() - t0:.1f} s)"
        )


if __name__ == "__main__":
    main()
