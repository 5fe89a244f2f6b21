"""Faster CPU backends for the MiniLM embedder: ONNX Runtime (fp32 or int8) and OpenVINO.

The default embedder (sentence-transformers on PyTorch) is unchanged; these are named options for the
audits and notebooks on a CPU, chosen with ``get_embedder("minilm", backend=...)``:

- ``"onnx"``: the model exported once to ONNX (fp32), run by ``onnxruntime``;
- ``"onnx-int8"``: the same export with int8 dynamic quantisation of its weights (measured min cosine
  0.966 against PyTorch on the sample's texts: below the 0.999 rule, kept for benchmarking only);
- ``"openvino"``: the fp32 ONNX export compiled by OpenVINO for the CPU.

The export is built from the local model folder (nothing is downloaded) into
``cache_root() / "onnx" / <model>-<weights digest>-<variant>``: it is written in a temporary folder
beside it, completed by a ``manifest.json`` written last, and renamed into place, so a half-written
export is never loaded (a folder without its manifest is rebuilt). Tokenisation, mean pooling and the
final L2 normalisation follow the sentence-transformers pipeline of the model folder
(``modules.json``, ``1_Pooling/config.json``, ``sentence_bert_config.json``), and every backend's
cache key names the backend, so its vectors never mix with the PyTorch ones in the embedding cache.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
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
    if final.exists():
        logger.warning("%s: incomplete export (no valid %s); rebuilding it", final, _MANIFEST)
        shutil.rmtree(final)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=root))
    try:
        logger.info("exporting %s to ONNX (%s) in %s", model_dir, variant, final)
        if variant == "fp32":
            _export_fp32(model_dir, tmp / "model.onnx")
        else:
            fp32 = export_model(model_dir, variant="fp32", export_dir=root)
            _quantize_int8(fp32 / "model.onnx", tmp / "model.onnx")
        atomic_write_json(tmp / _MANIFEST, manifest)  # written last: it marks the export complete
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first: use its export
            if not _complete(final, manifest):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _complete(folder: Path, manifest: dict[str, Any]) -> bool:
    try:
        found = json.loads((folder / _MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return found == manifest and (folder / "model.onnx").is_file()


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
