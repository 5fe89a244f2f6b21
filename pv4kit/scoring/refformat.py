"""The reference scorer's file formats: export a scored run to them, import its predictions into a run.

The reference (Memorilla ``metrics.py``) writes

- ``predictions.jsonl``: one JSON object per dataset row, in row order, ``{question, answer, prediction}``
  then ``choices`` and ``hard`` when the data has those columns (no user id, no question index);
- ``metrics.json``: ``{accuracy, accuracy_hard, num_examples}`` with accuracies as percentages rounded to 2
  decimals; ``evaluate.py`` leaves ``accuracy_hard`` out when no row is hard, ``evaluate_baselines.py``
  writes 0.0 there.

:func:`export_reference` writes both from a scored run, byte for byte as the reference would for the same
predictions, so numbers can sit next to published ones.
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

import numpy as np
import pandas as pd

from pv4kit._io import atomic_write_json, atomic_write_text, iter_jsonl, sha256_file
from pv4kit.dataset.load import load
from pv4kit.schema import QUESTION_KEY
from pv4kit.scoring import runs
from pv4kit.scoring.samedata import data_fingerprint, question_differences

logger = logging.getLogger(__name__)

METRICS_FORMS = ("baselines", "evaluate")


def reference_metrics(predictions: pd.DataFrame, *, form: str = "baselines") -> dict[str, Any]:
    """The reference's ``metrics.json`` for a predictions frame (percentages rounded to 2 decimals).

    Args:
        predictions: ``correct`` per question, and ``hard`` when the data flags hard questions.
        form: ``"baselines"`` (default): as the reference's ``evaluate_baselines.py`` writes it,
            ``accuracy``, ``accuracy_hard`` (0.0 when no question is hard) and ``num_examples``;
            ``"evaluate"``: as its ``evaluate.py`` writes it, ``accuracy_hard`` only when some question is
            hard. Without a ``hard`` column the baselines form writes 0.0 too (the reference's script
            stops with a ``KeyError`` there).

    Returns:
        The ``metrics.json`` content, keys in the reference's order.
    """
    if form not in METRICS_FORMS:
        raise ValueError(f"form: expected one of {list(METRICS_FORMS)}, got {form!r}")
    if not len(predictions):
        raise ValueError("predictions: no scored question to report")
    correct = np.asarray(predictions["correct"], dtype=bool)
    hard_col = predictions["hard"] if "hard" in predictions else None
    hard = (
        None if hard_col is None or hard_col.isna().all() else np.asarray(hard_col.fillna(False), dtype=bool)
    )
    scores = {"accuracy": float(correct.mean())}
    if form == "baselines" or (hard is not None and hard.any()):
        scores["accuracy_hard"] = float(correct[hard].mean()) if hard is not None and hard.any() else 0.0
    out: dict[str, Any] = {name: round(100 * value, 2) for name, value in scores.items()}
    out["num_examples"] = int(len(predictions))
    return out


def _questions_of(data: Any, run_dir: Path, splits: list[str]) -> tuple[pd.DataFrame, str | None]:
    if isinstance(data, pd.DataFrame):
        return data, None
    if data is not None and hasattr(data, "questions"):
        return data.questions, getattr(data, "fingerprint", None)
    source = data if data is not None else runs.read_run_config(run_dir).get("data")
    if source is None or str(source).startswith("<"):
        raise ValueError(
            f"data: {run_dir / runs.CONFIG_FILE} records no loadable data source ({source!r}); the export "
            "needs the data for its row order: pass data=SOURCE"
        )
    loaded = load(str(source), splits=splits)
    return loaded.questions, getattr(loaded, "fingerprint", None)


def reference_records(predictions: pd.DataFrame, questions: pd.DataFrame) -> list[dict[str, Any]]:
    """The reference's ``predictions.jsonl`` records, one per scored question, in the data's row order.

    Each record holds ``question``, ``answer`` (the data's own values, unstripped), ``prediction`` (the
    cleaned generation), then ``choices`` and ``hard`` when the data has those columns, as the reference's
    ``evaluation_records`` writes them; no ids.

    Raises:
        ValueError: When a scored question is not in ``questions`` or has another text, choices or answer
            there (the data changed since scoring), or when ``hard`` is missing for some rows only.
    """
    missing = [c for c in (*QUESTION_KEY, "question", "answer") if c not in questions.columns]
    if missing:
        raise ValueError(f"data: the questions lack column(s) {missing}; got {list(questions.columns)}")
    keys = questions[QUESTION_KEY].astype("int64")
    position = pd.Series(np.arange(len(questions)), index=pd.MultiIndex.from_frame(keys))
    if not position.index.is_unique:
        raise ValueError("data: several questions share a (user_id, question_index) key")
    wanted = pd.MultiIndex.from_frame(predictions[QUESTION_KEY].astype("int64"))
    found = wanted.isin(position.index)
    if not found.all():
        first = [f"user {u} question {q}" for u, q in wanted[~found][:5]]
        raise ValueError(
            f"data: {int((~found).sum())} scored question(s) are not in the data, e.g. {', '.join(first)}; "
            "export with the data the run was scored on"
        )
    rows = questions.iloc[np.sort(position.loc[wanted].to_numpy())]
    diff = question_differences(predictions, rows)
    if len(diff):
        first = [
            f"user {r.user_id} question {r.question_index} ({r.fields})" for r in diff.head(5).itertuples()
        ]
        raise ValueError(
            f"data: {len(diff)} scored question(s) differ from the data, e.g. {'; '.join(first)}; the data "
            "changed since the run was scored: rescore it, or export with the data it was scored on"
        )
    generation = dict(
        zip(
            map(tuple, predictions[QUESTION_KEY].astype("int64").to_numpy().tolist()),
            predictions["generation"],
            strict=True,
        )
    )
    with_choices = "choices" in rows.columns
    with_hard = "hard" in rows.columns and bool(rows["hard"].notna().any())
    if with_hard and rows["hard"].isna().any():
        raise ValueError(f"data: 'hard' is missing for {int(rows['hard'].isna().sum())} of {len(rows)} rows")
    records = []
    for row in rows.to_dict("records"):
        rec: dict[str, Any] = {
            "question": row["question"],
            "answer": row["answer"],
            "prediction": generation[(int(row["user_id"]), int(row["question_index"]))],
        }
        if with_choices:
            rec["choices"] = [c if c is None else str(c) for c in row["choices"]]
        if with_hard:
            rec["hard"] = bool(row["hard"])
        records.append(rec)
    return records


def export_reference(
    run_dir: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    data: Any = None,
    split: str | None = None,
    metrics_form: str = "baselines",
) -> Path:
    """Write a scored run's ``predictions.jsonl`` and ``metrics.json`` in the reference's format.

    ``predictions.jsonl``: one ``json.dumps(record, ensure_ascii=False)`` line per question, in the data's
    row order (:func:`reference_records`); ``metrics.json``: :func:`reference_metrics`, indented by 2, with
    a final newline: the bytes the reference writes for the same predictions.

    Args:
        run_dir: A scored run (``predictions.parquet``).
        out_dir: Output folder; default ``<run_dir>/reference/``.
        data: The data the run was scored on (path or hub id, a ``PV4Data``, or a questions frame), for the
            row order and the question fields; default: the ``data`` in the run's ``config.json``.
        split: The split to export; needed when the run covers several (the reference writes one split
            per folder).
        metrics_form: ``"baselines"`` (default, ``evaluate_baselines.py``: ``accuracy_hard`` always, 0.0
            without hard questions) or ``"evaluate"`` (``evaluate.py``: only when some question is hard).

    Returns:
        The output folder.
    """
    if metrics_form not in METRICS_FORMS:
        raise ValueError(f"metrics_form: expected one of {list(METRICS_FORMS)}, got {metrics_form!r}")
    run_dir = Path(run_dir)
    pred = runs.read_predictions(run_dir)
    splits = sorted(set(pred["split"].astype(str))) if "split" in pred else []
    if split is not None:
        if split not in splits:
            raise ValueError(f"split: the run {run_dir} has no {split!r} questions; it has {splits}")
        pred = pred[pred["split"].astype(str) == split]
    elif len(splits) > 1:
        raise ValueError(
            f"split: the run {run_dir} covers the splits {splits} and the reference writes one split per "
            "folder; pass split=NAME"
        )
    questions, fingerprint = _questions_of(data, run_dir, splits if split is None else [split])
    if "split" in questions and "split" in pred and len(pred):
        questions = questions[questions["split"].astype(str) == str(pred["split"].iloc[0])]
    records = reference_records(pred, questions.reset_index(drop=True))
    if len(records) < len(questions):
        logger.warning(
            "%s: %d of the %d questions of the split are scored; the reference's files hold every row",
            run_dir,
            len(records),
            len(questions),
        )
    recorded = data_fingerprint(run_dir)
    if fingerprint and recorded and fingerprint != recorded:
        logger.warning("%s: the data's fingerprint differs from the one recorded at scoring", run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir / "reference"
    text = "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records)
    atomic_write_text(out / "predictions.jsonl", text)
    atomic_write_json(out / "metrics.json", reference_metrics(pred, form=metrics_form))
    logger.info("exported %d predictions to %s", len(records), out)
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
        "Choose another directory, or pass force=True to replace it."
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
        data: Data source for :func:`pv4kit.dataset.load.load`, a ``PV4Data``, or a questions frame.
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
    runs.write_generations(
        run_dir, gens, config=config, files={"import_unmatched.csv": unmatched.to_csv(index=False)}
    )
    return gens, unmatched
