"""PersonaFeedback (PersonalAILab/PersonaFeedback): loader, pairwise LLM judge, PV4-style scoring.

The release holds ``data/{general,spedific}/{easy,medium,hard}.jsonl`` (the ``spedific`` folder name is
misspelled in the release; ``specific`` is accepted too) with rows ``{user_id, question, chosen,
reject}``, and the personas (sections ``Name``, ``Demographics``, ``Personality``, ``Preference``,
``Bias``; the sections hold nested dicts and lists) in one of two layouts:

* ``persona/<N>.json`` -- one JSON object per file, on one line or pretty-printed; ``N`` is the id the
  rows' ``user_id`` refers to. This is the layout of the commit that uploaded the data.
* ``persona/all_personas.jsonl`` -- one persona per line; a third-party loader uses the 1-based line
  number as the id (an explicit id field in every record, ``user_id``/``id``/``persona_id``, wins).

``layout="auto"`` reads whichever is present; when both are, the per-persona files are used and the
two are compared persona by persona (:attr:`PersonaFeedbackData.layout_disagreements`). Rows that join
no persona keep ``persona = NA`` (:attr:`PersonaFeedbackData.unjoined`); personas that no row uses are
in :attr:`PersonaFeedbackData.unused_personas`; :attr:`PersonaFeedbackData.counts` counts rows per set
and tier (the paper reports 8,298 cases in all, :data:`PAPER_TOTAL`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.related._common import accuracy_table, encode, iter_jsonl, resolve_source

logger = logging.getLogger(__name__)

__all__ = [
    "HUB_ID",
    "JUDGE_PROMPT_VERSION",
    "PersonaFeedbackData",
    "build_judge_messages",
    "generate_answers",
    "generation_messages",
    "judge_accuracy",
    "judge_pairs",
    "judge_requests",
    "load_personafeedback",
    "parse_judge_reply",
    "position_bias",
    "pv4_score",
    "pv4_score_accuracy",
    "render_persona",
]

HUB_ID = "PersonalAILab/PersonaFeedback"
SETS = {"general": "general", "specific": "specific", "spedific": "specific"}
TIERS = ("easy", "medium", "hard")
PERSONA_SECTIONS = ("Name", "Demographics", "Personality", "Preference", "Bias")
PAPER_TOTAL = 8298  # cases reported in the PersonaFeedback paper
LINES_FILE = "persona/all_personas.jsonl"
_ID_FIELDS = ("user_id", "id", "persona_id")
PAIR_COLUMNS = ["set", "tier", "user_id", "persona", "question", "chosen", "rejected", "pair_id", "line"]

JUDGE_PROMPT_VERSION = "pf_judge/v1"
JUDGE_SYSTEM = (
    "You judge which of two assistant responses is better personalised to a specific user. "
    "Consider the user's persona and question; prefer the response that fits this user while "
    "remaining helpful. Reply with exactly one letter: A or B."
)
JUDGE_TEMPLATE = (
    "# User persona\n{persona}\n\n# The user's question\n{question}\n\n"
    "# Response A\n{response_a}\n\n# Response B\n{response_b}\n\n"
    "Which response is better personalised for this user? Answer with a single letter, A or B."
)
GENERATE_PROMPT_VERSION = "pf_generate/v1"
GENERATE_SYSTEM = "You are a helpful assistant. Tailor your answer to the user described below."


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
    if id_rule not in ("auto", "field", "line"):
        raise ValueError(f"id_rule must be 'auto', 'field' or 'line', got {id_rule!r}")
    if layout not in ("auto", "files", "lines"):
        raise ValueError(f"layout must be 'auto', 'files' or 'lines', got {layout!r}")
    for name, given, allowed in (("sets", sets, ("general", "specific")), ("tiers", tiers, TIERS)):
        bad = sorted(set(given or ()) - set(allowed))
        if bad:
            raise ValueError(f"{name}: unknown values {bad}; allowed: {list(allowed)}")
    root = resolve_source(source, repo_id=HUB_ID)
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
    pairs = pd.DataFrame(rows, columns=[c for c in PAIR_COLUMNS if c != "persona"])
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
    counts = _counts(pairs)
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
        counts=counts,
        unused_personas=unused,
        layout_disagreements=disagreements,
    )


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


# ---------------------------------------------------------------------------------------------- judge


def build_judge_messages(
    persona: str, question: str, response_a: str, response_b: str
) -> list[dict[str, str]]:
    """The chat messages asking a judge which of two responses is better personalised (pure)."""
    user = JUDGE_TEMPLATE.format(
        persona=persona, question=question, response_a=response_a, response_b=response_b
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def _chosen_first(seed: int, pair_id: str) -> bool:
    """Seeded, per-pair coin: the same pair gets the same position whatever else is in the frame."""
    return hashlib.sha256(f"{seed}:{pair_id}".encode()).digest()[0] % 2 == 0


def judge_requests(pairs: pd.DataFrame, *, seed: int = 0, both_orders: bool = False) -> pd.DataFrame:
    """One judge request per pair (two with ``both_orders``), with the chosen response's position.

    Args:
        pairs: A pairs frame (``pair_id, persona, question, chosen, rejected`` at least; ``set``,
            ``tier``, ``user_id`` are carried along when present). Rows without a persona are skipped.
        seed: Seed of the per-pair position coin (order ``"random"``).
        both_orders: Ask each pair twice, chosen as A (order ``"chosen_A"``) and as B (``"chosen_B"``).

    Returns:
        Frame with the carried columns plus ``order``, ``chosen_position`` (``"A"``/``"B"``) and
        ``messages``.
    """
    missing = {"pair_id", "persona", "question", "chosen", "rejected"} - set(pairs.columns)
    if missing:
        raise ValueError(f"pairs: missing columns {sorted(missing)}")
    usable = pairs[pairs["persona"].notna()]
    if len(usable) < len(pairs):
        logger.warning("skipping %d pairs without a persona", len(pairs) - len(usable))
    carried = [c for c in ("set", "tier", "user_id", "pair_id") if c in pairs.columns]
    rows = []
    for rec in usable.to_dict("records"):
        if both_orders:
            orders = [("chosen_A", "A"), ("chosen_B", "B")]
        else:
            orders = [("random", "A" if _chosen_first(seed, str(rec["pair_id"])) else "B")]
        for order, pos in orders:
            a, b = (rec["chosen"], rec["rejected"]) if pos == "A" else (rec["rejected"], rec["chosen"])
            rows.append(
                {
                    **{c: rec[c] for c in carried},
                    "order": order,
                    "chosen_position": pos,
                    "messages": build_judge_messages(rec["persona"], rec["question"], a, b),
                }
            )
    return pd.DataFrame(rows, columns=[*carried, "order", "chosen_position", "messages"])


_REPLY = re.compile(
    r"^(?:(?:final\s+)?(?:answer|choice|verdict)\s*[:\-]?\s*)?(?:response\s+)?"
    r"[\(\[\"'*`]*([AB])[\)\]\"'*`]*\.?$",
    re.IGNORECASE,
)


def parse_judge_reply(text: str | None) -> str | None:
    """Parse a judge reply strictly: ``"A"``/``"B"`` or ``None``.

    Accepted: the bare letter, optionally in brackets/quotes/bold with a final period, optionally after
    ``Answer:``/``Final answer:``/``Choice:`` and ``Response``. The letter must be upper case. Anything
    else (prose, both letters, empty) is ``None`` -- and counts as wrong, never as right.
    """
    if text is None:
        return None
    stripped = text.strip()
    match = _REPLY.match(stripped)
    if not match or match.group(1) not in ("A", "B"):
        return None
    return match.group(1)


def _complete(
    messages: list[Any],
    *,
    config: Any,
    cache: Any,
    step: str,
    progress: bool,
    client: Any,
    complete_fn: Callable[..., Any] | None,
) -> list[Any]:
    if complete_fn is None:
        from pv4kit.llm.client import complete as complete_fn
    return list(
        complete_fn(messages, config=config, cache=cache, step=step, progress=progress, client=client)
    )


def judge_pairs(
    pairs: pd.DataFrame,
    *,
    config: Any,
    cache: Any = None,
    seed: int = 0,
    both_orders: bool = False,
    client: Any = None,
    complete_fn: Callable[..., Any] | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Ask an LLM judge to pick the better-personalised response of each pair.

    Args:
        pairs: A pairs frame (see :func:`judge_requests`); PV4 pairs from
            :func:`pv4kit.related.pv4_pairs.pv4_pairs` work unchanged.
        config: A ``pv4kit.llm.client.LLMConfig``.
        cache: The ``pv4kit.llm.client`` response cache (path or ``None``).
        seed: Position seed.
        both_orders: Ask both ways to measure position bias.
        client: Passed to ``pv4kit.llm.client.complete``.
        complete_fn: A function with ``pv4kit.llm.client.complete``'s signature (tests inject a fake).
        progress: Show a progress bar.

    Returns:
        One row per request: carried columns, ``order``, ``chosen_position``, ``reply``, ``parsed``
        (``"A"``/``"B"``/None), ``unparsed`` (bool), ``error`` (str or None), ``correct`` (bool;
        False whenever unparsed or errored), ``cached``.
    """
    requests = judge_requests(pairs, seed=seed, both_orders=both_orders)
    responses = _complete(
        requests["messages"].tolist(),
        config=config,
        cache=cache,
        step="pf_judge",
        progress=progress,
        client=client,
        complete_fn=complete_fn,
    )
    out = requests.drop(columns=["messages"])
    out["reply"] = [getattr(r, "text", None) for r in responses]
    out["error"] = [getattr(r, "error", None) for r in responses]
    out["cached"] = [bool(getattr(r, "cached", False)) for r in responses]
    out["parsed"] = [
        parse_judge_reply(t) if e is None else None for t, e in zip(out["reply"], out["error"], strict=True)
    ]
    out["unparsed"] = out["parsed"].isna() & out["error"].isna()
    out["correct"] = (out["parsed"] == out["chosen_position"]).fillna(False).astype(bool)
    n_bad = int(out["unparsed"].sum())
    if n_bad:
        logger.warning("%d of %d judge replies could not be parsed; counted as wrong", n_bad, len(out))
    return out


