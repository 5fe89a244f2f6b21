"""Nearest-candidate scoring of free-text answers: generations -> per-question predictions -> metrics.

The reference scorer's rule (Memorilla ``metrics.py``): the prediction is the non-empty candidate of highest
cosine with the cleaned generation (:mod:`pv4kit.scoring.numerics`), ties to the earliest letter (counted).
Unlike the reference, vectors are cached and metrics carry user-clustered bootstrap intervals.
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
from pv4kit.schema import LETTERS, QUESTION_KEY, answer_indices
from pv4kit.scoring import failures, runs
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.choices import ORDER_COLUMN, original_letter, parse_choice, position_table
from pv4kit.scoring.numerics import DEFAULT_NUMERICS, candidate_similarities, check_numerics

logger = logging.getLogger(__name__)

SIM_COLUMNS = [f"sim_{letter}" for letter in LETTERS]
_SPECIAL_TOKENS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|im_sep|>")
# one left-to-right pass, as the reference's regex: ``<|im_<|im_end|>start|>`` keeps ``<|im_start|>``
_SPECIAL_TOKEN_PATTERN = re.compile("|".join(re.escape(t) for t in _SPECIAL_TOKENS))
_COLUMNS = [
    *QUESTION_KEY,
    "split",
    "category",
    "category_name",
    "hard",
    "question",
    "choices",
    "answer",
    "answer_letter",
    "generation",
    "predicted_letter",
    "correct",
]


def clean_generation(text: str | None) -> str:
    """Remove the chat special tokens in one pass, then surrounding whitespace (``None``/NaN -> ``""``)."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    return _SPECIAL_TOKEN_PATTERN.sub("", str(text)).strip()


def _join(questions: pd.DataFrame, generations: pd.DataFrame) -> pd.DataFrame:
    """The generations joined to their questions, with ``answer_letter`` and the cleaned generation."""
    missing = [c for c in ("user_id", "question_index", "choices", "answer") if c not in questions.columns]
    if missing:
        raise ValueError(f"questions: missing column(s) {missing}; got {list(questions.columns)}")
    for col in ("user_id", "question_index", "generation"):
        if col not in generations.columns:
            raise ValueError(f"generations: missing column {col!r}; got {list(generations.columns)}")
    q = questions.astype(dict.fromkeys(QUESTION_KEY, "int64"))
    g = generations[[c for c in (*QUESTION_KEY, "split", "generation", ORDER_COLUMN) if c in generations]]
    g = g.assign(**{key: runs._int_key(g[key], where="generations") for key in QUESTION_KEY})
    rows = g.merge(q, on=QUESTION_KEY, how="left", suffixes=("_run", ""), indicator=True)
    orphan = rows[rows["_merge"] == "left_only"]
    if len(orphan):
        first = orphan[QUESTION_KEY].head(5).to_dict("records")
        raise ValueError(f"generations: {len(orphan)} row(s) match no question in the data, e.g. {first}")
    if "split_run" in rows.columns and "split" in rows.columns:
        clash = rows["split_run"].astype(str) != rows["split"].astype(str)
        if clash.any():
            row = rows[clash].iloc[0]
            raise ValueError(
                f"generations: {int(clash.sum())} row(s) name a different split than the data, e.g. user "
                f"{row['user_id']} question {row['question_index']}: run says {row['split_run']!r}, data "
                f"says {row['split']!r}"
            )
    elif "split_run" in rows.columns:
        rows["split"] = rows["split_run"]
    rows = rows.drop(columns=[c for c in ("_merge", "split_run") if c in rows.columns])
    rows["answer_letter"] = [LETTERS[i] for i in answer_indices(rows)]  # raises before anything is embedded
    rows["choices"] = [list(c) for c in rows["choices"]]
    rows["generation"] = [clean_generation(t) for t in rows["generation"]]
    return rows


