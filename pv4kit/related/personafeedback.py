"""PersonaFeedback (PersonalAILab/PersonaFeedback): loader, pairwise LLM judge, PV4-style scoring.

The release holds ``data/{general,spedific}/{easy,medium,hard}.jsonl`` (``specific`` accepted too) with rows
``{user_id, question, chosen, reject}``, and personas as ``persona/<N>.json`` and/or
``persona/all_personas.jsonl`` (see :func:`read_personas`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import iter_jsonl
from pv4kit.llm.client import complete
from pv4kit.related._common import accuracy_table, check_choice, encode, resolve_source

logger = logging.getLogger(__name__)

HUB_ID = "PersonalAILab/PersonaFeedback"
SETS = {"general": "general", "specific": "specific", "spedific": "specific"}
TIERS = ("easy", "medium", "hard")
PAPER_TOTAL = 8298  # cases reported in the PersonaFeedback paper
PAIR_COLUMNS = ["set", "tier", "user_id", "persona", "question", "chosen", "rejected", "pair_id", "line"]
PERSONA_SECTIONS = ("Name", "Demographics", "Personality", "Preference", "Bias")
LINES_FILE = "persona/all_personas.jsonl"
_ID_FIELDS = ("user_id", "id", "persona_id")
ID_RULES = ("auto", "field", "line")  # how all_personas.jsonl records get their ids
LAYOUTS = ("auto", "files", "lines")

# ------------------------------------------------------------------------------------------- personas


def render_persona(record: dict[str, Any]) -> str:
    """Render a persona record as text: one section per heading, nested values indented.

    ``PERSONA_SECTIONS`` come first, then any other non-id field. A dict becomes ``- key: value`` lines (a
    nested dict one level deeper), a list ``- item`` lines, deeper values are joined; empty values are
    left out; both layouts render a persona the same.
    """
    keys = [k for k in PERSONA_SECTIONS if k in record]
    keys += [k for k in record if k not in PERSONA_SECTIONS and k not in _ID_FIELDS]
    sections = [
        "\n".join([f"{k}:", *_render_lines(v, 0)]) if isinstance(v, dict | list) else f"{k}: {_flat(v)}"
        for k, v in ((k, record[k]) for k in keys)
        if not _empty(v)
    ]
    return "\n".join(sections).strip()


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


def _render_lines(value: dict[str, Any] | list[Any], depth: int) -> list[str]:
    pad, lines = "  " * depth, []
    items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    for sub, val in items:
        if _empty(val):
            continue
        if sub is not None and isinstance(val, dict):
            lines += [f"{pad}- {sub}:", *_render_lines(val, depth + 1)]
        else:
            lines.append(f"{pad}- {_flat(val)}" if sub is None else f"{pad}- {sub}: {_flat(val)}")
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
    """The personas of the release folder ``root`` and how the two layouts compare.

    ``layout``: ``"auto"`` (the per-persona files when present), ``"files"`` or ``"lines"``; ``id_rule``:
    ``"auto"``, ``"field"`` or ``"line"``, how ``all_personas.jsonl`` records get ids. Returns ``(personas, id
    rule used, layout used, layouts found, disagreements)``: ``persona_key, file, line, name, persona,
    record`` and ``persona_key, problem, file, line``.
    """
    files = sorted(
        (p for p in (root / "persona").glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem)
    )
    found = [name for name, there in (("files", files), ("lines", (root / LINES_FILE).is_file())) if there]
    if not found:
        raise FileNotFoundError(f"{root}: no personas: neither persona/<N>.json files nor {LINES_FILE} found")
    use = found[0] if layout == "auto" else layout  # auto: the per-persona files when present
    if use not in found:
        want = "persona/<N>.json files" if use == "files" else LINES_FILE
        raise FileNotFoundError(f"{root}: layout={layout!r} but no {want} found (found: {found})")
    read = {name: _read_layout(root, name, files, id_rule) for name in found}
    personas, rule = read[use]
    rows = []
    if len(read) == 2:
        by_file, by_line = (read[name][0].set_index("persona_key") for name in ("files", "lines"))
        for key in sorted(set(by_file.index) | set(by_line.index), key=lambda k: (len(k), k)):
            if key not in by_line.index:
                rows.append((key, "only_in_files", by_file.at[key, "file"], pd.NA))
            elif key not in by_file.index:
                rows.append((key, "only_in_lines", by_line.at[key, "file"], by_line.at[key, "line"]))
            elif _canonical(by_file.at[key, "record"]) != _canonical(by_line.at[key, "record"]):
                rows.append((key, "different", by_file.at[key, "file"], by_line.at[key, "line"]))
    disagreements = pd.DataFrame(rows, columns=["persona_key", "problem", "file", "line"])
    if rows:
        problems = disagreements["problem"].value_counts().to_dict()
        msg = "%s and persona/<N>.json disagree on %d personas (%s); using the %s layout"
        logger.warning(msg, LINES_FILE, len(rows), problems, use)
    return personas, rule, use, found, disagreements


def _canonical(rec: dict[str, Any]) -> str:
    content = {k: v for k, v in rec.items() if k not in _ID_FIELDS}
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


def _persona_row(key: str, rec: Any, path: Path, line: int, root: Path) -> list[Any]:
    if not isinstance(rec, dict):
        raise ValueError(f"{path}:{line}: expected a persona object, found {type(rec).__name__}")
    if not any(k in PERSONA_SECTIONS for k in rec):
        raise ValueError(
            f"{path}:{line}: not a persona record: expected sections {list(PERSONA_SECTIONS)}, "
            f"found fields {sorted(rec)}"
        )
    return [key, str(path.relative_to(root)), line, _flat(rec.get("Name", "")), render_persona(rec), rec]


def _read_layout(root: Path, layout: str, files: list[Path], id_rule: str) -> tuple[pd.DataFrame, str]:
    """One layout's personas (ids checked unique) and the id rule used."""
    rows, rule = [], "file"
    if layout == "files":
        if others := sorted(p.name for p in (root / "persona").glob("*.json") if not p.stem.isdigit()):
            msg = "persona/: ignoring %d .json files whose names are not ids: %s"
            logger.warning(msg, len(others), others[:5])
        for path in files:
            try:
                rec = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{exc.lineno}: not one JSON object ({exc.msg})") from exc
            key = str(int(path.stem))
            for name in _ID_FIELDS:
                if isinstance(rec, dict) and rec.get(name) is not None and _persona_key(rec[name]) != key:
                    raise ValueError(f"{path}:1: {name} {rec[name]!r} but the file name says the id is {key}")
            rows.append(_persona_row(key, rec, path, 1, root))
    else:
        path = root / LINES_FILE
        records = list(iter_jsonl(path))
        id_field = next((f for f in _ID_FIELDS if records and all(f in r for _, r in records)), None)
        if id_rule == "field" and id_field is None:
            raise ValueError(f"{path}: id_rule='field' but no id field {list(_ID_FIELDS)} is in every record")
        rule = f"field:{id_field}" if id_field is not None and id_rule != "line" else "line"
        for n, (line, rec) in enumerate(records, start=1):
            key = str(n) if rule == "line" else _persona_key(rec[id_field])
            rows.append(_persona_row(key, rec, path, line, root))
    frame = pd.DataFrame(rows, columns=["persona_key", "file", "line", "name", "persona", "record"])
    dupes = frame[frame["persona_key"].duplicated(keep=False)]
    if len(dupes):
        places = (dupes["file"] + ":" + dupes["line"].astype(str)).tolist()[:10]
        raise ValueError(f"{root / 'persona'}: persona ids repeat under rule {rule}: {places}")
    return frame, rule


