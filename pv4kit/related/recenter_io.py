"""Re-Centering Humans in LLM Personalization (leczhang/recenter-personalization): loaders.

Reads the three stages of the release into pandas frames; the metrics on them are in
:mod:`pv4kit.related.recenter`. The record shapes are those of the data card and of the authors' public
annotation tool (GitHub ``orange0629/personalize-annotation``: ``app.py``, ``convert_task2_to_task3.py``,
``analyze_relevance_agreement.py``); ``docs/related.md`` lists what was read where. A record of any other
shape raises a ``ValueError`` naming the file, the line and the fields found.

* **Stage 1** (attribute extraction): one row per attribute (``confidence`` is a float), and one per
  annotator x attribute with the judgment ``ok``, ``unsure`` or ``bad``.
* **Stage 2** (relevance of an attribute to a prompt): human and LLM labels are collapsed to binary by
  :func:`relevance_label` as the authors do (``convert_task2_to_task3.py``): ``necessary_explicit``,
  ``necessary_implicit`` **and** ``optional`` are relevant; ``unnecessary`` and ``forbidden`` are not;
  ``none``, an empty label and null are missing; booleans and ``yes``/``no`` are taken as they are; an
  unknown label raises. A judgment's label may sit under ``rating`` (the five-way task-2 records) or
  ``relevant``; both are read, and when both are given they must agree.
* **Stage 3** (generic vs personalised response): ratings 1-5 of annotators and LLM judges with the
  ``display_assignment`` of the A/B sides, and the generations, joined to the items by prompt id and
  generator model tag.

Every (item, attribute) pair of the items stays in the frames; the ``coverage`` tables count what each
rater left unrated (the tool shows an attribute text once per prompt, so a pair whose text another user
of the same prompt also has is judged under that user's item only) and judgments that match no pair.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.related._common import iter_jsonl, resolve_source

logger = logging.getLogger(__name__)

__all__ = [
    "CONDITIONS",
    "HUB_ID",
    "RELEVANCE_LABELS",
    "STAGE1_LABELS",
    "Stage1Data",
    "Stage2Data",
    "Stage3Data",
    "load_stage1",
    "load_stage2",
    "load_stage3",
    "personalised_side",
    "relevance_label",
    "same_model",
]

HUB_ID = "leczhang/recenter-personalization"
STAGE1_LABELS = ("bad", "unsure", "ok")  # ordered, for the weighted kappa
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
# stage-3 generation conditions, as file-name prefixes (longest first: "gt_attributes" before "attributes")
CONDITIONS = ("gt_attributes", "no_context", "attributes")
_TOOL_PREFIX = "eval_results_task5_"  # the annotation tool's name for the same files
_GENERIC_SIDE = ("no_context", "generic", "baseline", "no_profile")
_PERSONAL_SIDE = ("personalized", "personalised", "gt_attributes", "attributes", "personal")
_INDEX_KEYS = ("item_index", "index", "sample_index")


@dataclass
class Stage1Data:
    """Stage 1: ``items`` (one row per attribute) and ``annotations`` (one row per annotator x attribute)."""

    items: pd.DataFrame
    annotations: pd.DataFrame


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


def _stage_dir(source: str | os.PathLike[str], stage: str) -> Path:
    root = resolve_source(source, repo_id=HUB_ID)
    folder = root / stage if (root / stage).is_dir() else root
    if not (folder / "items.jsonl").is_file():
        raise FileNotFoundError(f"{root}: {stage}/items.jsonl not found")
    return folder


def _shape_error(path: Path, line: int, what: str, expected: str, rec: dict[str, Any]) -> ValueError:
    return ValueError(f"{path}:{line}: not a {what} record: expected {expected}; found fields {sorted(rec)}")


def _index_of(rec: dict[str, Any], path: Path, line: int, what: str, expected: str) -> int:
    for key in _INDEX_KEYS:
        if rec.get(key) is not None:
            try:
                return int(rec[key])
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{line}: {key} {rec[key]!r} is not an integer") from None
    raise _shape_error(path, line, what, expected, rec)


def _list_field(rec: dict[str, Any], key: str, path: Path, line: int, what: str, expected: str) -> list[Any]:
    value = rec.get(key)
    if not isinstance(value, list):
        raise _shape_error(path, line, what, expected, rec)
    return value


def _attr_text(value: Any, path: Path, line: int, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("attribute"), str):
        return value["attribute"]
    found = sorted(value) if isinstance(value, dict) else type(value).__name__
    raise ValueError(f"{path}:{line}: {what}: expected {{attribute, ...}}, found {found}")


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def _float_or_none(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{where}: expected a number, found {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{where}: expected a number, found {value!r}") from None


# ------------------------------------------------------------------------------------------ stage 1

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
    for line, rec in iter_jsonl(path):
        index = _index_of(rec, path, line, "stage-1 item", _S1_ITEM)
        for j, attr in enumerate(_list_field(rec, "merged_attributes", path, line, "stage-1 item", _S1_ITEM)):
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
        for line, rec in iter_jsonl(path):
            index = _index_of(rec, path, line, "stage-1 annotation", _S1_ANN)
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


# ------------------------------------------------------------------------------------------ stage 2


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
    rows = []
    path = folder / "items.jsonl"
    for line, rec in iter_jsonl(path):
        index = _index_of(rec, path, line, "stage-2 item", _S2_ITEM)
        attrs = _list_field(rec, "profile_attributes", path, line, "stage-2 item", _S2_ITEM)
        proposed = {_attr_text(a, path, line, "items[]") for a in rec.get("items") or []}
        for j, attr in enumerate(attrs):
            text = _attr_text(attr, path, line, f"profile_attributes[{j}]")
            rows.append(
                {
                    "item_index": index,
                    "prompt_index": rec.get("prompt_index"),
                    "prompt_text": rec.get("prompt_text"),
                    "user_id": rec.get("user_id"),
                    "attribute": text,
                    "ground_truth": attr.get("ground_truth") if isinstance(attr, dict) else None,
                    "coarse_filter": text in proposed,
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
    ann, missing = [], []
    for path in _files(folder / "annotations"):
        for line, rec in iter_jsonl(path):
            index = _index_of(rec, path, line, "stage-2 annotation", _S2_ANN)
            for judg in _list_field(rec, "relevance_judgments", path, line, "stage-2 annotation", _S2_ANN):
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
    jud = []
    for path in _files(folder / "llm_judgments"):
        for line, rec in iter_jsonl(path):
            index = _index_of(rec, path, line, "stage-2 LLM judgment", _S2_LLM)
            for judg in _list_field(rec, "items", path, line, "stage-2 LLM judgment", _S2_LLM):
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
    annotations = pd.DataFrame(ann, columns=["annotator", "item_index", "attribute", "label", "relevant"])
    judgments = pd.DataFrame(
        jud, columns=["model", "model_name", "item_index", "attribute", "relevant", "raw_answer"]
    )
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


def _unparsed(judgments: pd.DataFrame) -> list[tuple[str, int, str]]:
    bad = judgments[judgments["relevant"].isna()]
    return list(zip(bad["model"], bad["item_index"], bad["attribute"], strict=True))


_COVERAGE_COLUMNS = ["kind", "rater", "n_pairs", "n_rated", "n_unrated", "n_missing_label", "n_orphan"]


def _coverage(
    items: pd.DataFrame, families: list[tuple[str, pd.DataFrame, list[tuple[str, int, str]]]]
) -> pd.DataFrame:
    """How many of the items' (item, attribute) pairs each rater rated, and how many judgments match none."""
    pairs = set(zip(items["item_index"], items["attribute"], strict=True))
    rows = []
    for kind, frame, missing in families:
        rated_any: set[tuple[Any, str]] = set()
        raters = sorted(set(frame["rater"]) | {m[0] for m in missing})
        for rater in raters:
            part = frame[frame["rater"] == rater]
            keys = set(zip(part["item_index"], part["attribute"], strict=True))
            rated_any |= keys & pairs
            rows.append(
                {
                    "kind": kind,
                    "rater": rater,
                    "n_pairs": len(pairs),
                    "n_rated": len(keys & pairs),
                    "n_unrated": len(pairs - keys),
                    "n_missing_label": sum(1 for m in missing if m[0] == rater),
                    "n_orphan": len(keys - pairs),
                }
            )
        if raters:
            rows.append(
                {
                    "kind": kind,
                    "rater": f"{kind} (any)",
                    "n_pairs": len(pairs),
                    "n_rated": len(rated_any),
                    "n_unrated": len(pairs - rated_any),
                    "n_missing_label": len(missing),
                    "n_orphan": sum(r["n_orphan"] for r in rows if r["kind"] == kind),
                }
            )
    return pd.DataFrame(rows, columns=_COVERAGE_COLUMNS)


# ------------------------------------------------------------------------------------------ stage 3

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
        for line, rec in iter_jsonl(path):
            index = _index_of(rec, path, line, "stage-3 rating", _S3_RATING)
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
    for line, rec in iter_jsonl(path):
        index = _index_of(rec, path, line, "stage-3 item", _S3_ITEM)
        for j, attr in enumerate(_list_field(rec, "attributes", path, line, "stage-3 item", _S3_ITEM)):
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
