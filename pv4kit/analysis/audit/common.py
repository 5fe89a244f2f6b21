"""What every audit shares: the chance rate, the per-question key columns, candidate vectors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pv4kit.embeddings.models import embed_texts
from pv4kit.vectors import unit_rows

CHANCE = 0.2
#: Columns that identify and describe a question in every per-question audit table (those present).
BASE_COLUMNS = ("user_id", "question_index", "split", "category", "category_name", "hard")


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
