"""Every notebook at release scale: seconds cold (empty embedding cache) and warm, and peak memory.

Grows the sample in ``raw/`` to the release's shape (149 users with the release's ids, 200 chats, 10
categories x 15 questions each, every text unique; :mod:`grow`), runs steps 5-6, writes ``--runs``
synthetic answer runs on the test split and scores them with MiniLM, then executes every notebook twice,
each in a fresh process: cold with an empty cache (the audits' CPU embedder, ``static``, is distilled from
MiniLM by the first notebook that needs it), warm with the cache the cold pass filled. Peak memory is the
kernel's maximum resident set size. Prints each figure next to its target (issue 27, on 2 cores with the
CPU embedder): all notebooks <= 300 s cold and <= 90 s warm, 02 <= 120 s cold, peak <= 3 GB with 5 scored
runs. ``--runs 0`` skips the scored runs (01-03 need none). ``--embedder minilm`` runs the notebooks with
MiniLM instead (``PV4KIT_EMBEDDER``).

    .venv/bin/python benchmarks/bench_notebooks.py [--workdir DIR] [--runs 5] [--notebooks 01,02]
    .venv/bin/python benchmarks/bench_notebooks.py --workdir DIR --profile 02   # pyinstrument, cold cache
    .venv/bin/python benchmarks/bench_notebooks.py --workdir DIR --profile 01 --profile-cache warm
    .venv/bin/python benchmarks/bench_notebooks.py --workdir DIR --warm-only --warm-passes 3  # medians

Where a cold kernel spends its time: attach ``py-spy record -r 5 -f raw --nonblocking`` to its pid while it
runs and sum the stacks with ``benchmarks/pyspy_buckets.py`` (``--profile`` runs the script without a
kernel under pyinstrument instead).

The executed ``.ipynb`` files land beside the scripts in ``notebooks/`` (git-ignored), figures under the
work dir.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from math import nan
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from grow import add_hard_subset, grow_tree  # noqa: E402

TARGETS = {"all_cold": 300.0, "all_warm": 90.0, "02_cold": 120.0, "peak_mb": 3 * 1024.0}

# the clock starts after the harness's own imports (jupytext and nbclient: ~3.5 s, most of it nbformat's
# jsonschema building an RFC 3987 grammar), which a notebook opened in JupyterLab never pays; it covers
# the kernel's start, every cell and writing the executed .ipynb
CHILD = r"""
import json, resource, sys, time
import jupytext, nbclient
from pv4kit.analysis.notebooks import execute_notebooks
t0 = time.perf_counter()
execute_notebooks([sys.argv[1]], notebooks_dir=sys.argv[2], timeout=7200)
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "kernel_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _pv4kit(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pv4kit", *args], check=True, stdout=subprocess.DEVNULL)


def prepare(work: Path, *, n_runs: int) -> None:
    """Grow the tree, build ``data/`` and write and score ``n_runs`` synthetic runs (skips what exists)."""
    raw, data, runs_dir = work / "raw", work / "data", work / "runs"
    if not (raw / "users").is_dir():
        t0 = time.perf_counter()
        grow_tree(ROOT / "raw", raw)
        _pv4kit("qa-table", "--users-dir", str(raw / "users"))
        n_hard = add_hard_subset(raw)
        print(f"grew {raw} in {time.perf_counter() - t0:.0f} s ({n_hard} hard test questions)")
    if not any(data.glob("*.parquet")):
        t0 = time.perf_counter()
        _pv4kit(
            "build",
            "--users-dir",
            str(raw / "users"),
            "--hard-subset",
            str(raw / "hard_subset.csv"),
            "--output-dir",
            str(data),
        )
        print(f"built {data} in {time.perf_counter() - t0:.0f} s")
    missing = [
        r for r in range(n_runs) if not (runs_dir / f"synthetic_{r}" / "predictions.parquet").is_file()
    ]
    if missing:
        t0 = time.perf_counter()
        write_and_score_runs(data, runs_dir, missing, cache=work / "cache-scoring")
        print(f"wrote and scored {len(missing)} run(s) in {time.perf_counter() - t0:.0f} s")


