"""The reference scorer's file formats: export a scored run to them, import its predictions into a run.

The reference (Memorilla ``metrics.py``) writes ``predictions.jsonl`` (``{question, answer, prediction}``
per dataset row, in row order, no ids) and ``metrics.json`` (percentages rounded to 2 decimals).
:func:`export_reference` writes both byte for byte; :func:`import_reference` joins someone else's
``predictions.jsonl`` to the questions (rows that do not join are reported, never guessed).
"""

from __future__ import annotations

import json
import logging
import os
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import atomic_write_json, atomic_write_text, iter_jsonl, sha256_file
from pv4kit.schema import QUESTION_KEY, require_columns
from pv4kit.scoring import runs
from pv4kit.scoring.runs import data_fingerprint, differences_text, question_differences

logger = logging.getLogger(__name__)

METRICS_FORMS = ("baselines", "evaluate")


def _check_form(name: str, form: str) -> None:
    if form not in METRICS_FORMS:
        raise ValueError(f"{name}: expected one of {list(METRICS_FORMS)}, got {form!r}")


def reference_metrics(predictions: pd.DataFrame, *, form: str = "baselines") -> dict[str, Any]:
    """The reference's ``metrics.json`` for a predictions frame (``correct``, and ``hard`` when flagged).

    ``form``: ``"baselines"`` (``evaluate_baselines.py``: ``accuracy_hard`` always, 0.0 without hard
    questions or a ``hard`` column) or ``"evaluate"`` (``evaluate.py``: only when some question is hard).
    """
    _check_form("form", form)
    if not len(predictions):
        raise ValueError("predictions: no scored question to report")
    correct = np.asarray(predictions["correct"], dtype=bool)
    hard = predictions.get("hard", pd.Series(False, index=predictions.index))
    hard = np.asarray(hard.fillna(False), dtype=bool)  # no column, or no flag: no hard question
    scores = {"accuracy": float(correct.mean())}
    if form == "baselines" or hard.any():
        scores["accuracy_hard"] = float(correct[hard].mean()) if hard.any() else 0.0
    return {**{k: round(100 * v, 2) for k, v in scores.items()}, "num_examples": int(len(predictions))}


def reference_records(predictions: pd.DataFrame, questions: pd.DataFrame) -> list[dict[str, Any]]:
    """The reference's ``predictions.jsonl`` records, one per scored question, in the data's row order.

    Raises:
        ValueError: A scored question is not in ``questions`` or differs there (the data changed since
            scoring), or ``hard`` is missing for some rows only.
    """
    require_columns(questions, [*QUESTION_KEY, "question", "answer"], name="data")
    keys = pd.MultiIndex.from_frame(questions[QUESTION_KEY].astype("int64"))
    if not keys.is_unique:
        raise ValueError("data: several questions share a (user_id, question_index) key")
    wanted = pd.MultiIndex.from_frame(predictions[QUESTION_KEY].astype("int64"))
    found = wanted.isin(keys)
    if not found.all():
        first = [f"user {u} question {q}" for u, q in wanted[~found][:5]]
        raise ValueError(
            f"data: {int((~found).sum())} scored question(s) are not in the data, e.g. {', '.join(first)}; "
            "export with the data the run was scored on"
        )
    scored = keys.isin(wanted)
    rows = questions[scored]  # in the data's row order
    diff = question_differences(predictions, rows)
    if len(diff):
        raise ValueError(
            f"data: {len(diff)} scored question(s) differ from the data, e.g. {differences_text(diff)}; the "
            "data changed since the run was scored: rescore it, or export with the data it was scored on"
        )
    generation = pd.Series(predictions["generation"].to_numpy(), index=wanted)
    with_hard = "hard" in rows.columns and bool(rows["hard"].notna().any())
    if with_hard and rows["hard"].isna().any():
        raise ValueError(f"data: 'hard' is missing for {int(rows['hard'].isna().sum())} of {len(rows)} rows")
    records = rows[["question", "answer"]].assign(prediction=generation.loc[keys[scored]].to_numpy())
    if "choices" in rows.columns:
        records["choices"] = [[c if c is None else str(c) for c in cs] for cs in rows["choices"]]
    if with_hard:
        records["hard"] = rows["hard"].astype(bool)
    return records.to_dict("records")


