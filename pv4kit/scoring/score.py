"""Nearest-candidate scoring of free-text answers: generations -> per-question predictions -> metrics.

The rule matches the reference scorer (Memorilla ``metrics.py``): the cleaned generation and the non-empty
candidates are embedded with the same model (no instruction prefix by default); the prediction is the
candidate with the highest cosine similarity; an empty candidate never wins; ties go to the earliest letter
(they are counted and flagged); the reference is the first choice equal to the answer after stripping, and a
question whose answer is not among its choices is an error raised **before** anything is embedded.

Cosine is taken on float16 arrays exactly as the reference does (``numerics="float32"`` is the option;
see :mod:`pv4kit.scoring.numerics`). Differences from the reference, on purpose: candidate and generation
vectors are cached on disk (the encoder's float32 output; the float16 cast happens at scoring);
``accuracy_hard`` is ``null`` on an empty hard subset in ``metrics.json`` (the reference's files come from
:func:`pv4kit.scoring.refformat.export_reference`); metrics are fractions with user-clustered bootstrap
intervals.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import atomic_write_json, provenance, sha256_file
from pv4kit._options import check_number, merge_options
from pv4kit.dataset.load import load
from pv4kit.embeddings.cache import EmbeddingCache
from pv4kit.embeddings.models import Embedder, embed_texts, resolve_embedder
from pv4kit.schema import LETTERS, QUESTION_KEY, answer_indices
from pv4kit.scoring import failures, runs
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.choices import ORDER_COLUMN, position_table, score_choices
from pv4kit.scoring.numerics import DEFAULT_NUMERICS, candidate_similarities, check_numerics

logger = logging.getLogger(__name__)

SIM_COLUMNS = [f"sim_{letter}" for letter in LETTERS]
_SPECIAL_TOKENS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|im_sep|>")
# one left-to-right pass over the four tokens, as the reference's regex does: pieces left around a
# removed token are not joined and removed again (``<|im_<|im_end|>start|>`` keeps ``<|im_start|>``)
_SPECIAL_TOKEN_PATTERN = re.compile("|".join(re.escape(t) for t in _SPECIAL_TOKENS))


def clean_generation(text: str | None) -> str:
    """Remove the chat special tokens in one pass, then surrounding whitespace, as the reference does.

    A missing generation (``None``/NaN) reads as ``""``.
    """
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    return _SPECIAL_TOKEN_PATTERN.sub("", str(text)).strip()


def _join(questions: pd.DataFrame, generations: pd.DataFrame) -> pd.DataFrame:
    need = ["user_id", "question_index", "choices", "answer"]
    missing = [c for c in need if c not in questions.columns]
    if missing:
        raise ValueError(f"questions: missing column(s) {missing}; got {list(questions.columns)}")
    for col in ("user_id", "question_index", "generation"):
        if col not in generations.columns:
            raise ValueError(f"generations: missing column {col!r}; got {list(generations.columns)}")
    q = questions.copy()
    q[QUESTION_KEY] = q[QUESTION_KEY].astype("int64")
    g = generations[
        [c for c in ("user_id", "question_index", "split", "generation", ORDER_COLUMN) if c in generations]
    ].copy()
    for key in QUESTION_KEY:
        g[key] = runs._int_key(g[key], where="generations")
    merged = g.merge(q, on=QUESTION_KEY, how="left", suffixes=("_run", ""), indicator=True)
    orphan = merged[merged["_merge"] == "left_only"]
    if len(orphan):
        first = orphan[QUESTION_KEY].head(5).to_dict("records")
        raise ValueError(f"generations: {len(orphan)} row(s) match no question in the data, e.g. {first}")
    if "split_run" in merged.columns and "split" in merged.columns:
        clash = merged["split_run"].astype(str) != merged["split"].astype(str)
        if clash.any():
            row = merged[clash].iloc[0]
            raise ValueError(
                f"generations: {int(clash.sum())} row(s) name a different split than the data, e.g. user "
                f"{row['user_id']} question {row['question_index']}: run says {row['split_run']!r}, data "
                f"says {row['split']!r}"
            )
    elif "split_run" in merged.columns:
        merged["split"] = merged["split_run"]
    return merged.drop(columns=[c for c in ("_merge", "split_run") if c in merged.columns])


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
        questions: The PV4 questions frame (``user_id, question_index, choices, answer`` at least; ``split,
            category, category_name, hard, question`` are carried over when present).
        generations: ``user_id, question_index, generation`` (``split`` is checked against the data).
        embedder: Any :class:`~pv4kit.embeddings.models.Embedder`.
        cache: Embedding cache (see :func:`~pv4kit.embeddings.models.embed_texts`).
        batch_size: Encode batch size.
        progress: Progress bar while encoding.
        numerics: ``"float16"`` (default: the reference's float16 cosine, see :mod:`pv4kit.scoring.numerics`)
            or ``"float32"``.

    Returns:
        ``user_id, question_index, split, category, category_name, hard, question, choices, answer,
        answer_letter, generation`` (cleaned), ``predicted_letter, correct, sim_A..sim_E`` (NaN for empty
        candidates), ``margin`` (best minus second best; NaN with one candidate), ``n_candidates, tie``.
    """
    check_numerics(numerics)
    rows = _join(questions, generations)
    answer_idx = answer_indices(rows)  # raises before anything is embedded
    n = len(rows)
    queries = [clean_generation(t) for t in rows["generation"]]
    choice_lists = [list(c) for c in rows["choices"]]
    cand_mask = np.array(
        [[isinstance(c, str) and c.strip() != "" for c in cs] for cs in choice_lists], dtype=bool
    ).reshape(n, 5)
    cand_texts = [
        c for cs, m in zip(choice_lists, cand_mask, strict=True) for c, ok in zip(cs, m, strict=True) if ok
    ]
    vectors = embed_texts(
        queries + cand_texts, embedder=embedder, cache=cache, batch_size=batch_size, progress=progress
    )
    # the encoder's vectors, cast (float16) and normalised as the numerics say; NaN for empty candidates
    sims = candidate_similarities(vectors[:n], vectors[n:], cand_mask, numerics=numerics)
    scores = np.where(cand_mask, sims, -np.inf)
    pred = np.argmax(scores, axis=1)  # earliest letter wins a tie
    best = scores[np.arange(n), pred]
    n_cand = cand_mask.sum(axis=1)
    ties = ((scores == best[:, None]).sum(axis=1) > 1) & (n_cand > 0)
    second = np.sort(scores, axis=1)[:, -2] if n else np.zeros(0, dtype=np.float32)
    margin = np.where(n_cand >= 2, best - second, np.nan).astype(np.float32)
    pred = np.where(n_cand > 0, pred, -1)

    out = pd.DataFrame(
        {
            "user_id": rows["user_id"].to_numpy(),
            "question_index": rows["question_index"].to_numpy(),
            "split": rows["split"].to_numpy() if "split" in rows else None,
            "category": rows["category"].to_numpy() if "category" in rows else pd.NA,
            "category_name": rows["category_name"].to_numpy() if "category_name" in rows else pd.NA,
            "hard": rows["hard"].astype("boolean").to_numpy() if "hard" in rows else pd.NA,
            "question": rows["question"].to_numpy() if "question" in rows else pd.NA,
            "choices": choice_lists,
            "answer": rows["answer"].to_numpy(),
            "answer_letter": [LETTERS[i] for i in answer_idx],
            "generation": queries,
            "predicted_letter": [LETTERS[i] if i >= 0 else None for i in pred],
            "correct": pred == answer_idx,
        }
    )
    for j, col in enumerate(SIM_COLUMNS):
        out[col] = sims[:, j]
    out["margin"] = margin
    out["n_candidates"] = n_cand.astype("int64")
    out["tie"] = ties
    if "category" in rows:
        out["category"] = out["category"].astype("Int64")
    out["hard"] = out["hard"].astype("boolean")
    return out.sort_values(QUESTION_KEY, kind="stable").reset_index(drop=True)


