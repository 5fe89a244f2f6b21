"""CPU embedder backends for MiniLM: PyTorch fp32 (the default, the naive baseline) vs ONNX / OpenVINO.

Texts like PV4's: the sample's questions, answer choices, rationales and category names (``raw/``),
repeated with a variant tag until there are ``--texts`` of them, in the release's mix (one question and
one rationale per five candidates). Every backend encodes the same texts in each of ``--repeats``
rounds, interleaved (the machine may be shared), and the table gives the median texts/s, the ratio to
PyTorch in the same run, and the cosine of each text's vector against the PyTorch vector (min, mean).
The issue's rule: a backend is adopted only where min cosine >= 0.999.

Usage: ``python benchmarks/bench_cpu_backends.py [--texts 4000] [--repeats 3] [--backends onnx,...]``
(exports go to a temporary folder unless ``--export-dir`` is given; the first export takes ~1 min).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time

import numpy as np


def pv4_texts(n: int, *, raw: str = "raw") -> list[str]:
    import pv4kit

    questions = pv4kit.load(raw).questions
    base: list[str] = []
    for row in questions.itertuples():
        base.append(str(row.question))
        base.extend(str(c) for c in row.choices)
        base.append(str(row.rationale))
    base.extend(sorted(set(questions["category_name"].astype(str))))
    out: list[str] = []
    variant = 0
    while len(out) < n:
        out.extend(f"{t} (variant {variant})" if variant else t for t in base)
        variant += 1
    return out[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--backends", default="onnx,openvino,onnx-int8")
    parser.add_argument("--export-dir", default=None)
    parser.add_argument("--raw", default="raw")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import torch

    from pv4kit.embeddings.models import get_embedder

    texts = pv4_texts(args.texts, raw=args.raw)
    words = np.mean([len(t.split()) for t in texts])
    print(f"{len(texts)} texts (mean {words:.0f} words), torch threads {torch.get_num_threads()}")
    with tempfile.TemporaryDirectory() as tmp:
        export_dir = args.export_dir or tmp
        embedders = {"pytorch-fp32": get_embedder("minilm", batch_size=args.batch_size)}
        for backend in args.backends.split(","):
            t0 = time.perf_counter()
            embedders[backend] = get_embedder(
                "minilm", backend=backend, batch_size=args.batch_size, export_dir=export_dir
            )
            print(f"{backend}: export + load {time.perf_counter() - t0:.1f} s")
        rates: dict[str, list[float]] = {k: [] for k in embedders}
        vectors: dict[str, np.ndarray] = {}
        for r in range(args.repeats):
            for key, emb in embedders.items():
                t0 = time.perf_counter()
                vec = emb.encode(texts)
                rates[key].append(len(texts) / (time.perf_counter() - t0))
                vectors.setdefault(key, vec)
                print(f"  round {r + 1} {key}: {rates[key][-1]:.0f} texts/s", flush=True)
    ref = vectors["pytorch-fp32"]
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    base = statistics.median(rates["pytorch-fp32"])
    print(f"\n| backend | texts/s (median of {args.repeats}) | x PyTorch | min cosine | mean cosine |")
    print("| --- | --- | --- | --- | --- |")
    for key, runs in rates.items():
        vec = vectors[key] / np.linalg.norm(vectors[key], axis=1, keepdims=True)
        cos = (vec * ref).sum(axis=1)
        med = statistics.median(runs)
        print(f"| {key} | {med:.0f} | {med / base:.2f} | {cos.min():.5f} | {cos.mean():.5f} |")


if __name__ == "__main__":
    main()
