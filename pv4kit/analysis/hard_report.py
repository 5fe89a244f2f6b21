"""The hard subset against the other questions: the tables notebook 03 draws, read from a stored audit.

:func:`hard_subset_tables` gives the questions with their hard flags (the data's, else a derived subset),
the category groups, the length audit and the candidate-only solvers' predictions. Notebook 02's audit
(:func:`~pv4kit.analysis.audit_report.run_audit` with a ``store``) already holds the last three for the
same questions; when the store has that result they are taken from it, with this subset's flags, instead
of being computed again (at release size notebook 03 takes 9.8 s instead of 19.8 s with every vector
cached, and computing the solvers with no vector cached would take ~17 min on two cores, an estimate).
Either way the tables are the same (``tests/test_hard_report.py``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import pandas as pd

from pv4kit.analysis.audit.categories import category_groups, with_category_groups
from pv4kit.analysis.audit.solvers import SOLVERS, candidate_only_predictions
from pv4kit.analysis.audit.structure import length_audit
from pv4kit.analysis.audit_report import stored_audit
from pv4kit.baselines.hard import with_fallback_subset
from pv4kit.embeddings.models import resolve_embedder
from pv4kit.schema import QUESTION_KEY

logger = logging.getLogger(__name__)


def hard_subset_tables(
    data: Any,
    *,
    derived: str | os.PathLike[str] | None = None,
    embedder: Any = None,
    cache: Any = True,
    store: str | os.PathLike[str] | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Questions, category groups, lengths and candidate-only predictions, each with the hard flags.

    Args:
        data: The loaded dataset (:class:`~pv4kit.dataset.load.PV4Data`).
        derived: A derived ``hard_subset.csv`` used when the data marks no question hard
            (:func:`~pv4kit.baselines.hard.with_fallback_subset`).
        embedder: The embedder (or a name); the audit's default when ``None``
            (:func:`~pv4kit.embeddings.models.get_audit_embedder`).
        cache: The embedding cache.
        store: :func:`~pv4kit.analysis.audit_report.run_audit`'s store (notebook 02's). With a result for
            these questions and embedder there, nothing is embedded or recomputed.
        n_boot: The stored audit's bootstrap replicates (part of its key; notebook 02 uses the default).
        seed: The stored audit's seed (likewise).

    Returns:
        ``{"questions", "note", "categories", "lengths", "solvers", "source"}``: the questions with
        ``hard`` and the sentence saying where the flags came from; the category groups; the length
        audit with the groups; the four :data:`~pv4kit.analysis.audit.solvers.SOLVERS`' predictions; and
        ``"stored audit <folder>"`` or ``"computed"``.
    """
    questions, note = with_fallback_subset(data.questions, derived)
    embedder = resolve_embedder(embedder, audit=True)
    kept = None
    if store is not None:
        kept = stored_audit(data, embedder=embedder, cache=cache, store=store, n_boot=n_boot, seed=seed)
    if kept is not None:
        categories = kept["categories"]
        solvers = kept["solver_predictions"]
        solvers = solvers[solvers["solver"].isin(SOLVERS)].reset_index(drop=True)
        lengths = _with_flags(kept["lengths"], questions)
        solvers = _with_flags(solvers, questions)
        source = f"stored audit {store}"
    else:
        categories = category_groups(questions, embedder=embedder, cache=cache)
        lengths = length_audit(questions)
        solvers = candidate_only_predictions(questions, embedder=embedder, cache=cache)
        source = "computed"
    logger.info("hard-subset tables: %s", source)
    return {
        "questions": questions,
        "note": note,
        "categories": categories,
        "lengths": with_category_groups(lengths, categories),
        "solvers": solvers,
        "source": source,
    }


def _with_flags(table: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """``table`` (one row per question, or several) with ``questions``' ``hard`` column in its place."""
    if "hard" not in questions:
        return table.drop(columns="hard", errors="ignore")
    flags = questions.set_index(list(QUESTION_KEY))["hard"]
    keys = pd.MultiIndex.from_frame(table[list(QUESTION_KEY)])
    hard = flags.reindex(keys)
    if hard.isna().any():  # the key covers the questions, so this means a damaged store
        raise ValueError("stored audit: rows for questions the data does not hold; rerun the audit")
    return table.assign(hard=hard.to_numpy())
