"""Candidate-only solvers: embedding and length heuristics, an LLM shown only the choices, their accuracy."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.analysis.audit.common import CHANCE, _base, _candidate_vectors, _words, embedder_name
from pv4kit.embeddings.models import embed_texts
from pv4kit.llm.client import complete
from pv4kit.schema import LETTERS, answer_indices, require_columns
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.vectors import unit_rows

logger = logging.getLogger(__name__)

SOLVERS = ("nearest_to_question", "nearest_to_centroid", "longest", "shortest")


def candidate_only_predictions(questions: pd.DataFrame, *, embedder: Any, cache: Any = True) -> pd.DataFrame:
    """Predictions of four solvers that see neither the user's chats nor a model answer.

    * ``nearest_to_question``: the candidate most similar to the question (cosine);
    * ``nearest_to_centroid``: the candidate most similar to the mean of the five (the "most typical");
    * ``longest`` / ``shortest``: by words, then characters; ties go to the earliest letter.

    Returns:
        Long frame: key columns plus ``solver, predicted_letter, correct`` and the ``embedder``'s name.
    """
    require_columns(questions, ["question"], name="questions")
    idx = answer_indices(questions)
    cand = _candidate_vectors(questions, embedder=embedder, cache=cache)
    qvec = unit_rows(embed_texts(list(questions["question"]), embedder=embedder, cache=cache, progress=False))
    empty = ~np.any(cand != 0, axis=2)
    sim_q = np.where(empty, -np.inf, np.einsum("nkd,nd->nk", cand, qvec))
    centroid = unit_rows(cand.sum(axis=1))
    sim_c = np.where(empty, -np.inf, np.einsum("nkd,nd->nk", cand, centroid))
    words = np.array(
        [[len(_words(c)) * 10_000 + len(str(c).strip()) for c in cs] for cs in questions["choices"]]
    )
    picks = {
        "nearest_to_question": sim_q.argmax(axis=1),
        "nearest_to_centroid": sim_c.argmax(axis=1),
        "longest": words.argmax(axis=1),
        "shortest": np.where(empty, np.iinfo(np.int64).max, words).argmin(axis=1),
    }
    base = _base(questions)
    parts = [
        base.assign(
            solver=name,
            predicted_letter=[LETTERS[i] for i in pick],
            correct=pick == idx,
            embedder=embedder_name(embedder),
        )
        for name, pick in picks.items()
    ]
    return pd.concat(parts, ignore_index=True)


LLM_SYSTEM = (
    "You answer multiple-choice questions about a person you know nothing about. Choose the option that "
    "is most likely correct anyway. Reply with a single letter: A, B, C, D or E."
)


def llm_candidate_only_messages(question: str, choices: list[str]) -> list[dict[str, str]]:
    """The prompt of the LLM candidate-only solver: the question and the lettered choices, no context."""
    lines = [f"Question: {question.strip()}", ""]
    lines += [f"{x}. {str(c).strip()}" for x, c in zip(LETTERS, choices, strict=True)]
    lines += ["", "Answer with one letter."]
    return [{"role": "system", "content": LLM_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def parse_letter(text: str) -> str | None:
    """The first standalone letter A-E in a model reply (``"Answer: (C)"`` -> ``"C"``), else ``None``."""
    m = re.search(r"\b([A-E])\b", text or "")
    return m.group(1) if m else None


def llm_candidate_only(
    questions: pd.DataFrame,
    *,
    config: Any,
    cache: str | os.PathLike[str] | bool | None = True,
    client: Any = None,
    progress: bool = False,
) -> pd.DataFrame:
    """An LLM shown only the question and the five choices (through :func:`pv4kit.llm.client.complete`).

    Args:
        questions: The questions frame.
        config: A :class:`pv4kit.llm.client.LLMConfig`.
        cache: The LLM response cache (and usage ledger).
        client: Injected OpenAI-like client (tests).
        progress: Progress bar.

    Returns:
        Key columns plus ``solver`` (``llm:<model>``), ``predicted_letter`` (``None`` when the reply has no
        letter), ``correct``, ``reply``.

    Raises:
        RuntimeError: Some requests failed after their retries (a failure is not a wrong answer; the
            answers that came are cached, so calling again asks only the failed ones).
    """
    require_columns(questions, ["question"], name="questions")
    idx = answer_indices(questions)
    requests = [
        llm_candidate_only_messages(q, list(c))
        for q, c in zip(questions["question"], questions["choices"], strict=True)
    ]
    replies = complete(
        requests, llm=config, cache=cache, step="audit_candidate_only", client=client, progress=progress
    )
    failed = [r.error for r in replies if r.error is not None]
    if failed:
        raise RuntimeError(
            f"llm candidate-only: {len(failed)} of {len(replies)} requests to {config.model!r} failed "
            f"(first: {failed[0]}); run again to retry them"
        )
    letters = [parse_letter(r.text) for r in replies]
    unparsed = sum(x is None for x in letters)
    if unparsed:
        logger.warning("llm candidate-only: %d of %d replies had no letter A-E", unparsed, len(letters))
    return _base(questions).assign(
        solver=f"llm:{config.model}",
        predicted_letter=letters,
        correct=[x is not None and LETTERS.index(x) == i for x, i in zip(letters, idx, strict=True)],
        reply=[r.text for r in replies],
    )


def solver_accuracy(
    predictions: pd.DataFrame,
    *,
    by: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    chance: float = CHANCE,
) -> pd.DataFrame:
    """Accuracy of each solver (overall, or per ``by`` group) against the chance line.

    Args:
        predictions: Long frame with ``user_id, solver, correct`` (and ``by``).
        by: Optional grouping column, e.g. ``"category_name"`` or ``"split"``.
        n_boot: Bootstrap replicates (users resampled).
        seed: Bootstrap seed.
        chance: The chance rate (one in five).

    Returns:
        ``solver, group, n, n_correct, accuracy, ci_low, ci_high, chance, binom_p`` (one-sided exact test
        of accuracy > chance, questions treated as independent), ``above_chance`` (the user-bootstrap
        interval lies above chance), and ``embedder`` when the predictions name one (their distinct
        names, comma-joined).
    """
    require_columns(predictions, ["user_id", "solver", "correct", *([by] if by else [])], name="predictions")
    from scipy.stats import binom

    table = accuracy_table(predictions, by=["solver", by] if by else ["solver"], n_boot=n_boot, seed=seed)
    k, n = table["n_correct"].to_numpy(), table["n"].to_numpy()
    # binomtest(k, n, chance, alternative="greater").pvalue is binom.sf(k - 1, n, chance), capped at 1
    binom_p = np.where(n > 0, np.minimum(1.0, binom.sf(k - 1, n, chance)), np.nan)
    out = pd.DataFrame(
        {
            "solver": table["solver"].to_numpy(),
            "group": table[by].astype(str).to_numpy() if by else "all",
            "n": n,
            "n_correct": k,
            "accuracy": table["accuracy"].to_numpy(),
            "ci_low": table["ci_low"].to_numpy(),
            "ci_high": table["ci_high"].to_numpy(),
            "chance": chance,
            "binom_p": binom_p,
            "above_chance": (table["ci_low"] > chance).to_numpy(),
        }
    )
    if "embedder" in predictions and predictions["embedder"].notna().any():
        out["embedder"] = ", ".join(sorted(set(predictions["embedder"].dropna().astype(str))))
    return out
