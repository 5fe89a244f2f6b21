"""The floor of notebook 02's cold time: the texts its audit must embed, and how fast MiniLM embeds them.

Counts the distinct texts ``run_audit`` embeds (questions, answer choices, rationales, category names)
and their MiniLM tokens in a built data folder (the release-sized tree of ``bench_notebooks.py``), then
times the CPU embedder on a sample drawn in the same mix, longest first as ``embed_texts`` orders them,
and projects the time for all of them. It also prints the arithmetic bound: MiniLM-L6 does about 21
MFLOP per token (6 layers of 384 x 384 attention projections and a 384 x 1536 feed-forward), so the
whole job needs ``tokens x 21 MFLOP``, which even at the machine's fp32 peak (``--peak-gflops``; by default
AVX2 FMA's 32 FLOP per cycle x the cores x the clock ``/proc/cpuinfo`` reports) takes the seconds printed.
Issue 15's target for 02 cold is 240 s.

    .venv/bin/python benchmarks/bench_audit_floor.py --data /tmp/bench-nb/data [--sample 3000]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FLOP_PER_TOKEN = 2 * 6 * (4 * 384 * 384 + 2 * 384 * 1536)  # multiply-adds of the six layers, x2


def fp32_peak_gflops() -> float:
    """Cores x 32 FLOP/cycle (two 256-bit FMA pipes) x the clock in ``/proc/cpuinfo`` (3 GHz if unknown)."""
    import os
    import re

    try:
        mhz = [float(m) for m in re.findall(r"cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text())]
    except OSError:
        mhz = []
    clock = max(mhz) / 1000 if mhz else 3.0
    return (os.cpu_count() or 1) * 32 * clock


def audit_texts(data: str) -> dict[str, list[str]]:
    """The distinct texts of each kind the distractor audit embeds."""
    import pv4kit

    q = pv4kit.load(data).questions
    kinds = {
        "question": list(q["question"]),
        "choice": [c for cs in q["choices"] for c in cs if isinstance(c, str) and c.strip()],
        "rationale": [r for r in q["rationale"] if isinstance(r, str)],
        "category name": [c for c in q["category_name"] if isinstance(c, str)],
    }
    return {k: list(dict.fromkeys(v)) for k, v in kinds.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a built data folder (or raw tree)")
    ap.add_argument("--sample", type=int, default=3000, help="texts timed per backend (default 3000)")
    ap.add_argument("--backends", default="torch,openvino", help="torch and/or openvino (if installed)")
    ap.add_argument("--peak-gflops", type=float, default=None, help="fp32 peak (default: from the clock)")
    args = ap.parse_args()
    if args.peak_gflops is None:
        args.peak_gflops = fp32_peak_gflops()
    logging.basicConfig(level=logging.WARNING)
    sys.path.insert(0, str(ROOT))
    from transformers import AutoTokenizer

    from pv4kit.embeddings.models import _minilm_path, get_embedder

    texts = audit_texts(args.data)
    tok = AutoTokenizer.from_pretrained(_minilm_path())
    total_texts = sum(len(v) for v in texts.values())
    tokens: dict[str, int] = {}
    print(f"{'kind':14s} {'texts':>8s} {'tokens':>10s} {'mean':>6s}")
    for kind, items in texts.items():
        n = [len(ids) for ids in tok(items, truncation=True, max_length=256)["input_ids"]]
        tokens[kind] = int(sum(n))
        print(f"{kind:14s} {len(items):8d} {tokens[kind]:10d} {np.mean(n) if n else 0:6.1f}")
    total_tokens = sum(tokens.values())
    print(f"{'all':14s} {total_texts:8d} {total_tokens:10d} {total_tokens / total_texts:6.1f}")

    rng = np.random.default_rng(0)
    sample = [
        t
        for kind, items in texts.items()
        for t in rng.choice(items, size=round(args.sample * len(items) / total_texts), replace=False)
    ]
    sample.sort(key=len, reverse=True)
    sample_tokens = sum(len(ids) for ids in tok(sample, truncation=True, max_length=256)["input_ids"])
    print(f"\ntimed sample: {len(sample)} texts, {sample_tokens} tokens, in the same mix")
    bound = total_tokens * FLOP_PER_TOKEN / (args.peak_gflops * 1e9)
    print(
        f"arithmetic bound: {total_tokens} tokens x {FLOP_PER_TOKEN / 1e6:.1f} MFLOP = "
        f"{total_tokens * FLOP_PER_TOKEN / 1e12:.0f} TFLOP; at {args.peak_gflops:.0f} GFLOP/s peak "
        f"{bound:.0f} s (target for 02 cold: 240 s)"
    )
    for backend in args.backends.split(","):
        kw = {} if backend == "torch" else {"backend": backend}
        try:
            emb = get_embedder("minilm", device="cpu", **kw)
            emb.encode(sample[:64])  # load and warm up
        except Exception as exc:  # noqa: BLE001 - an optional backend that is not installed
            print(f"{backend}: unavailable ({type(exc).__name__}: {str(exc)[:120]})")
            continue
        t0 = time.perf_counter()
        emb.encode(sample, batch_size=64)
        dt = time.perf_counter() - t0
        rate_tokens = sample_tokens / dt
        projected = total_tokens / rate_tokens
        print(
            f"{backend:9s} {len(sample) / dt:7.1f} texts/s {rate_tokens:8.0f} tokens/s "
            f"({rate_tokens * FLOP_PER_TOKEN / 1e9:.0f} GFLOP/s): all {total_texts} texts in "
            f"{projected:.0f} s = {projected / 60:.1f} min"
        )


if __name__ == "__main__":
    main()
