"""Distractor-quality and shortcut audits of PV4: can the answer be found without knowing the user?

Each audit takes the questions frame (and, where needed, the users frame or an embedder) and returns a
tidy frame; :func:`run_audit` runs them all, :func:`write_audit` writes the tables and a summary, and
:func:`hard_subset_tables` gives notebook 03's tables. Cosine is on L2-normalised vectors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import atomic_path, atomic_write_text, sha256_file, sha256_text
from pv4kit._options import check_number
from pv4kit.baselines.hard import with_fallback_subset
from pv4kit.embeddings.models import MINILM, embed_texts, resolve_embedder
from pv4kit.llm.client import complete
from pv4kit.schema import LETTERS, QUESTION_KEY, answer_indices, require_columns
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.score import score_frame
from pv4kit.text import content_words
from pv4kit.vectors import unit_rows

logger = logging.getLogger(__name__)

CHANCE = 0.2
#: Columns that identify and describe a question in every per-question audit table (those present).
BASE_COLUMNS = ("user_id", "question_index", "split", "category", "category_name", "hard")
SOLVERS = ("nearest_to_question", "nearest_to_centroid", "longest", "shortest")

#: The embedding audits' cut-offs: cosine of a near-duplicate candidate pair and of a near-duplicate
#: question pair within a user, and the cosine distance below which category names are grouped. Chosen on
#: MiniLM's scale; another embedder's flag the same share of pairs (docs/analysis.md). Unlisted: MiniLM's.
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
    return dict(CUTOFFS.get(embedder_name(embedder), CUTOFFS[MINILM]))


def embedder_name(embedder: Any) -> str:
    """The name an audit table records for ``embedder`` (its ``name``, else its text)."""
    return embedder if isinstance(embedder, str) else str(getattr(embedder, "name", embedder))


def embedder_names(frame: pd.DataFrame) -> str:
    """The embedders ``frame`` names in its ``embedder`` column, comma-joined (``""`` for none)."""
    return ", ".join(sorted(set(frame["embedder"].dropna().astype(str)))) if "embedder" in frame else ""


def _base(questions: pd.DataFrame) -> pd.DataFrame:
    return questions[[c for c in BASE_COLUMNS if c in questions]].reset_index(drop=True)


def _embed(texts: list[str], embedder: Any, cache: Any) -> np.ndarray:
    return unit_rows(embed_texts(texts, embedder=embedder, cache=cache, progress=False))


def _choices(questions: pd.DataFrame) -> list[list[str]]:
    """Each question's candidates as text (``""`` for a missing one)."""
    return [[c if isinstance(c, str) else "" for c in cs] for cs in questions["choices"]]


def _candidate_vectors(questions: pd.DataFrame, *, embedder: Any, cache: Any) -> np.ndarray:
    """Unit vectors of every candidate, shape ``(n, 5, dim)`` (zeros for an empty candidate)."""
    flat = [c for cs in _choices(questions) for c in cs]
    vecs = _embed([t or " " for t in flat], embedder, cache)
    vecs[np.array([not t.strip() for t in flat])] = 0.0
    return vecs.reshape(len(questions), 5, -1)


# --------------------------------------------------------------------------- length, structure, position


def length_audit(questions: pd.DataFrame) -> pd.DataFrame:
    """Length and structure of the reference against its distractors, one row per question.

    The key columns plus ``answer_letter, ref_words, ref_chars, distractor_words_mean, distractor_words_min,
    distractor_words_max, distractor_chars_mean, word_spread`` (max minus min words over the five),
    ``within_2_words``, ``ref_word_rank`` (1 = longest, ties share the best rank), ``ref_longest`` /
    ``ref_shortest`` (uniquely, by words then characters), ``ref_longest_chars`` / ``ref_shortest_chars``
    (uniquely, by characters), ``shared_first_word`` and ``shared_first_two`` (how many of the four
    distractors start like the reference).
    """
    a = answer_indices(questions)
    n = len(a)
    choices = _choices(questions)
    tokens = [[c.split() for c in cs] for cs in choices]
    words = np.array([[len(t) for t in ts] for ts in tokens], dtype=np.int64).reshape(n, 5)
    chars = np.array([[len(c.strip()) for c in cs] for cs in choices], dtype=np.int64).reshape(n, 5)
    # the first one and two words, lower-cased and stripped of ",.;:", as codes (-1: none)
    heads = [[[w.lower().strip(",.;:") for w in t[:2]] for t in ts] for ts in tokens]
    one = pd.factorize(pd.Series([h[0] if h else None for hs in heads for h in hs]))[0]
    two = pd.factorize(pd.Series(["\x1f".join(h) if len(h) == 2 else None for hs in heads for h in hs]))[0]
    rows = np.arange(n)
    others = np.ones((n, 5), dtype=bool)
    others[rows, a] = False
    key = words * 10_000 + chars  # words first, characters break ties
    spread = words.max(axis=1) - words.min(axis=1)

    def beats(arr: np.ndarray) -> np.ndarray:  # every distractor below the reference
        return ((arr < arr[rows, a][:, None]) | ~others).all(axis=1)

    def shared(arr: np.ndarray) -> np.ndarray:  # distractors with the reference's (known) code
        arr = arr.reshape(n, 5)
        ref = arr[rows, a]
        return ((arr == ref[:, None]) & others & (ref >= 0)[:, None]).sum(axis=1)

    frame = pd.DataFrame(
        {
            "answer_letter": np.array(list(LETTERS))[a] if n else np.array([], dtype=object),
            "ref_words": words[rows, a],
            "ref_chars": chars[rows, a],
            "distractor_words_mean": (words * others).sum(axis=1) / 4.0,
            "distractor_words_min": np.where(others, words, np.iinfo(np.int64).max).min(axis=1),
            "distractor_words_max": np.where(others, words, -1).max(axis=1),
            "distractor_chars_mean": (chars * others).sum(axis=1) / 4.0,
            "word_spread": spread,
            "within_2_words": spread <= 2,
            "ref_word_rank": 1 + ((words > words[rows, a][:, None]) & others).sum(axis=1),
            "ref_longest": beats(key),
            "ref_shortest": beats(-key),
            "ref_longest_chars": beats(chars),
            "ref_shortest_chars": beats(-chars),
            "shared_first_word": shared(one),
            "shared_first_two": shared(two),
        }
    )
    return pd.concat([_base(questions), frame], axis=1)


