"""PersonaFeedback personas: reading either persona layout, rendering a record as text, comparing layouts.

* ``persona/<N>.json`` -- one JSON object per file, on one line or pretty-printed; ``N`` is the id the
  rows' ``user_id`` refers to (the layout of the commit that uploaded the data).
* ``persona/all_personas.jsonl`` -- one persona per line; a third-party loader uses the 1-based line
  number as the id (an explicit id field in every record, ``user_id``/``id``/``persona_id``, wins).

:func:`read_personas` picks the layout (``"auto"``: the per-persona files when present) and, when both
are present, compares them persona by persona.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit.related._common import iter_jsonl

logger = logging.getLogger(__name__)

__all__ = ["LINES_FILE", "PERSONA_SECTIONS", "read_personas", "render_persona"]

PERSONA_SECTIONS = ("Name", "Demographics", "Personality", "Preference", "Bias")
LINES_FILE = "persona/all_personas.jsonl"
_ID_FIELDS = ("user_id", "id", "persona_id")


def render_persona(record: dict[str, Any]) -> str:
    """Render a persona record as readable text: one section per heading, nested values indented.

    The known sections come first in the order ``Name, Demographics, Personality, Preference, Bias``;
    any other non-id field follows. A dict becomes ``- key: value`` lines (a nested dict or a list of
    dicts is indented one level further), a list of scalars ``- item`` lines inside a section and a
    comma-separated value below that; empty values are left out. The text depends only on the record,
    so a persona renders the same from ``persona/<N>.json`` and from ``all_personas.jsonl``.
    """
    keys = [k for k in PERSONA_SECTIONS if k in record]
    keys += [k for k in record if k not in PERSONA_SECTIONS and k not in _ID_FIELDS]
    return "\n".join(_render_section(k, record[k]) for k in keys if not _empty(record[k])).strip()


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


def _render_section(key: str, value: Any) -> str:
    if isinstance(value, dict | list):
        return "\n".join([f"{key}:", *_render_lines(value, depth=0)])
    return f"{key}: {_flat(value)}"


def _render_lines(value: dict[str, Any] | list[Any], *, depth: int) -> list[str]:
    """``- key: value`` lines; a dict nested in a dict is indented one level, anything else flattened."""
    pad = "  " * depth
    lines: list[str] = []
    items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    for sub, val in items:
        if _empty(val):
            continue
        if sub is not None and isinstance(val, dict):
            lines.append(f"{pad}- {sub}:")
            lines.extend(_render_lines(val, depth=depth + 1))
        elif sub is not None:
            lines.append(f"{pad}- {sub}: {_flat(val)}")
        else:
            lines.append(f"{pad}- {_flat(val)}")
    return lines


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_flat(v)}" for k, v in value.items() if not _empty(v))
    if isinstance(value, list):
        return ", ".join(_flat(v) for v in value if not _empty(v))
    return str(value).strip()


def _persona_key(value: Any) -> str:
    """Join keys compare as text so ``3``, ``"3"`` and ``3.0`` match."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def read_personas(
    root: Path, *, id_rule: str, layout: str
) -> tuple[pd.DataFrame, str, str, list[str], pd.DataFrame]:
    """The personas of a release folder under the chosen layout, and how the two layouts compare.

    Args:
        root: The release folder (holding ``persona/``).
        id_rule: ``"auto"``, ``"field"`` or ``"line"`` (how ``all_personas.jsonl`` records get ids).
        layout: ``"auto"``, ``"files"`` or ``"lines"``.

    Returns:
        ``(personas, id rule used, layout used, layouts found, layout disagreements)``; ``personas`` has
        ``persona_key, file, line, name, persona, record``.

    Raises:
        FileNotFoundError: If no persona file of the requested layout is found.
    """
    found = _persona_layouts(root)
    if not found:
        raise FileNotFoundError(f"{root}: no personas: neither persona/<N>.json files nor {LINES_FILE} found")
    use = ("files" if "files" in found else "lines") if layout == "auto" else layout
    if use not in found:
        want = "persona/<N>.json files" if use == "files" else LINES_FILE
        raise FileNotFoundError(f"{root}: layout={layout!r} but no {want} found (found: {found})")
    by_file = _read_persona_files(root) if "files" in found else None
    by_line, line_rule = _read_persona_lines(root, id_rule=id_rule) if "lines" in found else (None, "")
    personas, rule = (by_file, "file") if use == "files" else (by_line, line_rule)
    disagreements = (
        _compare_layouts(by_file, by_line)
        if by_file is not None and by_line is not None
        else _no_disagreement()
    )
    if len(disagreements):
        logger.warning(
            "%s and persona/<N>.json disagree on %d personas (%s); using the %s layout",
            LINES_FILE,
            len(disagreements),
            disagreements["problem"].value_counts().to_dict(),
            use,
        )
    return personas, rule, use, found, disagreements


