"""PersonaFeedback's cases: the tier files read into one tidy frame and joined to the personas.

The release holds ``data/{general,spedific}/{easy,medium,hard}.jsonl`` (the ``spedific`` folder name is
misspelled in the release; ``specific`` is accepted too) with rows ``{user_id, question, chosen,
reject}``; the personas come from :mod:`pv4kit.related.personafeedback.personas`. Rows that join no
persona keep ``persona = NA`` (:attr:`PersonaFeedbackData.unjoined`); personas that no row uses are in
:attr:`PersonaFeedbackData.unused_personas`; :attr:`PersonaFeedbackData.counts` counts rows per set and
tier (the paper reports 8,298 cases in all, :data:`PAPER_TOTAL`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit.related._common import iter_jsonl, resolve_source
from pv4kit.related.personafeedback.personas import _persona_key, read_personas

logger = logging.getLogger(__name__)

__all__ = [
    "HUB_ID",
    "PAIR_COLUMNS",
    "PAPER_TOTAL",
    "SETS",
    "TIERS",
    "PersonaFeedbackData",
    "head_per_group",
    "load_personafeedback",
]

HUB_ID = "PersonalAILab/PersonaFeedback"
SETS = {"general": "general", "specific": "specific", "spedific": "specific"}
TIERS = ("easy", "medium", "hard")
PAPER_TOTAL = 8298  # cases reported in the PersonaFeedback paper
PAIR_COLUMNS = ["set", "tier", "user_id", "persona", "question", "chosen", "rejected", "pair_id", "line"]


@dataclass
class PersonaFeedbackData:
    """A loaded PersonaFeedback release.

    Attributes:
        pairs: One row per case: ``set`` (general | specific), ``tier`` (easy | medium | hard),
            ``user_id``, ``persona`` (rendered text, NA when the join failed), ``question``, ``chosen``,
            ``rejected``, ``pair_id`` (``"<set>/<tier>/<line>"``), ``line`` (1-based in its file).
        personas: One row per persona record: ``persona_key`` (the join key), ``line``, ``name``,
            ``persona`` (rendered text).
        unjoined: The rows of ``pairs`` whose ``user_id`` matched no persona.
        id_rule: The join rule used: ``"file"`` (ids from ``persona/<N>.json`` names),
            ``"field:<name>"`` or ``"line"``.
        source: The folder read.
        files: The tier files read (relative paths).
        layout: The persona layout used: ``"files"`` or ``"lines"``.
        layouts_found: The layouts present in the folder.
        counts: Rows per ``set, tier`` (``n_rows, n_joined, n_unjoined``) plus an ``all, all`` row.
        unused_personas: The rows of ``personas`` that no case refers to.
        layout_disagreements: When both layouts are present, one row per persona on which they
            disagree: ``persona_key``, ``problem`` (``only_in_files``, ``only_in_lines``,
            ``different``), ``file``, ``line``; empty when they agree or only one is present.
    """

    pairs: pd.DataFrame
    personas: pd.DataFrame
    unjoined: pd.DataFrame
    id_rule: str
    source: str
    files: list[str] = field(default_factory=list)
    layout: str = "lines"
    layouts_found: list[str] = field(default_factory=list)
    counts: pd.DataFrame = field(default_factory=pd.DataFrame)
    unused_personas: pd.DataFrame = field(default_factory=pd.DataFrame)
    layout_disagreements: pd.DataFrame = field(default_factory=pd.DataFrame)


def load_personafeedback(
    source: str | os.PathLike[str] = HUB_ID,
    *,
    id_rule: str = "auto",
    layout: str = "auto",
    sets: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
) -> PersonaFeedbackData:
    """Load PersonaFeedback from a local download or the hub id into one tidy frame.

    Args:
        source: A folder with ``data/`` and ``persona/`` or the hub id ``PersonalAILab/PersonaFeedback``
            (downloaded lazily with ``huggingface_hub.snapshot_download``).
        id_rule: How ``user_id`` joins a persona of ``all_personas.jsonl``: ``"auto"``, ``"field"``
            (an id field in every persona record) or ``"line"`` (1-based line number). The
            per-persona layout always takes the id from the file name.
        layout: ``"auto"`` (per-persona files when present, else ``all_personas.jsonl``; both are
            compared when both are present), ``"files"`` or ``"lines"``.
        sets: Keep only these sets (``"general"``, ``"specific"``).
        tiers: Keep only these tiers (``"easy"``, ``"medium"``, ``"hard"``).

    Returns:
        A :class:`PersonaFeedbackData`; unjoined rows, unused personas and layout disagreements are
        logged as warnings.

    Raises:
        FileNotFoundError: If no tier file or no persona file of the requested layout is found.
        ValueError: On a bad option, a row missing a required field, a persona file that is not one
            JSON object, or duplicate persona ids.
    """
    _check_options(id_rule=id_rule, layout=layout, sets=sets, tiers=tiers)
    root = resolve_source(source, repo_id=HUB_ID)
    personas, rule, use, found, disagreements = read_personas(root, id_rule=id_rule, layout=layout)
    pairs, files = _read_pairs(root, sets=sets, tiers=tiers)
    pairs, unjoined, unused = _join(pairs, personas, rule=rule)
    if not sets and not tiers and len(pairs) != PAPER_TOTAL:
        logger.info("%d PersonaFeedback rows; the paper reports %d cases", len(pairs), PAPER_TOTAL)
    logger.info(
        "loaded %d PersonaFeedback pairs from %d files, %d personas (%s layout)",
        len(pairs),
        len(files),
        len(personas),
        use,
    )
    return PersonaFeedbackData(
        pairs=pairs,
        personas=personas,
        unjoined=unjoined,
        id_rule=rule,
        source=str(root),
        files=files,
        layout=use,
        layouts_found=found,
        counts=_counts(pairs),
        unused_personas=unused,
        layout_disagreements=disagreements,
    )


def _check_options(
    *, id_rule: str, layout: str, sets: Sequence[str] | None, tiers: Sequence[str] | None
) -> None:
    if id_rule not in ("auto", "field", "line"):
        raise ValueError(f"id_rule must be 'auto', 'field' or 'line', got {id_rule!r}")
    if layout not in ("auto", "files", "lines"):
        raise ValueError(f"layout must be 'auto', 'files' or 'lines', got {layout!r}")
    for name, given, allowed in (("sets", sets, ("general", "specific")), ("tiers", tiers, TIERS)):
        bad = sorted(set(given or ()) - set(allowed))
        if bad:
            raise ValueError(f"{name}: unknown values {bad}; allowed: {list(allowed)}")


def _read_pairs(
    root: Path, *, sets: Sequence[str] | None, tiers: Sequence[str] | None
) -> tuple[pd.DataFrame, list[str]]:
    """The cases of the selected tier files (without personas) and the files read."""
    rows, files = [], []
    for folder in sorted(SETS):
        set_name = SETS[folder]
        if sets and set_name not in sets:
            continue
        for tier in TIERS:
            if tiers and tier not in tiers:
                continue
            path = root / "data" / folder / f"{tier}.jsonl"
            if not path.is_file():
                continue
            files.append(str(path.relative_to(root)))
            for line, rec in iter_jsonl(path):
                rows.append(_pair_row(rec, path=path, line=line, set_name=set_name, tier=tier))
    if not files:
        raise FileNotFoundError(
            f"{root}: no data/{{general,spedific,specific}}/{{easy,medium,hard}}.jsonl files found"
        )
    return pd.DataFrame(rows, columns=[c for c in PAIR_COLUMNS if c != "persona"]), files


def _join(
    pairs: pd.DataFrame, personas: pd.DataFrame, *, rule: str
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``pairs`` with the rendered ``persona`` column, the unjoined rows and the unused personas."""
    lookup = dict(zip(personas["persona_key"], personas["persona"], strict=True))
    pairs.insert(3, "persona", pairs["user_id"].map(lambda u: lookup.get(_persona_key(u), pd.NA)))
    pairs["persona"] = pairs["persona"].astype(object)
    unjoined = pairs[pairs["persona"].isna()].reset_index(drop=True)
    unused = personas[~personas["persona_key"].isin(set(pairs["user_id"]))].reset_index(drop=True)
    if len(unjoined):
        logger.warning(
            "%d of %d PersonaFeedback rows match no persona under rule %s (user_ids %s)",
            len(unjoined),
            len(pairs),
            rule,
            sorted(unjoined["user_id"].astype(str).unique())[:10],
        )
    if len(unused):
        logger.warning("%d of %d personas are used by no row", len(unused), len(personas))
    return pairs, unjoined, unused


