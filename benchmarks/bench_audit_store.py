"""Release-size ``run_audit``: computed, then read back from its ``store``, in one process.

Grows the sample to the release's shape (:mod:`grow`, 149 users, 20,860 questions) under ``WORKDIR`` once,
then times the audit with the tests' crc32 fake embedder (so the figure leaves out embedding: a lower bound
of what the store saves with a real embedder).

    .venv/bin/python benchmarks/bench_audit_store.py WORKDIR
"""

import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]


def main() -> None:
    from conftest import FakeEmbedder
    from grow import grow_tree

    import pv4kit

    work = Path(sys.argv[1])
    raw = work / "raw"
    if not (raw / "users").is_dir():
        grow_tree(ROOT / "raw", raw)
        qa = [sys.executable, "-m", "pv4kit", "qa-table", "--users-dir", str(raw / "users")]
        subprocess.run(qa, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    data = pv4kit.load(raw, cache=work / "loads")
    store = work / "audits"
    shutil.rmtree(store, ignore_errors=True)
    seconds = []
    for _ in range(2):  # computed and stored, then read back
        t0 = time.perf_counter()
        pv4kit.run_audit(data, embedder=FakeEmbedder(dim=256), cache=False, store=store)
        seconds.append(time.perf_counter() - t0)
    print(f"{len(data.questions)} questions: computed {seconds[0]:.1f} s, read back {seconds[1]:.1f} s")


if __name__ == "__main__":
    main()
