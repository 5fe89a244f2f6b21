"""Benchmark of `pv4kit.generation.steps` against a loopback server that answers after a fixed delay.

Run: ``.venv/bin/python benchmarks/bench_generate.py [--delay 0.1] [--workers 50] [--users 10]``

Measures, in one run:
1. one full-size user (10 categories, 200 topics, 15 questions: 2 list calls, 200 chats, 10 question
   files) at ``--workers``, next to the ideal critical path of this pipeline (lists in parallel, then
   ceil(210 / workers) waves), the reference's schedule (lists serial, then chats, then questions:
   2 + ceil(200/w) + ceil(10/w) waves) and a naive serial loop (212 calls one after another, computed);
   the ideal is given twice: waves of the server delay, and waves of the measured serial round trip
   (delay + loopback + client per-request overhead), with the client's CPU time for the run;
2. a rerun of ``--users`` users whose files all exist (nothing to do);
3. the same users into a fresh output folder with every response cached (cache -> files).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pv4kit.generation.steps import generate_users  # noqa: E402
from pv4kit.llm.config import LLMConfig  # noqa: E402

# TCP_NODELAY on the server's sockets: http.server writes the headers and the body of a response in two
# send() calls, and with Nagle on the body waits for the client's delayed ACK of the headers (40 ms on
# Linux), an artefact of this fake server, not of the client (real endpoints answer in one write).
# ``--nagle`` keeps it, to reproduce the old figures.
_SERVER = """
import socketserver, sys, time
sys.path.insert(0, {root!r})
socketserver.StreamRequestHandler.disable_nagle_algorithm = {nodelay}
from tests.llm_server import FakeLLMServer, prompt_of
from tests.test_generate import answer

def respond(protocol, body, nth):
    prompt = prompt_of(protocol, body)
    return answer(prompt) if "# Task:" in prompt else "ok"

with FakeLLMServer(respond, delay={delay}) as srv:
    print(srv.base_url, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
"""


@contextlib.contextmanager
def server_process(delay: float, *, nodelay: bool = True):
    """The fake server in its own process, so its CPU work does not share the client's GIL."""
    code = _SERVER.format(root=str(ROOT), delay=delay, nodelay=nodelay)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument(
        "--nagle", action="store_true", help="leave Nagle on in the fake server (+40 ms/call)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    w, d = args.workers, args.delay

    with tempfile.TemporaryDirectory() as tmp, server_process(d, nodelay=not args.nagle) as base_url:
        tmp = Path(tmp)
        personas = tmp / "personas"
        personas.mkdir()
        for u in range(1, args.users + 1):
            (personas / f"user_{u}.txt").write_text(f"Persona {u}: a nurse who restores bicycles.\n")
        llm = LLMConfig(model="fake", base_url=base_url, protocol="chat", max_concurrency=w, timeout=30)
        cfg = dict(llm=llm, chat_llm=llm, num_categories=10, num_topics=200, num_questions=15)
        cache = tmp / "cache.sqlite"

        # one request at a time: the measured round trip (server delay + loopback + client overhead)
        probe = LLMConfig(model="probe", base_url=base_url, protocol="chat", max_concurrency=1)
        from pv4kit.llm.client import complete

        complete([[{"role": "user", "content": "warm"}]], config=probe, progress=False)
        t = time.perf_counter()
        complete([[{"role": "user", "content": f"p{i}"}] for i in range(10)], config=probe, progress=False)
        per_call = (time.perf_counter() - t) / 10

        t, cpu = time.perf_counter(), time.process_time()  # process time: the client only (server apart)
        one = generate_users(
            personas, tmp / "out", **cfg, user_start=1, user_end=1, cache=cache, progress=False
        )
        single = time.perf_counter() - t
        cpu = time.process_time() - cpu
        calls = int(one.loc[0, "calls"])
        waves = 1 + math.ceil(210 / w)
        ideal = waves * d
        ideal_rt = waves * per_call
        reference = (2 + math.ceil(200 / w) + math.ceil(10 / w)) * d
        naive = 212 * per_call

        t = time.perf_counter()
        generate_users(personas, tmp / "out", **cfg, cache=cache, progress=False)
        fill = time.perf_counter() - t
        t = time.perf_counter()
        rerun = generate_users(personas, tmp / "out", **cfg, cache=cache, progress=False)
        noop = time.perf_counter() - t
        assert (rerun["calls"] == 0).all()
        t = time.perf_counter()
        fresh = generate_users(personas, tmp / "out2", **cfg, cache=cache, progress=False)
        cached = time.perf_counter() - t
        assert (fresh["calls"] == 0).all() and (fresh["status"] == "complete").all()

    print(f"server delay {d * 1000:.0f} ms, {w} workers; measured serial round trip {per_call * 1000:.1f} ms")
    print(f"one full-size user ({calls} calls):         {single:6.2f} s  (client CPU {cpu:.2f} s)")
    print(
        f"  ideal critical path (lists || , then ceil(210/{w}) waves) x {d * 1000:.0f} ms server delay: "
        f"{ideal:6.2f} s  -> ratio {single / ideal:.2f}x"
    )
    print(
        f"  same {waves} waves x measured round trip {per_call * 1000:.1f} ms:                   "
        f"{ideal_rt:6.2f} s  -> ratio {single / ideal_rt:.2f}x"
    )
    print(f"  reference schedule (lists serial, chats, then questions): {reference:6.2f} s")
    print(f"  naive serial loop (212 x measured round trip):           {naive:6.2f} s")
    print(f"{args.users - 1} more users generated:                    {fill:6.2f} s")
    print(f"rerun of {args.users} complete users (files exist):       {noop:6.2f} s")
    print(
        f"{args.users} users into a fresh folder, all cached:       {cached:6.2f} s "
        f"({int(fresh['cached'].sum())} cached responses -> files)"
    )


if __name__ == "__main__":
    main()
