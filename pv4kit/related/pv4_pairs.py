"""PV4 questions as PersonaFeedback-style (reference, distractor) pairs for the same judge and reward head."""

from __future__ import annotations

import logging
import os

import numpy as np
import pandas as pd

from pv4kit.dataset.load import load
from pv4kit.related._common import check_choice
from pv4kit.related.personafeedback import PAIR_COLUMNS
from pv4kit.schema import LETTERS

logger = logging.getLogger(__name__)

_COLUMNS = [*PAIR_COLUMNS, "question_index", "split", "distractor_letter"]


def pv4_pairs(
    questions: pd.DataFrame,
    users: pd.DataFrame | None = None,
    *,
    distractors: str = "one",
    seed: int = 0,
    splits: list[str] | None = None,
) -> pd.DataFrame:
    """Turn PV4 questions (and ``users``' personas) into (reference, distractor) pairs.

    ``distractors``: ``"one"`` (a pick with ``seed`` among a question's non-empty distractors) or ``"all"``;
    ``splits`` keeps only those. Returns PersonaFeedback's pair columns (``set`` ``"pv4"``, ``tier``
    ``"hard"``/``"standard"``, ``pair_id`` ``"pv4/<user>/<question>/<letter>"``) and ``question_index,
    split, distractor_letter``.
    """
    check_choice(distractors, "distractors", ("one", "all"))
    frame = questions if not splits else questions[questions["split"].isin(splits)]
    known = [] if users is None else zip(users["user_id"], users["persona"], strict=True)
    personas = {user: p for user, p in known if isinstance(p, str) and p.strip()}
    rng = np.random.default_rng(seed)
    rows = []
    for rec in frame.to_dict("records"):
        user, index = rec["user_id"], rec["question_index"]
        choices, answer = list(rec["choices"]), LETTERS.index(rec["answer_letter"])
        options = [i for i, c in enumerate(choices) if i != answer and isinstance(c, str) and c.strip()]
        if not options:
            logger.warning("user %s question %s has no non-empty distractor; skipped", user, index)
            continue
        tier = "hard" if rec.get("hard", False) else "standard"
        question = ["pv4", tier, user, personas.get(user, pd.NA), rec["question"], choices[answer]]
        for i in [options[int(rng.integers(len(options)))]] if distractors == "one" else options:
            pair = [choices[i], f"pv4/{user}/{index}/{LETTERS[i]}"]
            rows.append([*question, *pair, int(index), int(index), rec.get("split"), LETTERS[i]])
    out = pd.DataFrame(rows, columns=_COLUMNS)
    out["persona"] = out["persona"].astype(object)
    return out


def load_pv4_pairs(
    source: str | os.PathLike[str], *, seed: int = 0, splits: list[str] | None = None
) -> pd.DataFrame:
    """:func:`pv4_pairs` of the PV4 dataset at ``source`` (a folder or hub id)."""
    data = load(source)
    return pv4_pairs(data.questions, data.users, seed=seed, splits=splits)