def score_choice_frame(questions: pd.DataFrame, generations: pd.DataFrame) -> pd.DataFrame:
    """Score a multiple-choice run (``generations`` has ``choice_order``) by the letter each reply names.

    Nothing is embedded: the reply is read with :func:`pv4kit.scoring.choices.parse_choice` against the
    candidates in the order the model saw them, and mapped back to the question's own letter. An unparsed
    reply is wrong and flagged (``unparsed``).

    Returns:
        The columns of :func:`score_frame` (similarities and ``margin`` NaN, ``tie`` false), plus
        ``choice_order``, ``shown_letter``, ``answer_position`` and ``unparsed``.
    """
    rows = _join(questions, generations)
    answer_idx = answer_indices(rows)
    rows["answer_letter"] = [LETTERS[i] for i in answer_idx]
    rows["choices"] = [list(c) for c in rows["choices"]]
    rows["generation"] = [clean_generation(t) for t in rows["generation"]]
    scored = score_choices(rows)
    out = scored.reindex(
        columns=[
            *QUESTION_KEY, "split", "category", "category_name", "hard", "question", "choices", "answer",
            "answer_letter", "generation", "predicted_letter", "correct",
        ]
    )  # fmt: skip
    for col in SIM_COLUMNS:
        out[col] = np.float32(np.nan)
    out["margin"] = np.float32(np.nan)
    out["n_candidates"] = [sum(isinstance(c, str) and c.strip() != "" for c in cs) for cs in out["choices"]]
    out["tie"] = False
    for col in (ORDER_COLUMN, "shown_letter", "answer_position", "unparsed"):
        out[col] = scored[col].to_numpy() if col != ORDER_COLUMN else [list(o) for o in scored[col]]
    if "category" in rows:
        out["category"] = out["category"].astype("Int64")
    out["hard"] = out["hard"].astype("boolean")
    return out.sort_values(QUESTION_KEY, kind="stable").reset_index(drop=True)


