"""Nearest-candidate scoring of free-text answers: generations -> per-question predictions -> metrics.

The reference scorer's rule (Memorilla ``metrics.py``): the prediction is the non-empty candidate of highest
cosine with the cleaned generation, ties to the earliest letter (counted), in the reference's float16
arithmetic by default (:func:`candidate_similarities`). Unlike the reference, vectors are cached, metrics
carry user-clustered bootstrap intervals, and failed requests are refused unless ``failed=`` says how to
count them (an empty answer the server did return is scored as the reference scores it, and counted).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import atomic_write_json, provenance, sha256_file
from pv4kit._options import check_number
from pv4kit.embeddings.cache import EmbeddingCache
from pv4kit.embeddings.models import Embedder, embed_texts, resolve_embedder
from pv4kit.schema import LETTERS, QUESTION_KEY, answer_indices, require_columns
from pv4kit.scoring import runs
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.choices import ORDER_COLUMN, original_letter, parse_choice, position_table, shown_letter

logger = logging.getLogger(__name__)

NUMERICS = ("float16", "float32")
DEFAULT_NUMERICS = "float16"
#: how ``score_run`` may count failed requests: wrong (in the denominator, no prediction), or left out
FAILED_POLICIES = ("wrong", "exclude")
SIM_COLUMNS = [f"sim_{letter}" for letter in LETTERS]
#: the questions' columns a predictions frame carries over
CARRIED_COLUMNS = ("split", "category", "category_name", "hard", "question", "choices", "answer")
_COLUMNS = [*QUESTION_KEY, *CARRIED_COLUMNS, "answer_letter", "generation", "predicted_letter", "correct"]
_EPS = 1e-8  # added to every norm, as the reference does (it vanishes in float16 arithmetic)
_SPECIAL_TOKENS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|im_sep|>")
# one left-to-right pass, as the reference's regex: ``<|im_<|im_end|>start|>`` keeps ``<|im_start|>``
_SPECIAL_TOKEN_PATTERN = re.compile("|".join(re.escape(t) for t in _SPECIAL_TOKENS))


class FailedRowsError(ValueError):
    """A run with failed requests was scored without saying how to count them."""


def check_numerics(numerics: str) -> str:
    """Return ``numerics`` if it is one of :data:`NUMERICS`, else raise ``ValueError`` naming it."""
    if numerics not in NUMERICS:
        raise ValueError(f"numerics: expected one of {list(NUMERICS)}, got {numerics!r}")
    return numerics


def candidate_similarities(
    queries: np.ndarray, candidates: np.ndarray, mask: np.ndarray, *, numerics: str = DEFAULT_NUMERICS
) -> np.ndarray:
    """Cosine similarity of each query with each of its non-empty candidates.

    Args:
        queries: ``(n, dim)`` generation vectors as the encoder returned them.
        candidates: ``(mask.sum(), dim)`` vectors of the non-empty candidates, row by row in letter order.
        mask: ``(n, k)`` booleans, True where a candidate is non-empty.
        numerics: ``"float16"`` (the reference's arithmetic) or ``"float32"``.

    Returns ``(n, k)`` float32 similarities (float16 values exactly, under ``"float16"``), ``NaN`` where the
    candidate is empty.
    """
    check_numerics(numerics)
    mask = np.asarray(mask, dtype=bool)
    if len(candidates) != int(mask.sum()):
        raise ValueError(
            f"candidates: expected {int(mask.sum())} rows (one per non-empty candidate), "
            f"got {len(candidates)}"
        )
    out = np.full(mask.shape, np.nan, dtype=np.float32)
    if numerics == "float32":
        q, c = (np.array(v, dtype=np.float32) for v in (queries, candidates))
        for v in (q, c):
            v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), np.float32(1e-12))  # zero stays zero
        rr, cc = np.nonzero(mask)  # row-major order == the order of the candidate rows
        out[rr, cc] = np.einsum("ij,ij->i", q[rr], c)
        return out
    q16, c16 = np.asarray(queries).astype(np.float16), np.asarray(candidates).astype(np.float16)
    offset = 0
    # a zero vector gives NaN and float16 overflow inf, as in the reference; no warning
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for i in range(len(q16)):  # row by row: the reference's NumPy calls on the same shapes
            cols = np.flatnonzero(mask[i])
            block = c16[offset : offset + len(cols)]
            offset += len(cols)
            if len(cols):
                vector = q16[i] / (np.linalg.norm(q16[i]) + _EPS)
                out[i, cols] = vector @ (block / (np.linalg.norm(block, axis=-1, keepdims=True) + _EPS)).T
    return out


def clean_generation(text: str | None) -> str:
    """Remove the chat special tokens in one pass, then surrounding whitespace (``None``/NaN -> ``""``)."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    return _SPECIAL_TOKEN_PATTERN.sub("", str(text)).strip()


def _join(questions: pd.DataFrame, generations: pd.DataFrame) -> pd.DataFrame:
    """The generations joined to their questions, with ``answer_letter`` and the cleaned generation."""
    require_columns(questions, [*QUESTION_KEY, "choices", "answer"], name="questions")
    require_columns(generations, [*QUESTION_KEY, "generation"], name="generations")
    q = questions.astype(dict.fromkeys(QUESTION_KEY, "int64"))
    g = generations[[c for c in (*QUESTION_KEY, "split", "generation", ORDER_COLUMN) if c in generations]]
    g = g.assign(**{key: runs._int_key(g[key], where="generations") for key in QUESTION_KEY})
    rows = g.merge(q, on=QUESTION_KEY, how="left", suffixes=("_run", ""), indicator=True)
    orphan = rows[rows["_merge"] == "left_only"]
    if len(orphan):
        first = orphan[QUESTION_KEY].head(5).to_dict("records")
        raise ValueError(f"generations: {len(orphan)} row(s) match no question in the data, e.g. {first}")
    if "split_run" in rows.columns:  # both name a split
        clash = rows["split_run"].astype(str) != rows["split"].astype(str)
        if clash.any():
            row = rows[clash].iloc[0]
            raise ValueError(
                f"generations: {int(clash.sum())} row(s) name a different split than the data, e.g. user "
                f"{row['user_id']} question {row['question_index']}: run says {row['split_run']!r}, data "
                f"says {row['split']!r}"
            )
    rows = rows.drop(columns=["_merge", "split_run"], errors="ignore")
    rows["answer_letter"] = [LETTERS[i] for i in answer_indices(rows)]  # raises before anything is embedded
    rows["choices"] = [list(c) for c in rows["choices"]]
    rows["generation"] = [clean_generation(t) for t in rows["generation"]]
    return rows


def _nonempty(choices: pd.Series) -> np.ndarray:
    """``(n, 5)`` booleans: True where a candidate is a non-blank string."""
    found = [[isinstance(c, str) and c.strip() != "" for c in cs] for cs in choices]
    return np.array(found, dtype=bool).reshape(len(choices), len(LETTERS))


def _finish(rows: pd.DataFrame, predicted: list[str | None], **columns: Any) -> pd.DataFrame:
    """The predictions frame: ``rows`` with ``predicted``, ``correct`` and ``columns``, sorted by key."""
    rows["predicted_letter"] = predicted
    rows["correct"] = (rows["predicted_letter"] == rows["answer_letter"]).to_numpy(dtype=bool)
    out = rows.reindex(columns=_COLUMNS).assign(**columns)
    if "category" in rows:
        out["category"] = out["category"].astype("Int64")
    out["hard"] = out["hard"].astype("boolean")
    return out.sort_values(QUESTION_KEY, kind="stable").reset_index(drop=True)


def score_frame(
    questions: pd.DataFrame,
    generations: pd.DataFrame,
    *,
    embedder: Embedder,
    cache: EmbeddingCache | str | os.PathLike[str] | bool | None = True,
    batch_size: int | None = None,
    progress: bool | None = None,
    numerics: str = DEFAULT_NUMERICS,
) -> pd.DataFrame:
    """Score generations against the questions frame; one prediction row per generation.

    Args:
        questions: ``user_id, question_index, choices, answer`` at least (``split, category,
            category_name, hard, question`` are carried over).
        generations: ``user_id, question_index, generation`` (``split`` is checked against the data).
        embedder: Any :class:`~pv4kit.embeddings.models.Embedder`.
        cache: Embedding cache (see :func:`~pv4kit.embeddings.models.embed_texts`).
        batch_size: Encode batch size.
        progress: Progress bar while encoding.
        numerics: ``"float16"`` (the reference's cosine) or ``"float32"``.

    Returns ``user_id, question_index, split, category, category_name, hard, question, choices, answer,
    answer_letter, generation`` (cleaned), ``predicted_letter, correct, sim_A..sim_E`` (NaN for empty
    candidates), ``margin`` (best minus second best; NaN with one candidate), ``n_candidates, tie``.
    """
    check_numerics(numerics)
    rows = _join(questions, generations)
    n = len(rows)
    mask = _nonempty(rows["choices"])
    candidates = np.array(rows["choices"].tolist(), dtype=object).reshape(mask.shape)[mask]
    texts = [*rows["generation"], *candidates]  # the non-empty candidates, row by row in letter order
    vectors = embed_texts(texts, embedder=embedder, cache=cache, batch_size=batch_size, progress=progress)
    sims = candidate_similarities(vectors[:n], vectors[n:], mask, numerics=numerics)  # NaN: empty
    scores = np.where(mask, sims, -np.inf)
    pred = np.argmax(scores, axis=1)  # earliest letter wins a tie
    best = scores[np.arange(n), pred]
    n_cand = mask.sum(axis=1)
    second = np.sort(scores, axis=1)[:, -2]
    return _finish(
        rows,
        [LETTERS[i] if k else None for i, k in zip(pred, n_cand, strict=True)],
        **dict(zip(SIM_COLUMNS, sims.T, strict=True)),
        margin=np.where(n_cand >= 2, best - second, np.nan).astype(np.float32),
        n_candidates=n_cand.astype("int64"),
        tie=((scores == best[:, None]).sum(axis=1) > 1) & (n_cand > 0),
    )


def score_choice_frame(questions: pd.DataFrame, generations: pd.DataFrame) -> pd.DataFrame:
    """Score a multiple-choice run (``generations`` has ``choice_order``) by the letter each reply names.

    Nothing is embedded: the reply is read (:func:`pv4kit.scoring.choices.parse_choice`) against the
    candidates in the order shown and mapped back to the question's letter; an unparsed reply is wrong.
    Returns the columns of :func:`score_frame` (similarities and ``margin`` NaN, ``tie`` false), plus
    ``choice_order``, ``shown_letter``, ``answer_position`` (the answer's shown letter) and ``unparsed``.
    """
    rows = _join(questions, generations)
    orders = [list(o) for o in rows[ORDER_COLUMN]]
    replies = zip(rows["generation"], rows["choices"], orders, strict=True)
    shown = [parse_choice(g, [c[i] for i in o]) for g, c, o in replies]
    return _finish(
        rows,
        [original_letter(s, o) for s, o in zip(shown, orders, strict=True)],
        **dict.fromkeys([*SIM_COLUMNS, "margin"], np.float32(np.nan)),
        n_candidates=_nonempty(rows["choices"]).sum(axis=1).astype("int64"),
        tie=False,
        **{ORDER_COLUMN: orders},
        shown_letter=shown,
        answer_position=[shown_letter(a, o) for a, o in zip(rows["answer_letter"], orders, strict=True)],
        unparsed=[s is None for s in shown],
    )


#: the fields of each ``by_category`` entry of ``metrics.json``, with their types
_CATEGORY_FIELDS = {"category": int, "category_name": str, "n": int, "n_correct": int}
_CATEGORY_FIELDS |= dict.fromkeys(("accuracy", "ci_low", "ci_high"), float)


def _number(value: Any) -> float | None:
    return None if pd.isna(value) else float(value)


def _overall(predictions: pd.DataFrame, *, n_boot: int, seed: int) -> tuple[float | None, list, int]:
    row = accuracy_table(predictions, n_boot=n_boot, seed=seed).iloc[0]
    return _number(row["accuracy"]), [_number(row["ci_low"]), _number(row["ci_high"])], int(row["n_correct"])


def compute_metrics(predictions: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Accuracy, hard accuracy, counts, user-bootstrap 95% CIs, per-category and per-user tables.

    Fractions in [0, 1] (:func:`~pv4kit.scoring.accuracy.accuracy_table`, ``seed`` restarted per group);
    ``accuracy_hard`` and its interval are ``None`` when no question is hard.
    """
    acc, ci, n_correct = _overall(predictions, n_boot=n_boot, seed=seed)
    is_hard = predictions["hard"].fillna(False) if "hard" in predictions else np.zeros(len(predictions))
    hard = predictions[is_hard.astype(bool)]
    hard_acc, hard_ci, hard_correct = _overall(hard, n_boot=n_boot, seed=seed)
    by_category = []
    if "category" in predictions and predictions["category"].notna().any():
        keys = ["category", "category_name"] if "category_name" in predictions else ["category"]
        table = accuracy_table(predictions, by=keys, n_boot=n_boot, seed=seed).to_dict("records")
        by_category = [
            {k: None if pd.isna(r.get(k)) else cast(r[k]) for k, cast in _CATEGORY_FIELDS.items()}
            for r in table
        ]
    users = accuracy_table(predictions, by="user_id", interval="none").astype({"user_id": "int64"})
    splits = predictions["split"].value_counts(sort=False).items() if "split" in predictions else []
    return {
        "accuracy": acc,
        "accuracy_ci": ci,
        "accuracy_hard": hard_acc,
        "accuracy_hard_ci": hard_ci,
        "n": int(len(predictions)),
        "n_correct": n_correct,
        "n_hard": int(len(hard)),
        "n_hard_correct": hard_correct,
        "n_users": int(predictions["user_id"].nunique()),
        "n_ties": int(predictions["tie"].sum()) if "tie" in predictions else None,
        "n_empty_generations": int((predictions["generation"] == "").sum()),
        "splits": {str(k): int(v) for k, v in splits},
        "bootstrap": dict(n_boot=n_boot, seed=seed, cluster="user_id", level=0.95, interval="percentile"),
        "by_category": by_category,
        "by_user": users[["user_id", "n", "n_correct", "accuracy"]].to_dict("records"),
    }


def _failed_rows(generations: pd.DataFrame, *, failed: str | None, where: str) -> pd.Series:
    """The mask of failed requests, refused unless ``failed`` says how to count them."""
    if failed is not None and failed not in FAILED_POLICIES:
        raise ValueError(f"failed must be one of {FAILED_POLICIES} or None, got {failed!r}")
    mask = runs.failed_rows(generations)
    n = int(mask.sum())
    if n and failed is None:
        first = generations.loc[mask].iloc[0]
        raise FailedRowsError(
            f"{where}: {n} of {len(generations)} requests failed (status 'failed' in generations.parquet; "
            f"e.g. user {int(first['user_id'])} question {int(first['question_index'])}: "
            f"{first.get('error')}); rerun `pv4kit answer` with the same options to resume them, or score "
            "with failed='wrong' (count them as wrong answers) or failed='exclude' (leave them out)"
        )
    if n:
        logger.warning("%s: %d failed requests, scored with failed=%r", where, n, failed)
    if n and failed == "exclude" and mask.all():
        raise FailedRowsError(f"{where}: every request failed; nothing to score (rerun `pv4kit answer`)")
    return mask


def _mark_failed(predictions: pd.DataFrame, failed_keys: pd.DataFrame) -> pd.DataFrame:
    """Add ``failed`` and ``empty_generation``; rows of ``failed_keys`` become wrong, with no prediction."""
    out = predictions.copy()
    keys = pd.MultiIndex.from_frame(failed_keys[list(QUESTION_KEY)].astype("int64"))
    mask = pd.MultiIndex.from_frame(out[list(QUESTION_KEY)].astype("int64")).isin(keys)
    out["failed"] = mask
    if mask.any():
        out["generation"] = out["generation"].astype(object)
        out.loc[mask, ["generation", "predicted_letter"]] = None
        out.loc[mask, ["correct", "tie"]] = False
        out.loc[mask, [*SIM_COLUMNS, "margin"]] = np.nan
    out["empty_generation"] = ~mask & out["generation"].fillna("").astype(str).eq("")
    return out


def score_run(
    run_dir: str | os.PathLike[str],
    *,
    data: Any = None,
    embedder: Embedder | str | None = None,
    cache: EmbeddingCache | str | os.PathLike[str] | bool | None = True,
    numerics: str = DEFAULT_NUMERICS,
    n_boot: int = 2000,
    seed: int = 0,
    batch_size: int | None = None,
    progress: bool | None = None,
    failed: str | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Score ``run_dir``, write ``predictions.parquet`` and ``metrics.json`` into it and return both.

    Args:
        run_dir: A run directory with ``generations.parquet``.
        data: Data source (path or hub id), a ``PV4Data``, or a questions frame; default: the ``data``
            recorded in the run's ``config.json``.
        embedder: An :class:`~pv4kit.embeddings.models.Embedder` or a name for
            :func:`~pv4kit.embeddings.models.get_embedder` (default: Qwen3-Embedding-4B on CUDA, MiniLM on
            CPU). A multiple-choice run is scored by the letter, without one.
        cache: Embedding cache (see :func:`~pv4kit.embeddings.models.embed_texts`).
        numerics: ``"float16"`` (the reference's cosine) or ``"float32"``; recorded in ``metrics.json``.
        n_boot: Bootstrap replicates of the intervals.
        seed: Bootstrap seed.
        batch_size: Encode batch size.
        progress: Progress bar while encoding.
        failed: How to count failed requests (:data:`FAILED_POLICIES`): ``None`` refuses a run with
            failed rows, ``"wrong"`` counts them wrong, ``"exclude"`` leaves them out.
    """
    check_numerics(numerics)  # before any data or model is loaded
    check_number(n_boot, "n_boot", ge=1, integer=True)
    check_number(seed, "seed", ge=0, integer=True)
    check_number(batch_size, "batch_size", ge=1, integer=True, allow_none=True)
    run_dir = Path(run_dir)
    generations = runs.read_generations(run_dir)
    scored_sha = generations.attrs[runs.GENERATIONS_SHA]
    failed_rows = _failed_rows(generations, failed=failed, where=str(run_dir))
    failed_keys = generations.loc[failed_rows & (failed == "wrong"), QUESTION_KEY]
    if failed == "exclude":
        generations = generations[~failed_rows].reset_index(drop=True)
    config = runs.read_run_config(run_dir)
    splits = sorted(set(generations["split"]))
    questions, source, fingerprint = runs.load_questions(data, run_dir, splits=splits)
    by_letter = ORDER_COLUMN in generations.columns  # a multiple-choice run: nothing to embed
    described = None
    if by_letter:
        predictions = score_choice_frame(questions, generations)
    else:
        embedder = resolve_embedder(embedder)
        encode = {"cache": cache, "batch_size": batch_size, "progress": progress, "numerics": numerics}
        predictions = score_frame(questions, generations, embedder=embedder, **encode)
        described = {"name": embedder.name, "cache_key": embedder.cache_key}
        if hasattr(embedder, "describe"):  # the backends' fuller provenance
            described = embedder.describe()
    predictions = _mark_failed(predictions, failed_keys)
    metrics = compute_metrics(predictions, n_boot=n_boot, seed=seed)
    metrics.update(n_failed=int(failed_rows.sum()), failed_policy=failed if failed_rows.any() else None)
    if by_letter:
        predictions["unparsed"] = predictions["unparsed"] & ~predictions["failed"]
        n_unparsed = int(predictions["unparsed"].sum())
        if n_unparsed:
            logger.warning("%s: %d replies name no option; scored wrong (unparsed)", run_dir, n_unparsed)
        by_position = position_table(predictions[~predictions["failed"]]).to_dict("records")
        metrics.update(scored_by="letter", n_unparsed=n_unparsed, by_position=by_position)
    in_splits = questions["split"].isin(splits).sum() if "split" in questions else None
    info = {"data": source} | ({} if isinstance(data, pd.DataFrame) else {"data_fingerprint": fingerprint})
    metrics = {
        **metrics,
        "n_missing_generations": None if in_splits is None else int(in_splits - len(predictions)),
        "run": str(run_dir),
        **{key: config.get(key) for key in ("method", "model")},
        "embedder": described,
        "numerics": None if by_letter else numerics,
        runs.GENERATIONS_SHA: scored_sha,
        "provenance": provenance(**info),
    }
    predictions.attrs[runs.GENERATIONS_SHA] = scored_sha
    with runs.rewrite_run(run_dir, drop=(runs.VALIDITY_DIR,)) as tmp:  # a report on other scores goes
        if sha256_file(run_dir / runs.GENERATIONS_FILE) != scored_sha:
            raise RuntimeError(
                f"{run_dir / runs.GENERATIONS_FILE} changed while it was scored (another process rewrote "
                "the run); nothing was written: score it again"
            )
        predictions.to_parquet(tmp / runs.PREDICTIONS_FILE, index=False)
        atomic_write_json(tmp / runs.METRICS_FILE, metrics)
    return predictions, metrics