_PERSONA_COLUMNS = ["persona_key", "file", "line", "name", "persona", "record"]


def _persona_files(root: Path) -> list[Path]:
    folder = root / "persona"
    return (
        sorted((p for p in folder.glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
        if folder.is_dir()
        else []
    )


def _persona_layouts(root: Path) -> list[str]:
    found = []
    if _persona_files(root):
        found.append("files")
    if (root / LINES_FILE).is_file():
        found.append("lines")
    return found


def _persona_row(key: str, rec: Any, *, path: Path, line: int, root: Path) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise ValueError(f"{path}:{line}: expected a persona object, found {type(rec).__name__}")
    known = [k for k in rec if k in PERSONA_SECTIONS]
    if not known:
        raise ValueError(
            f"{path}:{line}: not a persona record: expected sections {list(PERSONA_SECTIONS)}, "
            f"found fields {sorted(rec)}"
        )
    return {
        "persona_key": key,
        "file": str(path.relative_to(root)),
        "line": line,
        "name": _flat(rec.get("Name", "")),
        "persona": render_persona(rec),
        "record": rec,
    }


def _read_persona_files(root: Path) -> pd.DataFrame:
    """``persona/<N>.json``: one JSON object per file (one line or pretty-printed); the id is ``N``."""
    others = sorted(p.name for p in (root / "persona").glob("*.json") if not p.stem.isdigit())
    if others:
        logger.warning(
            "persona/: ignoring %d .json files whose names are not ids: %s", len(others), others[:5]
        )
    rows = []
    for path in _persona_files(root):
        text = path.read_text(encoding="utf-8")
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: not one JSON object ({exc.msg})") from exc
        key = str(int(path.stem))
        for name in _ID_FIELDS:
            if isinstance(rec, dict) and rec.get(name) is not None and _persona_key(rec[name]) != key:
                raise ValueError(f"{path}:1: {name} {rec[name]!r} but the file name says the id is {key}")
        rows.append(_persona_row(key, rec, path=path, line=1, root=root))
    frame = pd.DataFrame(rows, columns=_PERSONA_COLUMNS)
    dupes = frame["file"][frame["persona_key"].duplicated(keep=False)].tolist()
    if dupes:
        raise ValueError(f"{root / 'persona'}: files name the same id: {dupes[:10]}")
    return frame


def _read_persona_lines(root: Path, *, id_rule: str) -> tuple[pd.DataFrame, str]:
    path = root / LINES_FILE
    records = list(iter_jsonl(path))
    id_field = next((f for f in _ID_FIELDS if records and all(f in r for _, r in records)), None)
    if id_rule == "field" and id_field is None:
        raise ValueError(f"{path}: id_rule='field' but no id field {list(_ID_FIELDS)} is in every record")
    use_field = id_field is not None and id_rule != "line"
    rule = f"field:{id_field}" if use_field else "line"
    rows = []
    for number, (line, rec) in enumerate(records, start=1):
        key = _persona_key(rec[id_field]) if use_field else str(number)
        rows.append(_persona_row(key, rec, path=path, line=line, root=root))
    frame = pd.DataFrame(rows, columns=_PERSONA_COLUMNS)
    dupes = frame["persona_key"][frame["persona_key"].duplicated()].unique()
    if len(dupes):
        raise ValueError(f"{path}: duplicate persona ids under rule {rule}: {list(dupes)[:10]}")
    return frame, rule


def _canonical(rec: dict[str, Any]) -> str:
    return json.dumps(
        {k: v for k, v in rec.items() if k not in _ID_FIELDS}, sort_keys=True, ensure_ascii=False
    )


def _no_disagreement() -> pd.DataFrame:
    return pd.DataFrame(columns=["persona_key", "problem", "file", "line"])


def _compare_layouts(by_file: pd.DataFrame, by_line: pd.DataFrame) -> pd.DataFrame:
    """Personas on which ``persona/<N>.json`` and ``all_personas.jsonl`` disagree (id, then content)."""
    files = by_file.set_index("persona_key")
    lines = by_line.set_index("persona_key")
    rows = []
    for key in sorted(set(files.index) | set(lines.index), key=lambda k: (len(k), k)):
        if key not in lines.index:
            rows.append((key, "only_in_files", files.at[key, "file"], pd.NA))
        elif key not in files.index:
            rows.append((key, "only_in_lines", lines.at[key, "file"], lines.at[key, "line"]))
        elif _canonical(files.at[key, "record"]) != _canonical(lines.at[key, "record"]):
            rows.append((key, "different", files.at[key, "file"], lines.at[key, "line"]))
    return (
        pd.DataFrame(rows, columns=["persona_key", "problem", "file", "line"]) if rows else _no_disagreement()
    )
