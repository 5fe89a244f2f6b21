"""Throughput of pv4kit's embeddings-endpoint backend against a loopback OpenAI-compatible server.

Run: ``.venv/bin/python benchmarks/bench_embed_endpoint.py [--n-texts 25287] [--dim 2560] [--minilm]``

The server (``tests/embed_server.py``) runs in its own process, so its CPU work does not share the client's
GIL. By default it answers with cheap deterministic vectors of ``--dim`` floats (2560: Qwen3-Embedding-4B's
width, so each answer carries the real payload), which measures the client and the protocol: batching,
concurrency, base64 decoding, the cache commits. ``--minilm`` makes the server compute MiniLM vectors
instead (then the server's model is the bound, and the figure is compared with MiniLM in process).

Measured in one run, on the same texts (the test split's volume: 4,237 generations + 21,050 candidates,
~200 and ~80 characters):

1. ``EndpointEmbedder.encode`` (64 texts per request, ``--concurrency`` in flight, base64): the protocol;
2. ``embed_texts`` with the embedding cache, cold (encode + chunked commits, as ``pv4kit score`` runs it)
   and warm (every vector read back);
3. ``encoding_format="float"`` (JSON numbers) on the first ``--float-texts`` texts;
4. a naive client: one request per text, one at a time, through the openai SDK's
   ``client.embeddings.create`` (on the first ``--naive-texts`` texts; its rate is per text).

Each row gives wall seconds, texts/s and the client process's CPU seconds (the server's are apart), and
the load average is printed first: on a shared machine the wall figures move with it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_embed_qwen3 import synthetic_texts  # noqa: E402

from pv4kit.embeddings.endpoint import EndpointEmbedder  # noqa: E402
from pv4kit.embeddings.models import embed_texts  # noqa: E402

_SERVER = """
import sys, zlib
import numpy as np
sys.path.insert(0, {root!r})
from tests.embed_server import FakeEmbeddingServer

dim = {dim}
if {minilm}:
    from pv4kit.embeddings.models import get_embedder
    encode = get_embedder("minilm", device="cpu").encode
else:
    base = np.random.default_rng(0).standard_normal((997, dim)).astype(np.float32)
    def encode(texts):  # deterministic per text, cheap: one of 997 rows, scaled by the text's crc
        keys = [zlib.crc32(t.encode()) for t in texts]
        return np.stack([base[k % 997] * (1 + (k % 7)) for k in keys])

with FakeEmbeddingServer(encode, model="bench-embedder") as srv:
    print(srv.base_url, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
"""


@contextlib.contextmanager
def server_process(*, dim: int, minilm: bool):
    code = _SERVER.format(root=str(ROOT), dim=dim, minilm=minilm)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-texts", type=int, default=4237 + 21050)
    parser.add_argument("--dim", type=int, default=2560, help="vector width the hash server answers")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--naive-texts", type=int, default=1000, help="texts the naive client sends")
    parser.add_argument("--float-texts", type=int, default=5000, help="texts sent with float encoding")
    parser.add_argument("--minilm", action="store_true", help="the server computes MiniLM vectors")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    n_gen = round(args.n_texts * 4237 / (4237 + 21050))
    texts = synthetic_texts(args.n_texts, n_generations=n_gen)
    print(
        f"{args.n_texts} texts ({n_gen} ~200-char generations, {args.n_texts - n_gen} ~80-char candidates); "
        f"server: {'MiniLM (384-d)' if args.minilm else f'hash vectors, {args.dim}-d'}, separate process"
    )
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    rows = []

    def timed(name, n, fn):
        t, cpu = time.perf_counter(), time.process_time()
        fn()
        rows.append((name, n, time.perf_counter() - t, time.process_time() - cpu))
        print(f"  {name}: {rows[-1][2]:.2f} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp, server_process(dim=args.dim, minilm=args.minilm) as url:
        emb = EndpointEmbedder(
            "bench-embedder", base_url=url, batch_size=args.batch_size, max_concurrency=args.concurrency
        )
        size = f"{args.batch_size} texts x {args.concurrency} in flight"
        timed(f"pv4kit EndpointEmbedder.encode, base64, {size}", len(texts), lambda: emb.encode(texts))
        cache = Path(tmp) / "cache"
        timed(
            "pv4kit embed_texts (cache cold: encode + commit)",
            len(texts),
            lambda: embed_texts(texts, embedder=emb, cache=cache, progress=False),
        )
        timed(
            "pv4kit embed_texts (cache warm)",
            len(texts),
            lambda: embed_texts(texts, embedder=emb, cache=cache, progress=False),
        )
        floats = EndpointEmbedder(
            "bench-embedder",
            base_url=url,
            batch_size=args.batch_size,
            max_concurrency=args.concurrency,
            encoding_format="float",
        )
        subset = texts[: args.float_texts]
        timed(
            "pv4kit EndpointEmbedder.encode, float (JSON numbers)", len(subset), lambda: floats.encode(subset)
        )

        import openai

        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        naive = texts[: args.naive_texts]

        def one_by_one():
            for text in naive:
                client.embeddings.create(model="bench-embedder", input=text)

        timed("naive: one SDK request per text, one at a time", len(naive), one_by_one)
        if args.minilm:
            from pv4kit.embeddings.models import get_embedder

            local = get_embedder("minilm", device="cpu")
            sample = texts[: args.naive_texts * 2]
            timed("MiniLM in process (no server)", len(sample), lambda: local.encode(sample))

    print(f"\n{'client':58s} {'texts':>7s} {'seconds':>8s} {'texts/s':>9s} {'client CPU s':>12s}")
    for name, n, seconds, cpu in rows:
        print(f"{name:58s} {n:7d} {seconds:8.2f} {n / seconds:9,.0f} {cpu:12.2f}")
    best, naive_row = rows[0], next(r for r in rows if r[0].startswith("naive"))
    speedup = (best[1] / best[2]) / (naive_row[1] / naive_row[2])
    print(f"\npv4kit (base64, batched, concurrent) vs naive: {speedup:.0f}x texts/s")


if __name__ == "__main__":
    main()
