"""Re-Centering stage 2 (relevance of an attribute to a prompt): items, human labels, LLM judgments.

Human and LLM labels are collapsed to binary by :func:`relevance_label` as the authors do
(``convert_task2_to_task3.py``): ``necessary_explicit``, ``necessary_implicit`` **and** ``optional`` are
relevant; ``unnecessary`` and ``forbidden`` are not; ``none``, an empty label and null are missing;
booleans and ``yes``/``no`` are taken as they are; an unknown label raises. A judgment's label may sit
under ``rating`` (the five-way task-2 records) or ``relevant``; both are read, and when both are given
they must agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.related.recenter.records import (
    _attr_text,
    _coverage,
    _entries,
    _files,
    _stage_dir,
)

__all__ = ["MISSING_LABELS", "RELEVANCE_LABELS", "Stage2Data", "load_stage2", "relevance_label"]

# relevance labels -> binary, as convert_task2_to_task3.py binarises the five-way task-2 ratings
RELEVANCE_LABELS: dict[str, bool] = {
    "necessary_explicit": True,
    "necessary_implicit": True,
    "optional": True,
    "unnecessary": False,
    "forbidden": False,
    "yes": True,
    "no": False,
    "true": True,
    "false": False,
    "relevant": True,
    "not_relevant": False,
    "irrelevant": False,
}
MISSING_LABELS = ("none", "")  # the tool's "not rated yet"


@dataclass
class Stage2Data:
    """Stage 2 frames.

    Attributes:
        items: One row per item x profile attribute (every pair of ``items.jsonl``).
        annotations: One row per annotator x rated pair (missing labels left out, counted in coverage).
        judgments: One row per LLM x judged pair (``relevant`` may be NA: an unparsed answer).
        coverage: Per rater: ``kind, rater, n_pairs, n_rated, n_unrated, n_missing_label, n_orphan``
            (judgments naming a pair the items do not have), plus ``human (any)`` and ``llm (any)``.
    """

    items: pd.DataFrame
    annotations: pd.DataFrame
    judgments: pd.DataFrame
    coverage: pd.DataFrame = field(default_factory=pd.DataFrame)


def relevance_label(value: Any, *, where: str = "") -> bool | None:
    """Collapse a human or LLM relevance label to binary (``None`` for a missing one).

    ``necessary_explicit``, ``necessary_implicit`` and ``optional`` are relevant; ``unnecessary`` and
    ``forbidden`` are not; ``none``, ``""``, null and NaN are missing; booleans, 0/1 and ``yes``/``no``
    are taken as they are. Anything else raises ``ValueError`` naming ``where``.
    """
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float):
        if value in (0, 1):
            return bool(value)
        raise ValueError(f"{where}: relevance {value!r} is neither 0 nor 1")
    key = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    if key in MISSING_LABELS:
        return None
    if key not in RELEVANCE_LABELS:
        raise ValueError(f"{where}: unknown relevance label {value!r}; known: {sorted(RELEVANCE_LABELS)}")
    return RELEVANCE_LABELS[key]


_S2_ITEM = "{item_index, prompt_index, prompt_text, user_id, profile_attributes: [{attribute, ...}], items}"
_S2_ANN = "{index, relevance_judgments: [{attribute, relevant | rating}], ...}"
_S2_LLM = "{sample_index, items: [{attribute, relevant, raw_answer, full_output}], model, ...}"


def _judgment_label(judg: Any, where: str) -> tuple[str, Any, bool | None]:
    """``(attribute, raw label, binary)`` of one stage-2 human judgment (``rating`` and/or ``relevant``)."""
    if not isinstance(judg, dict) or not isinstance(judg.get("attribute"), str):
        found = sorted(judg) if isinstance(judg, dict) else type(judg).__name__
        raise ValueError(f"{where}: expected a judgment {{attribute, relevant | rating}}, found {found}")
    if "rating" not in judg and "relevant" not in judg:
        raise ValueError(
            f"{where}: judgment of {judg['attribute']!r} has neither 'rating' nor 'relevant'; "
            f"found fields {sorted(judg)}"
        )
    rating, relevant = judg.get("rating"), judg.get("relevant")
    by_rating = relevance_label(rating, where=f"{where}: rating")
    by_relevant = relevance_label(relevant, where=f"{where}: relevant")
    if by_rating is not None and by_relevant is not None and by_rating != by_relevant:
        raise ValueError(
            f"{where}: judgment of {judg['attribute']!r}: rating {rating!r} and relevant {relevant!r} "
            "disagree"
        )
    if by_rating is not None:
        return judg["attribute"], rating, by_rating
    return judg["attribute"], relevant if by_relevant is not None else rating, by_relevant


def load_stage2(source: str | os.PathLike[str]) -> Stage2Data:
    """Load ``stage2/items.jsonl``, ``annotations/*.jsonl`` and ``llm_judgments/*.jsonl``.

    Returns:
        ``items``: ``item_index, prompt_index, prompt_text, user_id, attribute, ground_truth,
        coarse_filter`` (whether the coarse filter proposed it), one row per pair of the items;
        ``annotations``: ``annotator, item_index, attribute, label`` (as written), ``relevant``;
        ``judgments``: ``model`` (file name), ``model_name`` (the record's), ``item_index, attribute,
        relevant, raw_answer``; ``coverage`` (see :class:`Stage2Data`).

    Raises:
        ValueError: On a record of another shape or an unknown label (file and line named).
    """
    folder = _stage_dir(source, "stage2")
    items = _read_items(folder / "items.jsonl")
    annotations, missing = _read_annotations(folder / "annotations")
    judgments = _read_judgments(folder / "llm_judgments")
    coverage = _coverage(
        items,
        [
            ("human", annotations.rename(columns={"annotator": "rater"}), missing),
            (
                "llm",
                judgments.rename(columns={"model": "rater"}).dropna(subset=["relevant"]),
                _unparsed(judgments),
            ),
        ],
    )
    return Stage2Data(items=items, annotations=annotations, judgments=judgments, coverage=coverage)


_ITEM_COLUMNS = [
    "item_index",
    "prompt_index",
    "prompt_text",
    "user_id",
    "attribute",
    "ground_truth",
    "coarse_filter",
]


def _read_items(path: Path) -> pd.DataFrame:
    rows, proposed = [], {}  # proposed: line -> the attribute texts the coarse filter proposed
    for line, rec, index, j, attr in _entries(
        path, key="profile_attributes", what="stage-2 item", expected=_S2_ITEM
    ):
        if line not in proposed:
            proposed[line] = {_attr_text(a, path, line, "items[]") for a in rec.get("items") or []}
        text = _attr_text(attr, path, line, f"profile_attributes[{j}]")
        rows.append(
            {
                "item_index": index,
                "prompt_index": rec.get("prompt_index"),
                "prompt_text": rec.get("prompt_text"),
                "user_id": rec.get("user_id"),
                "attribute": text,
                "ground_truth": attr.get("ground_truth") if isinstance(attr, dict) else None,
                "coarse_filter": text in proposed[line],
            }
        )
    return pd.DataFrame(rows, columns=_ITEM_COLUMNS)


def _read_annotations(folder: Path) -> tuple[pd.DataFrame, list[tuple[str, int, str]]]:
    """The rated pairs of every annotator file, and ``(annotator, item, attribute)`` of missing labels."""
    ann, missing = [], []
    for path in _files(folder):
        for line, _, index, _, judg in _entries(
            path, key="relevance_judgments", what="stage-2 annotation", expected=_S2_ANN
        ):
            attr, label, rel = _judgment_label(judg, f"{path}:{line}")
            if rel is None:
                missing.append((path.stem, index, attr))
                continue
            ann.append(
                {
                    "annotator": path.stem,
                    "item_index": index,
                    "attribute": attr,
                    "label": label,
                    "relevant": rel,
                }
            )
    return pd.DataFrame(ann, columns=["annotator", "item_index", "attribute", "label", "relevant"]), missing


def _read_judgments(folder: Path) -> pd.DataFrame:
    jud = []
    for path in _files(folder):
        for line, rec, index, _, judg in _entries(
            path, key="items", what="stage-2 LLM judgment", expected=_S2_LLM
        ):
            if not isinstance(judg, dict) or "attribute" not in judg or "relevant" not in judg:
                found = sorted(judg) if isinstance(judg, dict) else type(judg).__name__
                raise ValueError(
                    f"{path}:{line}: expected an LLM judgment {{attribute, relevant, raw_answer}}, "
                    f"found {found}"
                )
            jud.append(
                {
                    "model": path.stem,
                    "model_name": rec.get("model"),
                    "item_index": index,
                    "attribute": judg["attribute"],
                    "relevant": relevance_label(judg.get("relevant"), where=f"{path}:{line}"),
                    "raw_answer": judg.get("raw_answer"),
                }
            )
    return pd.DataFrame(
        jud, columns=["model", "model_name", "item_index", "attribute", "relevant", "raw_answer"]
    )


def _unparsed(judgments: pd.DataFrame) -> list[tuple[str, int, str]]:
    bad = judgments[judgments["relevant"].isna()]
    return list(zip(bad["model"], bad["item_index"], bad["attribute"], strict=True))
