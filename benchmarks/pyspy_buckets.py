"""Where a notebook's kernel spent its time, from a ``py-spy record -f raw`` profile, in a few buckets.

Attach py-spy to the kernel while ``bench_notebooks.py`` runs the notebook cold (it needs ptrace rights):

    py-spy record -r 5 -f raw --nonblocking -o WORK/pyspy_02_cold.txt --pid KERNEL_PID
    python benchmarks/pyspy_buckets.py WORK/pyspy_02_cold.txt --rate 5

Buckets: MiniLM's forward pass (``SentenceTransformerEmbedder.encode``), loading the model, the embedding
cache's reads and writes, the leakage audit, loading the data, the rest of ``run_audit``, plotly, other
pv4kit code, and the rest (the kernel, imports, waiting).
"""

from __future__ import annotations

import argparse
import collections

BUCKETS = (
    ("embedding: the model's forward pass", ("SentenceTransformerEmbedder.encode",)),
    ("embedding: loading the model", ("_load_sentence_transformer",)),
    ("embedding cache: reads and writes", ("EmbeddingCache",)),
    ("leakage audit", ("leakage_audit",)),
    ("loading the data", ("load_notebook_data",)),
    ("the rest of run_audit", ("run_audit",)),
    ("plotly", ("plotly",)),
    ("other pv4kit code", ("pv4kit/",)),
)


def buckets(path: str) -> collections.Counter[str]:
    """Samples per bucket (the first bucket whose marker is in a stack takes it)."""
    out: collections.Counter[str] = collections.Counter()
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            name = next((b for b, marks in BUCKETS if any(m in stack for m in marks)), "the rest")
            out[name] += int(count)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile", help="py-spy record -f raw output")
    ap.add_argument("--rate", type=float, default=100.0, help="samples per second it was recorded at")
    args = ap.parse_args()
    counts = buckets(args.profile)
    total = sum(counts.values())
    for name, n in counts.most_common():
        print(f"{n / args.rate:9.1f} s {100 * n / total:6.1f}%  {name}")
    print(f"{total / args.rate:9.1f} s  sampled in all")


if __name__ == "__main__":
    main()
