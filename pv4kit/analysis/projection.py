"""2-D projections of embeddings for the map figures: UMAP fitted once on the rows a figure needs.

* :func:`umap_2d`: vectors in, ``(n, 2)`` coordinates out (cosine, seeded, exact k-nearest neighbours);
* :func:`with_question_umap`: a scored-runs frame plus ``x, y`` of each question, the UMAP fitted once on
  the distinct questions the frame holds (not on every question of the dataset);
* :func:`with_category_umap`: the categories of :func:`pv4kit.analysis.audit.categories.category_groups`
  plus ``x, y`` of each name.

The figures themselves are :func:`pv4kit.analysis.plots.errors.question_map` and
:func:`pv4kit.analysis.plots.dataset.category_map`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.analysis.fitcache import beside_embeddings, stored_fit
from pv4kit.embeddings.models import embed_texts
from pv4kit.schema import QUESTION_KEY
from pv4kit.vectors import unit_rows

logger = logging.getLogger(__name__)

_KNN_BLOCK = 2048  # rows of the distance matrix held at once (2048 x 21,000 float32 is 172 MB)


def _exact_knn(unit: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosine distances of each row's ``k`` nearest rows, a block of rows at a time.

    Within a row the neighbours are ordered by distance, then index. Among rows exactly as far as the
    k-th neighbour, which ones are kept is numpy's (deterministic) choice.
    """
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
    """2-D UMAP of ``vectors`` under cosine distance, reproducible for a given ``seed``.

    The exact k-nearest neighbours are computed with numpy, a block of rows at a time (memory grows with
    the number of rows, not its square), and passed in (``precomputed_knn``), which skips most of numba's
    compilation: the first fit in a process takes about 9 s instead of 25 s on two cores; later fits are
    well under a second for a few thousand points. Fewer than five points are placed by PCA instead.

    Args:
        vectors: ``(n, dim)`` array.
        seed: ``random_state`` of UMAP.
        n_neighbors: Neighbourhood size (capped at ``n - 1``).
        min_dist: UMAP's ``min_dist``.
        n_epochs: Optimisation epochs (default: UMAP's; small values make tests fast).
        cache: Where fitted coordinates are kept: ``True`` for ``cache_root()/umap`` (``$PV4KIT_CACHE``),
            a folder, or ``False``/``None`` to always fit. The key is the SHA-256 of the vectors' bytes,
            every option above and the versions of umap-learn, numba and numpy, so a hit returns the
            coordinates the same fit gives; it saves the fit (about 22 s for 1,490 category names on
            two cores, most of it numba compiling) and the import of umap.

    Returns:
        ``(n, 2)`` float array.
    """
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors: expected a 2-D array, got shape {x.shape}")
    n = len(x)
    if n < 5:
        centred = x - x.mean(axis=0, keepdims=True)
        if n < 2:
            return np.zeros((n, 2))
        u, s, _ = np.linalg.svd(centred, full_matrices=False)
        out = u[:, :2] * s[:2]
        return np.pad(out, ((0, 0), (0, 2 - out.shape[1])))
    k = max(2, min(n_neighbors, n - 1))
    return stored_fit(
        "umap",
        x,
        lambda: _fit_umap(x, seed=seed, k=k, min_dist=min_dist, n_epochs=n_epochs),
        options={
            "seed": seed,
            "n_neighbors": k,
            "min_dist": min_dist,
            "n_epochs": n_epochs,
            "knn": _KNN_BLOCK,
        },
        packages=("umap-learn", "numba", "numpy"),
        shape=(n, 2),
        cache=cache,
    )


def _fit_umap(x: np.ndarray, *, seed: int, k: int, min_dist: float, n_epochs: int | None) -> np.ndarray:
    """The fit itself: exact neighbours (numpy), then UMAP's layout from them."""
    import warnings

    try:
        import umap
    except ImportError:  # pragma: no cover - a declared dependency
        raise ImportError("umap_2d needs umap-learn: pip install umap-learn") from None

    n = len(x)
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
            init="spectral" if n > k + 1 else "random",
        )
        return reducer.fit_transform(unit)


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

    The UMAP is fitted once, on the distinct questions ``frame`` holds (by ``user_id, question_index``),
    so every run's panel shares the same coordinates and questions no run answered are not projected.

    Args:
        frame: Rows with ``user_id, question_index`` (one question may appear once per run).
        questions: The questions frame the texts come from (``user_id, question_index, question``).
        embedder: Any :class:`~pv4kit.embeddings.models.Embedder` (the embedding cache is shared with
            scoring and the audits).
        cache: Embedding cache; the UMAP's fit is kept in ``umap/`` beside it
            (:func:`~pv4kit.analysis.fitcache.beside_embeddings`), and ``False``/``None`` fits afresh.
        seed: UMAP seed.
        n_epochs: UMAP epochs (default: UMAP's).

    Returns:
        ``frame`` with ``x`` and ``y`` columns, in its row order, and the ``embedder``'s name.

    Raises:
        KeyError: When ``frame`` holds questions that ``questions`` lacks (naming how many and one).
    """
    keys = frame[QUESTION_KEY].drop_duplicates().sort_values(QUESTION_KEY, ignore_index=True)
    texts = keys.merge(questions[[*QUESTION_KEY, "question"]], on=QUESTION_KEY, how="left")
    missing = texts["question"].isna()
    if missing.any():
        first = texts.loc[missing, QUESTION_KEY].iloc[0].tolist()
        raise KeyError(
            f"frame: {int(missing.sum())} question(s) not in questions, e.g. (user_id, question_index) = "
            f"{tuple(first)}"
        )
    logger.info("question UMAP: %d distinct questions", len(texts))
    vectors = embed_texts(list(texts["question"]), embedder=embedder, cache=cache, progress=False)
    xy = umap_2d(vectors, seed=seed, n_epochs=n_epochs, cache=beside_embeddings(cache, "umap"))
    coords = keys.assign(x=xy[:, 0], y=xy[:, 1])
    out = frame.drop(columns=[c for c in ("x", "y") if c in frame])
    out = out.merge(coords, on=QUESTION_KEY, how="left", validate="many_to_one")
    return out.assign(embedder=str(getattr(embedder, "name", embedder)))


def with_category_umap(
    categories: pd.DataFrame,
    *,
    seed: int = 0,
    n_epochs: int | None = None,
    cache: bool | str | os.PathLike[str] | None = True,
) -> pd.DataFrame:
    """``categories`` (with their unit ``vector`` column) plus ``x, y`` on a UMAP of the names.

    ``cache`` is :func:`umap_2d`'s (the fit is kept under ``cache_root()/umap`` by default).
    """
    if categories.empty:
        return categories.assign(x=pd.Series(dtype=float), y=pd.Series(dtype=float))
    xy = umap_2d(np.stack(categories["vector"]), seed=seed, n_epochs=n_epochs, cache=cache)
    return categories.assign(x=xy[:, 0], y=xy[:, 1])
