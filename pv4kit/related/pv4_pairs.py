"""PV4 questions as PersonaFeedback-style pairs, so the same pairwise judge runs on PV4.

Each PV4 question has a reference answer and four distractors. :func:`pv4_pairs` keeps the reference
as ``chosen`` and one distractor (a seeded pick per question, or every distractor) as ``rejected``; the
persona comes from ``PV4Data.users``. The output has the columns of
:attr:`pv4kit.related.personafeedback.load.PersonaFeedbackData.pairs` (``set = "pv4"``, ``tier`` = ``"hard"``
or ``"standard"`` by the question's ``hard`` flag), so
:func:`~pv4kit.related.personafeedback.judge.judge_pairs` and the reward-model baseline work unchanged.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pandas as pd

from pv4kit.dataset.load import load
from pv4kit.schema import LETTERS

logger = logging.getLogger(__name__)

__all__ = ["load_pv4_pairs", "pv4_pairs"]

_COLUMNS = [
    *("set", "tier", "user_id", "persona", "question", "chosen", "rejected", "pair_id", "line"),
    *("question_index", "split", "distractor_letter"),
]


def pv4_pairs(
    questions: pd.DataFrame,
    users: pd.DataFrame | None = None,
    *,
    distractors: str = "one",
    seed: int = 0,
    splits: list[str] | None = None,
) -> pd.DataFrame:
    """Turn PV4 questions into (reference, distractor) pairs.

    Args:
        questions: ``PV4Data.questions`` (``user_id, split, question_index, question, choices,
            answer_letter, hard``; ``category_name`` is carried when present).
        users: ``PV4Data.users`` (``user_id, persona``); without it every persona is NA.
        distractors: ``"one"`` (a seeded pick among the non-empty distractors of each question) or
            ``"all"`` (one pair per non-empty distractor).
        seed: Seed for ``distractors="one"``.
        splits: Keep only these splits (e.g. ``["test"]``).

    Returns:
        Frame ``set, tier, user_id, persona, question, chosen, rejected, pair_id, line,
        question_index, split, distractor_letter``; ``pair_id`` is ``"pv4/<user>/<question>/<letter>"``.
    """
    if distractors not in ("one", "all"):
        raise ValueError(f"distractors must be 'one' or 'all', got {distractors!r}")
    missing = {"user_id", "question_index", "question", "choices", "answer_letter"} - set(questions.columns)
    if missing:
        raise ValueError(f"questions: missing columns {sorted(missing)}")
    frame = questions if not splits else questions[questions["split"].isin(splits)]
    personas: dict = {}
    if users is not None:
        personas = dict(zip(users["user_id"], users["persona"], strict=True))
    rng = np.random.default_rng(seed)
    rows = []
    for rec in frame.to_dict("records"):
        choices = list(rec["choices"])
        answer = LETTERS.index(rec["answer_letter"])
        options = [i for i, c in enumerate(choices) if i != answer and isinstance(c, str) and c.strip()]
        if not options:
            logger.warning(
                "user %s question %s has no non-empty distractor; skipped",
                rec["user_id"],
                rec["question_index"],
            )
            continue
        picked = [options[int(rng.integers(len(options)))]] if distractors == "one" else options
        persona = personas.get(rec["user_id"], pd.NA)
        for i in picked:
            rows.append(
                {
                    "set": "pv4",
                    "tier": "hard" if bool(rec.get("hard", False)) else "standard",
                    "user_id": rec["user_id"],
                    "persona": persona if isinstance(persona, str) and persona.strip() else pd.NA,
                    "question": rec["question"],
                    "chosen": choices[answer],
                    "rejected": choices[i],
                    "pair_id": f"pv4/{rec['user_id']}/{rec['question_index']}/{LETTERS[i]}",
                    "line": int(rec["question_index"]),
                    "question_index": int(rec["question_index"]),
                    "split": rec.get("split"),
                    "distractor_letter": LETTERS[i],
                }
            )
    out = pd.DataFrame(rows, columns=_COLUMNS)
    out["persona"] = out["persona"].astype(object)
    return out


def load_pv4_pairs(
    source: str | os.PathLike[str], *, seed: int = 0, splits: list[str] | None = None
) -> pd.DataFrame:
    """:func:`pv4_pairs` of a PV4 dataset read by ``pv4kit.dataset.load.load`` (a folder or hub id)."""
    data = load(source)
    return pv4_pairs(data.questions, data.users, seed=seed, splits=splits)