def _finish(out: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
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

    Returns:
        ``user_id, question_index, split, category, category_name, hard, question, choices, answer,
        answer_letter, generation`` (cleaned), ``predicted_letter, correct, sim_A..sim_E`` (NaN for empty
        candidates), ``margin`` (best minus second best; NaN with one candidate), ``n_candidates, tie``.
    """
    check_numerics(numerics)
    rows = _join(questions, generations)
    n = len(rows)
    mask = np.array(
        [[isinstance(c, str) and c.strip() != "" for c in cs] for cs in rows["choices"]], dtype=bool
    ).reshape(n, 5)
    texts = [
        c for cs, m in zip(rows["choices"], mask, strict=True) for c, ok in zip(cs, m, strict=True) if ok
    ]
    vectors = embed_texts(
        [*rows["generation"], *texts],
        embedder=embedder,
        cache=cache,
        batch_size=batch_size,
        progress=progress,
    )
    sims = candidate_similarities(vectors[:n], vectors[n:], mask, numerics=numerics)  # NaN: empty
    scores = np.where(mask, sims, -np.inf)
    pred = np.argmax(scores, axis=1)  # earliest letter wins a tie
    best = scores[np.arange(n), pred]
    n_cand = mask.sum(axis=1)
    second = np.sort(scores, axis=1)[:, -2] if n else np.zeros(0, dtype=np.float32)
    pred = np.where(n_cand > 0, pred, -1)
    rows["predicted_letter"] = [LETTERS[i] if i >= 0 else None for i in pred]
    rows["correct"] = (rows["predicted_letter"] == rows["answer_letter"]).to_numpy(dtype=bool)
    out = rows.reindex(columns=_COLUMNS)
    out[SIM_COLUMNS] = sims
    out["margin"] = np.where(n_cand >= 2, best - second, np.nan).astype(np.float32)
    out["n_candidates"] = n_cand.astype("int64")
    out["tie"] = ((scores == best[:, None]).sum(axis=1) > 1) & (n_cand > 0)
    return _finish(out, rows)


def score_choice_frame(questions: pd.DataFrame, generations: pd.DataFrame) -> pd.DataFrame:
    """Score a multiple-choice run (``generations`` has ``choice_order``) by the letter each reply names.

    Nothing is embedded: the reply is read (:func:`pv4kit.scoring.choices.parse_choice`) against the
    candidates in the order shown and mapped back to the question's letter; an unparsed reply is wrong.

    Returns:
        The columns of :func:`score_frame` (similarities and ``margin`` NaN, ``tie`` false), plus
        ``choice_order``, ``shown_letter``, ``answer_position`` (the answer's shown letter) and ``unparsed``.
    """
    rows = _join(questions, generations)
    orders = [list(o) for o in rows[ORDER_COLUMN]]
    shown = [
        parse_choice(g, [c[i] for i in o])
        for g, c, o in zip(rows["generation"], rows["choices"], orders, strict=True)
    ]
    rows["predicted_letter"] = [original_letter(s, o) for s, o in zip(shown, orders, strict=True)]
    rows["correct"] = (rows["predicted_letter"] == rows["answer_letter"]).to_numpy(dtype=bool)
    out = rows.reindex(columns=_COLUMNS)
    out[[*SIM_COLUMNS, "margin"]] = np.float32(np.nan)
    out["n_candidates"] = [sum(isinstance(c, str) and c.strip() != "" for c in cs) for cs in out["choices"]]
    out["tie"] = False
    out[ORDER_COLUMN] = orders
    out["shown_letter"] = shown
    out["answer_position"] = [
        LETTERS[o.index(LETTERS.index(a))] for a, o in zip(rows["answer_letter"], orders, strict=True)
    ]
    out["unparsed"] = out["shown_letter"].isna().to_numpy(dtype=bool)
    return _finish(out, rows)


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
        for r in accuracy_table(predictions, by=keys, n_boot=n_boot, seed=seed).to_dict("records"):
            name = r.get("category_name")
            by_category.append(
                {
                    "category": None if pd.isna(r["category"]) else int(r["category"]),
                    "category_name": None if name is None or pd.isna(name) else str(name),
                    "n": int(r["n"]),
                    "n_correct": int(r["n_correct"]),
                    "accuracy": _number(r["accuracy"]),
                    "ci_low": _number(r["ci_low"]),
                    "ci_high": _number(r["ci_high"]),
                }
            )
    users = accuracy_table(predictions, by="user_id", interval="none")
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
        "by_user": [
            {"user_id": int(u), "n": int(n), "n_correct": int(k), "accuracy": float(a)}
            for u, n, k, a in users[["user_id", "n", "n_correct", "accuracy"]].itertuples(index=False)
        ],
    }


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
    """Score ``run_dir`` and write ``predictions.parquet`` and ``metrics.json`` into it.

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
        failed: How to count failed requests (:mod:`pv4kit.scoring.failures`): ``None`` refuses a run with
            failed rows, ``"wrong"`` counts them wrong, ``"exclude"`` leaves them out.

    Returns:
        ``(predictions, metrics)`` as written.
    """
    check_numerics(numerics)  # before any data or model is loaded
    check_number(n_boot, "n_boot", ge=1, integer=True)
    check_number(seed, "seed", ge=0, integer=True)
    check_number(batch_size, "batch_size", ge=1, integer=True, allow_none=True)
    run_dir = Path(run_dir)
    generations = runs.read_generations(run_dir)
    scored_sha = generations.attrs[runs.GENERATIONS_SHA]
    to_score, failed_rows = failures.rows_to_score(generations, failed=failed, where=str(run_dir))
    failed_keys, generations = generations.loc[failed_rows & (failed == "wrong"), QUESTION_KEY], to_score
    config = runs.read_run_config(run_dir)
    questions, source, fingerprint = runs.load_questions(
        data, run_dir, splits=sorted(set(generations["split"]))
    )
    by_letter = ORDER_COLUMN in generations.columns  # a multiple-choice run: nothing to embed
    described = None
    if by_letter:
        predictions = score_choice_frame(questions, generations)
    else:
        embedder = resolve_embedder(embedder)
        predictions = score_frame(
            questions,
            generations,
            embedder=embedder,
            cache=cache,
            batch_size=batch_size,
            progress=progress,
            numerics=numerics,
        )
        describe = getattr(embedder, "describe", None)
        described = (
            describe() if callable(describe) else {"name": embedder.name, "cache_key": embedder.cache_key}
        )
    predictions = failures.mark_failed(predictions, failed_keys)
    metrics = compute_metrics(predictions, n_boot=n_boot, seed=seed)
    metrics.update(n_failed=int(failed_rows.sum()), failed_policy=failed if failed_rows.any() else None)
    if by_letter:
        predictions["unparsed"] = predictions["unparsed"] & ~predictions["failed"]
        n_unparsed = int(predictions["unparsed"].sum())
        if n_unparsed:
            logger.warning("%s: %d replies name no option; scored wrong (unparsed)", run_dir, n_unparsed)
        metrics.update(
            scored_by="letter",
            n_unparsed=n_unparsed,
            by_position=position_table(predictions[~predictions["failed"]]).to_dict("records"),
        )
    in_splits = questions["split"].isin(set(generations["split"])).sum() if "split" in questions else None
    info = {"data": source} | ({} if isinstance(data, pd.DataFrame) else {"data_fingerprint": fingerprint})
    metrics = {
        **metrics,
        "n_missing_generations": None if in_splits is None else int(in_splits - len(predictions)),
        "run": str(run_dir),
        "method": config.get("method"),
        "model": config.get("model"),
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
