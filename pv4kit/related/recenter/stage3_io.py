"""Re-Centering stage 3 (generic vs personalised response): ratings, display sides and generations.

Ratings 1-5 of annotators and LLM judges come with the ``display_assignment`` of the A/B sides; the
generations are joined to the items by prompt id and generator model tag.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit.related._common import iter_jsonl
from pv4kit.related.recenter.records import (
    _attr_text,
    _coverage,
    _entries,
    _files,
    _float_or_none,
    _records,
    _shape_error,
    _stage_dir,
)

logger = logging.getLogger(__name__)

__all__ = ["CONDITIONS", "Stage3Data", "load_stage3", "personalised_side", "same_model"]

# stage-3 generation conditions, as file-name prefixes (longest first: "gt_attributes" before "attributes")
CONDITIONS = ("gt_attributes", "no_context", "attributes")
_TOOL_PREFIX = "eval_results_task5_"  # the annotation tool's name for the same files
_GENERIC_SIDE = ("no_context", "generic", "baseline", "no_profile")
_PERSONAL_SIDE = ("personalized", "personalised", "gt_attributes", "attributes", "personal")


@dataclass
class Stage3Data:
    """Stage 3 frames.

    Attributes:
        items: One row per item x attribute.
        annotations: Human ratings ``annotator, item_index, attribute, rating, personalised_side``.
        judgments: LLM ratings ``model, item_index, attribute, rating, personalised_side``.
        generations: One row per generation record, joined to ``item_index`` by prompt id and model tag.
        coverage: Per rater: ``kind, rater, n_pairs, n_rated, n_unrated, n_missing_label, n_orphan``,
            plus ``human (any)`` and ``llm (any)``.
    """

    items: pd.DataFrame
    annotations: pd.DataFrame
    judgments: pd.DataFrame
    generations: pd.DataFrame
    coverage: pd.DataFrame = field(default_factory=pd.DataFrame)


_S3_ITEM = (
    "{item_index, prompt_id, model_tag, prompt_text, attributes: [{attribute, is_relevant}], "
    "response_no_context, response_personalized}"
)
_S3_RATING = "{index | item_index | sample_index, ratings: {attribute: 1-5 | null}, display_assignment}"
_S3_GEN = "{user_id, prompt_id, prompt_text, profile_attributes, items, mode, model, response}"


def personalised_side(value: Any, *, where: str = "") -> str | None:
    """The side (``"A"``/``"B"``) that showed the personalised response, from a ``display_assignment``.

    Accepted: ``None`` (not recorded), a dict of sides to conditions (``{"A": "no_context", "B":
    "personalized"}``), a dict of conditions to sides (``{"personalized": "B", "no_context": "A"}``), or a
    two-item list ``[condition on A, condition on B]``. The conditions must be one generic
    (``no_context``, ``generic``, ...) and one personalised (``personalized``, ``gt_attributes``, ...).

    Raises:
        ValueError: On anything else, naming ``where`` and the value found.
    """
    if value is None:
        return None

    def role(text: Any) -> str | None:
        key = str(text).strip().lower().replace("-", "_").replace(" ", "_")
        return "p" if key in _PERSONAL_SIDE else "g" if key in _GENERIC_SIDE else None

    by_side: dict[str, Any] | None = None
    if isinstance(value, list | tuple) and len(value) == 2:
        by_side = {"A": value[0], "B": value[1]}
    elif isinstance(value, dict) and {str(k).strip().upper() for k in value} == {"A", "B"}:
        by_side = {str(k).strip().upper(): v for k, v in value.items()}
    elif isinstance(value, dict) and len(value) == 2:
        sides = {str(v).strip().upper(): k for k, v in value.items()}
        if set(sides) == {"A", "B"}:
            by_side = sides
    if by_side is not None:
        roles = {side: role(cond) for side, cond in by_side.items()}
        if sorted(map(str, roles.values())) == ["g", "p"]:
            return next(side for side, r in roles.items() if r == "p")
    raise ValueError(
        f"{where}: display_assignment {value!r} not understood: expected the sides A and B mapped to one "
        f"generic ({', '.join(_GENERIC_SIDE)}) and one personalised ({', '.join(_PERSONAL_SIDE)}) response"
    )


def _ratings_frame(folder: Path, who: str) -> tuple[pd.DataFrame, list[tuple[str, int, str]]]:
    rows, missing = [], []
    for path in _files(folder):
        for line, rec, index in _records(path, "stage-3 rating", _S3_RATING):
            ratings = rec.get("ratings")
            if not isinstance(ratings, dict):
                raise _shape_error(path, line, "stage-3 rating", _S3_RATING, rec)
            side = personalised_side(rec.get("display_assignment"), where=f"{path}:{line}")
            for attr, rating in ratings.items():
                if rating is None or rating == "":
                    missing.append((path.stem, index, attr))
                    continue
                value = _float_or_none(rating, f"{path}:{line}: rating of {attr!r}")
                if value is None or not 1 <= value <= 5:
                    raise ValueError(f"{path}:{line}: rating {rating!r} for {attr!r} is outside 1-5")
                rows.append(
                    {
                        who: path.stem,
                        "item_index": index,
                        "attribute": attr,
                        "rating": value,
                        "personalised_side": side,
                    }
                )
    frame = pd.DataFrame(rows, columns=[who, "item_index", "attribute", "rating", "personalised_side"])
    return frame, missing


def same_model(tag: str, name: str) -> bool:
    """Whether a file name's model tag and a record's ``model`` name the same generator.

    Lower-cased, the tag must equal the name, its part after the last ``/`` (``meta-llama/...``), that
    part without an ``-instruct`` suffix, or the name must end with ``.<tag>`` (a Bedrock
    inference-profile id such as ``...us.anthropic.<tag>``).
    """
    tag, name = str(tag).strip().lower(), str(name).strip().lower()
    tail = name.rsplit("/", 1)[-1]
    return tag in (name, tail, tail.removesuffix("-instruct")) or name.endswith(f".{tag}")


def _parse_generation_name(path: Path) -> tuple[str, str]:
    stem = path.stem.removeprefix(_TOOL_PREFIX)
    condition = next((c for c in CONDITIONS if stem.startswith(f"{c}_") and len(stem) > len(c) + 1), None)
    if condition is None:
        raise ValueError(
            f"{path}: file name is not <condition>_<model>.jsonl with condition in {list(CONDITIONS)}"
        )
    return condition, stem[len(condition) + 1 :]


_GEN_COLUMNS = [
    "condition",
    "model_tag",
    "model_name",
    "prompt_id",
    "user_id",
    "prompt_text",
    "response",
    "item_index",
    "matches_item",
    "file",
    "line",
]


def _read_generations(folder: Path, items: pd.DataFrame, items_path: Path) -> pd.DataFrame:
    """Generation records, checked against their file names and joined to items by (prompt_id, model_tag)."""
    first = items.drop_duplicates("item_index")
    keyed = first.dropna(subset=["prompt_id"])
    dupes = keyed[keyed.duplicated(["prompt_id", "model_tag"], keep=False)]
    if len(dupes):
        raise ValueError(
            f"{items_path}: items {sorted(dupes['item_index'].tolist())[:10]} share a (prompt_id, model_tag)"
        )
    lookup = {
        (p, m): (i, nc, pe)
        for p, m, i, nc, pe in zip(
            keyed["prompt_id"],
            keyed["model_tag"],
            keyed["item_index"],
            keyed["response_no_context"],
            keyed["response_personalized"],
            strict=True,
        )
    }
    rows, seen = [], {}
    for path in _files(folder):
        condition, tag = _parse_generation_name(path)
        for line, rec in iter_jsonl(path):
            if rec.get("prompt_id") is None or "response" not in rec:
                raise _shape_error(path, line, "stage-3 generation", _S3_GEN, rec)
            mode, name = rec.get("mode"), rec.get("model")
            if mode is not None and mode != condition:
                raise ValueError(f"{path}:{line}: record mode {mode!r} but the file name says {condition!r}")
            if name is not None and not same_model(tag, name):
                raise ValueError(f"{path}:{line}: record model {name!r} but the file name says {tag!r}")
            key = (rec["prompt_id"], condition, tag)
            if key in seen:
                raise ValueError(f"{path}:{line}: prompt_id {rec['prompt_id']!r} repeats line {seen[key]}")
            seen[key] = line
            joined = lookup.get((rec["prompt_id"], tag))
            matches = pd.NA
            if joined is not None and condition in ("no_context", "gt_attributes"):
                expected = joined[1] if condition == "no_context" else joined[2]
                matches = pd.NA if expected is None else rec["response"] == expected
            rows.append(
                {
                    "condition": condition,
                    "model_tag": tag,
                    "model_name": name,
                    "prompt_id": rec["prompt_id"],
                    "user_id": rec.get("user_id"),
                    "prompt_text": rec.get("prompt_text"),
                    "response": rec["response"],
                    "item_index": joined[0] if joined is not None else pd.NA,
                    "matches_item": matches,
                    "file": path.name,
                    "line": line,
                }
            )
    out = pd.DataFrame(rows, columns=_GEN_COLUMNS)
    if len(out) and keyed.empty:
        logger.warning("%s: no item has a prompt_id; %d generations join no item", items_path, len(out))
    elif len(out):
        logger.info(
            "%d generations in %d files, %d joined to an item by (prompt_id, model_tag)",
            len(out),
            out["file"].nunique(),
            int(out["item_index"].notna().sum()),
        )
    return out.astype({"item_index": "Int64", "matches_item": "boolean"})


def load_stage3(source: str | os.PathLike[str]) -> Stage3Data:
    """Load ``stage3/items.jsonl``, annotations, LLM judgments and generations.

    Returns:
        ``items``: ``item_index, prompt_id, user_id, model_tag, prompt_text, attribute, is_relevant,
        response_no_context, response_personalized``; ``annotations``: ``annotator, item_index,
        attribute, rating, personalised_side``; ``judgments``: ``model, item_index, attribute, rating,
        personalised_side``; ``generations``: one row per record of
        ``generations/<condition>_<model>.jsonl`` with ``condition`` and ``model_tag`` from the file name,
        ``model_name`` from the record, ``item_index`` joined by ``(prompt_id, model_tag)`` (NA when no item
        has it) and ``matches_item`` (the response equals the item's response of that condition);
        ``coverage`` (see :class:`Stage3Data`).

    Raises:
        ValueError: On a record of another shape, a rating outside 1-5, a display_assignment not
            understood, or a generation record whose ``mode``/``model`` disagree with its file name (file
            and line named).
    """
    folder = _stage_dir(source, "stage3")
    rows = []
    path = folder / "items.jsonl"
    for line, rec, index, j, attr in _entries(path, key="attributes", what="stage-3 item", expected=_S3_ITEM):
        rows.append(
            {
                "item_index": index,
                "prompt_id": rec.get("prompt_id"),
                "user_id": rec.get("user_id"),
                "model_tag": rec.get("model_tag"),
                "prompt_text": rec.get("prompt_text"),
                "attribute": _attr_text(attr, path, line, f"attributes[{j}]"),
                "is_relevant": attr.get("is_relevant") if isinstance(attr, dict) else None,
                "response_no_context": rec.get("response_no_context"),
                "response_personalized": rec.get("response_personalized"),
            }
        )
    items = pd.DataFrame(
        rows,
        columns=[
            "item_index",
            "prompt_id",
            "user_id",
            "model_tag",
            "prompt_text",
            "attribute",
            "is_relevant",
            "response_no_context",
            "response_personalized",
        ],
    )
    annotations, ann_missing = _ratings_frame(folder / "annotations", "annotator")
    judgments, jud_missing = _ratings_frame(folder / "llm_judgments", "model")
    coverage = _coverage(
        items,
        [
            ("human", annotations.rename(columns={"annotator": "rater"}), ann_missing),
            ("llm", judgments.rename(columns={"model": "rater"}), jud_missing),
        ],
    )
    return Stage3Data(
        items=items,
        annotations=annotations,
        judgments=judgments,
        generations=_read_generations(folder / "generations", items, path),
        coverage=coverage,
    )