def _number(value: Any) -> float | None:
    """``float(value)``, or ``None`` for NaN (what ``metrics.json`` writes as ``null``)."""
    return None if pd.isna(value) else float(value)


def _overall(predictions: pd.DataFrame, *, n_boot: int, seed: int) -> dict[str, Any]:
    """The one row of :func:`~pv4kit.scoring.accuracy.accuracy_table` for the whole frame, as a dict."""
    row = accuracy_table(predictions, n_boot=n_boot, seed=seed).iloc[0]
    return {
        "accuracy": _number(row["accuracy"]),
        "ci": [_number(row["ci_low"]), _number(row["ci_high"])],
        "n_correct": int(row["n_correct"]),
    }


def _by_category(predictions: pd.DataFrame, *, n_boot: int, seed: int) -> list[dict[str, Any]]:
    if "category" not in predictions or not predictions["category"].notna().any():
        return []
    keys = ["category", "category_name"] if "category_name" in predictions else ["category"]
    table = accuracy_table(predictions, by=keys, n_boot=n_boot, seed=seed)
    return [
        {
            "category": None if pd.isna(r["category"]) else int(r["category"]),
            "category_name": None
            if len(keys) < 2 or pd.isna(r["category_name"])
            else str(r["category_name"]),
            "n": int(r["n"]),
            "n_correct": int(r["n_correct"]),
            "accuracy": _number(r["accuracy"]),
            "ci_low": _number(r["ci_low"]),
            "ci_high": _number(r["ci_high"]),
        }
        for r in table.to_dict("records")
    ]


