"""CPU embedders: MiniLM on ONNX Runtime (fp32 or int8) or OpenVINO, and static models distilled by model2vec.

The default embedder (sentence-transformers on PyTorch) is unchanged; these are named options for the
audits and notebooks on a CPU, chosen with ``get_embedder("minilm", backend=...)``:

- ``"onnx"``: the model exported once to ONNX (fp32), run by ``onnxruntime``;
- ``"onnx-int8"``: the same export with int8 dynamic quantisation of its weights (measured min cosine
  0.966 against PyTorch on the sample's texts: below the 0.999 rule, kept for benchmarking only);
- ``"openvino"``: the fp32 ONNX export compiled by OpenVINO for the CPU.

``get_embedder("static")`` is another kind of CPU embedder (:class:`StaticEmbedder`): one vector per
token, distilled once from MiniLM (or ``"static:FOLDER"``: any local sentence-transformers folder) by
model2vec (:func:`distill_static`) into ``cache_root() / "static"``, the same way (temporary folder,
manifest last, rename). It is the audits' and maps' default on a CPU: a proxy for aggregate audit
figures, not for per-question verdicts (docs/analysis.md).

The export is built from the local model folder (nothing is downloaded) into
``cache_root() / "onnx" / <model>-<weights digest>-<variant>``: it is written in a temporary folder
beside it, completed by a ``manifest.json`` written last, and renamed into place, so a half-written
export is never loaded (a folder without its manifest is rebuilt). Tokenisation, mean pooling and the
final L2 normalisation follow the sentence-transformers pipeline of the model folder
(``modules.json``, ``1_Pooling/config.json``, ``sentence_bert_config.json``), and every backend's
cache key names the backend, so its vectors never mix with the PyTorch ones in the embedding cache.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pv4kit._io import atomic_write_json, cache_root, sha256_file
from pv4kit.embeddings.cache import model_key
from pv4kit.vectors import unit_rows

logger = logging.getLogger(__name__)

BACKENDS = ("onnx", "onnx-int8", "openvino")
_EXPORT_VERSION = 1  # bump when the export recipe changes; part of the folder name and cache key
_MANIFEST = "manifest.json"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def default_export_dir() -> Path:
    """Where exported models live: ``cache_root() / "onnx"``."""
    return cache_root() / "onnx"


def _pipeline(model_dir: Path) -> dict[str, Any]:
    """Read the sentence-transformers pipeline of ``model_dir``; only Transformer→mean Pooling(→Normalize)."""
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
    return {
        "normalize": kinds[-1] == "Normalize",
        "max_seq_length": int(max_len or 512),
        "dim": int(pooling["word_embedding_dimension"]),
    }


def _weights_digest(model_dir: Path) -> str:
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: the export needs the model's safetensors weights")
    return sha256_file(weights)[:16]


def _export_fp32(model_dir: Path, onnx_path: Path) -> None:
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager", dtype=torch.float32)
    model.eval()
    dummy = {
        "input_ids": torch.ones((2, 8), dtype=torch.long),
        "attention_mask": torch.ones((2, 8), dtype=torch.long),
        "token_type_ids": torch.zeros((2, 8), dtype=torch.long),
    }

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    axes = {name: {0: "batch", 1: "sequence"} for name in (*_INPUTS, "last_hidden_state")}
    with torch.no_grad():
        torch.onnx.export(
            _Hidden(model),
            tuple(dummy[name] for name in _INPUTS),
            str(onnx_path),
            input_names=list(_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def _quantize_int8(src: Path, dest: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dest), weight_type=QuantType.QInt8, per_channel=True)


def export_model(
    model_dir: str | os.PathLike[str], *, variant: str, export_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Export ``model_dir`` to ONNX once and return the folder holding ``model.onnx``.

    Args:
        model_dir: A local sentence-transformers model folder (mean pooling, e.g. MiniLM).
        variant: ``"fp32"`` or ``"int8"`` (dynamic quantisation of the fp32 export's weights).
        export_dir: Root of the exports (default :func:`default_export_dir`).

    Returns:
        The completed export folder (it holds ``model.onnx`` and ``manifest.json``). A folder without a
        valid manifest (a crashed export) is removed and rebuilt; a complete one is reused.
    """
    if variant not in ("fp32", "int8"):
        raise ValueError(f"variant: expected 'fp32' or 'int8', got {variant!r}")
    model_dir = Path(model_dir)
    digest = _weights_digest(model_dir)
    root = Path(export_dir) if export_dir is not None else default_export_dir()
    label = f"{model_dir.parent.name}-{model_dir.name}" if model_dir.name == "model" else model_dir.name
    final = root / f"{label}-{digest}-v{_EXPORT_VERSION}-{variant}"
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
        atomic_write_json(tmp / _MANIFEST, manifest)  # written last: it marks the export complete
    return final


