"""The ``attributes`` answer method: the Re-Centering pipeline applied to PV4.

:func:`attribute_contexts` runs stages 1 and 2 and returns the context document of every question; stage 3
(the answer from that document) is the ordinary answer step of :func:`pv4kit.baselines.run.answer`:

1. ``attributes:extract``, once per user: attributes extracted from the chats, packed into as few
   requests as the budget allows (:func:`pv4kit.baselines.prompting.extraction_messages`), deduplicated,
   capped; 2. ``attributes:select``, once per question: the relevant attributes as numbers or NONE, parsed
   strictly; an unparseable answer falls back to all attributes and is counted; 3. ``attributes:answer``: the
   selected attributes as one document (:func:`pv4kit.baselines.prompting.attribute_document`).

The answer step shares :func:`count_documents` (memoised token counts) with this pipeline; requests to
several equivalent endpoints are sharded by :func:`pv4kit.llm.client.complete` itself (``llm=[a, b]``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pv4kit._options import merge_options
from pv4kit.baselines.prompting import (
    SYSTEM_PROMPT,
    TokenCounter,
    attribute_document,
    extraction_messages,
    fixed_prompt_tokens,
    parse_attributes,
    parse_selection,
    selection_messages,
)
from pv4kit.llm.client import complete
from pv4kit.llm.config import LLMConfig

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


@dataclass(frozen=True)
class AttributeOptions:
    """Everything :func:`attribute_contexts` takes besides the data and the questions.

    Attributes:
        llm: The (greedy) model config, or several equivalent endpoints.
        cache: The LLM response cache.
        counter: Token counter, to pack chats into stage-1 requests that fit ``budget``.
        budget: Largest prompt in tokens.
        system: System prompt of every stage.
        max_attributes: Most attributes kept per user.
        client: Injected client (tests).
        progress: Progress bars.
    """

    llm: LLMConfig | list[LLMConfig]
    cache: str | os.PathLike[str] | None
    counter: TokenCounter
    budget: int
    system: str = SYSTEM_PROMPT
    max_attributes: int = 50
    client: Any = None
    progress: bool = True


@dataclass
class _Pipeline:
    """One :func:`attribute_contexts` call: its options, the running counts and the per-question results."""

    opts: AttributeOptions
    info: dict[str, Any]
    docs: dict[tuple[int, int], str] = field(default_factory=dict)
    n_chosen: dict[tuple[int, int], int] = field(default_factory=dict)
    fallback: dict[tuple[int, int], bool] = field(default_factory=dict)
    memo: dict[str, int] = field(default_factory=dict)
    sep: int = 1

    def call(self, messages: list[list[dict[str, str]]], *, step: str, user_id: int) -> list[Any]:
        """The responses to ``messages`` (one stage for one user), counted into ``info``."""
        o = self.opts
        shared = {"llm": o.llm, "cache": o.cache, "progress": o.progress, "client": o.client}
        responses = complete(messages, step=step, user_id=user_id, **shared)
        self.info["calls"] += sum(not r.cached for r in responses)
        self.info["cached"] += sum(r.cached for r in responses)
        self.info["errors"] += sum(r.error is not None for r in responses)
        return responses

    def extract(self, uid: int, chats: list[str]) -> list[str]:
        """Stage 1: the user's attributes, deduplicated (case-insensitively) and capped."""
        o = self.opts
        fixed = fixed_prompt_tokens(
            extraction_messages([], system=o.system)[-1]["content"], system=o.system, counter=o.counter
        )
        sizes = count_documents(chats, o.counter, memo=self.memo)
        chunks = _chunks(sizes, fixed=fixed, budget=o.budget, sep=self.sep)
        stage1 = self.call(
            [extraction_messages([chats[i] for i in c], system=o.system) for c in chunks],
            step="attributes:extract",
            user_id=uid,
        )
        self.info["n_stage1_requests"] += len(chunks)
        attrs: list[str] = []
        for r in stage1:
            attrs.extend(
                a
                for a in parse_attributes(r.text, max_attributes=o.max_attributes)
                if a.casefold() not in {x.casefold() for x in attrs}
            )
        return attrs[: o.max_attributes]

    def select(self, uid: int, rows: pd.DataFrame, attrs: list[str]) -> None:
        """Stage 2 and the document: each question's selected attributes (all of them when unparseable)."""
        keys = [(uid, int(i)) for i in rows["question_index"]]
        if not attrs:
            logger.warning("attributes: user %d: stage 1 found no attributes; answering closed book", uid)
            for k in keys:
                self.docs[k], self.n_chosen[k], self.fallback[k] = "", 0, False
            return
        stage2 = self.call(
            [selection_messages(q, attrs, system=self.opts.system) for q in rows["question"]],
            step="attributes:select",
            user_id=uid,
        )
        for k, r in zip(keys, stage2, strict=True):
            chosen = parse_selection(r.text, len(attrs))
            self.fallback[k] = chosen is None
            if chosen is None:
                chosen = list(range(len(attrs)))
                self.info["n_fallback"] += 1
            self.n_chosen[k] = len(chosen)
            self.docs[k] = attribute_document([attrs[j] for j in chosen])


def attribute_contexts(
    data: Any,
    questions: pd.DataFrame,
    *,
    options: AttributeOptions | None = None,
    **overrides: Any,
) -> tuple[dict[tuple[int, int], str], dict[str, Any]]:
    """Stages 1 and 2 of the ``attributes`` method: the context document of every question.

    Args:
        data: A :class:`~pv4kit.dataset.load.PV4Data`.
        questions: Rows with ``user_id, question_index, question``.
        options: The settings (:class:`AttributeOptions`: ``llm``, ``cache``, ``counter`` and ``budget`` are
            required).
        **overrides: Any field of :class:`AttributeOptions` by name (``llm=..., budget=...``), replacing
            the one in ``options``.

    Returns:
        ``({(user_id, question_index): document}, info)``; ``info`` holds ``calls, cached, errors``,
        ``attributes`` (per user), ``n_fallback`` (unparseable selections), ``n_stage1_requests`` and the
        per-question lists ``n_attributes_per_question`` and ``fallback_per_question``.

    Raises:
        TypeError: An unknown option (with the closest name) or a required one missing.
    """
    opts = merge_options(AttributeOptions, options, overrides, where="attribute_contexts")
    info: dict[str, Any] = {
        "calls": 0,
        "cached": 0,
        "errors": 0,
        "attributes": {},
        "n_fallback": 0,
        "n_stage1_requests": 0,
    }
    run = _Pipeline(opts, info, sep=max(1, opts.counter.count(["\n\n"])[0]))
    for uid, rows in questions.groupby("user_id", sort=True):
        attrs = run.extract(int(uid), data.documents(int(uid)))
        info["attributes"][str(int(uid))] = attrs
        run.select(int(uid), rows, attrs)
    if info["n_fallback"]:
        logger.warning(
            "attributes: %d of %d selections were unparseable; used all attributes for them",
            info["n_fallback"],
            len(questions),
        )
    order = list(zip(questions["user_id"].astype(int), questions["question_index"].astype(int), strict=True))
    info["n_attributes_per_question"] = [run.n_chosen[k] for k in order]
    info["fallback_per_question"] = [run.fallback[k] for k in order]
    return run.docs, info
