"""Cosine similarity between each generation and its non-empty candidates, in one of two numerics.

``"float16"`` (default) is the reference scorer's arithmetic (Memorilla ``metrics.py``): the encoder's
output cast to float16, and per question the generation vector and its candidates' matrix each divided by
their L2 norm plus ``1e-8`` and multiplied with NumPy's float16 kernels. The cast happens here, so the
embedding cache keeps float32 vectors. ``"float32"`` normalises and multiplies in float32 (fewer ties; it
can differ from the reference on near-ties, docs/scoring.md). An empty candidate gets ``NaN``.
"""

from __future__ import annotations

import numpy as np

NUMERICS = ("float16", "float32")
DEFAULT_NUMERICS = "float16"
_EPS = 1e-8  # added to every norm, as the reference does (it vanishes in float16 arithmetic)


def check_numerics(numerics: str) -> str:
    """Return ``numerics`` if it is one of :data:`NUMERICS`, else raise ``ValueError`` naming it."""
    if numerics not in NUMERICS:
        raise ValueError(f"numerics: expected one of {list(NUMERICS)}, got {numerics!r}")
    return numerics


def candidate_similarities(
    queries: np.ndarray, candidates: np.ndarray, mask: np.ndarray, *, numerics: str = DEFAULT_NUMERICS
) -> np.ndarray:
    """Cosine similarity of each query with each of its non-empty candidates.

    Args:
        queries: ``(n, dim)`` generation vectors as the encoder returned them.
        candidates: ``(mask.sum(), dim)`` vectors of the non-empty candidates, row by row in letter order.
        mask: ``(n, k)`` booleans, True where a candidate is non-empty.
        numerics: ``"float16"`` (the reference's arithmetic) or ``"float32"``.

    Returns:
        ``(n, k)`` float32 similarities (float16 values exactly, under ``"float16"``), ``NaN`` where the
        candidate is empty.
    """
    check_numerics(numerics)
    mask = np.asarray(mask, dtype=bool)
    if len(candidates) != int(mask.sum()):
        raise ValueError(
            f"candidates: expected {int(mask.sum())} rows (one per non-empty candidate), "
            f"got {len(candidates)}"
        )
    out = np.full(mask.shape, np.nan, dtype=np.float32)
    if numerics == "float32":
        q, c = (np.array(v, dtype=np.float32) for v in (queries, candidates))
        for v in (q, c):
            v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), np.float32(1e-12))  # zero stays zero
        rr, cc = np.nonzero(mask)  # row-major order == the order of the candidate rows
        if len(rr):
            out[rr, cc] = np.einsum("ij,ij->i", q[rr], c)
        return out
    q16, c16 = np.asarray(queries).astype(np.float16), np.asarray(candidates).astype(np.float16)
    offset = 0
    # a zero vector gives NaN and float16 overflow inf, as in the reference; no warning
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for i in range(len(q16)):  # row by row: the reference's NumPy calls on the same shapes
            cols = np.flatnonzero(mask[i])
            block = c16[offset : offset + len(cols)]
            offset += len(cols)
            if len(cols):
                vector = q16[i] / (np.linalg.norm(q16[i]) + _EPS)
                out[i, cols] = vector @ (block / (np.linalg.norm(block, axis=-1, keepdims=True) + _EPS)).T
    return out
