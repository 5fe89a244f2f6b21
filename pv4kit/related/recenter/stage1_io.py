"""Re-Centering stage 1 (attribute extraction): items and the annotators' ok/unsure/bad judgments."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from pv4kit.related.recenter.records import (
    _attr_text,
    _entries,
    _files,
    _float_or_none,
    _list_field,
    _records,
    _stage_dir,
)

__all__ = ["STAGE1_LABELS", "Stage1Data", "load_stage1"]

STAGE1_LABELS = ("bad", "unsure", "ok")  # ordered, for the weighted kappa


@dataclass
class Stage1Data:
    """Stage 1: ``items`` (one row per attribute) and ``annotations`` (one row per annotator x attribute)."""

    items: pd.DataFrame
    annotations: pd.DataFrame


_S1_ITEM = "{item_index, user_id, source, merged_attributes: [{attribute, confidence, ground_truth, ...}]}"
_S1_ANN = "{index, attr_judgments: [{judgment, note}], ...}"


def load_stage1(source: str | os.PathLike[str]) -> Stage1Data:
    """Load ``stage1/items.jsonl`` and ``stage1/annotations/*.jsonl``.

    Args:
        source: The release folder (or its ``stage1`` folder), or the hub id.

    Returns:
        ``items``: ``item_index, user_id, source, attr_index, attribute, confidence`` (float),
        ``ground_truth``; ``annotations``: ``annotator, item_index, attr_index, judgment``
        (``ok``/``unsure``/``bad``; an empty judgment is left out).

    Raises:
        ValueError: On a record of another shape, a non-numeric confidence, an unknown judgment or more
            judgments than the item has attributes (file and line named).
    """
    folder = _stage_dir(source, "stage1")
    rows = []
    path = folder / "items.jsonl"
    for line, rec, index, j, attr in _entries(
        path, key="merged_attributes", what="stage-1 item", expected=_S1_ITEM
    ):
        text = _attr_text(attr, path, line, f"merged_attributes[{j}]")
        attr = attr if isinstance(attr, dict) else {}
        rows.append(
            {
                "item_index": index,
                "user_id": rec.get("user_id"),
                "source": rec.get("source", rec.get("dataset")),
                "attr_index": j,
                "attribute": text,
                "confidence": _float_or_none(
                    attr.get("confidence"), f"{path}:{line}: merged_attributes[{j}].confidence"
                ),
                "ground_truth": attr.get("ground_truth"),
            }
        )
    items = pd.DataFrame(
        rows,
        columns=["item_index", "user_id", "source", "attr_index", "attribute", "confidence", "ground_truth"],
    ).astype({"confidence": float})
    n_attrs = items.groupby("item_index").size().to_dict()
    ann = []
    for path in _files(folder / "annotations"):
        for line, rec, index in _records(path, "stage-1 annotation", _S1_ANN):
            judgments = _list_field(rec, "attr_judgments", path, line, "stage-1 annotation", _S1_ANN)
            if index in n_attrs and len(judgments) > n_attrs[index]:
                raise ValueError(
                    f"{path}:{line}: {len(judgments)} judgments for item {index} with "
                    f"{n_attrs[index]} attributes"
                )
            for j, judg in enumerate(judgments):
                value = judg.get("judgment") if isinstance(judg, dict) else judg
                if value is None or value == "":
                    continue
                if value not in STAGE1_LABELS:
                    raise ValueError(f"{path}:{line}: judgment {value!r} not in {list(STAGE1_LABELS)}")
                ann.append({"annotator": path.stem, "item_index": index, "attr_index": j, "judgment": value})
    annotations = pd.DataFrame(ann, columns=["annotator", "item_index", "attr_index", "judgment"])
    return Stage1Data(items=items, annotations=annotations)
