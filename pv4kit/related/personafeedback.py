"""PersonaFeedback (PersonalAILab/PersonaFeedback): loader, pairwise LLM judge, PV4-style scoring.

The release holds ``data/{general,spedific}/{easy,medium,hard}.jsonl`` (the ``spedific`` folder name is
misspelled in the release; ``specific`` is accepted too) with rows ``{user_id, question, chosen,
reject}``, and ``persona/all_personas.jsonl`` with one persona per line (sections ``Name``,
``Demographics``, ``Personality``, ``Preference``, ``Bias``).

**The persona join is an assumption.** Rows carry a ``user_id`` but persona records may not; a
third-party loader maps ``user_id`` to the 1-based line number of ``all_personas.jsonl``. With
``id_rule="auto"`` an explicit id field in every persona record (``user_id``, ``id`` or
``persona_id``) wins, else the line-number rule is used; rows that do not join keep ``persona = NA``
and are listed in :attr:`PersonaFeedbackData.unjoined`.
"""

from __future__ import annotations

import hashlib
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
        id_rule: The join rule used: ``"field:<name>"`` or ``"line"``.
        source: The folder read.
    """

    pairs: pd.DataFrame
    personas: pd.DataFrame
    unjoined: pd.DataFrame
    id_rule: str
    source: str
    files: list[str] = field(default_factory=list)


def render_persona(record: dict[str, Any]) -> str:
    """Render a persona record as text: one section per heading, nested values as ``key: value`` lines.

    The known sections come first in the order ``Name, Demographics, Personality, Preference, Bias``;
    any other non-id field follows.
    """
    keys = [k for k in PERSONA_SECTIONS if k in record]
    keys += [k for k in record if k not in PERSONA_SECTIONS and k not in _ID_FIELDS]
    return "\n".join(_render_section(k, record[k]) for k in keys).strip()


def _render_section(key: str, value: Any) -> str:
    if isinstance(value, dict):
        lines = [f"{key}:"]
        for sub, val in value.items():
            lines.append(f"- {sub}: {_flat(val)}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join([f"{key}:"] + [f"- {_flat(v)}" for v in value])
    return f"{key}: {_flat(value)}"


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_flat(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_flat(v) for v in value)
    return str(value)


def _persona_key(value: Any) -> str:
    """Join keys compare as text so ``3``, ``"3"`` and ``3.0`` match."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def load_personafeedback(
    source: str | os.PathLike[str] = HUB_ID,
    *,
    id_rule: str = "auto",
    sets: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
) -> PersonaFeedbackData:
    """Load PersonaFeedback from a local download or the hub id into one tidy frame.

    Args:
        source: A folder with ``data/`` and ``persona/`` or the hub id ``PersonalAILab/PersonaFeedback``
            (downloaded lazily with ``huggingface_hub.snapshot_download``).
        id_rule: How ``user_id`` joins a persona: ``"auto"``, ``"field"`` (an id field in every
            persona record) or ``"line"`` (1-based line number of ``all_personas.jsonl``).
        sets: Keep only these sets (``"general"``, ``"specific"``).
        tiers: Keep only these tiers (``"easy"``, ``"medium"``, ``"hard"``).

    Returns:
        A :class:`PersonaFeedbackData`; unjoined rows are logged as a warning.

    Raises:
        FileNotFoundError: If no tier file or no persona file is found.
        ValueError: On a bad ``id_rule``/``sets``/``tiers`` or a row missing a required field.
    """
    if id_rule not in ("auto", "field", "line"):
        raise ValueError(f"id_rule must be 'auto', 'field' or 'line', got {id_rule!r}")
    for name, given, allowed in (("sets", sets, ("general", "specific")), ("tiers", tiers, TIERS)):
        bad = sorted(set(given or ()) - set(allowed))
        if bad:
            raise ValueError(f"{name}: unknown values {bad}; allowed: {list(allowed)}")
    root = resolve_source(source, repo_id=HUB_ID)
    personas, rule = _read_personas(root, id_rule=id_rule)
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
    if len(unjoined):
        logger.warning(
            "%d of %d PersonaFeedback rows match no persona under rule %s (user_ids %s)",
            len(unjoined),
            len(pairs),
            rule,
            sorted(unjoined["user_id"].astype(str).unique())[:10],
        )
    logger.info(
        "loaded %d PersonaFeedback pairs from %d files, %d personas", len(pairs), len(files), len(personas)
    )
    return PersonaFeedbackData(
        pairs=pairs, personas=personas, unjoined=unjoined, id_rule=rule, source=str(root), files=files
    )


def _pair_row(rec: dict[str, Any], *, path: Path, line: int, set_name: str, tier: str) -> dict[str, Any]:
    rejected = rec.get("reject", rec.get("rejected"))
    for name, value in (
        ("user_id", rec.get("user_id")),
        ("question", rec.get("question")),
        ("chosen", rec.get("chosen")),
        ("reject", rejected),
    ):
        if value is None:
            raise ValueError(f"{path}:{line}: missing field {name!r} (fields: {sorted(rec)})")
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


def _read_personas(root: Path, *, id_rule: str) -> tuple[pd.DataFrame, str]:
    path = root / "persona" / "all_personas.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{root}: persona/all_personas.jsonl not found")
    records = list(iter_jsonl(path))
    id_field = next((f for f in _ID_FIELDS if records and all(f in r for _, r in records)), None)
    if id_rule == "field" and id_field is None:
        raise ValueError(f"{path}: id_rule='field' but no id field {list(_ID_FIELDS)} is in every record")
    use_field = id_field is not None and id_rule != "line"
    rule = f"field:{id_field}" if use_field else "line"
    rows = []
    for number, (line, rec) in enumerate(records, start=1):
        key = _persona_key(rec[id_field]) if use_field else str(number)
        rows.append(
            {
                "persona_key": key,
                "line": line,
                "name": _flat(rec.get("Name", "")),
                "persona": render_persona(rec),
            }
        )
    frame = pd.DataFrame(rows, columns=["persona_key", "line", "name", "persona"])
    dupes = frame["persona_key"][frame["persona_key"].duplicated()].unique()
    if len(dupes):
        raise ValueError(f"{path}: duplicate persona ids under rule {rule}: {list(dupes)[:10]}")
    return frame, rule


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
        from pv4kit.llm import complete as complete_fn
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
        config: A ``pv4kit.llm.LLMConfig``.
        cache: The ``pv4kit.llm`` response cache (path or ``None``).
        seed: Position seed.
        both_orders: Ask both ways to measure position bias.
        client: Passed to ``pv4kit.llm.complete``.
        complete_fn: A function with ``pv4kit.llm.complete``'s signature (tests inject a fake).
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
        cache: Embedding cache, passed to ``pv4kit.embed.embed_texts``.

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
