"""Vector helpers shared by retrieval, the audits, the plots and the related benchmarks.

Scoring does *not* use these: it follows the reference's float16 rule (``norm + 1e-8``), see
:mod:`pv4kit.scoring.numerics`.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def unit_rows(vectors: Any, *, eps: float = 1e-12) -> np.ndarray:
    """Each row (last axis) scaled to length 1, as float32; a zero row stays zero (norm floored at ``eps``).

    Args:
        vectors: An array-like of shape ``(..., d)``.
        eps: The smallest norm divided by.

    Returns:
        A float32 array of the same shape.
    """
    x = np.asarray(vectors, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), np.float32(eps))


def check_vectors(vectors: np.ndarray, *, where: str, error: type[Exception] = ValueError) -> None:
    """Refuse a batch of embeddings that holds NaN or infinite values, or whose vectors are all zero.

    Every encoder's output passes through here (:func:`pv4kit.embeddings.models.embed_texts`, and the
    endpoint embedder per request batch, to name the server), before anything of it is cached.

    Args:
        vectors: The ``(n, dim)`` batch.
        where: What made it (embedder or server, model, batch), for the message.
        error: The exception class raised.

    Raises:
        error: Naming ``where`` and the first bad row.
    """
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        raise error(
            f"{where}: {int(bad.sum())} of {len(vectors)} vectors hold NaN or infinite values (first: "
            f"row {int(bad.argmax())}); nothing of this batch is cached"
        )
    if len(vectors) and not vectors.any():
        raise error(f"{where}: all {len(vectors)} vectors are zero; nothing of this batch is cached")