@contextlib.contextmanager
def _building(final: Path, manifest: dict[str, Any], weights: str) -> Iterator[Path]:
    """A temporary folder beside ``final`` that becomes ``final`` when the block ends without error.

    A ``final`` without a valid manifest (a crashed build) is removed first; when another process finished
    ``final`` first, its folder is kept. The block writes the manifest last: it marks the folder complete.
    """
    if final.exists():
        logger.warning("%s: incomplete (no valid %s); rebuilding it", final, _MANIFEST)
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


def _complete(folder: Path, manifest: dict[str, Any], weights: str = "model.onnx") -> bool:
    """Whether ``folder`` holds ``weights`` and a manifest with every field of ``manifest``."""
    try:
        found = json.loads((folder / _MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return all(found.get(k) == v for k, v in manifest.items()) and (folder / weights).is_file()


class OnnxEmbedder:
    """A mean-pooled sentence-transformers model run by ONNX Runtime or OpenVINO on the CPU.

    Build it with ``get_embedder("minilm", backend=...)`` or :func:`load_backend_embedder`.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        name: str,
        backend: str,
        batch_size: int = 64,
        max_seq_length: int | None = None,
        threads: int | None = None,
        export_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {list(BACKENDS)}, got {backend!r}")
        from transformers import AutoTokenizer

        self.model_dir = Path(model_dir)
        pipeline = _pipeline(self.model_dir)
        self.name = name
        self.backend = backend
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.normalize = pipeline["normalize"]
        self._max_len = max_seq_length or pipeline["max_seq_length"]
        self.dim = pipeline["dim"]
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
        variant = "int8" if backend == "onnx-int8" else "fp32"
        if variant == "int8":
            logger.warning(
                "backend='onnx-int8' moves some vectors (min cosine ~0.97 vs PyTorch); benchmark only"
            )
        self.export = export_model(self.model_dir, variant=variant, export_dir=export_dir)
        onnx_path = str(self.export / "model.onnx")
        if not threads:
            affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere all CPUs
            threads = len(affinity(0)) if affinity else os.cpu_count() or 1
        if backend == "openvino":
            import openvino as ov

            core = ov.Core()
            config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
            self._compiled = core.compile_model(onnx_path, "CPU", config)
            self._run = self._run_openvino
        else:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            self._session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
            self._input_names = {i.name for i in self._session.get_inputs()}
            self._run = self._run_onnx
        self.cache_key = model_key(
            name,
            revision="default",
            dim=self.dim,
            backend=backend,
            export=f"v{_EXPORT_VERSION}",
            max_seq_length=max_seq_length,
        )

    def __repr__(self) -> str:
        return f"OnnxEmbedder(name={self.name!r}, backend={self.backend!r}, dim={self.dim})"

    def _run_onnx(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return self._session.run(None, {k: v for k, v in feeds.items() if k in self._input_names})[0]

    def _run_openvino(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self._compiled(feeds)[0])

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False
    ) -> np.ndarray:
        """Embed ``texts`` (float32, L2-normalised when the model's pipeline normalises)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        from tqdm.auto import tqdm

        texts = list(texts)
        size = batch_size or self.batch_size
        order = np.argsort([-len(t) for t in texts], kind="stable")  # like sentence-transformers
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        starts = range(0, len(texts), size)
        for start in tqdm(starts, desc=f"encode ({self.backend})", disable=not progress):
            index = order[start : start + size]
            batch = self.tokenizer(
                [texts[i] for i in index],
                padding=True,
                truncation="longest_first",
                max_length=self._max_len,
                return_tensors="np",
            )
            feeds = {k: np.asarray(v, dtype=np.int64) for k, v in batch.items()}
            if "token_type_ids" not in feeds:
                feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
            hidden = self._run(feeds)
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            if self.normalize:
                pooled = unit_rows(pooled)
            out[index] = pooled
        return out

    def describe(self) -> dict[str, Any]:
        """A provenance record for this embedder."""
        return {
            "name": self.name,
            "backend": self.backend,
            "export": str(self.export),
            "dim": self.dim,
            "max_seq_length": self.max_seq_length,
            "devices": ["cpu"],
            "cache_key": self.cache_key,
        }


def load_backend_embedder(
    name: str,
    path: str,
    *,
    backend: str,
    batch_size: int | None = None,
    max_seq_length: int | None = None,
    export_dir: str | os.PathLike[str] | None = None,
) -> OnnxEmbedder:
    """Load ``path`` (a local model folder) on a CPU backend; ``name`` is recorded and keyed."""
    if not Path(path).is_dir():
        raise ValueError(f"backend={backend!r} needs a local model folder; {path!r} is not one")
    return OnnxEmbedder(
        path,
        name=name,
        backend=backend,
        batch_size=batch_size or 64,
        max_seq_length=max_seq_length,
        export_dir=export_dir,
    )


# --------------------------------------------------------------------------- static (model2vec) embedder

#: output width of a distilled static model (PCA of the source's token vectors), as measured in issue 27
STATIC_DIMS = 256
_STATIC_VERSION = 1  # bump when the distillation recipe changes; part of the folder name and cache key
_STATIC_PACKAGES = ("model2vec", "skeletoken", "transformers", "tokenizers", "torch", "numpy")
_POOLING = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "last",
    "pooling_mode_cls_token": "first",
}


def default_static_dir() -> Path:
    """Where distilled static models live: ``cache_root() / "static"``."""
    return cache_root() / "static"


def _source_pooling(model_dir: Path) -> str:
    """model2vec's pooling mode for the source's sentence-transformers pooling (mean when unstated)."""
    files = sorted(model_dir.glob("*_Pooling/config.json"))
    config = json.loads(files[0].read_text()) if files else {}
    modes = [_POOLING[k] for k, v in config.items() if v and k in _POOLING]
    return modes[0] if modes else "mean"


def _versions(packages: Sequence[str]) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in packages:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "missing"
    return found


def distill_static(
    model_dir: str | os.PathLike[str],
    *,
    pca_dims: int = STATIC_DIMS,
    token_remove_pattern: str = r"\[unused\d+\]",
    device: str | None = None,
    static_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Distil a static (model2vec) model from a local sentence-transformers folder, once, and return it.

    Every token of the source's vocabulary goes through the source model once (a progress bar counts
    them); the token vectors are reduced to ``pca_dims`` by PCA and weighted by SIF (model2vec's
    defaults). Nothing is random, so the same source, options and library versions give the same
    vectors. The model is built in a temporary folder and renamed into
    ``static_dir / <source>-v<recipe>-d<dims>-<key digest>`` (the key: the source folder, its weights'
    size and modification time, the options); its ``manifest.json`` (written last) holds the key and the
    provenance: the weights' SHA-256, vocabulary size, dimensions, pooling, library versions and the
    seconds taken. A folder without a valid manifest is rebuilt; a complete one is reused.

    Args:
        model_dir: A local sentence-transformers folder (MiniLM's, or e.g. Qwen3-Embedding-4B's).
        pca_dims: Output width (PCA components).
        token_remove_pattern: Regex of vocabulary tokens left out (model2vec's default drops BERT's
            ``[unused]`` slots; the tests keep a small vocabulary this way).
        device: Where the source model runs while distilling (default: CUDA when available, else CPU).
        static_dir: Root of the distilled models (default :func:`default_static_dir`).

    Returns:
        The completed model folder (model2vec's files and ``manifest.json``).

    Raises:
        FileNotFoundError: ``model_dir`` holds no ``model.safetensors``.
        ImportError: model2vec or skeletoken is not installed (the message names the install command).
    """
    import hashlib
    import time

    model_dir = Path(model_dir)
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(
            f"model_dir: {model_dir} holds no model.safetensors (expected a local sentence-transformers "
            "folder)"
        )
    pooling = _source_pooling(model_dir)
    stat = weights.stat()  # the key reads no weights, so a distilled model loads fast; the digest is recorded
    key = {
        "source": str(model_dir),
        "weights_bytes": stat.st_size,
        "weights_mtime_ns": stat.st_mtime_ns,
        "recipe_version": _STATIC_VERSION,
        "pca_dims": pca_dims,
        "pooling": pooling,
        "token_remove_pattern": token_remove_pattern,
    }
    options = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    label = f"{model_dir.parent.name}-{model_dir.name}" if model_dir.name == "model" else model_dir.name
    root = Path(static_dir) if static_dir is not None else default_static_dir()
    final = root / f"{label}-v{_STATIC_VERSION}-d{pca_dims}-{options}"
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
        static = distill_from_model(
            model=model,
            tokenizer=tokenizer,
            device=device,
            pca_dims=pca_dims,
            token_remove_pattern=token_remove_pattern,
            pooling=pooling,
        )
        static.save_pretrained(str(tmp))
        seconds = round(time.perf_counter() - t0, 1)
        manifest = {
            **key,
            "weights_sha256_16": _weights_digest(model_dir),
            "versions": _versions(_STATIC_PACKAGES),
            "vocabulary_size": len(static.tokens),
            "dims": static.dim,
            "seconds": seconds,
        }
        atomic_write_json(tmp / _MANIFEST, manifest)  # written last: it marks the model complete
        logger.info("distilled %d token vectors (%d dims) in %.0f s", len(static.tokens), static.dim, seconds)
    return final


class StaticEmbedder:
    """A distilled static model (one vector per token, averaged) behind the embedder interface.

    Build it with ``get_embedder("static")`` (distilled from MiniLM) or ``get_embedder("static:FOLDER")``.
    Encoding is a table lookup and a mean: thousands of texts per second on one core.

    Attributes:
        folder: The distilled model's folder; ``manifest`` its provenance (``manifest.json``).
        cache_vectors: ``False``: :func:`~pv4kit.embeddings.models.embed_texts` skips the embedding cache
            for it (at release size, notebook 02 cold spent 152 s writing the cache against 99 s
            encoding, under a load of ~12 on two cores).
    """

    cache_vectors = False

    def __init__(self, folder: str | os.PathLike[str], *, name: str, batch_size: int = 1024) -> None:
        from model2vec.model import StaticModel
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.folder = Path(folder)
        self.manifest = json.loads((self.folder / _MANIFEST).read_text())
        # built from its files: StaticModel.from_pretrained imports huggingface_hub first (~1 s here)
        config = json.loads((self.folder / "config.json").read_text())
        self.model = StaticModel(
            vectors=load_file(str(self.folder / "model.safetensors"))["embeddings"],
            tokenizer=Tokenizer.from_file(str(self.folder / "tokenizer.json")),
            config=config,
            normalize=config.get("normalize", True),
        )
        self.name = name
        self.batch_size = batch_size
        self.dim = int(self.model.dim)
        self.cache_key = model_key(
            name, revision=self.folder.name.rsplit("-", 1)[-1], dim=self.dim, backend="static"
        )

    def __repr__(self) -> str:
        return f"StaticEmbedder(name={self.name!r}, dim={self.dim}, folder={str(self.folder)!r})"

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False
    ) -> np.ndarray:
        """Embed ``texts`` (float32, L2-normalised)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self.model.encode(
            list(texts),
            batch_size=batch_size or self.batch_size,
            show_progress_bar=progress,
            use_multiprocessing=False,
        )
        return np.asarray(out, dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        """A provenance record for this embedder (the distillation's manifest included)."""
        return {
            "name": self.name,
            "dim": self.dim,
            "cache_key": self.cache_key,
            "devices": ["cpu"],
            **self.manifest,
        }
