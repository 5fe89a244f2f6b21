"""On-disk embedding cache: one SQLite database (WAL mode) per model key, vectors keyed by the text's SHA-256.

A process killed mid-write leaves the store readable; concurrent writers serialise on SQLite's lock. Layout:
``<root>/<slug>-<hash12>/embeddings.sqlite`` plus ``key.json``; the default root is
``$PV4KIT_CACHE/embeddings`` or ``./.cache/pv4kit/embeddings``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from pv4kit._io import atomic_write_json, cache_root, connect_sqlite, sha256_text
from pv4kit._sqlite import recover_corrupt, storage_errors

logger = logging.getLogger(__name__)

_DTYPES = ("float32", "float16")
_CHUNK = 500  # SQLite's bound-parameter limit is 999 on old builds
_TABLES = {"emb": ("sha", "dim", "dtype", "vec")}  # what a store must hold to be read (else rebuilt)
#: the texts an embedder's ``encode`` takes
Texts = Sequence[str]


def model_key(name: str, *, revision: str, dim: int, **fields: object) -> str:
    """``name|rev=REVISION|dim=DIM`` then ``|field=value`` per field given that is not ``None``, 0 or ""."""
    parts = [name, f"rev={revision}", f"dim={dim}"]
    parts += [f"{key}={value}" for key, value in fields.items() if value]
    return "|".join(parts)


class EmbeddingCache:
    """A directory of per-model SQLite embedding stores.

    Args:
        root: Cache root directory (default ``$PV4KIT_CACHE/embeddings``).
        dtype: Storage precision, ``"float32"`` (exact) or ``"float16"``; vectors come back as float32.
        timeout: Seconds to wait for another writer's lock before failing.
    """

    def __init__(
        self, root: str | os.PathLike[str] | None = None, *, dtype: str = "float32", timeout: float = 120.0
    ) -> None:
        if dtype not in _DTYPES:
            raise ValueError(f"dtype: expected one of {_DTYPES}, got {dtype!r}")
        self.root = Path(root) if root is not None else cache_root() / "embeddings"
        self.dtype, self.timeout = dtype, timeout

    def __repr__(self) -> str:
        return f"EmbeddingCache(root={str(self.root)!r}, dtype={self.dtype!r})"

    def model_dir(self, model_key: str) -> Path:
        """The directory that holds ``model_key``'s vectors."""
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_key).strip("_")[:60] or "model"
        return self.root / f"{slug}-{sha256_text(model_key)[:12]}"

    def _path(self, model_key: str) -> Path:
        return self.model_dir(model_key) / "embeddings.sqlite"

    def _connect(self, model_key: str, *, create: bool) -> sqlite3.Connection | None:
        path = self._path(model_key)
        with storage_errors(path, what="embedding cache"):
            recover_corrupt(path, tables=_TABLES, what="embedding cache", timeout=self.timeout)
            if not path.exists():
                if not create:
                    return None
                path.parent.mkdir(parents=True, exist_ok=True)
                if not (path.parent / "key.json").exists():
                    atomic_write_json(path.parent / "key.json", {"model_key": model_key})
            con = connect_sqlite(path, timeout=self.timeout)
            con.execute(
                "CREATE TABLE IF NOT EXISTS emb (sha TEXT PRIMARY KEY, dim INTEGER NOT NULL, "
                "dtype TEXT NOT NULL, vec BLOB NOT NULL) WITHOUT ROWID"
            )
            return con

    def get(self, model_key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Return ``{sha256: float32 vector}`` for the hashes that are cached (others are absent)."""
        if not hashes or (con := self._connect(model_key, create=False)) is None:
            return {}
        unique, found = sorted(set(hashes)), {}  # in key order: the lookups walk the B-tree forwards
        with contextlib.closing(con):
            for start in range(0, len(unique), _CHUNK):
                part = unique[start : start + _CHUNK]
                rows = con.execute(
                    f"SELECT sha, dtype, vec FROM emb WHERE sha IN ({','.join('?' * len(part))})", part
                )
                found.update(
                    (sha, np.frombuffer(blob, dtype=dtype).astype(np.float32)) for sha, dtype, blob in rows
                )
        return found

    def put(self, model_key: str, hashes: Sequence[str], vectors: np.ndarray) -> int:
        """Store ``vectors`` (one row per hash) in one transaction; returns the number of new rows."""
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[0] != len(hashes):
            raise ValueError(f"vectors: expected shape ({len(hashes)}, dim), got {tuple(vectors.shape)}")
        if not hashes:
            return 0
        stored = np.ascontiguousarray(vectors, dtype=self.dtype)
        rows = (
            (h, stored.shape[1], self.dtype, row.tobytes()) for h, row in zip(hashes, stored, strict=True)
        )
        con = self._connect(model_key, create=True)
        # closing a connection mid-transaction rolls it back: the store keeps only whole commits
        with contextlib.closing(con), storage_errors(self._path(model_key), what="embedding cache"):
            con.execute("BEGIN IMMEDIATE")
            before = con.total_changes
            con.executemany("INSERT OR IGNORE INTO emb (sha, dim, dtype, vec) VALUES (?, ?, ?, ?)", rows)
            con.execute("COMMIT")
            return con.total_changes - before

    def count(self, model_key: str) -> int:
        """Number of vectors cached for ``model_key``."""
        if (con := self._connect(model_key, create=False)) is None:
            return 0
        with contextlib.closing(con):
            return int(con.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def models(self) -> list[str]:
        """The model keys that have a store under this root."""
        keys = []
        for path in sorted(self.root.glob("*/key.json")):
            with contextlib.suppress(OSError, ValueError, KeyError):
                keys.append(json.loads(path.read_text())["model_key"])
        return keys


def hash_texts(texts: Iterable[str]) -> list[str]:
    """SHA-256 hex digests of ``texts`` (the cache's per-text key)."""
    return [sha256_text(t) for t in texts]