# ----------------------------------------------------------------------------------------------- load


@dataclass
class PersonaFeedbackData:
    """A loaded PersonaFeedback release; ``personas`` and ``layout*``: see :func:`read_personas`.

    ``pairs``: ``set, tier, user_id, persona`` (NA when no persona joins), ``question, chosen, rejected,
    pair_id`` (``"<set>/<tier>/<line>"``), ``line``; ``unjoined``: the pairs without a persona; ``counts``:
    ``set, tier, n_rows, n_joined, n_unjoined`` and an ``all, all`` row; ``id_rule``: ``"file"``,
    ``"field:<name>"`` or ``"line"``; ``source``, ``files``: what was read.
    """

    pairs: pd.DataFrame
    personas: pd.DataFrame
    unjoined: pd.DataFrame
    id_rule: str
    source: str
    files: list[str]
    layout: str
    layouts_found: list[str]
    counts: pd.DataFrame
    unused_personas: pd.DataFrame
    layout_disagreements: pd.DataFrame


def load_personafeedback(
    source: str | os.PathLike[str] = HUB_ID,
    *,
    id_rule: str = "auto",
    layout: str = "auto",
    sets: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
) -> PersonaFeedbackData:
    """Load PersonaFeedback from ``source``, a local folder (``data/``, ``persona/``) or its hub id.

    Args:
        source: PersonaFeedback folder or hub id.
        id_rule: How ``user_id`` joins a persona of ``all_personas.jsonl``: ``auto``, ``field`` (an id field
            of every record) or ``line`` (the 1-based line).
        layout: Which personas: ``auto`` (the files when present), ``files`` (``persona/<N>.json``) or
            ``lines`` (``all_personas.jsonl``).
        sets: Keep only these sets (``"general"``, ``"specific"``).
        tiers: Keep only these tiers (``"easy"``, ``"medium"``, ``"hard"``).

    Raises:
        FileNotFoundError: If no tier file or no persona file of the layout is found.
        ValueError: On a bad option or record (file and line named) or duplicate persona ids.
    """
    check_choice(id_rule, "id_rule", ID_RULES)
    check_choice(layout, "layout", LAYOUTS)
    for name, given, allowed in (("sets", sets, ("general", "specific")), ("tiers", tiers, TIERS)):
        if bad := sorted(set(given or ()) - set(allowed)):
            raise ValueError(f"{name}: unknown values {bad}; allowed: {list(allowed)}")
    root = resolve_source(source, repo_id=HUB_ID)
    personas, rule, use, found, disagreements = read_personas(root, id_rule=id_rule, layout=layout)
    rows, files = [], []
    for folder, tier in itertools.product(sorted(SETS), TIERS):
        path = root / "data" / folder / f"{tier}.jsonl"
        if (sets and SETS[folder] not in sets) or (tiers and tier not in tiers) or not path.is_file():
            continue
        files.append(str(path.relative_to(root)))
        rows += [_pair_row(rec, path, line, SETS[folder], tier) for line, rec in iter_jsonl(path)]
    if not files:
        raise FileNotFoundError(
            f"{root}: no data/{{general,spedific,specific}}/{{easy,medium,hard}}.jsonl files found"
        )
    pairs = pd.DataFrame(rows, columns=[c for c in PAIR_COLUMNS if c != "persona"])
    lookup = dict(zip(personas["persona_key"], personas["persona"], strict=True))
    pairs.insert(3, "persona", pairs["user_id"].map(lambda u: lookup.get(u, pd.NA)).astype(object))
    unjoined = pairs[pairs["persona"].isna()].reset_index(drop=True)
    unused = personas[~personas["persona_key"].isin(set(pairs["user_id"]))].reset_index(drop=True)
    if len(unjoined):
        ids = sorted(unjoined["user_id"].astype(str).unique())[:10]
        msg = "%d of %d PersonaFeedback rows match no persona under rule %s (user_ids %s)"
        logger.warning(msg, len(unjoined), len(pairs), rule, ids)
    if len(unused):
        logger.warning("%d of %d personas are used by no row", len(unused), len(personas))
    groups = [*pairs.groupby(["set", "tier"], sort=False), (("all", "all"), pairs)]
    counts = [(*k, len(part), int(part["persona"].notna().sum())) for k, part in groups]
    counts = pd.DataFrame(counts, columns=["set", "tier", "n_rows", "n_joined"])
    counts["n_unjoined"] = counts["n_rows"] - counts["n_joined"]
    return PersonaFeedbackData(
        pairs, personas, unjoined, rule, str(root), files, use, found, counts, unused, disagreements
    )


