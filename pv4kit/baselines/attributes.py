"""The ``attributes`` answer method: the Re-Centering pipeline applied to PV4.

:func:`attribute_contexts` runs stage 1 (``attributes:extract``, once per user, the chats packed into as few
requests as the budget allows) and stage 2 (``attributes:select``, once per question: numbers or NONE; an
unparseable answer falls back to all attributes); stage 3 is :func:`pv4kit.baselines.run.answer`'s own call.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from pv4kit.baselines.prompting import SYSTEM_PROMPT, build_messages, count_documents, fixed_prompt_tokens
from pv4kit.llm.client import complete
from pv4kit.llm.config import LLMConfig
from pv4kit.text import list_items

logger = logging.getLogger(__name__)

#: stage 1 (once per user and chunk of chats): the user's attributes, one per line
ATTRIBUTE_EXTRACTION = (
    "The conversations above are between a user and an assistant. List the user's personal attributes "
    "that they reveal: preferences, habits, values, skills and circumstances. Write one attribute per "
    'line, each line starting with "- ", as a short statement about the user. Write nothing else.'
)
#: stage 2 (once per question): which numbered attributes matter for the question
ATTRIBUTE_SELECTION = (
    "Attributes of a user:\n{attributes}\n\nQuestion: {question}\n\nWhich of the numbered attributes are "
    "relevant to answering the question? Reply with their numbers separated by commas (for example: 2, 5), "
    "or NONE if none is relevant. Reply with nothing else."
)
ATTRIBUTE_HEADER = "Attributes of the user:"

_SELECTION = re.compile(r"^(?:none|\d{1,3}(?:\s*,\s*\d{1,3})*)$", re.IGNORECASE)


def parse_attributes(text: str, *, max_attributes: int = 50) -> list[str]:
    """Bulleted or numbered lines of a stage-1 answer, deduplicated (case-insensitive), in order."""
    out: dict[str, str] = {}
    for item in list_items(text or "", loose=True, marked_only=True):
        if item and len(out) < max_attributes:
            out.setdefault(item.casefold(), item)
    return list(out.values())


def selection_messages(
    question: str, attributes: Sequence[str], *, system: str | None = SYSTEM_PROMPT
) -> list[dict[str, str]]:
    """Stage 2: the numbered attributes and the question; the model answers with numbers or NONE."""
    listing = "\n".join(f"{i}. {a}" for i, a in enumerate(attributes, start=1))
    return build_messages(ATTRIBUTE_SELECTION.format(attributes=listing, question=question), system=system)


def parse_selection(text: str, n: int) -> list[int] | None:
    """0-based positions from ``NONE`` or comma-separated numbers in ``1..n`` (a trailing period allowed).

    Example:
        >>> parse_selection("2, 5", 6), parse_selection("none", 6), parse_selection("I think 2", 6)
        ([1, 4], [], None)
    """
    t = (text or "").strip().rstrip(".").strip()
    if not _SELECTION.match(t):
        return None
    if t.lower() == "none":
        return []
    nums = [int(x) for x in t.split(",")]
    return None if any(not 1 <= k <= n for k in nums) else sorted({k - 1 for k in nums})


def attribute_document(attributes: Sequence[str]) -> str:
    """Stage 3's context document: a header and one ``- attribute`` line each (``""`` when none)."""
    return ATTRIBUTE_HEADER + "\n" + "\n".join(f"- {a}" for a in attributes) if attributes else ""


def _chunks(sizes: list[int], *, fixed: int, budget: int, sep: int) -> list[list[int]]:
    """Pack documents (in order) into consecutive chunks whose prompt fits ``budget``."""
    chunks: list[list[int]] = [[]]
    total = fixed
    for i, size in enumerate(sizes):
        if chunks[-1] and total + size + sep > budget:
            chunks.append([])
            total = fixed
        chunks[-1].append(i)
        total += size + sep
    return chunks if chunks[0] else []


def attribute_contexts(
    data: Any,
    questions: pd.DataFrame,
    *,
    llm: LLMConfig | list[LLMConfig],
    cache: str | os.PathLike[str] | bool | None,
    counter: Any,
    budget: int,
    system: str = SYSTEM_PROMPT,
    max_attributes: int = 50,
    client: Any = None,
    progress: bool = True,
) -> tuple[dict[tuple[int, int], str], dict[str, Any]]:
    """Stages 1 and 2 of the ``attributes`` method: ``({(user_id, question_index): document}, info)``.

    ``budget`` is the largest stage-1 prompt in tokens (``counter`` counts the chats packed into it).
    ``info`` holds ``calls, cached, errors``, ``attributes`` (per user), ``n_fallback`` (unparseable
    selections), ``n_stage1_requests`` and the per-question ``n_attributes_per_question`` and
    ``fallback_per_question``.
    """
    info: dict[str, Any] = dict.fromkeys(["calls", "cached", "errors"], 0)
    info.update(attributes={}, n_fallback=0, n_stage1_requests=0)
    docs, chosen, memo = {}, {}, {}  # chosen: (number of attributes, fell back) per question
    sep = max(1, counter.count(["\n\n"])[0])
    fixed = fixed_prompt_tokens(ATTRIBUTE_EXTRACTION, system=system, counter=counter)
    shared = {"llm": llm, "cache": cache, "progress": progress, "client": client}

    def call(messages: list[list[dict[str, str]]], step: str, uid: int) -> list[Any]:
        out = complete(messages, step=step, user_id=uid, **shared)
        info["calls"] += sum(not r.cached for r in out)
        info["cached"] += sum(r.cached for r in out)
        info["errors"] += sum(r.error is not None for r in out)
        return out

    for uid, rows in questions.groupby("user_id", sort=True):
        uid, chats = int(uid), data.documents(int(uid))
        chunks = _chunks(count_documents(chats, counter, memo=memo), fixed=fixed, budget=budget, sep=sep)
        info["n_stage1_requests"] += len(chunks)
        # stage 1: the chats, then the extraction instruction (the documents-then-question layout)
        stage1 = [build_messages(ATTRIBUTE_EXTRACTION, [chats[i] for i in c], system=system) for c in chunks]
        replies = "\n".join(r.text or "" for r in call(stage1, "attributes:extract", uid))
        attrs = parse_attributes(replies, max_attributes=max_attributes)
        info["attributes"][str(uid)] = attrs
        if not attrs:
            logger.warning("attributes: user %d: stage 1 found no attributes; answering closed book", uid)
        # stage 2 (users with attributes): which of them matter for each question
        selections = [""] * len(rows)
        if attrs:
            stage2 = [selection_messages(q, attrs, system=system) for q in rows["question"]]
            selections = [r.text for r in call(stage2, "attributes:select", uid)]
        for i, text in zip(rows["question_index"], selections, strict=True):
            picked = parse_selection(text, len(attrs)) if attrs else []  # None: unparseable, every attribute
            kept = attrs if picked is None else [attrs[j] for j in picked]
            chosen[uid, int(i)], docs[uid, int(i)] = (len(kept), picked is None), attribute_document(kept)
    info["n_fallback"] = sum(fell_back for _, fell_back in chosen.values())
    if info["n_fallback"]:
        msg = "attributes: %d of %d selections were unparseable; used all attributes for them"
        logger.warning(msg, info["n_fallback"], len(questions))
    order = list(zip(questions["user_id"].astype(int), questions["question_index"].astype(int), strict=True))
    info["n_attributes_per_question"] = [chosen[k][0] for k in order]
    info["fallback_per_question"] = [chosen[k][1] for k in order]
    return docs, info
