"""Vector helpers of retrieval, the audits, the plots and the embedders' output check (not of scoring)."""

from __future__ import annotations

from typing import Any

import numpy as np


def unit_rows(vectors: Any, *, eps: float = 1e-12) -> np.ndarray:
    """Each row (last axis) scaled to length 1, as float32; a zero row stays zero (norm floored at eps)."""
    x = np.asarray(vectors, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), np.float32(eps))


def check_vectors(vectors: np.ndarray, *, where: str, error: type[Exception] = ValueError) -> None:
    """Raise ``error`` naming ``where`` and the first bad row of a batch with NaN/inf or only zero vectors."""
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        raise error(
            f"{where}: {int(bad.sum())} of {len(vectors)} vectors hold NaN or infinite values (first: "
            f"row {int(bad.argmax())}); nothing of this batch is cached"
        )
    if len(vectors) and not vectors.any():
        raise error(f"{where}: all {len(vectors)} vectors are zero; nothing of this batch is cached")
