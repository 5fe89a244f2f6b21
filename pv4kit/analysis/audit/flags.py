"""One row per question with a boolean column per shortcut the other audits found."""

from __future__ import annotations

import pandas as pd

from pv4kit.analysis.audit.common import _base
from pv4kit.analysis.audit.leakage import reference_unique_top
from pv4kit.schema import QUESTION_KEY, require_columns


def question_flags(
    lengths: pd.DataFrame,
    solvers: pd.DataFrame | None = None,
    similarity: pd.DataFrame | None = None,
    leakage: pd.DataFrame | None = None,
    duplicates: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per question with a boolean column per shortcut and ``n_flags`` (their sum).

    Flags: ``ref_longest, ref_shortest, spread_over_2_words``; ``solved_by_<solver>`` for each
    candidate-only solver; ``ref_near_duplicate, near_duplicate_candidates, rationale_misses``;
    ``ref_top_chat_overlap`` (only the reference has the top overlap); ``duplicate_question``.
    """
    require_columns(lengths, [*QUESTION_KEY, "ref_longest", "ref_shortest", "within_2_words"], name="lengths")
    for name, frame, columns in (
        ("solvers", solvers, [*QUESTION_KEY, "solver", "correct"]),
        ("similarity", similarity, [*QUESTION_KEY, "ref_near_duplicate", "near_duplicate_candidates"]),
        ("duplicates", duplicates, ["user_id", "question_index_a", "question_index_b"]),
    ):
        if frame is not None:
            require_columns(frame, columns, name=name)
    out = lengths[[*[c for c in _base(lengths).columns], "ref_longest", "ref_shortest"]].copy()
    out["spread_over_2_words"] = ~lengths["within_2_words"]
    if solvers is not None and len(solvers):
        wide = solvers.pivot_table(index=QUESTION_KEY, columns="solver", values="correct", aggfunc="first")
        wide.columns = [f"solved_by_{c}" for c in wide.columns]
        out = out.merge(wide.reset_index(), on=QUESTION_KEY, how="left")
    if similarity is not None:
        cols = ["ref_near_duplicate", "near_duplicate_candidates"]
        sim = similarity[[*QUESTION_KEY, *cols]].copy()
        if "rationale_correct" in similarity:
            sim["rationale_misses"] = ~similarity["rationale_correct"].fillna(True).astype(bool)
        out = out.merge(sim, on=QUESTION_KEY, how="left")
    if leakage is not None:
        top = reference_unique_top(leakage)
        out = out.merge(top.rename("ref_top_chat_overlap").reset_index(), on=QUESTION_KEY, how="left")
    if duplicates is not None:
        dup = set(zip(duplicates["user_id"], duplicates["question_index_a"], strict=True)) | set(
            zip(duplicates["user_id"], duplicates["question_index_b"], strict=True)
        )
        out["duplicate_question"] = [
            (u, q) in dup for u, q in zip(out["user_id"], out["question_index"], strict=True)
        ]
    flag_cols = [c for c in out.columns if c not in _base(lengths).columns]
    out[flag_cols] = out[flag_cols].fillna(False).astype(bool)
    out["n_flags"] = out[flag_cols].sum(axis=1).astype("int64")
    return out
