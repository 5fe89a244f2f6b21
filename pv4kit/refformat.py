"""The reference scorer's file formats: export a scored run to them, import its predictions into a run.

The reference (Memorilla ``metrics.py``) writes

- ``predictions.jsonl``: one JSON object per question, ``{question, answer, prediction, choices, hard}``
  (no user id, no question index);
- ``metrics.json``: ``{accuracy, accuracy_hard, num_examples}`` with accuracies as percentages rounded to 2
  decimals.

:func:`export_reference` writes both from a scored run so numbers can sit next to published ones.
:func:`import_reference` turns someone else's ``predictions.jsonl`` into a pv4kit run (joining on the
question text, choices and answer, and the user when the file has a ``user_id``) so it gets the same
analysis; rows that do not join are reported, never guessed.
"""

from __future__ import annotations

import json
import logging
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit import runs
from pv4kit._io import atomic_write_json, atomic_write_text, iter_jsonl, sha256_file

logger = logging.getLogger(__name__)


def reference_metrics(predictions: pd.DataFrame) -> dict[str, Any]:
    """The reference's ``metrics.json`` for a predictions frame (percentages, 2 decimals).

    ``accuracy_hard`` is left out when no question is hard, as the reference's ``evaluate.py`` does for
    splits without hard rows (its baselines script writes 0.0 instead).
    """
    out: dict[str, Any] = {
        "accuracy": round(100 * float(predictions["correct"].mean()), 2) if len(predictions) else 0.0
    }
    hard = predictions["hard"].fillna(False).astype(bool) if "hard" in predictions else None
    if hard is not None and hard.any():
        out["accuracy_hard"] = round(100 * float(predictions.loc[hard, "correct"].mean()), 2)
    out["num_examples"] = int(len(predictions))
    return out


