"""Re-Centering Humans in LLM Personalization (leczhang/recenter-personalization): loaders.

Reads the three stages of the release into pandas frames (formats in the data card; see
``docs/related.md``); the metrics on them are in :mod:`pv4kit.related.recenter`.

* **Stage 1** (attribute extraction): one row per attribute, and one per annotator x attribute with the
  judgment ``ok``, ``unsure`` or ``bad``.
* **Stage 2** (relevance of an attribute to a prompt): human and LLM labels are collapsed to binary by
  :func:`relevance_label` -- ``necessary_explicit`` and ``necessary_implicit`` are relevant;
  ``optional``, ``unnecessary`` and ``forbidden`` are not; booleans and ``yes``/``no`` are taken as they
  are; an unknown label raises.
* **Stage 3** (generic vs personalised response): ratings 1-5 of annotators and LLM judges, and the
  generations.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.related._common import iter_jsonl, resolve_source

__all__ = [
    "HUB_ID",
    "RELEVANCE_LABELS",
    "STAGE1_LABELS",
    "Stage1Data",
    "Stage2Data",
    "Stage3Data",
    "load_stage1",
    "load_stage2",
    "load_stage3",
    "relevance_label",
]

HUB_ID = "leczhang/recenter-personalization"
STAGE1_LABELS = ("bad", "unsure", "ok")  # ordered, for the weighted kappa
# human relevance labels -> binary (first two relevant); unknown labels raise
RELEVANCE_LABELS: dict[str, bool] = {
    "necessary_explicit": True,
    "necessary_implicit": True,
    "optional": False,
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


@dataclass
class Stage1Data:
    """Stage 1: ``items`` (one row per attribute) and ``annotations`` (one row per annotator x attribute)."""

    items: pd.DataFrame
    annotations: pd.DataFrame


@dataclass
class Stage2Data:
    """Stage 2: ``items`` (one row per item x profile attribute), ``annotations`` and ``judgments`` (long)."""

    items: pd.DataFrame
    annotations: pd.DataFrame
    judgments: pd.DataFrame


@dataclass
class Stage3Data:
    """Stage 3: ``items`` (item x attribute), ``annotations``/``judgments`` (ratings) and ``generations``."""

    items: pd.DataFrame
    annotations: pd.DataFrame
    judgments: pd.DataFrame
    generations: pd.DataFrame


def _stage_dir(source: str | os.PathLike[str], stage: str) -> Path:
    root = resolve_source(source, repo_id=HUB_ID)
    folder = root / stage if (root / stage).is_dir() else root
    if not (folder / "items.jsonl").is_file():
        raise FileNotFoundError(f"{root}: {stage}/items.jsonl not found")
    return folder


def _index_of(rec: dict[str, Any], path: Path, line: int) -> int:
    for key in ("item_index", "index", "sample_index"):
        if rec.get(key) is not None:
            return int(rec[key])
    raise ValueError(f"{path}:{line}: no item_index/index/sample_index field")


def _attr_text(value: Any) -> str:
    return str(value["attribute"] if isinstance(value, dict) else value)


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def load_stage1(source: str | os.PathLike[str]) -> Stage1Data:
    """Load ``stage1/items.jsonl`` and ``stage1/annotations/*.jsonl``.

    Args:
        source: The release folder (or its ``stage1`` folder), or the hub id.

    Returns:
        ``items``: ``item_index, user_id, source, attr_index, attribute, confidence, ground_truth``;
        ``annotations``: ``annotator, item_index, attr_index, judgment`` (``ok``/``unsure``/``bad``).
    """
    folder = _stage_dir(source, "stage1")
    rows = []
    for line, rec in iter_jsonl(folder / "items.jsonl"):
        index = int(rec.get("item_index", rec.get("index", line - 1)))
        for j, attr in enumerate(rec.get("merged_attributes") or []):
            rows.append(
                {
                    "item_index": index,
                    "user_id": rec.get("user_id"),
                    "source": rec.get("source", rec.get("dataset")),
                    "attr_index": j,
                    "attribute": _attr_text(attr),
                    "confidence": attr.get("confidence"),
                    "ground_truth": attr.get("ground_truth"),
                }
            )
    items = pd.DataFrame(
        rows,
        columns=["item_index", "user_id", "source", "attr_index", "attribute", "confidence", "ground_truth"],
    )
    n_attrs = items.groupby("item_index").size().to_dict()
    ann = []
    for path in _files(folder / "annotations"):
        for line, rec in iter_jsonl(path):
            index = _index_of(rec, path, line)
            judgments = rec.get("attr_judgments") or []
            if index in n_attrs and len(judgments) > n_attrs[index]:
                raise ValueError(
                    f"{path}:{line}: {len(judgments)} judgments for item {index} with "
                    f"{n_attrs[index]} attributes"
                )
            for j, judg in enumerate(judgments):
                value = judg.get("judgment") if isinstance(judg, dict) else judg
                if value is None:
                    continue
                if value not in STAGE1_LABELS:
                    raise ValueError(f"{path}:{line}: judgment {value!r} not in {list(STAGE1_LABELS)}")
                ann.append({"annotator": path.stem, "item_index": index, "attr_index": j, "judgment": value})
    annotations = pd.DataFrame(ann, columns=["annotator", "item_index", "attr_index", "judgment"])
    return Stage1Data(items=items, annotations=annotations)


def relevance_label(value: Any, *, where: str = "") -> bool | None:
    """Collapse a human or LLM relevance label to binary (``None`` for a missing one)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float):
        return bool(value)
    key = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    if key not in RELEVANCE_LABELS:
        raise ValueError(f"{where}: unknown relevance label {value!r}; known: {sorted(RELEVANCE_LABELS)}")
    return RELEVANCE_LABELS[key]


def load_stage2(source: str | os.PathLike[str]) -> Stage2Data:
    """Load ``stage2/items.jsonl``, ``annotations/*.jsonl`` and ``llm_judgments/*.jsonl``.

    Returns:
        ``items``: ``item_index, prompt_index, prompt_text, user_id, attribute, ground_truth,
        coarse_filter`` (whether the coarse filter proposed it); ``annotations``: ``annotator,
        item_index, attribute, label, relevant``; ``judgments``: ``model, item_index, attribute,
        relevant, raw_answer``.
    """
    folder = _stage_dir(source, "stage2")
    rows = []
    for line, rec in iter_jsonl(folder / "items.jsonl"):
        index = _index_of(rec, folder / "items.jsonl", line)
        proposed = {_attr_text(a) for a in rec.get("items") or []}
        for attr in rec.get("profile_attributes") or []:
            gt = attr.get("ground_truth") if isinstance(attr, dict) else None
            rows.append(
                {
                    "item_index": index,
                    "prompt_index": rec.get("prompt_index"),
                    "prompt_text": rec.get("prompt_text"),
                    "user_id": rec.get("user_id"),
                    "attribute": _attr_text(attr),
                    "ground_truth": gt,
                    "coarse_filter": _attr_text(attr) in proposed,
                }
            )
    items = pd.DataFrame(
        rows,
        columns=[
            "item_index",
            "prompt_index",
            "prompt_text",
            "user_id",
            "attribute",
            "ground_truth",
            "coarse_filter",
        ],
    )
    ann = []
    for path in _files(folder / "annotations"):
        for line, rec in iter_jsonl(path):
            index = _index_of(rec, path, line)
            for judg in rec.get("relevance_judgments") or []:
                rel = relevance_label(judg.get("relevant"), where=f"{path}:{line}")
                if rel is not None:
                    ann.append(
                        {
                            "annotator": path.stem,
                            "item_index": index,
                            "attribute": judg["attribute"],
                            "label": judg.get("relevant"),
                            "relevant": rel,
                        }
                    )
    jud = []
    for path in _files(folder / "llm_judgments"):
        for line, rec in iter_jsonl(path):
            index = _index_of(rec, path, line)
            for judg in rec.get("items") or []:
                jud.append(
                    {
                        "model": path.stem,
                        "item_index": index,
                        "attribute": judg["attribute"],
                        "relevant": relevance_label(judg.get("relevant"), where=f"{path}:{line}"),
                        "raw_answer": judg.get("raw_answer"),
                    }
                )
    annotations = pd.DataFrame(ann, columns=["annotator", "item_index", "attribute", "label", "relevant"])
    judgments = pd.DataFrame(jud, columns=["model", "item_index", "attribute", "relevant", "raw_answer"])
    return Stage2Data(items=items, annotations=annotations, judgments=judgments)


def _ratings_frame(folder: Path, who: str) -> pd.DataFrame:
    rows = []
    for path in _files(folder):
        for line, rec in iter_jsonl(path):
            index = _index_of(rec, path, line)
            for attr, rating in (rec.get("ratings") or {}).items():
                if rating is None:
                    continue
                value = float(rating)
                if not 1 <= value <= 5:
                    raise ValueError(f"{path}:{line}: rating {rating!r} for {attr!r} is outside 1-5")
                rows.append({who: path.stem, "item_index": index, "attribute": attr, "rating": value})
    return pd.DataFrame(rows, columns=[who, "item_index", "attribute", "rating"])


def load_stage3(source: str | os.PathLike[str]) -> Stage3Data:
    """Load ``stage3/items.jsonl``, annotations, LLM judgments and generations.

    Returns:
        ``items``: ``item_index, model_tag, prompt_text, attribute, is_relevant, response_no_context,
        response_personalized``; ``annotations``: ``annotator, item_index, attribute, rating``;
        ``judgments``: ``model, item_index, attribute, rating``; ``generations``: every record of
        ``generations/<condition>_<model>.jsonl`` with ``condition`` and ``model`` columns added.
    """
    folder = _stage_dir(source, "stage3")
    rows = []
    for line, rec in iter_jsonl(folder / "items.jsonl"):
        index = _index_of(rec, folder / "items.jsonl", line)
        for attr in rec.get("attributes") or []:
            rows.append(
                {
                    "item_index": index,
                    "model_tag": rec.get("model_tag"),
                    "prompt_text": rec.get("prompt_text"),
                    "attribute": _attr_text(attr),
                    "is_relevant": attr.get("is_relevant") if isinstance(attr, dict) else None,
                    "response_no_context": rec.get("response_no_context"),
                    "response_personalized": rec.get("response_personalized"),
                }
            )
    items = pd.DataFrame(
        rows,
        columns=[
            "item_index",
            "model_tag",
            "prompt_text",
            "attribute",
            "is_relevant",
            "response_no_context",
            "response_personalized",
        ],
    )
    gens = []
    for path in _files(folder / "generations"):
        stem = path.stem
        condition = next(
            (c for c in ("no_context", "gt_attributes") if stem.startswith(f"{c}_")), stem.partition("_")[0]
        )
        model = stem[len(condition) + 1 :]
        for _, rec in iter_jsonl(path):
            gens.append({"condition": condition, "model": model, **rec})
    return Stage3Data(
        items=items,
        annotations=_ratings_frame(folder / "annotations", "annotator"),
        judgments=_ratings_frame(folder / "llm_judgments", "model"),
        generations=pd.DataFrame(gens),
    )
