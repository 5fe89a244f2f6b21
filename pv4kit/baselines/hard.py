"""The hard subset: questions a decoder gets wrong closed book and/or with the single best chat.

The dataset card's hard questions are those Qwen3-4B-Instruct-2507 "gets wrong in at least one of two
settings" (``no_docs``, ``rag`` top 1); the reference has no code for it. ``rule="any"`` (the card) and
``rule="all"`` (wrong in both) are derived from the questions scored in **both** runs.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd

from pv4kit._io import atomic_write_text
from pv4kit.dataset.tree import read_hard_subset
from pv4kit.schema import QUESTION_KEY
from pv4kit.scoring.runs import Run, check_same_data, read_predictions

logger = logging.getLogger(__name__)

RULES = ("any", "all")


def _predictions(frame: pd.DataFrame, *, name: str) -> pd.DataFrame:
    columns = [*QUESTION_KEY, "correct"]
    if missing := [c for c in columns if c not in frame.columns]:
        raise ValueError(f"{name}: predictions lack column(s) {missing}; score the run first")
    out = frame[columns].astype({"user_id": "int64", "question_index": "int64", "correct": bool})
    if out.duplicated(QUESTION_KEY).any():
        raise ValueError(f"{name}: predictions repeat a (user_id, question_index) key")
    return out


def hard_flags(no_docs: Run, rag: Run, *, force: bool = False) -> pd.DataFrame:
    """``user_id, question_index, correct_no_docs, correct_rag, hard_any, hard_all``, scored in both runs.

    ``no_docs``: the closed-book run; ``rag``: the ``rag`` ``top_k=1`` run of the same decoder; ``force``
    combines runs scored on different data with a warning (:func:`pv4kit.scoring.runs.check_same_data`).
    """
    pa, pb = (run if isinstance(run, pd.DataFrame) else read_predictions(run) for run in (no_docs, rag))
    check_same_data(no_docs, rag, pa, pb, force=force)
    a, b = _predictions(pa, name="no_docs"), _predictions(pb, name="rag")
    merged = a.merge(b, on=QUESTION_KEY, how="inner", suffixes=("_no_docs", "_rag"))
    only_a, only_b = len(a) - len(merged), len(b) - len(merged)
    if only_a or only_b:
        msg = "hard subset: %d questions only in the no_docs run and %d only in the rag run are left out"
        logger.warning(msg, only_a, only_b)
    merged["hard_any"] = ~merged["correct_no_docs"] | ~merged["correct_rag"]
    merged["hard_all"] = ~merged["correct_no_docs"] & ~merged["correct_rag"]
    merged.attrs.update(only_in_no_docs=only_a, only_in_rag=only_b)
    return merged.sort_values(QUESTION_KEY, kind="stable").reset_index(drop=True)


def derive_hard_subset(no_docs: Run, rag: Run, *, rule: str = "any", force: bool = False) -> pd.DataFrame:
    """The hard questions (``user_id, question_index``, sorted) under ``rule``: see :func:`hard_flags`.

    Args:
        no_docs: The closed-book run.
        rag: The ``rag`` ``top_k=1`` run of the same decoder.
        rule: Wrong in at least one run (``"any"``, the dataset card's wording), or in both (``"all"``).
        force: See :func:`hard_flags`.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    flags = hard_flags(no_docs, rag, force=force)
    return flags.loc[flags[f"hard_{rule}"], QUESTION_KEY].reset_index(drop=True)


def read_subset(path: str | os.PathLike[str], *, name: str = "existing") -> pd.DataFrame:
    """Read a ``hard_subset.csv`` (:func:`~pv4kit.dataset.tree.read_hard_subset`).

    Errors name the option ``name`` the path came from.
    """
    try:
        return read_hard_subset(path)
    except (FileNotFoundError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from None


def with_fallback_subset(
    questions: pd.DataFrame, derived: str | os.PathLike[str] | None
) -> tuple[pd.DataFrame, str]:
    """``(questions, note)``: the data's hard flags, or those of ``derived`` when the data marks none.

    ``derived`` is a ``hard_subset.csv`` such as ``make demo``'s ``runs/demo_hard_subset.csv``; the note
    says where the flags came from and how many questions are hard.
    """
    hard = questions["hard"].fillna(False).astype(bool) if "hard" in questions else None
    n = len(questions)
    if hard is not None and hard.any():
        return questions, f"{int(hard.sum())} of {n} questions are hard (the data's flags)"
    path = Path(derived) if derived is not None else None
    if path is not None and path.is_file():
        keys = pd.MultiIndex.from_frame(read_subset(path, name="derived")[QUESTION_KEY].astype("int64"))
        mine = pd.MultiIndex.from_frame(questions[QUESTION_KEY].astype("int64"))
        out = questions.assign(hard=mine.isin(keys))
        return out, (
            f"{int(out['hard'].sum())} of {n} questions are hard: the data marks none, so these are the "
            f"derived subset {path.name}"
        )
    where = f" and no derived subset at {path}" if path is not None else ""
    out = questions if hard is not None else questions.assign(hard=False)
    return out, f"0 of {n} questions are hard: the data marks none{where}"


def write_subset(subset: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``user_id,question_index`` rows to ``path`` atomically."""
    return atomic_write_text(path, subset[QUESTION_KEY].to_csv(index=False))


def overlap(derived: pd.DataFrame, existing: pd.DataFrame, *, universe: pd.DataFrame | None = None) -> dict:
    """Counts and Jaccard index of two subsets, within ``universe`` (the questions both runs scored).

    ``n_derived, n_existing, n_both, n_only_derived, n_only_existing, jaccard`` (``None`` when both are
    empty) and ``n_existing_outside`` (existing entries not in the universe, left out).
    """
    a, b_all = (set(map(tuple, f[QUESTION_KEY].to_numpy().tolist())) for f in (derived, existing))
    b = b_all & set(map(tuple, universe[QUESTION_KEY].to_numpy().tolist())) if universe is not None else b_all
    both, union = len(a & b), len(a | b)
    return {
        "n_derived": len(a),
        "n_existing": len(b),
        "n_both": both,
        "n_only_derived": len(a - b),
        "n_only_existing": len(b - a),
        "jaccard": both / union if union else None,
        "n_existing_outside": len(b_all - b),
    }


def hard_report(no_docs: Run, rag: Run, *, existing: Run | None = None, force: bool = False) -> pd.DataFrame:
    """Size of the hard subset under each rule and, with ``existing``, its overlap with it.

    One row per rule: ``rule, n_questions, n_hard, share, accuracy_no_docs, accuracy_rag`` and, with
    ``existing``, the columns of :func:`overlap`.

    Args:
        no_docs: The scored no_docs run directory.
        rag: The scored ``rag`` (``top_k=1``) run directory of the same decoder.
        existing: An existing ``hard_subset.csv`` to compare with.
        force: Use runs scored on different data (refused by default).
    """
    flags = hard_flags(no_docs, rag, force=force)
    if existing is not None and not isinstance(existing, pd.DataFrame):
        existing = read_subset(existing)
    n, rows = len(flags), []
    for rule in RULES:
        subset = flags.loc[flags[f"hard_{rule}"], QUESTION_KEY]
        row = {"rule": rule, "n_questions": n, "n_hard": len(subset), "share": len(subset) / n if n else None}
        for run in ("no_docs", "rag"):
            row[f"accuracy_{run}"] = float(flags[f"correct_{run}"].mean()) if n else None
        if existing is not None:
            row.update(overlap(subset, existing, universe=flags[QUESTION_KEY]))
        rows.append(row)
    return pd.DataFrame(rows)
