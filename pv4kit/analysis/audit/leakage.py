"""Lexical leakage: how many of each candidate's content words appear in the user's chats."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pv4kit.analysis.audit.common import _base
from pv4kit.schema import LETTERS, QUESTION_KEY, answer_indices, require_columns
from pv4kit.text import content_words


def leakage_audit(questions: pd.DataFrame, users: pd.DataFrame) -> pd.DataFrame:
    """Share of each candidate's content words that appear anywhere in the user's chats.

    Content words are lower-cased tokens of three or more characters, stop words removed.

    Returns:
        One row per question and candidate: key columns plus ``letter, is_reference, n_words,
        overlap`` (share in ``[0, 1]``; NaN for a candidate with no content word) and ``top_overlap``
        (this candidate has the question's highest overlap, ties included).
    """
    require_columns(users, ["user_id", "documents"], name="users")
    vocab = {
        int(u): set().union(*(content_words(d) for d in docs)) if docs is not None and len(docs) else set()
        for u, docs in zip(users["user_id"], users["documents"], strict=True)
    }
    idx = answer_indices(questions)
    base = _base(questions)
    rows = []
    for pos, (uid, choices, a) in enumerate(
        zip(questions["user_id"], questions["choices"], idx, strict=True)
    ):
        v = vocab.get(int(uid), set())
        shares = []
        for j, c in enumerate(choices):
            words = content_words(c)
            shares.append(len(words & v) / len(words) if words else np.nan)
            rows.append((pos, LETTERS[j], j == a, len(words), shares[-1]))
        best = np.nanmax(shares) if not np.all(np.isnan(shares)) else np.nan
        for k in range(5):
            rows[-5 + k] = (*rows[-5 + k], bool(shares[k] == best))
    frame = pd.DataFrame(rows, columns=["pos", "letter", "is_reference", "n_words", "overlap", "top_overlap"])
    out = base.iloc[frame["pos"]].reset_index(drop=True)
    return pd.concat([out, frame.drop(columns="pos")], axis=1)


def reference_unique_top(leakage: pd.DataFrame) -> pd.Series:
    """Per question (indexed by the key): only the reference has the top chat overlap.

    True when the question's reference rows all have ``top_overlap`` and exactly one candidate has it;
    computed with grouped sums (no per-question Python call).
    """
    require_columns(leakage, [*QUESTION_KEY, "is_reference", "top_overlap"], name="leakage")
    flags = pd.DataFrame(
        {
            "n_top": leakage["top_overlap"].astype(bool),
            "ref_not_top": leakage["is_reference"].astype(bool) & ~leakage["top_overlap"].astype(bool),
        }
    )
    sums = flags.groupby([leakage[k] for k in QUESTION_KEY], sort=True).sum()
    return ((sums["ref_not_top"] == 0) & (sums["n_top"] == 1)).rename(None)


def leakage_summary(leakage: pd.DataFrame) -> pd.DataFrame:
    """Mean overlap of references vs distractors and how often the reference alone overlaps most.

    Returns:
        ``role, mean_overlap, n`` for reference and distractors, plus a ``reference_unique_top`` row whose
        ``mean_overlap`` is the share of questions where only the reference has the top overlap (chance
        20% when there are no ties).
    """
    require_columns(leakage, [*QUESTION_KEY, "is_reference", "overlap", "top_overlap"], name="leakage")
    rows = [
        {"role": role, "mean_overlap": float(sub["overlap"].mean()), "n": int(len(sub))}
        for role, sub in (
            ("reference", leakage[leakage["is_reference"]]),
            ("distractor", leakage[~leakage["is_reference"]]),
        )
    ]
    top = reference_unique_top(leakage)
    rows.append({"role": "reference_unique_top", "mean_overlap": float(top.mean()), "n": int(len(top))})
    return pd.DataFrame(rows)