def write_and_score_runs(data: Path, runs_dir: Path, which: list[int], *, cache: Path) -> None:
    """Synthetic generations: the reference with some words added, another candidate, or a generic line."""
    import numpy as np

    import pv4kit
    from pv4kit.scoring.runs import write_generations
    from pv4kit.scoring.score import score_run

    questions = pv4kit.load(data, splits=["test"]).questions
    for r in which:
        rng = np.random.default_rng(100 + r)
        right = 0.2 + 0.1 * r
        gens = []
        for choices, answer in zip(questions["choices"], questions["answer"], strict=True):
            u = rng.random()
            if u < right:
                gens.append(f"I think they would {answer[0].lower()}{answer[1:]}")
            elif u < 0.9:
                others = [c for c in choices if c.strip() and c != answer]
                gens.append(str(others[rng.integers(len(others))]) if others else "No idea.")
            else:
                gens.append("They would weigh the options and pick what suits them best.")
        frame = questions[["user_id", "question_index", "split"]].assign(generation=gens)
        run = runs_dir / f"synthetic_{r}"
        write_generations(
            run, frame, config={"data": str(data), "method": "synthetic", "model": f"p={right:.1f}"}
        )
        score_run(run, data=data, embedder="minilm", cache=cache, n_boot=200, progress=False)