def _pair_row(rec: dict[str, Any], path: Path, line: int, set_name: str, tier: str) -> list[Any]:
    values = {k: rec.get(k) for k in ("user_id", "question", "chosen")}
    values["reject"] = rec.get("reject", rec.get("rejected"))
    if missing := [k for k, v in values.items() if v is None]:
        raise ValueError(
            f"{path}:{line}: missing field {missing[0]!r}; expected a case {{user_id, question, chosen, "
            f"reject}}, found fields {sorted(rec)}"
        )
    texts = [str(values[k]) for k in ("question", "chosen", "reject")]
    return [set_name, tier, _persona_key(values["user_id"]), *texts, f"{set_name}/{tier}/{line}", line]


def head_per_group(pairs: pd.DataFrame, limit: int) -> pd.DataFrame:
    """At most ``limit`` pairs per ``set`` x ``tier`` (in file order); ``limit=0`` keeps every pair."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0 (0: all), got {limit}")
    return pairs.groupby(["set", "tier"], sort=False).head(limit) if limit else pairs


# ---------------------------------------------------------------------------------------------- judge

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
_REPLY = re.compile(
    r"^(?:(?:final\s+)?(?:answer|choice|verdict)\s*[:\-]?\s*)?(?:response\s+)?"
    r"[\(\[\"'*`]*([AB])[\)\]\"'*`]*\.?$",
    re.IGNORECASE,
)


def build_judge_messages(
    persona: str, question: str, response_a: str, response_b: str
) -> list[dict[str, str]]:
    """The chat messages asking a judge which of two responses is better personalised (pure)."""
    user = JUDGE_TEMPLATE.format(
        persona=persona, question=question, response_a=response_a, response_b=response_b
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def judge_requests(pairs: pd.DataFrame, *, seed: int = 0, both_orders: bool = False) -> pd.DataFrame:
    """One judge request per pair with a persona (two with ``both_orders``), and the chosen's position.

    The position is a seeded coin per ``pair_id`` (order ``"random"``); ``both_orders`` asks ``"chosen_A"``
    and ``"chosen_B"``. Returns the ``set, tier, user_id, pair_id`` present, ``order, chosen_position,
    messages``.
    """
    usable = pairs[pairs["persona"].notna()]
    if len(usable) < len(pairs):
        logger.warning("skipping %d pairs without a persona", len(pairs) - len(usable))
    carried = [c for c in ("set", "tier", "user_id", "pair_id") if c in pairs.columns]
    rows = []
    for rec in usable.to_dict("records"):
        coin = hashlib.sha256(f"{seed}:{rec['pair_id']}".encode()).digest()[0] % 2 == 0
        orders = [("chosen_A", "A"), ("chosen_B", "B")] if both_orders else [("random", "A" if coin else "B")]
        for order, pos in orders:
            a, b = (rec["chosen"], rec["rejected"]) if pos == "A" else (rec["rejected"], rec["chosen"])
            messages = build_judge_messages(rec["persona"], rec["question"], a, b)
            rows.append([*(rec[c] for c in carried), order, pos, messages])
    return pd.DataFrame(rows, columns=[*carried, "order", "chosen_position", "messages"])


def parse_judge_reply(text: str | None) -> str | None:
    """Parse a judge reply strictly: ``"A"``/``"B"`` or ``None`` (which counts as wrong).

    Accepted: the upper-case letter, optionally in brackets/quotes/bold with a final period, optionally
    after ``Answer:``/``Final answer:``/``Choice:`` and ``Response``; anything else is ``None``.
    """
    match = _REPLY.match(text.strip()) if text is not None else None
    return match.group(1) if match and match.group(1) in ("A", "B") else None


def _ask(
    messages: list[Any], step: str, config: Any, cache: Any, client: Any, complete_fn: Any, progress: bool
) -> dict:
    """``reply``, ``error``, ``cached`` of ``complete_fn`` (default ``pv4kit.llm.client.complete``)."""
    fn = complete_fn or complete
    responses = list(fn(messages, llm=config, cache=cache, step=step, progress=progress, client=client))
    return {
        "reply": [getattr(r, "text", None) for r in responses],
        "error": [getattr(r, "error", None) for r in responses],
        "cached": [bool(getattr(r, "cached", False)) for r in responses],
    }


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
    """Ask an LLM judge to pick the better-personalised response of each pair (see :func:`judge_requests`).

    Returns one row per request: its columns without ``messages``, ``reply, error, cached, parsed``
    (``"A"``/``"B"``/None), ``unparsed`` and ``correct`` (False when unparsed or errored).

    Args:
        pairs: PersonaFeedback pairs (:func:`load_personafeedback`); PV4 pairs work unchanged.
        config: The judge's ``pv4kit.llm.config.LLMConfig``.
        cache: The LLM response cache.
        seed: Seed of the chosen response's position per pair.
        both_orders: Ask both orders to measure position bias.
        client: Goes to ``pv4kit.llm.client.complete``.
        complete_fn: Replaces ``pv4kit.llm.client.complete`` (tests).
        progress: Show a progress bar.
    """
    requests = judge_requests(pairs, seed=seed, both_orders=both_orders)
    replies = _ask(requests["messages"].tolist(), "pf_judge", config, cache, client, complete_fn, progress)
    out = requests.drop(columns=["messages"]).assign(**replies)
    out["parsed"] = out["reply"].map(parse_judge_reply, na_action="ignore").where(out["error"].isna(), None)
    out["unparsed"] = out["parsed"].isna() & out["error"].isna()
    out["correct"] = (out["parsed"] == out["chosen_position"]).fillna(False).astype(bool)
    if n_bad := int(out["unparsed"].sum()):
        logger.warning("%d of %d judge replies could not be parsed; counted as wrong", n_bad, len(out))
    return out


def judge_accuracy(
    predictions: pd.DataFrame, *, confidence: float = 0.95, interval: str = "wilson"
) -> pd.DataFrame:
    """Judge accuracy per order x set x tier.

    Returns ``order, set, tier, n, n_correct, accuracy, ci_low, ci_high, chance, unparsed, errored``.

    Args:
        predictions: :func:`judge_pairs`'s rows.
        confidence: The interval's level.
        interval: ``wilson``, or ``bootstrap`` over personas.
    """
    frame = predictions.assign(errored=predictions["error"].notna())
    counts = ["unparsed", "errored"]
    return accuracy_table(
        frame, outer=["order"], extra_counts=counts, confidence=confidence, interval=interval
    )


def position_bias(predictions: pd.DataFrame) -> pd.DataFrame:
    """Position bias of a ``both_orders`` run, per set and overall.

    Returns ``set, n_pairs, acc_chosen_A, acc_chosen_B, bias`` (A minus B), ``share_pick_A, consistent``
    (share of pairs where both orders picked the same response).
    """
    both = predictions[predictions["order"].isin(["chosen_A", "chosen_B"])]
    if both.empty:
        raise ValueError("predictions: position bias needs a run with both_orders=True")
    wide = both.pivot_table(index=["set", "pair_id"], columns="order", values="correct", aggfunc="first")
    picks = both.pivot_table(index=["set", "pair_id"], columns="order", values="parsed", aggfunc="first")
    wide = wide.dropna().astype(bool)
    rows = []
    for key, part in [*wide.groupby(level="set"), ("all", wide)]:
        acc_a, acc_b = float(part["chosen_A"].mean()), float(part["chosen_B"].mean())
        share_a = float((picks.reindex(part.index) == "A").to_numpy().mean())
        consistent = float((part["chosen_A"] == part["chosen_B"]).mean())
        rows.append([key, len(part), acc_a, acc_b, acc_a - acc_b, share_a, consistent])
    columns = "set n_pairs acc_chosen_A acc_chosen_B bias share_pick_A consistent"
    return pd.DataFrame(rows, columns=columns.split())


# ------------------------------------------------------------------------------------ PV4-style score

GENERATE_PROMPT_VERSION = "pf_generate/v1"
GENERATE_SYSTEM = "You are a helpful assistant. Tailor your answer to the user described below."


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
    """``pair_id, generation, error``: an answer per pair with a persona (arguments: :func:`judge_pairs`)."""
    usable = pairs[pairs["persona"].notna()]
    messages = [generation_messages(p, q) for p, q in zip(usable["persona"], usable["question"], strict=True)]
    replies = _ask(messages, "pf_generate", config, cache, client, complete_fn, progress)
    out = pd.DataFrame({"pair_id": usable["pair_id"].to_numpy()})
    return out.assign(generation=replies["reply"], error=replies["error"])


def pv4_score(
    pairs: pd.DataFrame, generations: pd.DataFrame, *, embedder: Any = None, cache: Any = True
) -> pd.DataFrame:
    """PV4's scoring rule: a generation is right when nearer (cosine) ``chosen`` than ``rejected``.

    A tie, an empty generation or an ``error`` is wrong (``failed`` marks the latter two); ``embedder`` and
    ``cache``: see :func:`pv4kit.related._common.encode`. Returns ``set, tier, user_id, pair_id`` (present
    ones), ``sim_chosen, sim_rejected, margin, failed, correct``.
    """
    merged = pairs.merge(generations, on="pair_id", how="inner", validate="one_to_one")
    if "error" not in merged.columns:
        merged["error"] = None
    gen = merged["generation"].fillna("").astype(str)
    texts = pd.concat([gen, merged["chosen"], merged["rejected"]]).tolist()
    g, c, r = np.split(encode(texts, embedder=embedder, cache=cache), 3)
    out = merged[[col for col in ("set", "tier", "user_id", "pair_id") if col in merged.columns]].copy()
    out["sim_chosen"] = np.einsum("ij,ij->i", g, c).astype(float)
    out["sim_rejected"] = np.einsum("ij,ij->i", g, r).astype(float)
    out["margin"] = out["sim_chosen"] - out["sim_rejected"]
    out["failed"] = ((gen.str.strip() == "") | merged["error"].notna()).to_numpy()
    out["correct"] = (out["margin"] > 0) & ~out["failed"]
    return out.reset_index(drop=True)


def pv4_score_accuracy(
    scores: pd.DataFrame, *, confidence: float = 0.95, interval: str = "wilson"
) -> pd.DataFrame:
    """Accuracy of :func:`pv4_score` per set x tier with intervals and the count of failed generations."""
    return accuracy_table(scores, extra_counts=["failed"], confidence=confidence, interval=interval)
