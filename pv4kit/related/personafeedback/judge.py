"""PersonaFeedback's pairwise LLM judge: prompts, position randomisation, strict parsing, accuracy, bias."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from pv4kit.related._common import accuracy_table
from pv4kit.related.personafeedback.calls import complete_messages, reply_columns

logger = logging.getLogger(__name__)

__all__ = [
    "JUDGE_PROMPT_VERSION",
    "JUDGE_SYSTEM",
    "JUDGE_TEMPLATE",
    "build_judge_messages",
    "judge_accuracy",
    "judge_pairs",
    "judge_requests",
    "parse_judge_reply",
    "position_bias",
]

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
    llm = dict(config=config, cache=cache, client=client, complete_fn=complete_fn, progress=progress)
    responses = complete_messages(requests["messages"].tolist(), step="pf_judge", llm=llm)
    out = requests.drop(columns=["messages"]).assign(**reply_columns(responses))
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