def judge_accuracy(
    predictions: pd.DataFrame, *, confidence: float = 0.95, interval: str = "wilson"
) -> pd.DataFrame:
    """Judge accuracy per order x set x tier with intervals, chance 0.5, counts of unparsed/errors.

    Args:
        predictions: From :func:`judge_pairs`.
        confidence: Interval level.
        interval: ``"wilson"`` or ``"bootstrap"`` (resampling ``user_id``, i.e. personas).

    Returns:
        ``order, set, tier, n, n_correct, accuracy, ci_low, ci_high, chance, unparsed, errored``.
    """
    frame = predictions.assign(errored=predictions["error"].notna())
    return accuracy_table(
        frame,
        by=["set", "tier"],
        outer=["order"],
        extra_counts=["unparsed", "errored"],
        confidence=confidence,
        interval=interval,
    )


def position_bias(predictions: pd.DataFrame) -> pd.DataFrame:
    """Position bias from a ``both_orders`` run, per set and overall.

    Returns:
        Frame ``set, n_pairs, acc_chosen_A, acc_chosen_B, bias`` (A minus B), ``share_pick_A`` and
        ``consistent`` (share of pairs where both orders picked the same response).
    """
    both = predictions[predictions["order"].isin(["chosen_A", "chosen_B"])]
    if both.empty:
        raise ValueError("predictions: position bias needs a run with both_orders=True")
    wide = both.pivot_table(index=["set", "pair_id"], columns="order", values="correct", aggfunc="first")
    picks = both.pivot_table(index=["set", "pair_id"], columns="order", values="parsed", aggfunc="first")
    wide = wide.dropna().astype(bool)
    rows = []
    for key, part in [*wide.groupby(level="set"), ("all", wide)]:
        ids = part.index
        p = picks.loc[ids]
        acc_a, acc_b = float(part["chosen_A"].mean()), float(part["chosen_B"].mean())
        rows.append(
            {
                "set": key,
                "n_pairs": len(part),
                "acc_chosen_A": acc_a,
                "acc_chosen_B": acc_b,
                "bias": acc_a - acc_b,
                "share_pick_A": float((p == "A").to_numpy().mean()),
                "consistent": float((part["chosen_A"] == part["chosen_B"]).mean()),
            }
        )
    return pd.DataFrame(rows)


