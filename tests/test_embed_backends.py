"""The ONNX / OpenVINO CPU backends of MiniLM against the PyTorch embedder, on the sample's real texts."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from pv4kit.embeddings import backends as embed_backends  # noqa: E402
from pv4kit.embeddings.cache import EmbeddingCache  # noqa: E402
from pv4kit.embeddings.models import _minilm_path, embed_texts, get_embedder  # noqa: E402


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-exports")


@pytest.fixture(scope="module")
def onnx_minilm(export_dir):
    return get_embedder("minilm", backend="onnx", export_dir=export_dir)


@pytest.fixture(scope="module")
def sample_texts():
    import pv4kit

    questions = pv4kit.load("raw").questions.head(12)
    texts = list(questions["question"]) + list(questions["rationale"])
    texts += [str(c) for choices in questions["choices"].head(3) for c in choices]
    return texts + ["", "x " * 400]  # an empty text and one past the 256-token limit


@pytest.fixture(scope="module")
def pytorch_vectors(minilm, sample_texts):
    return minilm.encode(sample_texts)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def test_onnx_matches_pytorch_on_sample_texts(onnx_minilm, pytorch_vectors, sample_texts):
    cos = _cosines(onnx_minilm.encode(sample_texts, batch_size=16), pytorch_vectors)
    assert cos.shape == (len(sample_texts),)
    assert cos.min() >= 0.999, f"min cosine {cos.min():.5f}"


def test_openvino_matches_pytorch_on_sample_texts(export_dir, pytorch_vectors, sample_texts):
    pytest.importorskip("openvino")
    ov = get_embedder("minilm", backend="openvino", export_dir=export_dir)  # reuses the fp32 export
    cos = _cosines(ov.encode(sample_texts), pytorch_vectors)
    assert cos.min() >= 0.999, f"min cosine {cos.min():.5f}"


def test_cache_key_names_the_backend_and_vectors_stay_apart(onnx_minilm, minilm, tmp_path):
    assert onnx_minilm.cache_key != minilm.cache_key
    assert "backend=onnx" in onnx_minilm.cache_key and onnx_minilm.name == minilm.name
    # the keys written before the embedders were rebuilt on a backend registry: old caches are still hit
    before = "sentence-transformers/all-MiniLM-L6-v2|rev=default|dim=384|backend=onnx|export=v1"
    assert onnx_minilm.cache_key == before
    assert EmbeddingCache(tmp_path).model_dir(before).name.endswith("-8fd963004bce")
    cache = EmbeddingCache(tmp_path / "emb")
    embed_texts(["a cup of tea"], embedder=minilm, cache=cache)
    embed_texts(["a cup of tea"], embedder=onnx_minilm, cache=cache)
    assert cache.count(minilm.cache_key) == 1 and cache.count(onnx_minilm.cache_key) == 1
    assert sorted(cache.models()) == sorted([minilm.cache_key, onnx_minilm.cache_key])


def test_export_is_reused_on_a_second_load(onnx_minilm, export_dir):
    onnx_file = onnx_minilm.export / "model.onnx"
    before = os.stat(onnx_file)
    again = get_embedder("minilm", backend="onnx", export_dir=export_dir)
    assert again.export == onnx_minilm.export
    after = os.stat(onnx_file)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert [p.name for p in export_dir.iterdir() if p.name.startswith(".")] == []  # no temp folders left


def test_a_half_written_export_is_rebuilt_not_used(onnx_minilm, tmp_path, sample_texts):
    folder = tmp_path / onnx_minilm.export.name
    folder.mkdir()
    good = (onnx_minilm.export / "model.onnx").read_bytes()
    (folder / "model.onnx").write_bytes(good[: len(good) // 3])  # a crash mid-write: no manifest
    rebuilt = embed_backends.export_model(_minilm_path(), variant="fp32", export_dir=tmp_path)
    assert rebuilt == folder
    assert (folder / "model.onnx").stat().st_size == len(good)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["variant"] == "fp32"
    emb = embed_backends.OnnxEmbedder(_minilm_path(), name="m", backend="onnx", export_dir=tmp_path)
    assert np.isfinite(emb.encode(sample_texts[:4])).all()


def test_a_failed_export_leaves_nothing_behind(onnx_minilm, export_dir, monkeypatch):
    def broken(src, dest):
        dest.write_bytes(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(embed_backends, "_quantize_int8", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        embed_backends.export_model(_minilm_path(), variant="int8", export_dir=export_dir)
    assert not any("int8" in p.name for p in export_dir.iterdir())


def test_bad_backend_and_options_are_named():
    with pytest.raises(ValueError, match="backend"):
        embed_backends.OnnxEmbedder(_minilm_path(), name="m", backend="tensorrt")
    with pytest.raises(ValueError, match="backend='onnx'"):
        get_embedder("minilm", backend="onnx", instruction="Query:")
    with pytest.raises(ValueError, match="variant"):
        embed_backends.export_model(_minilm_path(), variant="fp16")
