"""Reading the Re-Centering release: the stage folders, record checks that name file and line, coverage.

The helpers every stage loader of :mod:`pv4kit.related.recenter` shares. A record of another shape
raises a ``ValueError`` naming the file, the line, what was expected and the fields found.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit.related._common import iter_jsonl, resolve_source

__all__ = ["HUB_ID"]

HUB_ID = "leczhang/recenter-personalization"
_INDEX_KEYS = ("item_index", "index", "sample_index")


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


def _records(path: Path, what: str, expected: str) -> Iterator[tuple[int, dict[str, Any], int]]:
    """``(line, record, item index)`` of every record of ``path``: one record per item in a file.

    Raises:
        ValueError: A second record for an item, naming the file and both lines (after the caller's own
            checks of that record, so a malformed record is named as such first).
    """
    first: dict[int, int] = {}
    for line, rec in iter_jsonl(path):
        index = _index_of(rec, path, line, what, expected)
        yield line, rec, index
        if index in first:
            raise ValueError(
                f"{path}:{line}: a second {what} record for item {index} (the first is line {first[index]}); "
                "expected one record per item in a file: remove or merge one of them"
            )
        first[index] = line


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


def _entries(
    path: Path, *, key: str, what: str, expected: str
) -> Iterator[tuple[int, dict[str, Any], int, int, Any]]:
    """``(line, record, item index, position, entry)`` for every entry of each record's list ``key``.

    The items' attributes, an annotator's judgments or an LLM's: every record must carry an item index
    and a list under ``key`` (else a ``ValueError`` naming the file, line and fields found).
    """
    for line, rec, index in _records(path, what, expected):
        for j, attr in enumerate(_list_field(rec, key, path, line, what, expected)):
            yield line, rec, index, j, attr


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
