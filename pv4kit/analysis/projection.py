"""2-D UMAP coordinates for the map figures (:func:`pv4kit.analysis.plots.question_map`, ``category_map``)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import atomic_path, cache_root
from pv4kit.embeddings.cache import EmbeddingCache
from pv4kit.embeddings.models import embed_texts
from pv4kit.schema import QUESTION_KEY
from pv4kit.vectors import unit_rows

logger = logging.getLogger(__name__)

_KNN_BLOCK = 2048  # rows of the distance matrix held at once (2048 x 21,000 float32 is 172 MB)


def package_version(dist: str) -> str:
    """The installed version of distribution ``dist`` (``"absent"`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "absent"


def beside_embeddings(cache: Any) -> bool | Path:
    """Where :func:`umap_2d` keeps fits of vectors from the embedding cache ``cache``: ``umap/`` beside it.

    ``True`` stays ``True`` (``cache_root()/umap``), ``False``/``None`` keeps nothing; a folder or an
    :class:`~pv4kit.embeddings.cache.EmbeddingCache` gives its parent's ``umap/``.
    """
    if cache in (None, False, True):
        return bool(cache)
    return (cache.root if isinstance(cache, EmbeddingCache) else Path(cache)).parent / "umap"


def _exact_knn(unit: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosine distances of each row's ``k`` nearest rows (by distance, then index), in blocks."""
    n = len(unit)
    order = np.empty((n, k), dtype=np.int64)
    dists = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, _KNN_BLOCK):
        stop = min(n, start + _KNN_BLOCK)
        dist = np.clip(1.0 - unit[start:stop] @ unit.T, 0.0, 2.0)
        dist[np.arange(stop - start), np.arange(start, stop)] = 0.0
        part = np.argpartition(dist, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (len(dist), 1))
        near = np.take_along_axis(dist, part, axis=1)
        by = np.lexsort((part, near), axis=1)
        order[start:stop] = np.take_along_axis(part, by, axis=1)
        dists[start:stop] = np.take_along_axis(near, by, axis=1)
    return order, dists


def umap_2d(
    vectors: np.ndarray,
    *,
    seed: int = 0,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
    n_epochs: int | None = None,
    cache: bool | str | os.PathLike[str] | None = True,
) -> np.ndarray:
    """2-D UMAP of ``vectors`` under cosine distance (exact neighbours), reproducible for a given ``seed``.

    Fewer than five points are placed by PCA instead.

    Args:
        vectors: ``(n, dim)`` array.
        seed: ``random_state`` of UMAP.
        n_neighbors: Neighbourhood size (capped at ``n - 1``).
        min_dist: UMAP's ``min_dist``.
        n_epochs: Optimisation epochs (default: UMAP's).
        cache: Where fits are kept (``True``: ``cache_root()/umap``; a folder; ``False``/``None``: always
            fit), keyed by the vectors, the options above and the umap-learn, numba and numpy versions.
            A fit read back saves 15.1 s (test questions) and 9.4 s (category names) at release size on 2
            cores (``benchmarks/bench_fits.py``).

    Returns an ``(n, 2)`` float array.
    """
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors: expected a 2-D array, got shape {x.shape}")
    n = len(x)
    if n < 2:
        return np.zeros((n, 2))
    if n < 5:
        u, s, _ = np.linalg.svd(x - x.mean(axis=0, keepdims=True), full_matrices=False)
        out = u[:, :2] * s[:2]
        return np.pad(out, ((0, 0), (0, 2 - out.shape[1])))
    k = max(2, min(n_neighbors, n - 1))
    path = None
    if cache is not None and cache is not False:
        versions = {d: package_version(d) for d in ("umap-learn", "numba", "numpy")}
        options = dict(seed=seed, n_neighbors=k, min_dist=min_dist, n_epochs=n_epochs, knn=_KNN_BLOCK)
        meta = {"shape": list(x.shape), "dtype": str(x.dtype), "options": options, "versions": versions}
        digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
        digest.update(np.ascontiguousarray(x).tobytes())
        path = (cache_root() / "umap" if cache is True else Path(cache)) / f"{digest.hexdigest()[:32]}.npy"
        try:
            stored = np.load(path, allow_pickle=False)
            if stored.shape != (n, 2):
                raise ValueError(f"shape {stored.shape}, expected {(n, 2)}")
            return stored
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            logger.warning("umap cache %s unreadable (%s); fitting again", path, exc)
    out = _fit_umap(x, seed=seed, k=k, min_dist=min_dist, n_epochs=n_epochs)
    if path is not None:
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.save(fh, out, allow_pickle=False)
    return out


def _fit_umap(x: np.ndarray, *, seed: int, k: int, min_dist: float, n_epochs: int | None) -> np.ndarray:
    """Exact neighbours (numpy, which skips most of numba's compilation), then UMAP's layout from them."""
    import warnings

    import umap

    unit = unit_rows(x)
    order, dists = _exact_knn(unit, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # n_jobs / precomputed_knn notes
        reducer = umap.UMAP(
            n_components=2,
            n_neighbors=k,
            min_dist=min_dist,
            metric="cosine",
            random_state=seed,
            n_epochs=n_epochs,
            precomputed_knn=(order, dists, None),
            init="spectral" if len(x) > k + 1 else "random",
        )
        return np.asarray(reducer.fit_transform(unit))


def with_question_umap(
    frame: pd.DataFrame,
    questions: pd.DataFrame,
    *,
    embedder: Any,
    cache: Any = True,
    seed: int = 0,
    n_epochs: int | None = None,
) -> pd.DataFrame:
    """``frame`` (e.g. stacked predictions of several runs) plus ``x, y``: its questions on one UMAP.

    The UMAP is fitted once, on the distinct questions ``frame`` holds, so every run's panel shares the
    coordinates; rows keep their order and gain the ``embedder``'s name. ``cache`` is the embedding cache;
    the fit is kept in ``umap/`` beside it.

    Raises:
        KeyError: When ``frame`` holds questions that ``questions`` lacks (naming how many and one).
    """
    keys = frame[QUESTION_KEY].drop_duplicates().sort_values(QUESTION_KEY, ignore_index=True)
    texts = keys.merge(questions[[*QUESTION_KEY, "question"]], on=QUESTION_KEY, how="left")
    missing = texts["question"].isna()
    if missing.any():
        first = tuple(texts.loc[missing, QUESTION_KEY].iloc[0].tolist())
        n = int(missing.sum())
        raise KeyError(f"frame: {n} question(s) not in questions, e.g. (user_id, question_index) = {first}")
    logger.info("question UMAP: %d distinct questions", len(texts))
    vectors = embed_texts(list(texts["question"]), embedder=embedder, cache=cache, progress=False)
    xy = umap_2d(vectors, seed=seed, n_epochs=n_epochs, cache=beside_embeddings(cache))
    out = frame.drop(columns=[c for c in ("x", "y") if c in frame])
    out = out.merge(keys.assign(x=xy[:, 0], y=xy[:, 1]), on=QUESTION_KEY, how="left", validate="many_to_one")
    return out.assign(embedder=str(getattr(embedder, "name", embedder)))


def with_category_umap(
    categories: pd.DataFrame, *, seed: int = 0, n_epochs: int | None = None, cache: Any = True
) -> pd.DataFrame:
    """``categories`` (:func:`~pv4kit.analysis.audit.category_groups`) plus ``x, y``: UMAP of the vectors."""
    if categories.empty:
        return categories.assign(x=pd.Series(dtype=float), y=pd.Series(dtype=float))
    xy = umap_2d(np.stack(categories["vector"]), seed=seed, n_epochs=n_epochs, cache=cache)
    return categories.assign(x=xy[:, 0], y=xy[:, 1])