def export_reference(
    run_dir: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    data: Any = None,
    split: str | None = None,
    metrics_form: str = "baselines",
) -> Path:
    """Write a scored run's ``predictions.jsonl`` and ``metrics.json`` as the reference does; the folder.

    Args:
        run_dir: A scored run.
        out_dir: Output folder; default ``<run_dir>/reference/``.
        data: The data the run was scored on (for the row order); default: the ``data`` in its config.
        split: The split to export; needed when the run covers several (the reference writes one per folder).
        metrics_form: As ``form`` of :func:`reference_metrics`.
    """
    _check_form("metrics_form", metrics_form)
    run_dir = Path(run_dir)
    pred = runs.read_predictions(run_dir)
    splits = sorted(set(pred["split"].astype(str)))
    if split is not None and split not in splits:
        raise ValueError(f"split: the run {run_dir} has no {split!r} questions; it has {splits}")
    if split is None and len(splits) > 1:
        raise ValueError(
            f"split: the run {run_dir} covers the splits {splits} and the reference writes one split per "
            "folder; pass split=NAME"
        )
    split = split if split is not None else next(iter(splits), None)
    pred = pred[pred["split"].astype(str) == split]
    questions, _, fingerprint = runs.load_questions(data, run_dir, splits=[split] if split else None)
    if "split" in questions:
        questions = questions[questions["split"].astype(str) == split]
    records = reference_records(pred, questions.reset_index(drop=True))
    if len(records) < len(questions):
        logger.warning(
            "%s: %d of the %d questions of the split are scored; the reference's files hold every row",
            *(run_dir, len(records), len(questions)),
        )
    recorded = data_fingerprint(run_dir)
    if fingerprint and recorded and fingerprint != recorded:
        logger.warning("%s: the data's fingerprint differs from the one recorded at scoring", run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir / "reference"
    atomic_write_text(
        out / "predictions.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    )
    atomic_write_json(out / "metrics.json", reference_metrics(pred, form=metrics_form))
    return out


def join_reference(
    records: list[tuple[int, dict[str, Any]]], questions: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Match ``(line, record)`` reference predictions to questions.

    The key is the stripped question text, plus the stripped choices and answer and the ``user_id`` when
    the records have them. A key shared by several questions is matched in order (the k-th record takes
    the k-th question), right for files written in dataset order. Returns ``(generations, unmatched)``:
    ``user_id, question_index, split, generation`` for joined rows, ``line, question, reason`` for the rest.
    """
    by_user = any("user_id" in rec for _, rec in records)
    with_choices = all("choices" in rec for _, rec in records)
    with_answer = all("answer" in rec for _, rec in records)

    def key(rec: dict[str, Any]) -> tuple:
        user, choices, answer = rec.get("user_id") if by_user else None, rec.get("choices"), rec.get("answer")
        return (
            None if user is None else int(user),
            str(rec["question"]).strip(),
            tuple(str(c).strip() for c in (choices if choices is not None else [])) if with_choices else None,
            None if answer is None or not with_answer else str(answer).strip(),
        )

    slots: dict[tuple, deque[int]] = defaultdict(deque)  # the questions of each key, in order
    for pos, row in enumerate(questions.to_dict("records")):
        slots[key(row)].append(pos)
    matched, unmatched = [], []
    for lineno, rec in records:
        k = key(rec)
        if not slots.get(k):
            reason = (
                "more records than questions with this key" if k in slots else "no question with this text"
            )
            unmatched.append((lineno, rec["question"], reason))
            continue
        q = questions.iloc[slots[k].popleft()]
        matched.append(
            (int(q["user_id"]), int(q["question_index"]), q["split"], str(rec["prediction"] or ""))
        )
    return (
        pd.DataFrame(matched, columns=["user_id", "question_index", "split", "generation"]),
        pd.DataFrame(unmatched, columns=["line", "question", "reason"]),
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
    """A reference ``predictions.jsonl`` as a run; ``(generations, unmatched)`` as in :func:`join_reference`.

    Args:
        path: The reference ``predictions.jsonl``.
        data: Data source for :func:`pv4kit.dataset.load.load`, a ``PV4Data``, or a questions frame.
        run_dir: The run directory to write (unmatched rows go to ``import_unmatched.csv``).
        split: Only match questions of this split (``None``: all splits).
        method: Recorded as the run's method.
        model: Recorded as the run's model.
        force: Replace a run already in ``run_dir`` (refused by default: ``FileExistsError``).
    """
    run_dir, path = Path(run_dir), Path(path)
    files = (runs.GENERATIONS_FILE, runs.CONFIG_FILE, runs.PREDICTIONS_FILE, runs.METRICS_FILE)
    found = ", ".join(name for name in files if (run_dir / name).exists())
    if found and not force:  # before anything is read or written
        raise FileExistsError(
            f"run_dir: {run_dir} already holds a run ({found}); importing would replace it. "
            "Choose another directory, or pass force=True to replace it."
        )
    if found:
        logger.warning("%s: replacing the run there (%s) with the import (force)", run_dir, found)
    questions, source, _ = runs.load_questions(data, splits=[split] if split else None)
    if split is not None:
        questions = questions[questions["split"] == split]
    records = list(iter_jsonl(path))
    for lineno, obj in records:
        if missing := [field for field in ("question", "prediction") if field not in obj]:
            raise ValueError(f"{path}:{lineno}: missing field {missing[0]!r}; got {sorted(obj)}")
    gens, unmatched = join_reference(records, questions.reset_index(drop=True))
    if len(unmatched):
        logger.warning(
            "%d of %d rows in %s did not join to a question (see import_unmatched.csv)",
            *(len(unmatched), len(unmatched) + len(gens), path),
        )
    config = {"data": source, "method": method, "model": model, "imported_from": str(path)}
    config |= {"imported_sha256": sha256_file(path), "n_imported": len(gens), "n_unmatched": len(unmatched)}
    runs.write_generations(
        run_dir, gens, config=config, files={"import_unmatched.csv": unmatched.to_csv(index=False)}
    )
    return gens, unmatched
