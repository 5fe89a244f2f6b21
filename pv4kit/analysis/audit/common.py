"""What every audit shares: the chance rate, the per-question key columns, candidate vectors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pv4kit.embeddings.models import MINILM, embed_texts
from pv4kit.vectors import unit_rows

CHANCE = 0.2
#: Columns that identify and describe a question in every per-question audit table (those present).
BASE_COLUMNS = ("user_id", "question_index", "split", "category", "category_name", "hard")


#: The embedding audits' cut-offs: cosine of a near-duplicate candidate pair (``near_duplicate``) and of
#: a near-duplicate question pair within a user (``duplicate_question``), and the cosine distance below
#: which category names are grouped (``category_distance``). Chosen on MiniLM's cosine scale; for another
#: embedder, the value that flags the same share of pairs as MiniLM's cut-off does: of the sample's pairs,
#: or of the grown tree's where MiniLM flags fewer than ten of the sample's
#: (``benchmarks/bench_static_audit.py --calibrate``; docs/analysis.md). An embedder not listed gets
#: MiniLM's.
CUTOFFS: dict[str, dict[str, float]] = {
    MINILM: {"near_duplicate": 0.9, "duplicate_question": 0.9, "category_distance": 0.55},
    "static:all-MiniLM-L6-v2": {
        "near_duplicate": 0.904,
        "duplicate_question": 0.916,
        "category_distance": 0.488,
    },
}


def cutoffs(embedder: Any) -> dict[str, float]:
    """The audit cut-offs of ``embedder`` (an embedder or its name): :data:`CUTOFFS`, else MiniLM's."""
    name = embedder if isinstance(embedder, str) else getattr(embedder, "name", "")
    return dict(CUTOFFS.get(name, CUTOFFS[MINILM]))


def embedder_name(embedder: Any) -> str:
    """The name an audit table records for ``embedder`` (its ``name``, else its text)."""
    return embedder if isinstance(embedder, str) else str(getattr(embedder, "name", embedder))


def _words(text: Any) -> list[str]:
    return str(text).split() if isinstance(text, str) else []


def _base(questions: pd.DataFrame) -> pd.DataFrame:
    return questions[[c for c in BASE_COLUMNS if c in questions]].reset_index(drop=True)


def _candidate_vectors(questions: pd.DataFrame, *, embedder: Any, cache: Any) -> np.ndarray:
    """Unit vectors of every candidate, shape ``(n, 5, dim)`` (zeros for an empty candidate)."""
    flat = [c if isinstance(c, str) else "" for cs in questions["choices"] for c in cs]
    vecs = unit_rows(embed_texts([t or " " for t in flat], embedder=embedder, cache=cache, progress=False))
    vecs[np.array([not t.strip() for t in flat])] = 0.0
    return vecs.reshape(len(questions), 5, -1)
