"""Distractor-quality and shortcut audits of PV4: can the answer be found without knowing the user?

Every audit is a function that takes the questions frame (and, where needed, the users frame or an
embedder) and returns a tidy frame, one row per question (or per question x candidate, per row index, or
per solver x group). :func:`question_flags` joins them into one per-question flags table;
:func:`pv4kit.analysis.audit_report.run_audit` runs them all and ``pv4kit audit`` writes the tables and a
summary.

* **Length and structure** (:func:`length_audit`): word and character counts of the reference and the
  distractors, whether the reference is the (unique) longest or shortest (chance 20%), the word spread
  against the generation prompt's "within 2 words" rule, and how many distractors share the reference's
  first word and first two words (a template match).
* **Answer position** (:func:`position_audit`): letter counts with a chi-square test against uniform.
* **Letter sequence by row** (:mod:`pv4kit.analysis.audit_sequence`): do users share the correct letter at the
  same ``question_index``?
* **Candidate-only solvers** (:func:`candidate_only_predictions`, :func:`llm_candidate_only`): pick the
  candidate nearest the question, the one nearest the centroid of the five, the longest and the shortest;
  optionally an LLM shown only the question and the choices. :func:`solver_accuracy` gives accuracy with
  user-clustered bootstrap intervals and an exact binomial test against the 20% chance line.
* **Distractor similarity** (:func:`similarity_audit`): reference-to-nearest-distractor cosine, the
  closest candidate pair (near-duplicates the scorer cannot separate), and the rationale scored as if it
  were a generation (it names the distractors too: does it still pick the reference?).
* **Leakage** (:func:`leakage_audit`): share of each candidate's content words found in the user's chats.
* **Duplicates** (:func:`duplicate_questions`): near-duplicate question pairs within a user.

All embeddings go through :func:`pv4kit.embeddings.models.embed_texts` and its on-disk cache; cosine is on
L2-normalised float32 vectors, as in :mod:`pv4kit.scoring.score`.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.schema import LETTERS, QUESTION_KEY, answer_indices
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.score import score_frame
from pv4kit.scoring.stats import bootstrap_ci
from pv4kit.text import content_words
from pv4kit.vectors import unit_rows

logger = logging.getLogger(__name__)

CHANCE = 0.2
#: Columns that identify and describe a question in every per-question audit table (those present).
BASE_COLUMNS = ("user_id", "question_index", "split", "category", "category_name", "hard")
SOLVERS = ("nearest_to_question", "nearest_to_centroid", "longest", "shortest")


def _words(text: Any) -> list[str]:
    return str(text).split() if isinstance(text, str) else []


def _base(questions: pd.DataFrame) -> pd.DataFrame:
    return questions[[c for c in BASE_COLUMNS if c in questions]].reset_index(drop=True)


# --------------------------------------------------------------------------- length and structure


def length_audit(questions: pd.DataFrame) -> pd.DataFrame:
    """Length and structure of the reference against its distractors, one row per question.

    Returns:
        The key columns plus ``answer_letter, ref_words, ref_chars, distractor_words_mean,
        distractor_words_min, distractor_words_max, distractor_chars_mean, word_spread`` (max minus min
        words over the five), ``within_2_words``, ``ref_word_rank`` (1 = longest, ties share the best
        rank), ``ref_longest`` / ``ref_shortest`` (uniquely, by words then characters),
        ``ref_longest_chars`` / ``ref_shortest_chars`` (uniquely, by characters), ``shared_first_word``
        and ``shared_first_two`` (how many of the four distractors start like the reference).
    """
    idx = answer_indices(questions)
    rows = []
    for choices, a in zip(questions["choices"], idx, strict=True):
        choices = [c if isinstance(c, str) else "" for c in choices]
        words = np.array([len(_words(c)) for c in choices])
        chars = np.array([len(c.strip()) for c in choices])
        others = [j for j in range(5) if j != a]
        key = words * 10_000 + chars  # words first, characters break ties
        first = [tuple(w.lower().strip(",.;:") for w in _words(c)[:2]) for c in choices]
        rows.append(
            {
                "answer_letter": LETTERS[a],
                "ref_words": int(words[a]),
                "ref_chars": int(chars[a]),
                "distractor_words_mean": float(words[others].mean()),
                "distractor_words_min": int(words[others].min()),
                "distractor_words_max": int(words[others].max()),
                "distractor_chars_mean": float(chars[others].mean()),
                "word_spread": int(words.max() - words.min()),
                "within_2_words": bool(words.max() - words.min() <= 2),
                "ref_word_rank": int(1 + (words[others] > words[a]).sum()),
                "ref_longest": bool((key[others] < key[a]).all()),
                "ref_shortest": bool((key[others] > key[a]).all()),
                "ref_longest_chars": bool((chars[others] < chars[a]).all()),
                "ref_shortest_chars": bool((chars[others] > chars[a]).all()),
                "shared_first_word": int(
                    sum(bool(first[a]) and first[j][:1] == first[a][:1] for j in others)
                ),
                "shared_first_two": int(sum(first[j] == first[a] and len(first[a]) == 2 for j in others)),
            }
        )
    return pd.concat([_base(questions), pd.DataFrame(rows)], axis=1)


def length_summary(lengths: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Rates of the length flags with user-bootstrap intervals and the chance rate where one exists.

    Returns:
        One row per metric: ``metric, rate, ci_low, ci_high, n, chance``.
    """
    metrics = {
        "ref_longest": CHANCE,
        "ref_shortest": CHANCE,
        "ref_longest_chars": CHANCE,
        "ref_shortest_chars": CHANCE,
        "within_2_words": None,
    }
    frame = lengths.assign(
        all_share_first_word=lengths["shared_first_word"] == 4,
        all_share_first_two=lengths["shared_first_two"] == 4,
    )
    metrics.update({"all_share_first_word": None, "all_share_first_two": None})
    rows = []
    for metric, chance in metrics.items():
        ci = bootstrap_ci(frame.assign(v=frame[metric].astype(float)), value="v", n_boot=n_boot, seed=seed)
        rows.append(
            {
                "metric": metric,
                "rate": ci["estimate"],
                "ci_low": ci["low"],
                "ci_high": ci["high"],
                "n": ci["n"],
                "chance": chance,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- answer position


def position_audit(questions: pd.DataFrame, *, by: str | None = None) -> pd.DataFrame:
    """Counts of the correct letter with a chi-square test against a uniform A-E.

    Args:
        questions: The questions frame.
        by: Optional column to test within each group (e.g. ``"split"`` or ``"user_id"``).

    Returns:
        One row per group and letter: ``group, letter, n, share, expected_share, chi2, pvalue``
        (``chi2``/``pvalue`` repeat within a group; ``group`` is ``"all"`` without ``by``).
    """
    from scipy.stats import chisquare

    letters = pd.Series(LETTERS[i] for i in answer_indices(questions))
    groups = questions[by].astype(str).to_numpy() if by else np.full(len(questions), "all")
    rows = []
    for g in dict.fromkeys(groups):
        sub = letters[groups == g]
        counts = np.array([(sub == x).sum() for x in LETTERS])
        test = chisquare(counts) if counts.sum() else None
        for x, n in zip(LETTERS, counts, strict=True):
            rows.append(
                {
                    "group": g,
                    "letter": x,
                    "n": int(n),
                    "share": float(n / counts.sum()) if counts.sum() else np.nan,
                    "expected_share": CHANCE,
                    "chi2": float(test.statistic) if test is not None else np.nan,
                    "pvalue": float(test.pvalue) if test is not None else np.nan,
                }
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- candidate-only solvers


def _candidate_vectors(questions: pd.DataFrame, *, embedder: Any, cache: Any) -> np.ndarray:
    """Unit vectors of every candidate, shape ``(n, 5, dim)`` (zeros for an empty candidate)."""
    from pv4kit.embeddings.models import embed_texts

    flat = [c if isinstance(c, str) else "" for cs in questions["choices"] for c in cs]
    vecs = unit_rows(embed_texts([t or " " for t in flat], embedder=embedder, cache=cache, progress=False))
    vecs[np.array([not t.strip() for t in flat])] = 0.0
    return vecs.reshape(len(questions), 5, -1)


def candidate_only_predictions(questions: pd.DataFrame, *, embedder: Any, cache: Any = True) -> pd.DataFrame:
    """Predictions of four solvers that see neither the user's chats nor a model answer.

    * ``nearest_to_question``: the candidate most similar to the question (cosine);
    * ``nearest_to_centroid``: the candidate most similar to the mean of the five (the "most typical");
    * ``longest`` / ``shortest``: by words, then characters; ties go to the earliest letter.

    Returns:
        Long frame: key columns plus ``solver, predicted_letter, correct``.
    """
    from pv4kit.embeddings.models import embed_texts

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
        base.assign(solver=name, predicted_letter=[LETTERS[i] for i in pick], correct=pick == idx)
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
        letter or the call failed), ``correct``, ``reply``.
    """
    from pv4kit.llm.client import complete

    idx = answer_indices(questions)
    requests = [
        llm_candidate_only_messages(q, list(c))
        for q, c in zip(questions["question"], questions["choices"], strict=True)
    ]
    replies = complete(
        requests, config=config, cache=cache, step="audit_candidate_only", client=client, progress=progress
    )
    letters = [parse_letter(r.text) if r.error is None else None for r in replies]
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
        interval lies above chance).
    """
    from scipy.stats import binom

    table = accuracy_table(predictions, by=["solver", by] if by else ["solver"], n_boot=n_boot, seed=seed)
    k, n = table["n_correct"].to_numpy(), table["n"].to_numpy()
    # binomtest(k, n, chance, alternative="greater").pvalue is binom.sf(k - 1, n, chance), capped at 1
    binom_p = np.where(n > 0, np.minimum(1.0, binom.sf(k - 1, n, chance)), np.nan)
    return pd.DataFrame(
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


# --------------------------------------------------------------------------- similarity and rationale


def similarity_audit(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, near_duplicate: float = 0.9
) -> pd.DataFrame:
    """How close the distractors sit to the reference and to each other; the rationale as a generation.

    Args:
        questions: The questions frame (``rationale`` used when present).
        embedder: Any :class:`~pv4kit.embeddings.models.Embedder`.
        cache: Embedding cache.
        near_duplicate: Cosine at or above which two candidates count as near-duplicates.

    Returns:
        Key columns plus ``ref_nearest_distractor`` (max cosine reference-distractor),
        ``nearest_distractor_letter``, ``ref_mean_distractor``, ``max_pair`` (closest pair of any two
        candidates), ``max_pair_letters``, ``near_duplicate_candidates``, ``ref_near_duplicate`` (the
        reference has a near-duplicate distractor), and, with rationales, ``rationale_pick``,
        ``rationale_correct``, ``rationale_margin``.
    """
    idx = answer_indices(questions)
    cand = _candidate_vectors(questions, embedder=embedder, cache=cache)
    sims = np.einsum("nkd,njd->nkj", cand, cand)
    n = len(questions)
    eye = np.eye(5, dtype=bool)
    present = np.array([[isinstance(c, str) and bool(c.strip()) for c in cs] for cs in questions["choices"]])
    both = present[:, :, None] & present[:, None, :]
    pair = np.where(eye[None] | ~both, -np.inf, sims)  # empty candidates pair with nothing
    flat = pair.reshape(n, 25).argmax(axis=1)
    ref_row = sims[np.arange(n), idx]  # (n, 5)
    mask = present.copy()  # the non-empty distractors
    mask[np.arange(n), idx] = False
    ref_d = np.where(mask, ref_row, -np.inf)
    nearest = ref_d.argmax(axis=1)
    out = _base(questions).assign(
        ref_nearest_distractor=ref_d.max(axis=1),
        nearest_distractor_letter=[LETTERS[j] for j in nearest],
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
        scored = scored[[*QUESTION_KEY, "predicted_letter", "correct", "margin"]].rename(
            columns={
                "predicted_letter": "rationale_pick",
                "correct": "rationale_correct",
                "margin": "rationale_margin",
            }
        )
        out = out.merge(scored, on=QUESTION_KEY, how="left")
    return out


# --------------------------------------------------------------------------- leakage and duplicates


def leakage_audit(questions: pd.DataFrame, users: pd.DataFrame) -> pd.DataFrame:
    """Share of each candidate's content words that appear anywhere in the user's chats.

    Content words are lower-cased tokens of three or more characters, stop words removed.

    Returns:
        One row per question and candidate: key columns plus ``letter, is_reference, n_words,
        overlap`` (share in ``[0, 1]``; NaN for a candidate with no content word) and ``top_overlap``
        (this candidate has the question's highest overlap, ties included).
    """
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


def duplicate_questions(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, threshold: float = 0.9
) -> pd.DataFrame:
    """Pairs of questions of the same user whose cosine similarity is at least ``threshold``.

    Returns:
        ``user_id, question_index_a, question_index_b, similarity, question_a, question_b`` sorted by
        similarity (highest first); empty when nothing crosses the threshold.
    """
    from pv4kit.embeddings.models import embed_texts

    vecs = unit_rows(embed_texts(list(questions["question"]), embedder=embedder, cache=cache, progress=False))
    rows = []
    for uid, grp in questions.reset_index(drop=True).groupby("user_id", sort=True):
        pos = grp.index.to_numpy()
        sims = vecs[pos] @ vecs[pos].T
        a, b = np.nonzero(np.triu(sims >= threshold, k=1))
        for i, j in zip(a, b, strict=True):
            qa, qb = grp.iloc[i], grp.iloc[j]
            rows.append(
                (
                    int(uid),
                    int(qa["question_index"]),
                    int(qb["question_index"]),
                    float(sims[i, j]),
                    qa["question"],
                    qb["question"],
                )
            )
    cols = ["user_id", "question_index_a", "question_index_b", "similarity", "question_a", "question_b"]
    return pd.DataFrame(rows, columns=cols).sort_values("similarity", ascending=False, ignore_index=True)


# --------------------------------------------------------------------------- category names


def category_groups(
    questions: pd.DataFrame, *, embedder: Any, cache: Any = True, distance: float = 0.55
) -> pd.DataFrame:
    """Group similar category names across users (their names differ per user) by embedding.

    Agglomerative clustering (average linkage, cosine distance below ``distance``) of the distinct
    ``(user_id, category_name)`` names; each group is labelled by its member nearest the group mean.

    Returns:
        One row per user and category: ``user_id, category, category_name, n_questions, group,
        group_label`` and the unit ``vector`` (for maps).
    """
    from sklearn.cluster import AgglomerativeClustering

    from pv4kit.embeddings.models import embed_texts

    cats = (
        questions.dropna(subset=["category_name"])
        .groupby(["user_id", "category", "category_name"], sort=True)
        .size()
        .rename("n_questions")
        .reset_index()
    )
    if cats.empty:
        return cats.assign(group=pd.Series(dtype="int64"), group_label=pd.Series(dtype=object))
    vecs = unit_rows(embed_texts(list(cats["category_name"]), embedder=embedder, cache=cache, progress=False))
    if len(cats) == 1:
        labels = np.zeros(1, dtype=int)
    else:
        labels = AgglomerativeClustering(
            n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance
        ).fit_predict(vecs)
    # number groups by size (largest first) so colours are stable across runs
    order = pd.Series(labels).value_counts().index.tolist()
    renum = {g: i for i, g in enumerate(order)}
    cats["group"] = [renum[g] for g in labels]
    names = {}
    for g, members in cats.groupby("group"):
        m = vecs[members.index.to_numpy()]
        centre = unit_rows(m.mean(axis=0, keepdims=True))[0]
        names[g] = members["category_name"].iloc[int((m @ centre).argmax())]
    cats["group_label"] = cats["group"].map(names)
    cats["vector"] = list(vecs)
    return cats


def with_category_groups(frame: pd.DataFrame, categories: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus the ``group`` and ``group_label`` of its ``(user_id, category)``."""
    cols = ["user_id", "category", "group", "group_label"]
    out = frame.drop(columns=[c for c in ("group", "group_label") if c in frame])
    if categories.empty or "category" not in frame:
        return out.assign(group=pd.NA, group_label=None)
    right = categories[cols].astype({"category": "Int64"})
    return out.astype({"category": "Int64"}).merge(right, on=["user_id", "category"], how="left")


# --------------------------------------------------------------------------- everything


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