def length_summary(lengths: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The length flags' rates, user-bootstrap intervals: ``metric, rate, ci_low, ci_high, n, chance``."""
    flags = ["ref_longest", "ref_shortest", "ref_longest_chars", "ref_shortest_chars", "within_2_words"]
    require_columns(lengths, ["user_id", *flags, "shared_first_word", "shared_first_two"], name="lengths")
    frame = lengths.assign(
        all_share_first_word=lengths["shared_first_word"] == 4,
        all_share_first_two=lengths["shared_first_two"] == 4,
    )
    metrics = [*flags, "all_share_first_word", "all_share_first_two"]
    table = accuracy_table(frame, value=metrics, n_boot=n_boot, seed=seed)
    chance = [CHANCE if metric.startswith("ref_") else None for metric in metrics]
    table = table[["metric", "accuracy", "ci_low", "ci_high", "n"]].rename(columns={"accuracy": "rate"})
    return table.assign(chance=chance)


def position_audit(questions: pd.DataFrame, *, by: str | None = None) -> pd.DataFrame:
    """Counts of the correct letter with a chi-square test against a uniform A-E.

    One row per group (``"all"`` without ``by``) and letter: ``group, letter, n, share, expected_share, chi2,
    pvalue`` (``chi2``/``pvalue`` repeat within a group).
    """
    from scipy.stats import chisquare

    require_columns(questions, [by] if by else [], name="questions")
    idx = answer_indices(questions)
    groups = questions[by].astype(str).to_numpy() if by else np.full(len(questions), "all")
    rows = []
    for g in dict.fromkeys(groups):  # each group holds a question
        counts = np.bincount(idx[groups == g], minlength=5)
        chi2, p = chisquare(counts)
        stats = (CHANCE, float(chi2), float(p))
        rows += [(g, x, int(n), n / counts.sum(), *stats) for x, n in zip(LETTERS, counts, strict=True)]
    return pd.DataFrame(rows, columns=["group", "letter", "n", "share", "expected_share", "chi2", "pvalue"])


# --------------------------------------------------------------------------- letter sequence by row
# Step 5 seeds one random.Random(42) per user, the same seed for every user, so the correct letter of row
# k (the question_index) is the same for every user: a model can learn the row-to-letter map from
# training users. Per-user seeds would show chance-level agreement here.


def _row_codes(questions: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Correct-letter codes (0-4), row codes, and the sorted distinct ``question_index`` values."""
    rows, values = pd.factorize(questions["question_index"].to_numpy(), sort=True)
    return answer_indices(questions), rows, np.asarray(values)


def _letter_counts(letters: np.ndarray, rows: np.ndarray, n_rows: int) -> np.ndarray:
    return np.bincount(rows * 5 + letters, minlength=n_rows * 5).reshape(n_rows, 5)


def _sequence_stats(letters: np.ndarray, rows: np.ndarray, n_rows: int) -> tuple[float, float, np.ndarray]:
    """Modal-letter share over rows with two or more users; accuracy and picks of the row-letter solver.

    The solver's pick is ``-1`` where no other user has that row; ties go to the earliest letter.
    """
    counts = _letter_counts(letters, rows, n_rows)
    n = counts.sum(axis=1)
    shared = n >= 2
    modal = float(counts.max(axis=1)[shared].sum() / n[shared].sum()) if shared.any() else np.nan
    others = counts[rows]
    others[np.arange(len(letters)), letters] -= 1  # leave the question's own user out
    has = others.sum(axis=1) > 0
    pick = np.where(has, others.argmax(axis=1), -1)
    accuracy = float((pick == letters)[has].mean()) if has.any() else np.nan
    return modal, accuracy, pick


def letter_sequence_audit(questions: pd.DataFrame) -> pd.DataFrame:
    """The correct letter at each row index (``question_index``) across users.

    One row per row index: ``question_index, n_users``, ``modal_letter`` (ties go to the earliest letter),
    ``modal_share`` (share of those users with the modal letter) and ``n_letters``.
    """
    letters, rows, values = _row_codes(questions)
    counts = _letter_counts(letters, rows, len(values))
    n = counts.sum(axis=1)
    return pd.DataFrame(
        {
            "question_index": values,
            "n_users": n,
            "modal_letter": [LETTERS[i] for i in counts.argmax(axis=1)],
            "modal_share": counts.max(axis=1) / np.maximum(n, 1),
            "n_letters": (counts > 0).sum(axis=1),
        }
    )


def row_letter_predictions(questions: pd.DataFrame) -> pd.DataFrame:
    """A solver that answers with the letter most *other* users have at the same row index.

    Key columns plus ``solver`` (``"row_letter"``), ``predicted_letter`` (missing when no other user has a
    question at that row) and ``correct``.
    """
    letters, rows, values = _row_codes(questions)
    pick = _sequence_stats(letters, rows, len(values))[2]
    return _base(questions).assign(
        solver="row_letter",
        predicted_letter=[LETTERS[p] if p >= 0 else None for p in pick],
        correct=pick == letters,
    )


def letter_sequence_summary(questions: pd.DataFrame, *, n_perm: int = 200, seed: int = 0) -> pd.DataFrame:
    """How far users share one letter sequence, against a within-user permutation baseline.

    The baseline shuffles each user's letters over that user's rows ``n_perm`` times (seeded), keeping each
    user's letter counts and breaking only the alignment of rows across users. Returns two rows ``metric,
    rate, n, chance, pvalue``: ``modal_letter_of_row`` (share of the ``n`` questions in rows with two or more
    users whose letter is their row's modal letter) and ``row_letter`` (accuracy of
    :func:`row_letter_predictions`). ``chance`` is the permutation mean, ``pvalue`` the one-sided
    ``(1 + k) / (1 + n_perm)`` (NaN for both when ``n`` is 0).
    """
    letters, rows, values = _row_codes(questions)
    modal, accuracy, pick = _sequence_stats(letters, rows, len(values))
    users = pd.factorize(questions["user_id"].to_numpy())[0]
    by_user = np.argsort(users, kind="stable")
    rng = np.random.default_rng(seed)
    perm = np.empty((n_perm, 2))
    shuffled = np.empty_like(letters)
    for i in range(n_perm):
        # both orders list each user's questions as one block of the same size: a within-user shuffle
        shuffled[by_user] = letters[np.lexsort((rng.random(len(letters)), users))]
        perm[i] = _sequence_stats(shuffled, rows, len(values))[:2]
    n_shared = int((np.bincount(rows, minlength=len(values))[rows] >= 2).sum())
    out = []
    for j, (metric, rate, n) in enumerate(
        [("modal_letter_of_row", modal, n_shared), ("row_letter", accuracy, int((pick >= 0).sum()))]
    ):
        k = int((perm[:, j] >= rate - 1e-12).sum())
        valid = n > 0 and n_perm > 0
        chance, p = (float(perm[:, j].mean()), (1 + k) / (1 + n_perm)) if valid else (np.nan, np.nan)
        out.append((metric, rate, n, chance, p))
    return pd.DataFrame(out, columns=["metric", "rate", "n", "chance", "pvalue"])


# --------------------------------------------------------------------------- candidate-only solvers


def candidate_only_predictions(questions: pd.DataFrame, *, embedder: Any, cache: Any = True) -> pd.DataFrame:
    """Predictions of four solvers that see neither the user's chats nor a model answer.

    ``nearest_to_question`` (cosine), ``nearest_to_centroid`` (nearest the mean of the five), ``longest`` /
    ``shortest`` (by words, then characters; ties go to the earliest letter). Long frame: key columns plus
    ``solver, predicted_letter, correct`` and the ``embedder``'s name.
    """
    require_columns(questions, ["question"], name="questions")
    idx = answer_indices(questions)
    cand = _candidate_vectors(questions, embedder=embedder, cache=cache)
    qvec = _embed(list(questions["question"]), embedder, cache)
    empty = ~np.any(cand != 0, axis=2)
    sim_q = np.where(empty, -np.inf, np.einsum("nkd,nd->nk", cand, qvec))
    sim_c = np.where(empty, -np.inf, np.einsum("nkd,nd->nk", cand, unit_rows(cand.sum(axis=1))))
    words = np.array([[len(c.split()) * 10_000 + len(c.strip()) for c in cs] for cs in _choices(questions)])
    picks = {
        "nearest_to_question": sim_q.argmax(axis=1),
        "nearest_to_centroid": sim_c.argmax(axis=1),
        "longest": words.argmax(axis=1),
        "shortest": np.where(empty, np.iinfo(np.int64).max, words).argmin(axis=1),
    }
    base, name = _base(questions), embedder_name(embedder)
    return pd.concat(
        [
            base.assign(solver=s, predicted_letter=[LETTERS[i] for i in p], correct=p == idx, embedder=name)
            for s, p in picks.items()
        ],
        ignore_index=True,
    )


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
    questions: pd.DataFrame, *, config: Any, cache: Any = True, client: Any = None, progress: bool = False
) -> pd.DataFrame:
    """An LLM (``config``, an :class:`~pv4kit.llm.config.LLMConfig`) shown only the question and the choices.

    Asked through :func:`pv4kit.llm.client.complete` (``cache``: its response cache; ``client``: injected).
    Returns key columns plus ``solver`` (``llm:<model>``), ``predicted_letter`` (``None`` when the reply has
    no letter), ``correct``, ``reply``.

    Raises:
        RuntimeError: Some requests failed after their retries (the answers that came are cached).
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
        correct=[x == LETTERS[i] for x, i in zip(letters, idx, strict=True)],
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
    """Accuracy of each solver in ``predictions`` (overall, or per ``by`` group) against ``chance``.

    ``solver, group, n, n_correct, accuracy, ci_low, ci_high, chance, binom_p`` (one-sided exact test of
    accuracy > chance), ``above_chance`` (the interval lies above chance), and ``embedder`` when the
    predictions name one (their distinct names, comma-joined).
    """
    require_columns(predictions, ["user_id", "solver", "correct", *([by] if by else [])], name="predictions")
    from scipy.stats import binom

    table = accuracy_table(predictions, by=["solver", by] if by else ["solver"], n_boot=n_boot, seed=seed)
    k, n = table["n_correct"].to_numpy(), table["n"].to_numpy()
    out = table.reset_index(drop=True).assign(
        group=table[by].astype(str).to_numpy() if by else "all",
        chance=chance,
        binom_p=np.where(n > 0, np.minimum(1.0, binom.sf(k - 1, n, chance)), np.nan),
        above_chance=(table["ci_low"] > chance).to_numpy(),
    )
    out = out[["solver", "group", "n", "n_correct", "accuracy", "ci_low", "ci_high", *out.columns[-3:]]]
    if embedders := embedder_names(predictions):
        out["embedder"] = embedders
    return out


# --------------------------------------------------------------------------- similarity, duplicates


def similarity_audit(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, near_duplicate: float | None = None
) -> pd.DataFrame:
    """How close the distractors sit to the reference and to each other; the rationale as a generation.

    ``near_duplicate``: the cosine at which two candidates count as near-duplicates (default: the
    embedder's, :func:`cutoffs`). Returns key columns plus ``ref_nearest_distractor``,
    ``nearest_distractor_letter``, ``ref_mean_distractor``, ``max_pair`` (closest pair of any two
    candidates), ``max_pair_letters``, ``near_duplicate_candidates``, ``ref_near_duplicate``, and, with
    rationales, ``rationale_pick``, ``rationale_correct``, ``rationale_margin``; and the ``embedder``'s name.
    """
    near_duplicate = cutoffs(embedder)["near_duplicate"] if near_duplicate is None else near_duplicate
    idx = answer_indices(questions)
    cand = _candidate_vectors(questions, embedder=embedder, cache=cache)
    sims = np.einsum("nkd,njd->nkj", cand, cand)
    n = len(questions)
    present = np.array([[bool(c.strip()) for c in cs] for cs in _choices(questions)])
    # a candidate pairs with the others, an empty candidate with nothing
    pair = np.where(np.eye(5, dtype=bool) | ~(present[:, :, None] & present[:, None, :]), -np.inf, sims)
    flat = pair.reshape(n, 25).argmax(axis=1)
    ref_row = sims[np.arange(n), idx]  # (n, 5)
    mask = present.copy()  # the non-empty distractors
    mask[np.arange(n), idx] = False
    ref_d = np.where(mask, ref_row, -np.inf)
    out = _base(questions).assign(
        ref_nearest_distractor=ref_d.max(axis=1),
        nearest_distractor_letter=[LETTERS[j] for j in ref_d.argmax(axis=1)],
        ref_mean_distractor=np.where(mask, ref_row, 0).sum(axis=1) / np.maximum(mask.sum(axis=1), 1),
        max_pair=pair.max(axis=(1, 2)),
        max_pair_letters=[LETTERS[f // 5] + LETTERS[f % 5] for f in flat],
    )
    out["near_duplicate_candidates"] = out["max_pair"] >= near_duplicate
    out["ref_near_duplicate"] = out["ref_nearest_distractor"] >= near_duplicate
    if "rationale" in questions and questions["rationale"].notna().any():
        has = questions["rationale"].notna().to_numpy()
        gens = questions.loc[has, QUESTION_KEY].assign(generation=questions.loc[has, "rationale"].astype(str))
        scored = score_frame(questions, gens, embedder=embedder, cache=cache, progress=False)
        scored = scored[[*QUESTION_KEY, "predicted_letter", "correct", "margin"]]
        scored.columns = [*QUESTION_KEY, "rationale_pick", "rationale_correct", "rationale_margin"]
        out = out.merge(scored, on=QUESTION_KEY, how="left")
    return out.assign(embedder=embedder_name(embedder))


def duplicate_questions(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, threshold: float | None = None
) -> pd.DataFrame:
    """Pairs of questions of the same user whose cosine is at least ``threshold`` (default: :func:`cutoffs`).

    ``user_id, question_index_a, question_index_b, similarity, question_a, question_b, embedder``, highest
    similarity first.
    """
    require_columns(questions, [*QUESTION_KEY, "question"], name="questions")
    threshold = cutoffs(embedder)["duplicate_question"] if threshold is None else threshold
    q = questions.reset_index(drop=True)
    vecs = _embed(list(q["question"]), embedder, cache)
    found = [(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))]
    for pos in q.groupby("user_id", sort=True).indices.values():  # positions, in row order, per user
        s = vecs[pos] @ vecs[pos].T
        a, b = np.nonzero(np.triu(s >= threshold, k=1))
        found.append((pos[a], pos[b], s[a, b].astype(np.float64)))
    a, b, sims = (np.concatenate(column) for column in zip(*found, strict=True))
    one, two = q.iloc[a], q.iloc[b]
    out = pd.DataFrame(
        {
            "user_id": one["user_id"].to_numpy(np.int64),
            "question_index_a": one["question_index"].to_numpy(np.int64),
            "question_index_b": two["question_index"].to_numpy(np.int64),
            "similarity": sims,
            "question_a": one["question"].to_numpy(object),
            "question_b": two["question"].to_numpy(object),
        }
    ).sort_values("similarity", ascending=False, ignore_index=True)
    return out.assign(embedder=embedder_name(embedder))


# --------------------------------------------------------------------------- leakage


def leakage_audit(questions: pd.DataFrame, users: pd.DataFrame) -> pd.DataFrame:
    """Share of each candidate's content words (:func:`pv4kit.text.content_words`) found in the user's chats.

    One row per question and candidate: key columns plus ``letter, is_reference, n_words, overlap`` (NaN
    without content words) and ``top_overlap`` (the question's highest, ties included).
    """
    require_columns(users, ["user_id", "documents"], name="users")
    vocab = {
        int(u): set().union(*(content_words(d) for d in docs)) if docs is not None and len(docs) else set()
        for u, docs in zip(users["user_id"], users["documents"], strict=True)
    }
    rows = []
    for pos, (uid, choices, a) in enumerate(
        zip(questions["user_id"], questions["choices"], answer_indices(questions), strict=True)
    ):
        v = vocab.get(int(uid), set())
        words = [content_words(c) for c in choices]
        shares = [len(w & v) / len(w) if w else np.nan for w in words]
        best = np.nanmax(shares) if not np.all(np.isnan(shares)) else np.nan
        rows += [
            (pos, LETTERS[j], j == a, len(w), s, bool(s == best))
            for j, (w, s) in enumerate(zip(words, shares, strict=True))
        ]
    frame = pd.DataFrame(rows, columns=["pos", "letter", "is_reference", "n_words", "overlap", "top_overlap"])
    out = _base(questions).iloc[frame["pos"]].reset_index(drop=True)
    return pd.concat([out, frame.drop(columns="pos")], axis=1)


def reference_unique_top(leakage: pd.DataFrame) -> pd.Series:
    """Per question (indexed by the key): only the reference has the top chat overlap."""
    require_columns(leakage, [*QUESTION_KEY, "is_reference", "top_overlap"], name="leakage")
    top = leakage["top_overlap"].astype(bool)
    flags = pd.DataFrame({"n_top": top, "ref_not_top": leakage["is_reference"].astype(bool) & ~top})
    sums = flags.groupby([leakage[k] for k in QUESTION_KEY], sort=True).sum()
    return ((sums["ref_not_top"] == 0) & (sums["n_top"] == 1)).rename(None)


def leakage_summary(leakage: pd.DataFrame) -> pd.DataFrame:
    """``role, mean_overlap, n`` of references, distractors and ``reference_unique_top`` (a share)."""
    require_columns(leakage, [*QUESTION_KEY, "is_reference", "overlap", "top_overlap"], name="leakage")
    ref = leakage["is_reference"]
    shares = {"reference": leakage.loc[ref, "overlap"], "distractor": leakage.loc[~ref, "overlap"]}
    shares["reference_unique_top"] = reference_unique_top(leakage)
    rows = [{"role": r, "mean_overlap": float(v.mean()), "n": len(v)} for r, v in shares.items()]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- category names


def category_groups(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, distance: float | None = None
) -> pd.DataFrame:
    """Group similar category names across users (each user names their categories differently).

    Agglomerative clustering (average linkage, cosine distance below ``distance``, default the embedder's
    ``category_distance`` of :func:`cutoffs`) of the distinct ``(user_id, category_name)``; each group is
    labelled by its member nearest the group mean. A name with a zero vector is a group of its own.
    Returns one row per user and category: ``user_id, category, category_name, n_questions, group,
    group_label`` (groups numbered by size, largest first), the unit ``vector`` and the ``embedder``.
    """
    require_columns(questions, ["user_id", "category", "category_name"], name="questions")
    named = questions.dropna(subset=["category_name"])
    cats = named.groupby(["user_id", "category", "category_name"]).size().reset_index(name="n_questions")
    if cats.empty:
        return cats.assign(group=pd.Series(dtype="int64"), group_label=pd.Series(dtype=object))
    distance = cutoffs(embedder)["category_distance"] if distance is None else distance
    vecs = _embed(list(cats["category_name"]), embedder, cache)
    labels = np.arange(len(vecs)) + len(vecs)  # singletons, numbered after any cluster
    known = vecs.any(axis=1)
    if known.sum() >= 2:
        from sklearn.cluster import AgglomerativeClustering

        labels[known] = AgglomerativeClustering(
            n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance
        ).fit_predict(vecs[known])
    renum = {g: i for i, g in enumerate(pd.Series(labels).value_counts().index)}
    cats["group"] = [renum[g] for g in labels]
    names = {}
    for g, members in cats.groupby("group"):
        m = vecs[members.index.to_numpy()]
        centre = unit_rows(m.mean(axis=0, keepdims=True))[0]
        names[g] = members["category_name"].iloc[int((m @ centre).argmax())]
    cats["group_label"] = cats["group"].map(names)
    cats["vector"] = list(vecs)
    return cats.assign(embedder=embedder_name(embedder))


def with_category_groups(frame: pd.DataFrame, categories: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus the ``group`` and ``group_label`` of its ``(user_id, category)``."""
    cols = ["user_id", "category", "group", "group_label"]
    out = frame.drop(columns=[c for c in ("group", "group_label") if c in frame])
    if categories.empty or "category" not in frame:
        return out.assign(group=pd.NA, group_label=None)
    require_columns(categories, cols, name="categories")
    require_columns(frame, ["user_id"], name="frame")
    right = categories[cols].astype({"category": "Int64"})
    return out.astype({"category": "Int64"}).merge(right, on=["user_id", "category"], how="left")


# --------------------------------------------------------------------------- flags


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
    base = list(_base(lengths).columns)
    out = lengths[[*base, "ref_longest", "ref_shortest"]].copy()
    out["spread_over_2_words"] = ~lengths["within_2_words"]
    if solvers is not None and len(solvers):
        wide = solvers.pivot_table(index=QUESTION_KEY, columns="solver", values="correct", aggfunc="first")
        wide.columns = [f"solved_by_{c}" for c in wide.columns]
        out = out.merge(wide.reset_index(), on=QUESTION_KEY, how="left")
    if similarity is not None:
        sim = similarity[[*QUESTION_KEY, "ref_near_duplicate", "near_duplicate_candidates"]].copy()
        if "rationale_correct" in similarity:
            sim["rationale_misses"] = ~similarity["rationale_correct"].fillna(True).astype(bool)
        out = out.merge(sim, on=QUESTION_KEY, how="left")
    if leakage is not None:
        top = reference_unique_top(leakage).rename("ref_top_chat_overlap").reset_index()
        out = out.merge(top, on=QUESTION_KEY, how="left")
    if duplicates is not None:
        sides = [duplicates[["user_id", f"question_index_{x}"]].set_axis(QUESTION_KEY, axis=1) for x in "ab"]
        pairs = pd.MultiIndex.from_frame(pd.concat(sides))
        out["duplicate_question"] = pd.MultiIndex.from_frame(out[QUESTION_KEY]).isin(pairs)
    flag_cols = [c for c in out.columns if c not in base]
    out[flag_cols] = out[flag_cols].fillna(False).astype(bool)
    out["n_flags"] = out[flag_cols].sum(axis=1).astype("int64")
    return out


# --------------------------------------------------------------------------- running them all


@dataclass
class AuditResult:
    """All audit tables of one dataset (see :func:`run_audit`)."""

    tables: dict[str, pd.DataFrame]
    summary: str

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self.tables:
            raise KeyError(f"no audit table {name!r}; tables: {sorted(self.tables)}")
        return self.tables[name]


def run_audit(
    data: Any,
    *,
    embedder: Any = None,
    cache: Any = True,
    llm_config: Any = None,
    llm_cache: str | os.PathLike[str] | None = None,
    llm_client: Any = None,
    n_boot: int = 2000,
    seed: int = 0,
    store: str | os.PathLike[str] | None = None,
) -> AuditResult:
    """Run every audit on a :class:`~pv4kit.dataset.load.PV4Data` and summarise the findings.

    Args:
        data: The dataset.
        embedder: An embedder or a name (default :func:`~pv4kit.embeddings.models.get_audit_embedder`'s:
            Qwen3-Embedding-4B with CUDA, else the static model distilled from MiniLM).
        cache: The embedding cache.
        llm_config: Also run the LLM candidate-only solver with this :class:`~pv4kit.llm.client.LLMConfig`.
        llm_cache: The LLM response cache (default: the shared ``.cache/pv4kit/llm.sqlite``).
        llm_client: Injected OpenAI-like client (tests).
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed.
        store: A folder keeping finished audits (e.g. ``.cache/pv4kit/audits``): a result computed before
            for the same questions, data files, embedder, options and audit code is read back (not with
            ``llm_config``); notebooks 02, 03 and 07 share one. It saves 142 s at release size on 2 cores
            (``benchmarks/bench_audit_store.py``).

    Returns an :class:`AuditResult` with tables ``lengths, length_summary, positions, letter_sequence,
    letter_sequence_summary, solver_predictions, solver_accuracy, solver_accuracy_by_category, similarity,
    leakage, leakage_summary, duplicates, categories, flags`` (with ``solved_by_row_letter``) and a text
    summary; the tables drawn from embeddings name it in an ``embedder`` column.
    """
    check_number(n_boot, "n_boot", ge=1, integer=True)
    check_number(seed, "seed", ge=0, integer=True)
    embedder = resolve_embedder(embedder, audit=True)
    store = store if llm_config is None else None
    path = _stored_path(store, data, embedder, n_boot=n_boot, seed=seed)
    if (found := _read_stored(path)) is not None:
        return found
    q, boot = data.questions.reset_index(drop=True), {"n_boot": n_boot, "seed": seed}
    t: dict[str, pd.DataFrame] = {"lengths": length_audit(q)}
    t["length_summary"] = length_summary(t["lengths"], **boot)
    t["positions"] = position_audit(q)
    t["letter_sequence"] = letter_sequence_audit(q)
    t["letter_sequence_summary"] = letter_sequence_summary(q, seed=seed)
    preds = [candidate_only_predictions(q, embedder=embedder, cache=cache)]
    if llm_config is not None:
        preds.append(llm_candidate_only(q, config=llm_config, cache=llm_cache or True, client=llm_client))
    t["similarity"] = similarity_audit(q, embedder=embedder, cache=cache)
    if "rationale_correct" in t["similarity"]:
        rat = t["similarity"].dropna(subset=["rationale_pick"]).reset_index(drop=True)
        picks = {"predicted_letter": rat["rationale_pick"], "correct": rat["rationale_correct"]}
        preds.append(_base(rat).assign(**picks, solver="rationale_as_generation"))
    name = embedder_name(embedder)  # the tables drawn from embeddings name it
    t["solver_predictions"] = preds = pd.concat(preds, ignore_index=True).assign(embedder=name)
    t["solver_accuracy"] = solver_accuracy(preds, **boot)
    if q["category_name"].notna().any():
        t["solver_accuracy_by_category"] = solver_accuracy(preds, by="category_name", **boot)
    t["leakage"] = leakage_audit(q, data.users)
    t["leakage_summary"] = leakage_summary(t["leakage"])
    t["duplicates"] = duplicate_questions(q, embedder=embedder, cache=cache)
    t["categories"] = category_groups(q, embedder=embedder, cache=cache)
    candidate_only = preds[preds["solver"] != "rationale_as_generation"]
    solvers = pd.concat([candidate_only, row_letter_predictions(q)], ignore_index=True)
    flags = question_flags(t["lengths"], solvers, t["similarity"], t["leakage"], t["duplicates"])
    t["flags"] = flags.assign(embedder=name)
    result = AuditResult(tables=t, summary=summarize(t, embedder=name))
    if path is not None:
        with atomic_path(path) as tmp:
            tmp.write_bytes(pickle.dumps((result.tables, result.summary), protocol=5))
        entries = [p.parent for p in path.parent.parent.glob("[!.]*/result.pkl")]  # nothing else is pruned
        for old in sorted(entries, key=lambda p: p.stat().st_mtime, reverse=True)[
            3:
        ]:  # keep the newest three
            shutil.rmtree(old, ignore_errors=True)
    return result


def stored_audit(
    data: Any,
    *,
    store: str | os.PathLike[str] | None,
    embedder: Any = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> AuditResult | None:
    """The result :func:`run_audit` would read back from ``store`` with these options, else ``None``.

    Nothing is computed; a damaged entry is not trusted (a warning, ``None``).
    """
    return _read_stored(
        _stored_path(store, data, resolve_embedder(embedder, audit=True), n_boot=n_boot, seed=seed)
    )


def _read_stored(path: Path | None) -> AuditResult | None:
    if path is None or not path.is_file():
        return None
    try:
        tables, summary = pickle.loads(path.read_bytes())
    except Exception as exc:  # a damaged entry is recomputed, never trusted
        logger.warning("%s: unreadable stored audit (%s); recomputing", path, exc)
        return None
    logger.info("audit: read back the stored result %s", path.parent)
    return AuditResult(tables=tables, summary=summary)


def _stored_path(store: Any, data: Any, embedder: Any, *, n_boot: int, seed: int) -> Path | None:
    """``store/<key>/result.pkl``, the key a hash of the questions, data files, embedder, options and code."""
    from pv4kit import __version__
    from pv4kit.scoring import accuracy, score, stats

    if store is None:
        return None
    q = data.questions
    rows = pd.util.hash_pandas_object(q[["user_id", "question_index", "question"]], index=False)
    parts = {
        "questions": hashlib.sha256(rows.to_numpy().tobytes()).hexdigest(),
        "n": int(len(q)),
        "data": getattr(data, "fingerprint", None),
        "embedder": getattr(embedder, "cache_key", getattr(embedder, "name", repr(embedder))),
        "n_boot": n_boot,
        "seed": seed,
        "pv4kit": __version__,
        "code": [sha256_file(f) for f in (__file__, accuracy.__file__, score.__file__, stats.__file__)],
    }
    return Path(store) / sha256_text(json.dumps(parts, sort_keys=True))[:24] / "result.pkl"


def summarize(tables: dict[str, pd.DataFrame], *, embedder: str = "") -> str:
    """A short plain-text report of the audit findings (which shortcuts beat chance)."""
    cut = cutoffs(embedder)
    lines = [f"PV4 distractor audit ({len(tables['lengths'])} questions; embedder {embedder})", ""]
    lines.append("Candidate-only solvers (chance 20%; 95% CI resamples users; * = CI above chance):")
    for r in tables["solver_accuracy"].itertuples(index=False):
        lines.append(
            f"  {r.solver:<26} {100 * r.accuracy:5.1f}% [{100 * r.ci_low:5.1f}, {100 * r.ci_high:5.1f}]"
            f"  n={r.n}  binomial p={r.binom_p:.3g}{' *' if r.above_chance else ''}"
        )
    ls = tables["length_summary"].set_index("metric")["rate"]
    lines += [
        "",
        "Length and structure:",
        f"  reference uniquely longest   {100 * ls['ref_longest']:5.1f}% (chance 20%)",
        f"  reference uniquely shortest  {100 * ls['ref_shortest']:5.1f}% (chance 20%)",
        f"  five choices within 2 words  {100 * ls['within_2_words']:5.1f}% (prompt: 100%)",
        f"  all five share a first word  {100 * ls['all_share_first_word']:5.1f}%",
    ]
    pos = tables["positions"]
    shares = ", ".join(f"{r.letter} {100 * r.share:.0f}%" for r in pos.itertuples(index=False))
    lines += ["", f"Answer position: {shares}; chi-square p = {pos['pvalue'].iloc[0]:.3g}"]
    if "letter_sequence_summary" in tables:
        lines += ["", *_letter_sequence_lines(tables["letter_sequence_summary"])]
    sim = tables["similarity"]
    lines += [
        "",
        "Distractor similarity:",
        f"  median reference-to-nearest-distractor cosine {sim['ref_nearest_distractor'].median():.3f}",
        f"  questions with a near-duplicate candidate pair (>= {cut['near_duplicate']:.3g}): "
        f"{int(sim['near_duplicate_candidates'].sum())}",
    ]
    if "rationale_correct" in sim:
        lines.append(
            "  rationale scored as a generation picks the reference "
            f"{100 * sim['rationale_correct'].mean():.1f}%"
        )
    lk = tables["leakage_summary"].set_index("role")["mean_overlap"]
    lines += [
        "",
        f"Leakage: mean content-word overlap with the user's chats: reference "
        f"{lk['reference']:.3f}, distractors {lk['distractor']:.3f};",
        f"  the reference alone overlaps most in "
        f"{100 * lk['reference_unique_top']:.1f}% of questions (chance 20%)",
        f"Duplicates: {len(tables['duplicates'])} near-duplicate question pair(s) within a user "
        f"(cosine >= {cut['duplicate_question']:.3g})",
    ]
    if "categories" in tables and len(tables["categories"]):
        cats = tables["categories"]
        lines.append(
            f"Category names: {len(cats)} names in {cats['group'].nunique()} groups "
            f"(cosine distance < {cut['category_distance']:.3g})"
        )
    return "\n".join(lines) + "\n"


def _letter_sequence_lines(summary: pd.DataFrame) -> list[str]:
    s = summary.set_index("metric")
    modal, row = s.loc["modal_letter_of_row"], s.loc["row_letter"]
    if not modal["n"]:
        return ["Letters by row index: no row index is shared by two or more users"]
    lines = [
        "Letters by row index (question_index) across users:",
        f"  {100 * modal['rate']:.0f}% of {int(modal['n'])} questions have their row's modal letter "
        f"(chance {100 * modal['chance']:.0f}%, each user's letters shuffled; p = {modal['pvalue']:.3g})",
        f"  the other users' letter at the same row answers {100 * row['rate']:.0f}% "
        f"(chance {100 * row['chance']:.0f}%, p = {row['pvalue']:.3g})",
    ]
    if modal["rate"] >= 1.0 - 1e-12:
        lines += [
            "  -> the same seed for every user gives every user the same letter sequence: a row-to-letter",
            "     map learnt on training users answers test users",
        ]
    elif modal["pvalue"] < 0.01:
        lines.append("  -> users share much of one letter sequence (the same shuffle seed for every user?)")
    return lines


def write_audit(result: AuditResult, output_dir: Any) -> list[Any]:
    """Write every table as ``<name>.csv`` (vectors dropped) and ``summary.txt`` into ``output_dir``."""
    out, paths = Path(output_dir), []
    for name, frame in result.tables.items():
        csv = frame.drop(columns=["vector"], errors="ignore").to_csv(index=False)
        paths.append(atomic_write_text(out / f"{name}.csv", csv))
    return [*paths, atomic_write_text(out / "summary.txt", result.summary)]


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
    """Notebook 03's tables (questions, category groups, lengths, candidate-only predictions) with hard flags.

    The flags are the data's, else ``derived``'s (:func:`~pv4kit.baselines.hard.with_fallback_subset`).

    With ``store`` (notebook 02's :func:`run_audit` store, its ``n_boot`` and ``seed``) holding the audit of
    these questions and ``embedder``, the tables are read from it; this saves 10 s in notebook 03 at release
    size on 2 cores (``benchmarks/bench_notebooks.py``).

    Returns ``{"questions", "note", "categories", "lengths", "solvers", "source"}``: ``note`` says where the
    flags came from, ``solvers`` holds the :data:`SOLVERS`, ``source`` is ``"stored audit <store>"`` or
    ``"computed"``.
    """
    questions, note = with_fallback_subset(data.questions, derived)
    embedder = resolve_embedder(embedder, audit=True)
    kept = stored_audit(data, embedder=embedder, store=store, n_boot=n_boot, seed=seed)
    if kept is not None:
        categories = kept["categories"]
        solvers = kept["solver_predictions"]
        solvers = _with_flags(solvers[solvers["solver"].isin(SOLVERS)].reset_index(drop=True), questions)
        lengths = _with_flags(kept["lengths"], questions)
        source = f"stored audit {store}"
    else:
        categories = category_groups(questions, embedder=embedder, cache=cache)
        lengths = length_audit(questions)
        solvers = candidate_only_predictions(questions, embedder=embedder, cache=cache)
        source = "computed"
    lengths = with_category_groups(lengths, categories)
    out = {"questions": questions, "note": note, "categories": categories, "lengths": lengths}
    return out | {"solvers": solvers, "source": source}


def _with_flags(table: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """``table`` (one row per question, or several) with ``questions``' ``hard`` column in its place."""
    if "hard" not in questions:
        return table.drop(columns="hard", errors="ignore")
    hard = questions.set_index(QUESTION_KEY)["hard"].reindex(pd.MultiIndex.from_frame(table[QUESTION_KEY]))
    if hard.isna().any():  # the key covers the questions, so this means a damaged store
        raise ValueError("stored audit: rows for questions the data does not hold; rerun the audit")
    return table.assign(hard=hard.to_numpy())
