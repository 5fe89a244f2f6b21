"""Cosine similarity between each generation and its non-empty candidates, in one of two numerics.

``"float16"`` (the default) is the reference scorer's arithmetic (Memorilla ``metrics.py``): the
encoder's output is cast to a float16 array (its ``embed_texts`` fills a ``np.float16`` array), and per
question the generation vector and the matrix of its non-empty candidates are each divided by their
L2 norm plus ``1e-8`` and multiplied, all on float16 arrays with NumPy's float16 kernels. The cast
happens here, on the encoder's output, so the embedding cache keeps the encoder's float32 vectors under
a key that does not depend on the scoring numerics.

``"float32"`` (the option) normalises in float32 (a zero vector stays zero) and takes the dot products
in float32: fewer rounding ties, but predictions can differ from the reference's on near-ties
(docs/scoring.md gives the measured share).

Either way an empty candidate gets no similarity (``NaN`` in the returned array); the scorer ranks it at
``-inf`` so it never wins, and takes the first maximum (earliest letter on ties), as ``np.argmax`` does
in the reference.
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


def _float16_rows(queries: np.ndarray, candidates: np.ndarray, mask: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out`` row by row with the reference's float16 cosine (same NumPy calls, same shapes)."""
    q16 = np.asarray(queries).astype(np.float16)
    c16 = np.asarray(candidates).astype(np.float16)
    offset = 0
    for i in range(len(q16)):
        cols = np.flatnonzero(mask[i])
        block = c16[offset : offset + len(cols)]
        offset += len(cols)
        if not len(cols):
            continue
        vector = q16[i]
        vector = vector / (np.linalg.norm(vector) + _EPS)
        matrix = block / (np.linalg.norm(block, axis=-1, keepdims=True) + _EPS)
        out[i, cols] = vector @ matrix.T


def _float32_rows(queries: np.ndarray, candidates: np.ndarray, mask: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out`` with float32 cosines (vectorised; a zero vector keeps similarity 0)."""
    vectors = [np.array(v, dtype=np.float32) for v in (queries, candidates)]
    for v in vectors:
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), np.float32(1e-12))
    qvec, cvec = vectors
    rr, cc = np.nonzero(mask)  # row-major order == the order of the candidate rows
    if len(rr):
        out[rr, cc] = np.einsum("ij,ij->i", qvec[rr], cvec)


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
    if numerics == "float16":
        # a zero vector gives NaN and float16 overflow gives inf, as in the reference; no warning
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            _float16_rows(queries, candidates, mask, out)
    else:
        _float32_rows(queries, candidates, mask, out)
    return out
