"""The ``attributes`` answer method: the Re-Centering pipeline applied to PV4.

:func:`attribute_contexts` runs stages 1 and 2 and returns the context document of every question; stage 3
(the answer from that document) is the ordinary answer step of :func:`pv4kit.answer.baselines.answer`:

1. ``attributes:extract``, once per user: attributes extracted from the chats, packed into as few
   requests as the budget allows (:func:`pv4kit.answer.prompting.extraction_messages`), deduplicated, capped;
2. ``attributes:select``, once per question: the relevant attributes as numbers or NONE, parsed strictly;
   an unparseable answer falls back to all attributes and is counted;
3. ``attributes:answer``: the selected attributes as one document
   (:func:`pv4kit.answer.prompting.attribute_document`).

The answer step shares :func:`count_documents` (memoised token counts) with this pipeline; requests to
several equivalent endpoints are sharded by :func:`pv4kit.llm.client.complete` itself (``llm=[a, b]``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import pandas as pd

from pv4kit.answer.prompting import (
    SYSTEM_PROMPT,
    TokenCounter,
    attribute_document,
    extraction_messages,
    fixed_prompt_tokens,
    parse_attributes,
    parse_selection,
    selection_messages,
)
from pv4kit.llm.client import LLMConfig, complete

logger = logging.getLogger(__name__)


def count_documents(docs: list[str], counter: TokenCounter, *, memo: dict[str, int]) -> list[int]:
    """Token counts of ``docs``, each distinct text counted once and remembered in ``memo``.

    Args:
        docs: The texts.
        counter: The token counter.
        memo: Text -> count, filled in place (share it across calls to count each text once).

    Returns:
        One count per text of ``docs``.
    """
    todo = [d for d in dict.fromkeys(docs) if d not in memo]
    if todo:
        memo.update(zip(todo, counter.count(todo), strict=True))
    return [memo[d] for d in docs]


def _chunks(sizes: list[int], *, fixed: int, budget: int, sep: int) -> list[list[int]]:
    """Pack documents (in order) into consecutive chunks whose prompt fits ``budget``."""
    chunks: list[list[int]] = []
    current: list[int] = []
    total = fixed
    for i, size in enumerate(sizes):
        if current and total + size + sep > budget:
            chunks.append(current)
            current, total = [], fixed
        current.append(i)
        total += size + sep
    if current:
        chunks.append(current)
    return chunks


def attribute_contexts(
    data: Any,
    questions: pd.DataFrame,
    *,
    llm: LLMConfig | list[LLMConfig],
    cache: str | os.PathLike[str] | None,
    counter: TokenCounter,
    budget: int,
    system: str = SYSTEM_PROMPT,
    max_attributes: int = 50,
    client: Any = None,
    progress: bool = True,
) -> tuple[dict[tuple[int, int], str], dict[str, Any]]:
    """Stages 1 and 2 of the ``attributes`` method: the context document of every question.

    Args:
        data: A :class:`~pv4kit.dataset.load.PV4Data`.
        questions: Rows with ``user_id, question_index, question``.
        llm: The (greedy) model config, or several equivalent endpoints.
        cache: The LLM response cache.
        counter: Token counter, to pack chats into stage-1 requests that fit ``budget``.
        budget: Largest prompt in tokens.
        system: System prompt of every stage.
        max_attributes: Most attributes kept per user.
        client: Injected client (tests).
        progress: Progress bars.

    Returns:
        ``({(user_id, question_index): document}, info)``; ``info`` holds ``calls, cached, errors``,
        ``attributes`` (per user), ``n_fallback`` (unparseable selections), ``n_stage1_requests`` and the
        per-question lists ``n_attributes_per_question`` and ``fallback_per_question``.
    """
    docs: dict[tuple[int, int], str] = {}
    info: dict[str, Any] = {
        "calls": 0,
        "cached": 0,
        "errors": 0,
        "attributes": {},
        "n_fallback": 0,
        "n_stage1_requests": 0,
    }
    per_q_n: dict[tuple[int, int], int] = {}
    per_q_fb: dict[tuple[int, int], bool] = {}
    memo: dict[str, int] = {}
    sep = max(1, counter.count(["\n\n"])[0])

    def tally(responses: list[Any]) -> None:
        info["calls"] += sum(not r.cached for r in responses)
        info["cached"] += sum(r.cached for r in responses)
        info["errors"] += sum(r.error is not None for r in responses)

    for uid, rows in questions.groupby("user_id", sort=True):
        uid = int(uid)
        chats = data.documents(uid)
        fixed = fixed_prompt_tokens(
            extraction_messages([], system=system)[-1]["content"], system=system, counter=counter
        )
        chunks = _chunks(count_documents(chats, counter, memo=memo), fixed=fixed, budget=budget, sep=sep)
        stage1 = complete(
            [extraction_messages([chats[i] for i in c], system=system) for c in chunks],
            llm=llm,
            cache=cache,
            step="attributes:extract",
            user_id=uid,
            progress=progress,
            client=client,
        )
        tally(stage1)
        info["n_stage1_requests"] += len(chunks)
        attrs: list[str] = []
        for r in stage1:
            attrs.extend(
                a
                for a in parse_attributes(r.text, max_attributes=max_attributes)
                if a.casefold() not in {x.casefold() for x in attrs}
            )
        attrs = attrs[:max_attributes]
        info["attributes"][str(uid)] = attrs
        keys = [(uid, int(i)) for i in rows["question_index"]]
        if not attrs:
            logger.warning("attributes: user %d: stage 1 found no attributes; answering closed book", uid)
            for k in keys:
                docs[k], per_q_n[k], per_q_fb[k] = "", 0, False
            continue
        stage2 = complete(
            [selection_messages(q, attrs, system=system) for q in rows["question"]],
            llm=llm,
            cache=cache,
            step="attributes:select",
            user_id=uid,
            progress=progress,
            client=client,
        )
        tally(stage2)
        for k, r in zip(keys, stage2, strict=True):
            chosen = parse_selection(r.text, len(attrs))
            per_q_fb[k] = chosen is None
            if chosen is None:
                chosen = list(range(len(attrs)))
                info["n_fallback"] += 1
            per_q_n[k] = len(chosen)
            docs[k] = attribute_document([attrs[j] for j in chosen])
    if info["n_fallback"]:
        logger.warning(
            "attributes: %d of %d selections were unparseable; used all attributes for them",
            info["n_fallback"],
            len(questions),
        )
    order = list(zip(questions["user_id"].astype(int), questions["question_index"].astype(int), strict=True))
    info["n_attributes_per_question"] = [per_q_n[k] for k in order]
    info["fallback_per_question"] = [per_q_fb[k] for k in order]
    return docs, info
