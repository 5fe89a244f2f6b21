"""Results of deterministic fits kept on disk (UMAP coordinates, cluster labels), keyed by their inputs.

A fit is stored as ``<root>/<kind>/<key>.npy`` where the key is the SHA-256 of the input array's bytes,
its shape and dtype, the fit's options and the versions of the packages that compute it. A hit returns
the array the same fit gives (and skips importing the fitting library: numba's compilation for UMAP,
scikit-learn for clustering); an unreadable or misshapen file is logged and fitted again. The root is
``cache_root()`` (``$PV4KIT_CACHE``) for ``cache=True``, or the folder given.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pv4kit._io import atomic_path, cache_root
from pv4kit.embeddings.cache import EmbeddingCache

logger = logging.getLogger(__name__)


def package_version(dist: str) -> str:
    """The installed version of distribution ``dist`` (``"absent"`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "absent"


def beside_embeddings(cache: Any, kind: str) -> bool | Path:
    """Where a fit made from embeddings cached in ``cache`` is kept: ``kind/`` beside that store.

    ``cache`` is an ``embed_texts`` cache argument: ``True`` (the default store, so ``cache_root()/kind``),
    a folder or an :class:`~pv4kit.embeddings.cache.EmbeddingCache` (its parent folder gets ``kind/``;
    ``.cache/pv4kit/embeddings`` -> ``.cache/pv4kit/umap``), or ``False``/``None`` (no fit is kept either).
    """
    if cache is None or cache is False:
        return False
    if cache is True:
        return True
    root = cache.root if isinstance(cache, EmbeddingCache) else Path(cache)
    return root.parent / kind


def stored_fit_path(
    kind: str,
    x: np.ndarray,
    *,
    options: dict[str, Any],
    packages: Sequence[str],
    cache: bool | str | os.PathLike[str] | None = True,
) -> Path | None:
    """The file that holds (or will hold) the ``kind`` fit of ``x`` under ``options``; None: no cache."""
    if cache is None or cache is False:
        return None
    meta = {
        "shape": list(x.shape),
        "dtype": str(x.dtype),
        "options": options,
        "versions": {d: package_version(d) for d in packages},
    }
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    digest.update(np.ascontiguousarray(x).tobytes())
    root = cache_root() / kind if cache is True else Path(cache)
    return root / f"{digest.hexdigest()[:32]}.npy"


def stored_fit(
    kind: str,
    x: np.ndarray,
    compute: Callable[[], np.ndarray],
    *,
    options: dict[str, Any],
    packages: Sequence[str],
    shape: tuple[int, ...],
    cache: bool | str | os.PathLike[str] | None = True,
) -> np.ndarray:
    """``compute()``'s result for ``x``, read from the store when the same fit was kept before.

    Args:
        kind: The fit's folder under the cache root (``"umap"``, ``"clusters"``).
        x: The input array (its bytes are part of the key).
        compute: The fit itself; its result is stored.
        options: Everything else the result depends on (JSON-serialisable).
        packages: Distributions whose versions are part of the key.
        shape: The shape a stored result must have to be used.
        cache: ``True`` (``cache_root()/kind``), a folder, or ``False``/``None`` to always compute.
    """
    path = stored_fit_path(kind, x, options=options, packages=packages, cache=cache)
    if path is not None and path.is_file():
        try:
            stored = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            logger.warning("%s cache %s unreadable (%s); fitting again", kind, path, exc)
        else:
            if stored.shape == shape:
                logger.info("%s of %d rows read from %s", kind, len(x), path)
                return stored
            logger.warning(
                "%s cache %s holds shape %s, expected %s; fitting again", kind, path, stored.shape, shape
            )
    out = np.asarray(compute())
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.save(fh, out, allow_pickle=False)
    return out
