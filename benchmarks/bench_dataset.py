"""Benchmark steps 5-6 and the loader on a full-size synthetic tree (149 users x 200 chats x ~140 questions).

Prints build time and peak memory, and ``pv4kit.load`` time and peak memory next to a naive
``pandas.read_parquet`` of the three splits, each measured in a fresh subprocess in the same run.
Target: ``load`` at least 10x less peak memory than naive, and no slower.

    .venv/bin/python benchmarks/bench_dataset.py [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import write_synthetic_tree  # noqa: E402

CHILD = r"""
import json, resource, sys, time
import pandas, pyarrow.parquet, numpy, pv4kit.dataset.load, pv4kit.dataset.splits, pv4kit.dataset.questions
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
{body}
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"seconds": dt, "peak_mb": peak / 1024, "delta_mb": (peak - base) / 1024, "info": info}}))
"""

BODIES = {
    "qa-table (step 5)": "info = len(pv4kit.dataset.questions.write_qa_tables(sys.argv[1] + '/users', "
    "overwrite=True))",
    "build (step 6)": "f = pv4kit.dataset.splits.build_dataset(sys.argv[1] + '/users', sys.argv[2], "
    "progress=False)\n"
    "info = {s: int(f[s].sum()) for s in ('train', 'validation', 'test')}",
    "pv4kit.load(data)": "d = pv4kit.dataset.load.load(sys.argv[2])\ninfo = {'questions': len(d.questions), "
    "'users': len(d.users)}",
    "naive pandas.read_parquet x3": "fr = [pandas.read_parquet(f'{sys.argv[2]}/{s}.parquet') for s in "
    "('train', 'validation', 'test')]\ninfo = {'rows': sum(len(f) for f in fr)}",
}


def measure(name: str, raw: Path, data: Path) -> dict:
    code = CHILD.format(body=BODIES[name])
    out = subprocess.run([sys.executable, "-c", code, str(raw), str(data)], capture_output=True, text=True)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="pv4kit-bench-"))
    raw, data = work / "raw", work / "data"
    t0 = time.perf_counter()
    if not (raw / "users").is_dir():
        write_synthetic_tree(raw)
    print(f"synthetic raw tree: {raw} ({time.perf_counter() - t0:.1f} s to write)")
    results = {name: measure(name, raw, data) for name in BODIES}
    size = sum(p.stat().st_size for p in data.glob("*.parquet")) / 2**20
    print(f"parquet on disk: {size:.1f} MiB\n")
    print(f"{'step':32s} {'seconds':>9s} {'peak RSS MiB':>13s} {'above imports':>14s}  info")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:32s} failed: {r['error']}")
            continue
        print(f"{name:32s} {r['seconds']:9.2f} {r['peak_mb']:13.0f} {r['delta_mb']:14.0f}  {r['info']}")
    a, b = results["pv4kit.load(data)"], results["naive pandas.read_parquet x3"]
    if "error" not in a and "error" not in b:
        print(
            f"\nload vs naive: {b['delta_mb'] / max(a['delta_mb'], 1):.1f}x less memory above imports "
            f"({b['peak_mb'] / a['peak_mb']:.1f}x less peak RSS), "
            f"{b['seconds'] / a['seconds']:.1f}x the speed "
            "(target: >= 10x less memory, no slower)"
        )
    if not args.keep and not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
