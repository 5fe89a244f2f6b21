"""Seconds a fresh process takes for the maps' UMAP at release size, fitted and read from its cache.

UMAP of the 1,490 category names and of the 4,237 test questions (the notebooks' two maps), each in a fresh
process (so imports and numba's compilation count), once with no cache and once reading the fit a first
run kept. Random unit vectors. (The category-name clustering, measured the same way, saved 2.3 s of 3.5 s
when cached: it is no longer cached.)

    .venv/bin/python benchmarks/bench_fits.py [--dim 256]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
kind, n, dim, cache = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
x = np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32)
x /= np.linalg.norm(x, axis=1, keepdims=True)
cache = False if cache == "-" else cache
from pv4kit.analysis.projection import umap_2d
umap_2d(x, seed=0, cache=cache)
print(json.dumps(time.perf_counter() - t0))
"""


def run(kind: str, n: int, dim: int, cache: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(n), str(dim), cache],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=256)
    args = ap.parse_args()
    for kind, n in (("umap", 1490), ("umap", 4237)):
        with tempfile.TemporaryDirectory() as tmp:
            store = str(Path(tmp) / kind)
            cold = run(kind, n, args.dim, "-")
            run(kind, n, args.dim, store)  # fill the cache
            hit = run(kind, n, args.dim, store)
            print(
                f"{kind} n={n:5d}  fitted {cold:6.1f} s  from cache {hit:5.1f} s  saves {cold - hit:5.1f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
