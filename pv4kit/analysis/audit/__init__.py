"""Distractor-quality and shortcut audits of PV4: can the answer be found without knowing the user?

Every audit is a function that takes the questions frame (and, where needed, the users frame or an
embedder) and returns a tidy frame, one row per question (or per question x candidate, per row index, or
per solver x group). :func:`question_flags` joins them into one per-question flags table;
:func:`pv4kit.analysis.audit_report.run_audit` runs them all and ``pv4kit audit`` writes the tables and a
summary. One module per family:

* :mod:`~pv4kit.analysis.audit.structure` - **length and structure** (:func:`length_audit`): word and
  character counts of the reference and the distractors, whether the reference is the (unique) longest or
  shortest (chance 20%), the word spread against the generation prompt's "within 2 words" rule, and how
  many distractors share the reference's first word and first two words (a template match); **answer
  position** (:func:`position_audit`): letter counts with a chi-square test against uniform.
* :mod:`pv4kit.analysis.audit_sequence` - **letter sequence by row**: do users share the correct letter at
  the same ``question_index``?
* :mod:`~pv4kit.analysis.audit.solvers` - **candidate-only solvers** (:func:`candidate_only_predictions`,
  :func:`llm_candidate_only`): pick the candidate nearest the question, the one nearest the centroid of
  the five, the longest and the shortest; optionally an LLM shown only the question and the choices.
  :func:`solver_accuracy` gives accuracy with user-clustered bootstrap intervals and an exact binomial
  test against the 20% chance line.
* :mod:`~pv4kit.analysis.audit.similarity` - **distractor similarity** (:func:`similarity_audit`):
  reference-to-nearest-distractor cosine, the closest candidate pair (near-duplicates the scorer cannot
  separate), and the rationale scored as if it were a generation (it names the distractors too: does it
  still pick the reference?); **duplicates** (:func:`duplicate_questions`): near-duplicate question pairs
  within a user.
* :mod:`~pv4kit.analysis.audit.leakage` - **leakage** (:func:`leakage_audit`): share of each candidate's
  content words found in the user's chats.
* :mod:`~pv4kit.analysis.audit.categories` - **category names** (:func:`category_groups`): similar names
  grouped across users by embedding.
* :mod:`~pv4kit.analysis.audit.flags` - :func:`question_flags`; :mod:`~pv4kit.analysis.audit.common` -
  the chance rate, the key columns and the candidate vectors every audit shares.

This package re-exports every public name of its modules (``from pv4kit.analysis import audit;
audit.length_audit(...)`` and ``from pv4kit.analysis.audit import length_audit`` work); pv4kit's own code
imports from the defining module. All embeddings go through :func:`pv4kit.embeddings.models.embed_texts`
and its on-disk cache; cosine is on L2-normalised float32 vectors, as in :mod:`pv4kit.scoring.score`.
"""

from pv4kit.analysis.audit.categories import category_groups, with_category_groups
from pv4kit.analysis.audit.common import BASE_COLUMNS, CHANCE
from pv4kit.analysis.audit.flags import question_flags
from pv4kit.analysis.audit.leakage import leakage_audit, leakage_summary, reference_unique_top
from pv4kit.analysis.audit.similarity import duplicate_questions, similarity_audit
from pv4kit.analysis.audit.solvers import (
    LLM_SYSTEM,
    SOLVERS,
    candidate_only_predictions,
    llm_candidate_only,
    llm_candidate_only_messages,
    parse_letter,
    solver_accuracy,
)
from pv4kit.analysis.audit.structure import length_audit, length_summary, position_audit

__all__ = [
    "BASE_COLUMNS",
    "CHANCE",
    "LLM_SYSTEM",
    "SOLVERS",
    "candidate_only_predictions",
    "category_groups",
    "duplicate_questions",
    "leakage_audit",
    "leakage_summary",
    "length_audit",
    "length_summary",
    "llm_candidate_only",
    "llm_candidate_only_messages",
    "parse_letter",
    "position_audit",
    "question_flags",
    "reference_unique_top",
    "similarity_audit",
    "solver_accuracy",
    "with_category_groups",
]