def run_notebook(
    name: str, work: Path, cache: Path, *, profile: bool = False, embedder: str | None = None
) -> dict:
    """Execute one notebook in a fresh process; seconds and the kernel's peak RSS (MiB)."""
    env = dict(os.environ)
    if embedder:
        env["PV4KIT_EMBEDDER"] = embedder
    env.update(
        PV4KIT_DATA=str(work / "data"),
        PV4KIT_RUNS=str(work / "runs"),
        PV4KIT_FIGURES=str(work / "figures"),
        PV4KIT_CACHE=str(cache),
    )
    if profile:
        import importlib.util

        if importlib.util.find_spec("pyinstrument") is None:
            raise SystemExit("--profile needs pyinstrument: .venv/bin/pip install pyinstrument")
        script = work / f"profile_{name}.py"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "jupytext",
                "--to",
                "py:percent",
                "-o",
                str(script),
                str(ROOT / "notebooks" / f"{name}.py"),
            ],
            check=True,
            capture_output=True,
        )
        env["PLOTLY_RENDERER"] = "json"
        out_txt = work / f"profile_{name}_{cache.name}.txt"
        subprocess.run(
            [sys.executable, "-m", "pyinstrument", "-r", "text", "-o", str(out_txt), str(script)],
            env=env,
            cwd=ROOT / "notebooks",
            stdout=subprocess.DEVNULL,
            check=True,
        )
        return {"profile": str(out_txt)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(ROOT / "notebooks")],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        tail = (out.stderr or out.stdout).strip().splitlines()
        return {"error": tail[-1] if tail else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=None, help="keep the grown tree, runs and caches here")
    ap.add_argument("--runs", type=int, default=5, help="scored synthetic runs (default 5)")
    ap.add_argument("--notebooks", default=None, help="comma-separated notebook numbers (default: all)")
    ap.add_argument("--warm-only", action="store_true", help="skip the cold pass")
    ap.add_argument(
        "--embedder", default=None, help="the notebooks' embedder (default: theirs, static on a CPU)"
    )
    ap.add_argument(
        "--warm-passes",
        type=int,
        default=1,
        help="warm passes; with more than one, each notebook's median is reported (the same 2-core "
        "machine varies by ~10 s in all between passes)",
    )
    ap.add_argument("--profile", default=None, help="profile one notebook with pyinstrument")
    ap.add_argument(
        "--profile-cache",
        choices=["cold", "warm"],
        default="cold",
        help="profile with an empty embedding cache (default) or the one the timed passes filled",
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from pv4kit.analysis.notebooks import list_notebooks

    work = Path(args.workdir or tempfile.mkdtemp(prefix="pv4kit-bench-nb-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    prepare(work, n_runs=args.runs)
    names = list_notebooks(ROOT / "notebooks")
    if args.notebooks:
        wanted = args.notebooks.split(",")
        names = [n for n in names if n.split("_", 1)[0] in wanted or n in wanted]
    if args.profile:
        name = next(n for n in list_notebooks(ROOT / "notebooks") if n.startswith(args.profile))
        if args.profile_cache == "warm":
            print(run_notebook(name, work, work / "cache-notebooks", profile=True))
            return
        cold = work / "cache-profile"
        shutil.rmtree(cold, ignore_errors=True)
        print(run_notebook(name, work, cold, profile=True))
        return
    cache = work / "cache-notebooks"
    results: dict[str, dict[str, dict]] = {"cold": {}, "warm": {}}
    passes = ["warm"] if args.warm_only else ["cold", "warm"]
    if "cold" in passes:
        shutil.rmtree(cache, ignore_errors=True)
    warm_runs: dict[str, list[dict]] = {name: [] for name in names}
    for p in [q for q in passes for _ in range(args.warm_passes if q == "warm" else 1)]:
        for name in names:
            r = run_notebook(name, work, cache, embedder=args.embedder)
            if p == "warm":
                warm_runs[name].append(r)
            else:
                results[p][name] = r
            print(
                f"{p:4s} {name:28s} {r.get('seconds', nan):8.1f} s  "
                f"{r.get('kernel_peak_mb', nan):7.0f} MiB  load {os.getloadavg()[0]:4.1f}  "
                f"{r.get('error', '')}",
                flush=True,
            )
    for name, rs in warm_runs.items():  # the median pass of each notebook, the highest peak
        secs = sorted(r.get("seconds", nan) for r in rs)
        results["warm"][name] = {
            "seconds": statistics.median(secs),
            "kernel_peak_mb": max(r.get("kernel_peak_mb", 0.0) for r in rs),
        }
    if args.warm_passes > 1:
        per_pass = [
            sum(rs[i].get("seconds", 0.0) for rs in warm_runs.values()) for i in range(args.warm_passes)
        ]
        listed = ", ".join(f"{t:.1f} s" for t in per_pass)
        print(f"\nwarm passes, all notebooks: {listed} (below: each notebook's median)")
    print(f"\n{'notebook':28s} {'cold s':>8s} {'warm s':>8s} {'peak MiB':>9s}")
    totals = {p: sum(r.get("seconds", 0.0) for r in results[p].values()) for p in passes}
    peak = 0.0
    for name in names:
        c, w = results["cold"].get(name, {}), results["warm"].get(name, {})
        pk = max(c.get("kernel_peak_mb", 0.0), w.get("kernel_peak_mb", 0.0))
        peak = max(peak, pk)
        print(f"{name:28s} {c.get('seconds', nan):8.1f} {w.get('seconds', nan):8.1f} {pk:9.0f}")
    print(f"{'all':28s} {totals.get('cold', nan):8.1f} {totals.get('warm', nan):8.1f} {peak:9.0f}")
    print(f"\ntargets (2 cores, CPU embedder; load average {os.getloadavg()[0]:.1f} at the end):")
    if "cold" in totals:
        c02 = next((r.get("seconds") for n, r in results["cold"].items() if n.startswith("02")), None)
        print(f"  all cold  {totals['cold']:7.1f} s  target <= {TARGETS['all_cold']:.0f} s")
        if c02 is not None:
            print(f"  02 cold   {c02:7.1f} s  target <= {TARGETS['02_cold']:.0f} s")
    print(f"  all warm  {totals['warm']:7.1f} s  target <= {TARGETS['all_warm']:.0f} s")
    print(f"  peak      {peak:7.0f} MiB target <= {TARGETS['peak_mb']:.0f} MiB ({args.runs} scored runs)")
    if not args.workdir:
        print(f"(work dir kept for inspection: {work})")


if __name__ == "__main__":
    main()
