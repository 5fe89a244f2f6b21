"""CPU embedders: a mean-pooled model (MiniLM) on ONNX Runtime or OpenVINO, and static model2vec models.

Exports (:func:`export_model`) and distillations (:func:`distill_static`) are built once and renamed into
place when complete. Every cache key names the backend, so its vectors never mix with PyTorch's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from pv4kit._io import atomic_write_json, cache_root, sha256_file
from pv4kit.embeddings.cache import Texts, model_key
from pv4kit.vectors import unit_rows

logger = logging.getLogger(__name__)

BACKENDS = ("onnx", "onnx-int8", "openvino")
_EXPORT_VERSION = 1  # bump when the export recipe changes; part of the folder name and cache key
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_STATIC_VERSION = 1  # bump when the distillation recipe changes; part of the folder name and cache key
_POOLING = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "last",
    "pooling_mode_cls_token": "first",
}


def encode_with(embedder: Any, texts: Sequence[str], **options: Any) -> np.ndarray:
    """``embedder.model.encode`` (sentence-transformers, model2vec) of ``texts`` as float32 rows."""
    if not texts:  # the model is not touched (nor loaded)
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.asarray(embedder.model.encode(list(texts), **options), dtype=np.float32)


def _label(model_dir: Path) -> str:
    return f"{model_dir.parent.name}-{model_dir.name}" if model_dir.name == "model" else model_dir.name


def _weights_digest(model_dir: Path) -> str:
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: the export needs the model's safetensors weights")
    return sha256_file(weights)[:16]


def _complete(folder: Path, manifest: dict[str, Any], weights: str = "model.onnx") -> bool:
    try:
        found = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return all(found.get(k) == v for k, v in manifest.items()) and (folder / weights).is_file()


@contextlib.contextmanager
def _building(final: Path, manifest: dict[str, Any], weights: str) -> Iterator[Path]:
    """A temporary folder that becomes ``final`` (an incomplete one is replaced) when the block succeeds."""
    if final.exists():
        logger.warning("%s: incomplete (no valid manifest.json); rebuilding it", final)
        shutil.rmtree(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first: use its folder
            if not _complete(final, manifest, weights):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _export_fp32(model_dir: Path, onnx_path: Path) -> None:
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager", dtype=torch.float32).eval()

    class _Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    dummy = (torch.ones((2, 8), dtype=torch.long), torch.ones((2, 8), dtype=torch.long))
    with torch.no_grad():
        torch.onnx.export(
            _Hidden(),
            (*dummy, torch.zeros((2, 8), dtype=torch.long)),
            str(onnx_path),
            input_names=list(_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in (*_INPUTS, "last_hidden_state")},
            opset_version=17,
            dynamo=False,
        )


def _quantize_int8(src: Path, dest: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dest), weight_type=QuantType.QInt8, per_channel=True)


def export_model(
    model_dir: str | os.PathLike[str], *, variant: str, export_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Export ``model_dir`` (a local mean-pooled sentence-transformers folder) to ONNX once; its folder.

    ``variant``: ``"fp32"`` or ``"int8"`` (dynamic quantisation of the fp32 weights); ``export_dir``: root of
    the exports (default ``cache_root() / "onnx"``).
    """
    if variant not in ("fp32", "int8"):
        raise ValueError(f"variant: expected 'fp32' or 'int8', got {variant!r}")
    model_dir = Path(model_dir)
    digest = _weights_digest(model_dir)
    root = Path(export_dir) if export_dir is not None else cache_root() / "onnx"
    final = root / f"{_label(model_dir)}-{digest}-v{_EXPORT_VERSION}-{variant}"
    manifest = {"source": str(model_dir), "weights_sha256_16": digest, "variant": variant}
    manifest["export_version"] = _EXPORT_VERSION
    if _complete(final, manifest):
        return final
    with _building(final, manifest, "model.onnx") as tmp:
        logger.info("exporting %s to ONNX (%s) in %s", model_dir, variant, final)
        if variant == "fp32":
            _export_fp32(model_dir, tmp / "model.onnx")
        else:
            fp32 = export_model(model_dir, variant="fp32", export_dir=root)
            _quantize_int8(fp32 / "model.onnx", tmp / "model.onnx")
        atomic_write_json(tmp / "manifest.json", manifest)  # written last: it marks the export complete
    return final