# -------------------------------------------------------------------------------- PV4-style scoring


def generation_messages(persona: str, question: str) -> list[dict[str, str]]:
    """Messages asking a model for a personalised answer given the persona (pure)."""
    return [
        {"role": "system", "content": GENERATE_SYSTEM},
        {"role": "user", "content": f"About me:\n{persona}\n\nMy question: {question}"},
    ]


def generate_answers(
    pairs: pd.DataFrame,
    *,
    config: Any,
    cache: Any = None,
    client: Any = None,
    complete_fn: Callable[..., Any] | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Generate one personalised answer per pair; returns ``pair_id, generation, error``."""
    usable = pairs[pairs["persona"].notna()]
    messages = [generation_messages(p, q) for p, q in zip(usable["persona"], usable["question"], strict=True)]
    responses = _complete(
        messages,
        config=config,
        cache=cache,
        step="pf_generate",
        progress=progress,
        client=client,
        complete_fn=complete_fn,
    )
    return pd.DataFrame(
        {
            "pair_id": usable["pair_id"].to_numpy(),
            "generation": [getattr(r, "text", None) for r in responses],
            "error": [getattr(r, "error", None) for r in responses],
        }
    )


def pv4_score(
    pairs: pd.DataFrame,
    generations: pd.DataFrame,
    *,
    embedder: Any = None,
    cache: Any = True,
) -> pd.DataFrame:
    """PV4's scoring rule on PersonaFeedback: right when the generation is nearer ``chosen``.

    Cosine similarity under the embedder; a tie, an empty generation or a generation error counts as
    wrong (``failed`` marks the latter two).

    Args:
        pairs: The pairs frame.
        generations: ``pair_id, generation`` (and optionally ``error``), e.g. from
            :func:`generate_answers`.
        embedder: See :func:`pv4kit.related._common.encode`.
        cache: Embedding cache, passed to ``pv4kit.embeddings.models.embed_texts``.

    Returns:
        One row per pair with a generation: ``set, tier, pair_id, sim_chosen, sim_rejected, margin,
        failed, correct``.
    """
    merged = pairs.merge(generations, on="pair_id", how="inner", validate="one_to_one")
    if "error" not in merged.columns:
        merged["error"] = None
    gen = merged["generation"].fillna("").astype(str)
    failed = (gen.str.strip() == "") | merged["error"].notna()
    texts = pd.concat([gen, merged["chosen"], merged["rejected"]]).tolist()
    vectors = encode(texts, embedder=embedder, cache=cache)
    n = len(merged)
    g, c, r = vectors[:n], vectors[n : 2 * n], vectors[2 * n :]
    sim_c, sim_r = np.einsum("ij,ij->i", g, c), np.einsum("ij,ij->i", g, r)
    out = merged[[c for c in ("set", "tier", "user_id", "pair_id") if c in merged.columns]].copy()
    out["sim_chosen"], out["sim_rejected"] = sim_c.astype(float), sim_r.astype(float)
    out["margin"] = out["sim_chosen"] - out["sim_rejected"]
    out["failed"] = failed.to_numpy()
    out["correct"] = (out["margin"] > 0) & ~out["failed"]
    return out.reset_index(drop=True)


def pv4_score_accuracy(
    scores: pd.DataFrame, *, confidence: float = 0.95, interval: str = "wilson"
) -> pd.DataFrame:
    """Accuracy of :func:`pv4_score` per set x tier with intervals and the count of failed generations."""
    return accuracy_table(scores, extra_counts=["failed"], confidence=confidence, interval=interval)
