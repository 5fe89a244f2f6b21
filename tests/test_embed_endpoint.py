"""The OpenAI-compatible embeddings backend against a hand-written loopback server computing MiniLM vectors.

It serves what a real server cannot be made to show on demand: 429/500 storms with Retry-After, hangs,
413 batch limits, keys, revisions and concurrency counts. Equality with vLLM's real ``/v1/embeddings``
(vectors and a whole ``pv4kit score``) is in ``tests/test_vllm.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from pv4kit.embeddings.cache import EmbeddingCache
from pv4kit.embeddings.endpoint import EmbeddingEndpointError, EndpointEmbedder
from pv4kit.embeddings.models import embed_texts, get_embedder
from pv4kit.llm.config import LLMConfigError
from tests.embed_server import FakeEmbeddingServer, Fault

RAW = Path(__file__).resolve().parents[1] / "raw"
MODEL = "minilm-served"
TEXTS = [
    "I love hiking in the mountains.",
    "Mountain trekking is my passion, especially at dawn with a thermos of tea.",
    "The stock market fell today.",
    "ok",
    "Weighs flour to the gram and keeps a notebook of every failed croissant batch since 2019.",
    "",
    "Night shifts, dry humour, ultramarathons.",
    "She saves every euro for her own shop in Lyon.",
    "A" * 300,
    "bees",
    "church band on Sundays",
]


@pytest.fixture(scope="module")
def served(minilm):
    """A server computing vectors with the installed MiniLM (one ``encode`` per request)."""
    with FakeEmbeddingServer(
        minilm.encode, model=MODEL, root="sentence-transformers/all-MiniLM-L6-v2"
    ) as srv:
        yield srv


@pytest.fixture
def server(served):
    served.faults.clear()
    served.requests.clear()
    served.statuses.clear()
    served.max_batch = served.max_chars = None
    served.delay = 0.0
    served.max_in_flight = 0
    return served


def _fast(base_url, **kw):
    """An endpoint embedder with test-sized backoff."""
    return EndpointEmbedder(MODEL, base_url=base_url, backoff_base=0.01, backoff_max=0.05, **kw)


def _direct(minilm, texts, size):
    """What the server computes for ``texts`` sent ``size`` per request, encoded here directly."""
    return np.concatenate([minilm.encode(texts[i : i + size]) for i in range(0, len(texts), size)])


@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_received_vectors_equal_a_direct_minilm_encode(server, minilm, encoding):
    emb = _fast(server.base_url, batch_size=4, encoding_format=encoding)
    assert emb.dim == 384
    got = emb.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
    np.testing.assert_array_equal(got, _direct(minilm, TEXTS, 4))  # bit for bit
    np.testing.assert_allclose(got, minilm.encode(TEXTS), atol=1e-6)  # batching moves only the last bits
    bodies = [b for b in server.requests if b["input"] != ["dimension probe"]]
    assert {b["encoding_format"] for b in bodies} == {encoding}
    assert sorted(len(b["input"]) for b in bodies) == [3, 4, 4]


def test_the_server_speaks_the_openai_sdk_wire_format(server, minilm):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    resp = client.embeddings.create(model=MODEL, input=TEXTS[:3])  # the SDK asks for base64 and decodes
    assert server.requests[-1]["encoding_format"] == "base64"
    sdk = np.array([d.embedding for d in resp.data], dtype=np.float32)
    np.testing.assert_array_equal(sdk, _fast(server.base_url, batch_size=3).encode(TEXTS[:3]))
    floats = client.embeddings.create(model=MODEL, input="ok", encoding_format="float")
    np.testing.assert_array_equal(np.float32(floats.data[0].embedding), minilm.encode(["ok"])[0])


def test_get_embedder_and_embed_texts_through_the_endpoint(server, minilm, tmp_path, monkeypatch):
    emb = get_embedder(f"openai:{MODEL}", base_url=server.base_url)
    assert emb.name == f"openai:{MODEL}"
    vecs = embed_texts(TEXTS + TEXTS[:2], embedder=emb, cache=tmp_path, progress=False)
    np.testing.assert_allclose(vecs[: len(TEXTS)], minilm.encode(TEXTS), atol=1e-6)
    np.testing.assert_array_equal(vecs[-2:], vecs[:2])
    n = len(server.requests)
    again = embed_texts(TEXTS, embedder=emb, cache=tmp_path, progress=False)
    assert len(server.requests) == n  # all cached
    np.testing.assert_array_equal(again, vecs[: len(TEXTS)])
    monkeypatch.setenv("PV4KIT_EMBED_BASE_URL", server.base_url)  # what notebooks and other commands use
    assert get_embedder(f"openai:{MODEL}").cache_key == emb.cache_key


def test_cache_key_names_the_served_model_and_revision_not_the_url(minilm, tmp_path):
    root = "Qwen/Qwen3-Embedding-4B"
    with (
        FakeEmbeddingServer(minilm.encode, model=MODEL, root=root, revision="5cf2132") as a,
        FakeEmbeddingServer(minilm.encode, model=MODEL, root=root, revision="5cf2132") as b,
        FakeEmbeddingServer(minilm.encode, model=MODEL, root=root, revision="ffffff0") as c,
    ):
        ea, eb, ec = (_fast(s.base_url) for s in (a, b, c))
        assert ea.cache_key == eb.cache_key != ec.cache_key
        assert ea.cache_key.startswith(f"openai:{root}|rev=5cf2132|dim=384")
        assert "127.0.0.1" not in ea.cache_key
        embed_texts(TEXTS, embedder=ea, cache=tmp_path, progress=False)
        before = len(b.requests)
        embed_texts(TEXTS, embedder=eb, cache=tmp_path, progress=False)  # another host: cache hits
        assert len(b.requests) == before
        with pytest.raises(ValueError, match="do not serve the same model"):
            _fast(f"{a.base_url},{c.base_url}")
        with pytest.raises(ValueError, match="revision"):
            _fast(a.base_url, revision="0000000")
        assert _fast(a.base_url, instruction="Instruct: x\nQuery:").cache_key != ea.cache_key


def test_the_cache_keys_written_before_are_kept(server):
    # recorded from the endpoint embedder before it took an options dataclass: old caches are still hit
    root = "openai:sentence-transformers/all-MiniLM-L6-v2|rev=unreported"
    assert (
        get_embedder(f"openai:{MODEL}", base_url=server.base_url).cache_key == f"{root}|dim=384|dtype=float32"
    )
    emb = _fast(server.base_url, dimensions=128, instruction="Q: ")
    assert emb.cache_key == f"{root}|dim=128|dtype=float32|dimensions=128|instruction=Q: "
    assert EmbeddingCache("unused").model_dir(emb.cache_key).name.endswith("-c5ac4f58c161")


def test_a_server_without_v1_models_keys_the_cache_by_the_requested_name(minilm, caplog):
    with FakeEmbeddingServer(minilm.encode, model=MODEL, list_models=False) as srv:
        emb = _fast(srv.base_url)
        assert emb.cache_key.startswith(f"openai:{MODEL}|rev=unreported|dim=384")
        assert "no /v1/models" in caplog.text
        assert _fast(srv.base_url, revision="abc123").cache_key.startswith(f"openai:{MODEL}|rev=abc123|")


def test_texts_are_sharded_across_servers(minilm):
    with (
        FakeEmbeddingServer(minilm.encode, model=MODEL) as a,
        FakeEmbeddingServer(minilm.encode, model=MODEL) as b,
    ):
        emb = get_embedder(f"openai:{MODEL}", base_url=f"{a.base_url}, {b.base_url}", batch_size=2)
        got = emb.encode(TEXTS)
        np.testing.assert_array_equal(got, _direct(minilm, TEXTS, 2))
        sent = {
            s: [t for body in s.requests for t in body["input"] if t != "dimension probe"] for s in (a, b)
        }
        assert len(sent[a]) == 6 and len(sent[b]) == 5  # batches dealt round-robin
        assert sorted(sent[a] + sent[b]) == sorted(TEXTS)


def test_requests_run_concurrently(server):
    server.delay = 0.1
    emb = _fast(server.base_url, batch_size=1, max_concurrency=4)
    server.max_in_flight = 0  # the width probe
    emb.encode(TEXTS[:8])
    assert server.max_in_flight >= 3  # requests overlapped at the server (its 0.1 s wait is unlocked)


def test_429_and_500_storms_are_retried_with_retry_after(server, minilm):
    emb = _fast(server.base_url, batch_size=len(TEXTS))
    server.statuses.clear()  # the width probe
    server.faults = [Fault(429, headers={"Retry-After": "0.3"})] * 3 + [Fault(500), Fault(502), Fault(503)]
    start = time.monotonic()
    got = emb.encode(TEXTS)
    assert time.monotonic() - start >= 0.9  # three Retry-After pauses honoured
    assert server.statuses == [429, 429, 429, 500, 502, 503, 200]
    np.testing.assert_array_equal(got, minilm.encode(TEXTS))


def test_a_storm_longer_than_the_retries_raises_and_keeps_committed_chunks(server, minilm, tmp_path):
    emb = _fast(server.base_url, batch_size=2, max_retries=2, max_concurrency=1)
    server.faults = [Fault(200)] * 2 + [Fault(500)] * 30  # the first chunk's two requests go through
    cache = EmbeddingCache(tmp_path)
    with pytest.raises(EmbeddingEndpointError, match="gave up after 3 attempts"):
        embed_texts(TEXTS, embedder=emb, cache=cache, chunk_size=4, progress=False)
    assert cache.count(emb.cache_key) == 4  # the first chunk, committed; nothing made up for the rest
    server.faults.clear()
    vecs = embed_texts(TEXTS, embedder=emb, cache=cache, chunk_size=4, progress=False)
    np.testing.assert_allclose(vecs, minilm.encode(TEXTS), atol=1e-6)


def test_a_batch_too_large_is_split(server, minilm):
    server.max_batch = 3
    emb = _fast(server.base_url, batch_size=len(TEXTS), max_concurrency=1)
    server.statuses.clear()
    server.requests.clear()
    got = emb.encode(TEXTS)
    assert 413 in server.statuses
    ok = [b for b, s in zip(server.requests, server.statuses, strict=True) if s == 200]
    assert max(len(b["input"]) for b in ok) <= 3
    np.testing.assert_allclose(got, minilm.encode(TEXTS), atol=1e-6)


def test_a_text_over_the_context_length_is_an_error_naming_it(server):
    server.max_chars = 200
    emb = _fast(server.base_url, batch_size=len(TEXTS))
    with pytest.raises(EmbeddingEndpointError, match=r"one text of 300 characters.*'AAAA"):
        emb.encode(TEXTS)
    assert server.statuses.count(400) >= 2  # split down to the text itself


def test_a_hanging_server_times_out(server):
    emb = _fast(server.base_url, timeout=0.3, max_retries=1)
    server.faults = [Fault(200, delay=5.0)] * 2
    start = time.monotonic()
    with pytest.raises(EmbeddingEndpointError, match="(?i)timed? ?out"):
        emb.encode(TEXTS[:2])
    assert time.monotonic() - start < 3.0


def test_the_api_key_comes_from_the_environment_and_is_never_written(minilm, tmp_path, monkeypatch):
    secret = "sk-pv4kit-test-secret-0123456789"
    with FakeEmbeddingServer(minilm.encode, model=MODEL, api_key=secret) as srv:
        monkeypatch.setenv("PV4KIT_TEST_EMBED_KEY", "sk-wrong-key-000000000000")
        with pytest.raises(LLMConfigError) as err:
            get_embedder(f"openai:{MODEL}", base_url=srv.base_url, api_key_env="PV4KIT_TEST_EMBED_KEY")
        assert "sk-wrong" not in str(err.value) and "PV4KIT_TEST_EMBED_KEY" in str(err.value)
        monkeypatch.setenv("PV4KIT_TEST_EMBED_KEY", secret)
        emb = get_embedder(f"openai:{MODEL}", base_url=srv.base_url, api_key_env="PV4KIT_TEST_EMBED_KEY")
        embed_texts(TEXTS, embedder=emb, cache=tmp_path, progress=False)
        assert secret not in json.dumps(emb.describe()) and secret not in emb.cache_key
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_bad_names_and_options(server):
    with pytest.raises(LLMConfigError, match=r"'nope' is not served.*minilm-served"):
        get_embedder("openai:nope", base_url=server.base_url)
    with pytest.raises(ValueError, match="base_url"):
        get_embedder("minilm", base_url=server.base_url)
    with pytest.raises(ValueError, match="device"):
        get_embedder(f"openai:{MODEL}", base_url=server.base_url, device="cuda")
    with pytest.raises(ValueError, match="model id"):
        get_embedder("openai:", base_url=server.base_url)


def test_urls_are_recorded_without_credentials(server):
    from pv4kit.embeddings.endpoint import public_url

    assert public_url("http://user:secret@host:8000/v1?api_key=sk-1#x") == "http://host:8000/v1"
    emb = _fast(server.base_url)
    assert emb.describe()["base_urls"] == [server.base_url]


# a whole `pv4kit score` on the sample through a real vLLM pooling server: tests/test_vllm.py


@pytest.mark.parametrize("bad", ["nan", "inf", "zero"])
@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_invalid_vectors_are_an_error_naming_the_server_model_and_batch(minilm, tmp_path, bad, encoding):
    """NaN/inf values, or a batch of all-zero vectors, are refused; nothing of that chunk is cached."""

    def encode(texts):
        vectors = minilm.encode(texts)
        if "poison" in texts:
            if bad == "zero":
                vectors[:] = 0.0
            else:
                vectors[texts.index("poison"), 3] = np.nan if bad == "nan" else np.inf
        return vectors

    cache = EmbeddingCache(tmp_path)
    with FakeEmbeddingServer(encode, model=MODEL) as srv:
        emb = _fast(srv.base_url, batch_size=2, max_concurrency=1, encoding_format=encoding)
        texts = ["aaaaaa", "bbbbbb", "cccccc", "poison"]  # one length: the batches keep this order
        what = "all 2 vectors are zero" if bad == "zero" else "1 of 2 vectors hold NaN or infinite values"
        with pytest.raises(EmbeddingEndpointError, match=rf"127\.0\.0\.1.*{MODEL}.*batch 2 of 2.*{what}"):
            embed_texts(texts, embedder=emb, cache=cache, progress=False)
        assert cache.count(emb.cache_key) == 0
        # a chunk of good vectors before the bad one is kept, the bad chunk is not
        with pytest.raises(EmbeddingEndpointError, match="batch 1 of 1"):
            embed_texts(texts, embedder=emb, cache=cache, chunk_size=2, progress=False)
        assert cache.count(emb.cache_key) == 2