class OnnxEmbedder:
    """A mean-pooled sentence-transformers model run by ONNX Runtime or OpenVINO on the CPU."""

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        name: str,
        backend: str,
        batch_size: int = 64,
        max_seq_length: int | None = None,
        export_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {list(BACKENDS)}, got {backend!r}")
        from transformers import AutoTokenizer

        self.model_dir = Path(model_dir)
        self.normalize, default_len, self.dim = _pipeline(self.model_dir)
        self.name, self.backend, self.batch_size = name, backend, batch_size
        self.max_seq_length, self._max_len = max_seq_length, max_seq_length or default_len
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
        if backend == "onnx-int8":
            logger.warning(
                "backend='onnx-int8' moves some vectors (min cosine ~0.97 vs PyTorch); benchmark only"
            )
        variant = "int8" if backend == "onnx-int8" else "fp32"
        self.export = export_model(self.model_dir, variant=variant, export_dir=export_dir)
        onnx_path = str(self.export / "model.onnx")
        affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere all CPUs
        threads = len(affinity(0)) if affinity else os.cpu_count() or 1
        if backend == "openvino":
            import openvino as ov

            config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
            compiled = ov.Core().compile_model(onnx_path, "CPU", config)
            self._run = lambda feeds: np.asarray(compiled(feeds)[0])
        else:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
            names = {i.name for i in session.get_inputs()}
            self._run = lambda feeds: session.run(None, {k: v for k, v in feeds.items() if k in names})[0]
        key = {"backend": backend, "export": f"v{_EXPORT_VERSION}", "max_seq_length": max_seq_length}
        self.cache_key = model_key(name, revision="default", dim=self.dim, **key)

    def __repr__(self) -> str:
        return f"OnnxEmbedder(name={self.name!r}, backend={self.backend!r}, dim={self.dim})"

    def encode(self, texts: Texts, *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` (float32, L2-normalised when the model's pipeline normalises)."""
        from tqdm.auto import tqdm

        texts = list(texts)
        size = batch_size or self.batch_size
        order = np.argsort([-len(t) for t in texts], kind="stable")  # like sentence-transformers
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        tokenize = {"padding": True, "truncation": "longest_first", "max_length": self._max_len}
        for start in tqdm(range(0, len(texts), size), desc=f"encode ({self.backend})", disable=not progress):
            index = order[start : start + size]
            batch = self.tokenizer([texts[i] for i in index], return_tensors="np", **tokenize)
            feeds = {k: np.asarray(v, dtype=np.int64) for k, v in batch.items()}
            feeds.setdefault("token_type_ids", np.zeros_like(feeds["input_ids"]))
            hidden = self._run(feeds)
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            out[index] = unit_rows(pooled) if self.normalize else pooled
        return out

    def describe(self) -> dict[str, Any]:
        """A provenance record for this embedder."""
        described = {f: getattr(self, f) for f in ("name", "backend", "export", "dim", "max_seq_length")}
        return {**described, "export": str(self.export), "devices": ["cpu"], "cache_key": self.cache_key}


def _pipeline(model_dir: Path) -> tuple[bool, int, int]:
    """``(normalize, max_seq_length, dim)`` of a Transformer -> mean Pooling (-> Normalize) folder."""
    modules_file = model_dir / "modules.json"
    try:
        modules = json.loads(modules_file.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{modules_file}: cannot read the sentence-transformers modules ({exc})") from None
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise ValueError(
            f"{modules_file}: expected modules Transformer, Pooling[, Normalize], found {kinds}; "
            "the ONNX/OpenVINO backends support mean-pooled encoders such as MiniLM only"
        )
    pooling_file = model_dir / modules[1].get("path", "1_Pooling") / "config.json"
    pooling = json.loads(pooling_file.read_text())
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
    if modes != ["pooling_mode_mean_tokens"]:
        raise ValueError(f"{pooling_file}: expected mean pooling only, found {modes}")
    bert_config = model_dir / "sentence_bert_config.json"
    max_len = json.loads(bert_config.read_text()).get("max_seq_length") if bert_config.is_file() else None
    return kinds[-1] == "Normalize", int(max_len or 512), int(pooling["word_embedding_dimension"])


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "missing"


def distill_static(
    model_dir: str | os.PathLike[str],
    *,
    pca_dims: int = 256,
    token_remove_pattern: str = r"\[unused\d+\]",
    device: str | None = None,
    static_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Distil a static (model2vec) model from a local sentence-transformers folder once; its folder.

    Every vocabulary token goes through the source model once, reduced to ``pca_dims`` by PCA and
    SIF-weighted (model2vec's defaults). The folder is keyed by the source folder, its weights' size and
    mtime, and the options; its ``manifest.json`` records the key, the weights' SHA-256 and library versions.

    Args:
        model_dir: A local sentence-transformers folder (MiniLM's, or e.g. Qwen3-Embedding-4B's).
        pca_dims: Output width.
        token_remove_pattern: Regex of vocabulary tokens left out (default: BERT's ``[unused]`` slots).
        device: Where the source model runs (default: CUDA when available, else CPU).
        static_dir: Root of the distilled models (default ``cache_root() / "static"``).
    """
    model_dir = Path(model_dir)
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(
            f"model_dir: {model_dir} holds no model.safetensors (expected a local sentence-transformers "
            "folder)"
        )
    files = sorted(model_dir.glob("*_Pooling/config.json"))
    config = json.loads(files[0].read_text()) if files else {}
    pooling = next((_POOLING[k] for k, v in config.items() if v and k in _POOLING), "mean")
    stat = weights.stat()  # the key reads no weights, so a distilled model loads fast; the digest is recorded
    key = {"source": str(model_dir), "weights_bytes": stat.st_size, "weights_mtime_ns": stat.st_mtime_ns}
    key |= {"recipe_version": _STATIC_VERSION, "pca_dims": pca_dims, "pooling": pooling}
    key["token_remove_pattern"] = token_remove_pattern
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    root = Path(static_dir) if static_dir is not None else cache_root() / "static"
    final = root / f"{_label(model_dir)}-v{_STATIC_VERSION}-d{pca_dims}-{digest}"
    if _complete(final, key, "model.safetensors"):
        return final
    try:
        import torch
        from model2vec.distill import distill_from_model
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise ImportError(
            f"the static embedder needs model2vec and skeletoken ({exc}): pip install model2vec skeletoken "
            "(not model2vec[distill], which pins an older transformers)"
        ) from None
    with _building(final, key, "model.safetensors") as tmp:
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        logger.info("distilling a static embedder from %s on %s into %s (once)", model_dir, device, final)
        t0 = time.perf_counter()
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        model = AutoModel.from_pretrained(str(model_dir), dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)
        recipe = {"pca_dims": pca_dims, "token_remove_pattern": token_remove_pattern, "pooling": pooling}
        static = distill_from_model(model=model, tokenizer=tokenizer, device=device, **recipe)
        static.save_pretrained(str(tmp))
        seconds = round(time.perf_counter() - t0, 1)
        packages = ("model2vec", "skeletoken", "transformers", "tokenizers", "torch", "numpy")
        manifest = {**key, "weights_sha256_16": _weights_digest(model_dir)}
        manifest["versions"] = {p: _version(p) for p in packages}
        manifest |= {"vocabulary_size": len(static.tokens), "dims": static.dim, "seconds": seconds}
        atomic_write_json(tmp / "manifest.json", manifest)  # written last: it marks the model complete
        logger.info("distilled %d token vectors (%d dims) in %.0f s", len(static.tokens), static.dim, seconds)
    return final


class StaticEmbedder:
    """A distilled static model (token vectors, averaged); its vectors are not cached (``cache_vectors``)."""

    cache_vectors = False

    def __init__(self, folder: str | os.PathLike[str], *, name: str, batch_size: int = 1024) -> None:
        from model2vec.model import StaticModel
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.folder = Path(folder)
        self.manifest = json.loads((self.folder / "manifest.json").read_text())
        # built from its files: StaticModel.from_pretrained imports huggingface_hub first (~1 s)
        config = json.loads((self.folder / "config.json").read_text())
        self.model = StaticModel(
            vectors=load_file(str(self.folder / "model.safetensors"))["embeddings"],
            tokenizer=Tokenizer.from_file(str(self.folder / "tokenizer.json")),
            config=config,
            normalize=config.get("normalize", True),
        )
        self.name, self.batch_size, self.dim = name, batch_size, int(self.model.dim)
        revision = self.folder.name.rsplit("-", 1)[-1]
        self.cache_key = model_key(name, revision=revision, dim=self.dim, backend="static")

    def __repr__(self) -> str:
        return f"StaticEmbedder(name={self.name!r}, dim={self.dim}, folder={str(self.folder)!r})"

    def encode(self, texts: Texts, *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` (float32, L2-normalised)."""
        options = {"batch_size": batch_size or self.batch_size, "use_multiprocessing": False}
        return encode_with(self, texts, show_progress_bar=progress, **options)

    def describe(self) -> dict[str, Any]:
        """A provenance record for this embedder (the distillation's manifest included)."""
        described = {"name": self.name, "dim": self.dim, "cache_key": self.cache_key, "devices": ["cpu"]}
        return described | self.manifest