def compute_metrics(predictions: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Accuracy, hard accuracy, counts, user-bootstrap 95% CIs, per-category and per-user tables.

    Every accuracy comes from :func:`~pv4kit.scoring.accuracy.accuracy_table` (user-clustered bootstrap,
    ``seed`` restarted per group). Fractions in [0, 1]; ``accuracy_hard`` and its interval are ``None``
    when no question is hard.
    """
    overall = _overall(predictions, n_boot=n_boot, seed=seed)
    hard_mask = predictions["hard"].fillna(False).astype(bool) if "hard" in predictions else None
    hard = predictions[hard_mask] if hard_mask is not None else predictions.iloc[0:0]
    hard_acc = _overall(hard, n_boot=n_boot, seed=seed)
    users = accuracy_table(predictions, by="user_id", interval="none")
    by_user = [
        {
            "user_id": int(r["user_id"]),
            "n": int(r["n"]),
            "n_correct": int(r["n_correct"]),
            "accuracy": float(r["accuracy"]),
        }
        for r in users.to_dict("records")
    ]
    return {
        "accuracy": overall["accuracy"],
        "accuracy_ci": overall["ci"],
        "accuracy_hard": hard_acc["accuracy"],
        "accuracy_hard_ci": hard_acc["ci"],
        "n": int(len(predictions)),
        "n_correct": overall["n_correct"],
        "n_hard": int(len(hard)),
        "n_hard_correct": hard_acc["n_correct"],
        "n_users": int(predictions["user_id"].nunique()),
        "n_ties": int(predictions["tie"].sum()) if "tie" in predictions else None,
        "n_empty_generations": int((predictions["generation"] == "").sum()),
        "splits": {str(k): int(v) for k, v in predictions["split"].value_counts(sort=False).items()}
        if "split" in predictions
        else {},
        "bootstrap": {
            "n_boot": n_boot,
            "seed": seed,
            "cluster": "user_id",
            "level": 0.95,
            "interval": "percentile",
        },
        "by_category": _by_category(predictions, n_boot=n_boot, seed=seed),
        "by_user": by_user,
    }


def _load_questions(
    data: Any, run_dir: Path, config: dict[str, Any], *, splits: list[str] | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    if isinstance(data, pd.DataFrame):
        return data, {"data": "<DataFrame>"}
    if data is not None and hasattr(data, "questions"):
        return data.questions, {
            "data": getattr(data, "source", None),
            "data_fingerprint": getattr(data, "fingerprint", None),
        }
    source = data if data is not None else config.get("data")
    if source is None:
        raise ValueError(f"data: {run_dir / runs.CONFIG_FILE} records no 'data' source; pass data=SOURCE")
    loaded = load(str(source), splits=splits)
    return loaded.questions, {"data": str(source), "data_fingerprint": getattr(loaded, "fingerprint", None)}


@dataclass(frozen=True)
class ScoreOptions:
    """How :func:`score_run` scores (each field also a keyword of ``score_run``).

    Attributes:
        numerics: ``"float16"`` (default, the reference's cosine) or ``"float32"``; recorded in
            ``metrics.json``.
        n_boot: Bootstrap replicates for the intervals.
        seed: Bootstrap seed.
        batch_size: Encode batch size.
        progress: Progress bar while encoding.
        failed: How to count requests that failed (see :mod:`pv4kit.scoring.failures`): ``None`` refuses a run
            with failed rows, ``"wrong"`` counts them as wrong, ``"exclude"`` leaves them out.
    """

    numerics: str = DEFAULT_NUMERICS
    n_boot: int = 2000
    seed: int = 0
    batch_size: int | None = None
    progress: bool | None = None
    failed: str | None = None

    def __post_init__(self) -> None:
        check_number(self.n_boot, "n_boot", ge=1, integer=True)
        check_number(self.seed, "seed", ge=0, integer=True)
        check_number(self.batch_size, "batch_size", ge=1, integer=True, allow_none=True)


def score_run(
    run_dir: str | os.PathLike[str],
    *,
    data: Any = None,
    embedder: Embedder | str | None = None,
    cache: EmbeddingCache | str | os.PathLike[str] | bool | None = True,
    options: ScoreOptions | None = None,
    **overrides: Any,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Score ``run_dir`` and write ``predictions.parquet`` and ``metrics.json`` into it.

    Args:
        run_dir: A run directory with ``generations.parquet``.
        data: Data source (path or hub id for :func:`pv4kit.dataset.load.load`), a ``PV4Data``, or a questions
            frame; default: the ``data`` recorded in the run's ``config.json``.
        embedder: An :class:`~pv4kit.embeddings.models.Embedder` or a name for
            :func:`~pv4kit.embeddings.models.get_embedder` (default: Qwen3-Embedding-4B on CUDA, MiniLM on
            CPU).
        cache: Embedding cache (see :func:`~pv4kit.embeddings.models.embed_texts`).
        options: A :class:`ScoreOptions`.
        **overrides: Its fields as keywords: ``numerics``, ``n_boot``, ``seed``, ``batch_size``,
            ``progress``, ``failed``.

    Returns:
        ``(predictions, metrics)`` as written.
    """
    opts = merge_options(ScoreOptions, options, overrides, where="score_run")
    check_numerics(opts.numerics)  # before any data or model is loaded
    run_dir = Path(run_dir)
    generations = runs.read_generations(run_dir)
    scored_sha = generations.attrs[runs.GENERATIONS_SHA]
    failed_rows = failures.check_failed(generations, failed=opts.failed, where=str(run_dir))
    failed_keys = (
        generations.loc[failed_rows, QUESTION_KEY]
        if opts.failed == "wrong"
        else generations.iloc[0:0][QUESTION_KEY]
    )
    generations = failures.rows_to_score(generations, failed_rows, failed=opts.failed, where=str(run_dir))
    config = runs.read_run_config(run_dir)
    questions, data_info = _load_questions(data, run_dir, config, splits=sorted(set(generations["split"])))
    by_letter = ORDER_COLUMN in generations.columns  # a multiple-choice run: nothing to embed
    if by_letter:
        embedder = None
        predictions = score_choice_frame(questions, generations)
    else:
        embedder = resolve_embedder(embedder)
        predictions = score_frame(
            questions,
            generations,
            embedder=embedder,
            cache=cache,
            batch_size=opts.batch_size,
            progress=opts.progress,
            numerics=opts.numerics,
        )
    predictions = failures.mark_failed(predictions, failed_keys)
    metrics = compute_metrics(predictions, n_boot=opts.n_boot, seed=opts.seed)
    metrics.update(failures.failure_metrics(int(failed_rows.sum()), opts.failed))
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
    in_splits = (
        questions[questions["split"].isin(set(generations["split"]))] if "split" in questions else None
    )
    describe = getattr(embedder, "describe", None)
    metrics = {
        **metrics,
        "n_missing_generations": None if in_splits is None else int(len(in_splits) - len(predictions)),
        "run": str(run_dir),
        "method": config.get("method"),
        "model": config.get("model"),
        "embedder": None
        if embedder is None
        else describe()
        if callable(describe)
        else {"name": embedder.name, "cache_key": embedder.cache_key},
        "numerics": None if by_letter else opts.numerics,
        runs.GENERATIONS_SHA: scored_sha,
        "provenance": provenance(**data_info),
    }
    predictions.attrs[runs.GENERATIONS_SHA] = scored_sha
    _write_scored(run_dir, predictions, metrics)
    return predictions, metrics


def _write_scored(run_dir: Path, predictions: pd.DataFrame, metrics: dict[str, Any]) -> None:
    """Write ``predictions.parquet`` and ``metrics.json`` into the run as one unit and log the accuracy.

    Raises:
        RuntimeError: When the run's generations are no longer those scored (nothing is written).
    """
    with runs.rewrite_run(run_dir, drop=(runs.VALIDITY_DIR,)) as tmp:  # a report on other scores
        if sha256_file(run_dir / runs.GENERATIONS_FILE) != metrics[runs.GENERATIONS_SHA]:
            raise RuntimeError(
                f"{run_dir / runs.GENERATIONS_FILE} changed while it was scored (another process rewrote "
                "the run); nothing was written: score it again"
            )
        predictions.to_parquet(tmp / runs.PREDICTIONS_FILE, index=False)
        atomic_write_json(tmp / runs.METRICS_FILE, metrics)
    acc, lo, hi = metrics["accuracy"], *metrics["accuracy_ci"]
    if acc is not None:
        logger.info("%s: accuracy %.4f [%.4f, %.4f] on %d questions", run_dir.name, acc, lo, hi, metrics["n"])