def export_reference(
    run_dir: str | os.PathLike[str], *, out_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Write ``predictions.jsonl`` and ``metrics.json`` in the reference's format.

    Args:
        run_dir: A scored run (``predictions.parquet``).
        out_dir: Output folder; default ``<run_dir>/reference/``.

    Returns:
        The output folder.
    """
    run_dir = Path(run_dir)
    pred = runs.read_predictions(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir / "reference"
    lines = []
    for row in pred.itertuples(index=False):
        hard = getattr(row, "hard", None)
        lines.append(
            json.dumps(
                {
                    "question": getattr(row, "question", None),
                    "answer": row.answer,
                    "prediction": row.generation,
                    "choices": [str(c) for c in row.choices],
                    "hard": None if hard is None or pd.isna(hard) else bool(hard),
                },
                ensure_ascii=False,
            )
        )
    atomic_write_text(out / "predictions.jsonl", "".join(line + "\n" for line in lines))
    atomic_write_json(out / "metrics.json", reference_metrics(pred))
    logger.info("exported %d predictions to %s", len(lines), out)
    return out


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = list(iter_jsonl(path))
    for lineno, obj in rows:
        for key in ("question", "prediction"):
            if key not in obj:
                raise ValueError(f"{path}:{lineno}: missing field {key!r}; got {sorted(obj)}")
    return rows


def _strip(values: Any) -> tuple[str, ...]:
    return tuple(str(v).strip() for v in (values if values is not None else []))


def join_reference(
    records: list[tuple[int, dict[str, Any]]], questions: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Match reference prediction records to questions.

    The key is the stripped question text, plus the stripped choices and answer when the record has them,
    plus ``user_id`` when it has one. A key shared by several questions (the same question asked of several
    users) is matched in order: the k-th record with the key takes the k-th question with it, which is right
    for files written in dataset order.

    Returns:
        ``(generations, unmatched)``: ``user_id, question_index, split, generation`` for joined rows, and
        ``line, question, reason`` for the rest.
    """

    def key(user: Any, question: Any, choices: Any, answer: Any) -> tuple:
        return (
            user,
            str(question).strip(),
            _strip(choices) if choices is not None else None,
            str(answer).strip() if answer is not None else None,
        )

    by_user = any("user_id" in rec for _, rec in records)
    with_choices = all("choices" in rec for _, rec in records)
    with_answer = all("answer" in rec for _, rec in records)
    slots: dict[tuple, list[int]] = defaultdict(list)
    for pos, row in enumerate(questions.itertuples(index=False)):
        slots[
            key(
                row.user_id if by_user else None,
                row.question,
                row.choices if with_choices else None,
                row.answer if with_answer else None,
            )
        ].append(pos)
    taken: dict[tuple, int] = defaultdict(int)
    matched, unmatched = [], []
    for lineno, rec in records:
        k = key(
            rec.get("user_id") if by_user else None,
            rec["question"],
            rec.get("choices") if with_choices else None,
            rec.get("answer") if with_answer else None,
        )
        if by_user and k[0] is not None:
            k = (int(k[0]), *k[1:])
        candidates = slots.get(k, [])
        if taken[k] >= len(candidates):
            reason = (
                "no question with this text"
                if not candidates
                else "more records than questions with this key"
            )
            unmatched.append({"line": lineno, "question": rec["question"], "reason": reason})
            continue
        q = questions.iloc[candidates[taken[k]]]
        taken[k] += 1
        matched.append(
            {
                "user_id": int(q["user_id"]),
                "question_index": int(q["question_index"]),
                "split": q["split"],
                "generation": str(rec["prediction"] or ""),
            }
        )
    gens = pd.DataFrame(matched, columns=["user_id", "question_index", "split", "generation"])
    return gens, pd.DataFrame(unmatched, columns=["line", "question", "reason"])


def _refuse_existing_run(run_dir: Path, *, force: bool) -> None:
    found = [
        name
        for name in (runs.GENERATIONS_FILE, runs.CONFIG_FILE, runs.PREDICTIONS_FILE, runs.METRICS_FILE)
        if (run_dir / name).exists()
    ]
    if not found:
        return
    if force:
        logger.warning("%s: replacing the run there (%s) with the import (force)", run_dir, ", ".join(found))
        return
    raise FileExistsError(
        f"run_dir: {run_dir} already holds a run ({', '.join(found)}); importing would replace it. "
        "Choose another directory, or pass --force (force=True) to replace it."
    )


def import_reference(
    path: str | os.PathLike[str],
    *,
    data: Any,
    run_dir: str | os.PathLike[str],
    split: str | None = "test",
    method: str = "imported",
    model: str | None = None,
    force: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Turn a reference ``predictions.jsonl`` into a pv4kit run directory.

    Args:
        path: The reference ``predictions.jsonl``.
        data: Data source for :func:`pv4kit.data.load`, a ``PV4Data``, or a questions frame.
        run_dir: The run directory to write (``generations.parquet`` + ``config.json``; unmatched rows go to
            ``import_unmatched.csv``).
        split: Only match questions of this split (``None``: all splits).
        method: Recorded as the run's method.
        model: Recorded as the run's model.
        force: Replace a run already in ``run_dir`` (refused by default: ``FileExistsError``).

    Returns:
        ``(generations, unmatched)`` as in :func:`join_reference`.
    """
    _refuse_existing_run(Path(run_dir), force=force)  # before anything is read or written
    path = Path(path)
    if isinstance(data, pd.DataFrame):
        questions, source = data, "<DataFrame>"
    elif hasattr(data, "questions"):
        questions, source = data.questions, getattr(data, "source", None)
    else:
        from pv4kit.data import load

        questions, source = load(str(data), splits=[split] if split else None).questions, str(data)
    if split is not None:
        questions = questions[questions["split"] == split]
    gens, unmatched = join_reference(_read_jsonl(path), questions.reset_index(drop=True))
    if len(unmatched):
        logger.warning(
            "%d of %d rows in %s did not join to a question (see import_unmatched.csv)",
            len(unmatched),
            len(unmatched) + len(gens),
            path,
        )
    config = {
        "data": source,
        "method": method,
        "model": model,
        "imported_from": str(path),
        "imported_sha256": sha256_file(path),
        "n_imported": int(len(gens)),
        "n_unmatched": int(len(unmatched)),
    }
    run_dir = Path(run_dir)
    runs.write_generations(run_dir, gens, config=config)
    atomic_write_text(run_dir / "import_unmatched.csv", unmatched.to_csv(index=False))
    return gens, unmatched
