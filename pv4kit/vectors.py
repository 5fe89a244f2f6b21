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