def head_per_group(pairs: pd.DataFrame, limit: int) -> pd.DataFrame:
    """At most ``limit`` pairs per ``set`` x ``tier`` (in file order); ``limit=0`` keeps every pair."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0 (0: all), got {limit}")
    return pairs.groupby(["set", "tier"], sort=False).head(limit) if limit else pairs


def _counts(pairs: pd.DataFrame) -> pd.DataFrame:
    """Rows per set and tier (in the order general, specific x easy, medium, hard) and in all."""
    joined = pairs["persona"].notna()
    rows = []
    for (set_name, tier), part in pairs.groupby(["set", "tier"], sort=False):
        rows.append((set_name, tier, len(part), int(joined[part.index].sum())))
    rows.append(("all", "all", len(pairs), int(joined.sum())))
    out = pd.DataFrame(rows, columns=["set", "tier", "n_rows", "n_joined"])
    out["n_unjoined"] = out["n_rows"] - out["n_joined"]
    return out


def _pair_row(rec: dict[str, Any], *, path: Path, line: int, set_name: str, tier: str) -> dict[str, Any]:
    rejected = rec.get("reject", rec.get("rejected"))
    for name, value in (
        ("user_id", rec.get("user_id")),
        ("question", rec.get("question")),
        ("chosen", rec.get("chosen")),
        ("reject", rejected),
    ):
        if value is None:
            raise ValueError(
                f"{path}:{line}: missing field {name!r}; expected a case {{user_id, question, chosen, "
                f"reject}}, found fields {sorted(rec)}"
            )
    return {
        "set": set_name,
        "tier": tier,
        "user_id": _persona_key(rec["user_id"]),
        "question": str(rec["question"]),
        "chosen": str(rec["chosen"]),
        "rejected": str(rejected),
        "pair_id": f"{set_name}/{tier}/{line}",
        "line": line,
    }
