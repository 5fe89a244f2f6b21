"""Answer runs: the PV4 baselines over five memory settings, on any OpenAI-compatible endpoint.

:func:`answer` writes ``runs/<name>/`` in the run format (:mod:`pv4kit.runs`) plus ``context.json``.
Methods (what goes in the user turn before the question):

* ``no_docs``: nothing (the reference's ``closed_book``);
* ``rag``: the ``top_k`` chats most similar to the question, most similar first (dense with the
  embedder and its cache, or ``retriever="bm25"``);
* ``full``: every chat in topic order (the reference's ``full_context``); when the budget is short the
  chats *least similar to the question* are dropped, the rest stay in topic order;
* ``persona``: the explicit persona profile instead of chats (the PersonaFeedback setting, an upper
  bound on what memory could give);
* ``attributes``: the Re-Centering pipeline applied to PV4 (:mod:`pv4kit.attributes`): attributes
  extracted from the chats once per user, the relevant ones selected per question, the answer written
  from them.

Decoding is greedy with at most ``max_new_tokens`` (256) new tokens. Every call goes through
:func:`pv4kit.llm.complete` with its response cache, so rerunning a finished run makes no requests;
calls are labelled in the ledger as ``answer:<method>`` (and ``attributes:*`` for the pipeline's steps).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import atomic_write_json
from pv4kit.attributes import attribute_contexts, complete_sharded, count_documents
from pv4kit.llm import LLMConfig
from pv4kit.prompting import (
    DEFAULT_MARGIN,
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    CharEstimate,
    TokenCounter,
    build_messages,
    fit_documents,
    fixed_prompt_tokens,
)
from pv4kit.redact import redact_url

logger = logging.getLogger(__name__)

METHODS = ("no_docs", "rag", "full", "persona", "attributes")
#: the reference's folder names for the same settings
REFERENCE_NAMES = {"no_docs": "closed_book", "full": "full_context"}
CONTEXT_FILE = "context.json"
LOCAL_MAX_MODEL_LEN = 8192
DEFAULT_MAX_MODEL_LEN = 32768


@dataclass
class AnswerRun:
    """The result of :func:`answer`.

    Attributes:
        generations: One row per question (the ``generations.parquet`` frame).
        context: The ``context.json`` record (fit rate, truncations, prompt-token percentiles).
        config: The run settings written to ``config.json`` (without provenance).
        run_dir: Where the run was written (``None`` when not written).
        calls: LLM requests sent to the endpoint.
        cached: LLM requests answered from the cache.
        errors: Requests that failed after their retries (their generation is ``""``).
    """

    generations: pd.DataFrame
    context: dict[str, Any]
    config: dict[str, Any]
    run_dir: Path | None = None
    calls: int = 0
    cached: int = 0
    errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def default_max_model_len(model: str) -> int:
    """8192 for the local SmolLM2 server (its ``n_ctx``), 32768 otherwise (the reference's setting)."""
    from pv4kit.localllm import LOCAL_ALIAS, LOCAL_MODEL_ID

    return LOCAL_MAX_MODEL_LEN if model in (LOCAL_MODEL_ID, LOCAL_ALIAS) else DEFAULT_MAX_MODEL_LEN


def select_questions(
    data: Any, *, split: str = "test", users: list[int] | None = None, limit: int | None = None
) -> pd.DataFrame:
    """The questions of ``split`` (optionally some users), sorted by ``(user_id, question_index)``.

    ``limit`` keeps the first N after sorting (for smoke tests).
    """
    q = data.split(split)
    if users is not None:
        unknown = sorted(set(users) - set(q["user_id"]))
        if unknown:
            raise ValueError(
                f"users: {unknown} have no {split!r} questions; have {sorted(set(q['user_id']))}"
            )
        q = q[q["user_id"].isin(users)]
    q = q.sort_values(["user_id", "question_index"], kind="stable").reset_index(drop=True)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        q = q.head(limit).reset_index(drop=True)
    if q.empty:
        raise ValueError(f"split {split!r} of {getattr(data, 'source', 'the data')} has no questions")
    return q


@dataclass
class _Plan:
    """What one question's prompt holds before the budget: documents in display order and priority."""

    documents: list[str]
    doc_ids: list[int]
    scores: list[float]
    priority: list[int] | None = None


def _plans(
    method: str,
    data: Any,
    questions: pd.DataFrame,
    *,
    top_k: int,
    retriever: str,
    embedder: Any,
    embed_cache: Any,
    attribute_docs: dict[tuple[int, int], str] | None,
) -> list[_Plan]:
    from pv4kit.retrieve import rank_questions

    n = len(questions)
    if method == "no_docs":
        return [_Plan([], [], []) for _ in range(n)]
    if method == "persona":
        plans = []
        for uid in questions["user_id"]:
            persona = data.persona(int(uid))
            if not persona:
                raise ValueError(
                    f"method 'persona': user {uid} has no persona profile in {data.source}; load the data "
                    "next to its raw tree (raw/personas/user_N.txt)"
                )
            plans.append(_Plan([persona], [], []))
        return plans
    if method == "attributes":
        assert attribute_docs is not None
        return [
            _Plan([attribute_docs[(int(u), int(i))]] if attribute_docs[(int(u), int(i))] else [], [], [])
            for u, i in zip(questions["user_id"], questions["question_index"], strict=True)
        ]
    ranked = rank_questions(
        data,
        questions,
        retriever=retriever,
        embedder=embedder,
        cache=embed_cache,
        top_k=top_k if method == "rag" else None,
    )
    plans = []
    for r in ranked.itertuples(index=False):
        docs = data.documents(int(r.user_id))
        if method == "rag":
            ids, scores = list(r.ranked_ids), list(r.ranked_scores)
            plans.append(_Plan([docs[i] for i in ids], ids, scores))
        else:  # full: topic order, dropped from the least similar
            by_id = dict(zip(r.ranked_ids, r.ranked_scores, strict=True))
            ids = list(range(len(docs)))
            plans.append(_Plan(list(docs), ids, [by_id[i] for i in ids], priority=list(r.ranked_ids)))
    return plans


def _percentile(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def context_report(
    prompt_tokens: list[int],
    *,
    full_tokens: list[int],
    truncated: list[bool],
    fits: list[bool],
    documents_dropped: list[int],
    max_model_len: int,
    max_input_tokens: int,
    counter: str,
) -> dict[str, Any]:
    """The ``context.json`` record: the reference's keys (fit rate as a fraction) plus pv4kit's.

    ``fit_rate`` is the share of prompts that fit without dropping anything; ``tokens_dropped`` sums the
    counted tokens of the dropped documents; ``num_over_budget`` counts prompts still too long with no
    documents at all (the question and system prompt are never cut).
    """
    pt = np.asarray(prompt_tokens, dtype=np.float64)
    n = len(pt)
    return {
        "max_model_len": int(max_model_len),
        "max_input_tokens": int(max_input_tokens),
        "num_prompts": n,
        "num_truncated": int(sum(truncated)),
        "fit_rate": (1 - sum(truncated) / n) if n else None,
        "mean_prompt_tokens": float(pt.mean()) if n else None,
        "max_prompt_tokens": int(pt.max()) if n else None,
        "tokens_dropped": int(sum(f - p for f, p in zip(full_tokens, prompt_tokens, strict=True))),
        "p50_prompt_tokens": _percentile(pt, 50),
        "p90_prompt_tokens": _percentile(pt, 90),
        "p95_prompt_tokens": _percentile(pt, 95),
        "p99_prompt_tokens": _percentile(pt, 99),
        "documents_dropped": int(sum(documents_dropped)),
        "num_over_budget": int(sum(not f for f in fits)),
        "token_counter": counter,
        "token_count_rule": "sum of parts (system, documents, separators, question) + template overhead",
    }


def answer(
    data: Any,
    *,
    method: str,
    llm: LLMConfig | list[LLMConfig],
    run_dir: str | os.PathLike[str] | None = None,
    split: str = "test",
    top_k: int = 5,
    retriever: str = "dense",
    embedder: Any = None,
    embed_cache: Any = True,
    cache: str | os.PathLike[str] | bool | None = True,
    max_model_len: int | None = None,
    max_new_tokens: int = 256,
    margin: int = DEFAULT_MARGIN,
    token_counter: TokenCounter | None = None,
    system: str = SYSTEM_PROMPT,
    users: list[int] | None = None,
    limit: int | None = None,
    client: Any = None,
    progress: bool = True,
    extra_config: dict[str, Any] | None = None,
) -> AnswerRun:
    """Answer the questions of one split with one memory setting and write the run.

    Args:
        data: A :class:`~pv4kit.data.PV4Data` (see :func:`pv4kit.data.load`).
        method: One of :data:`METHODS`.
        llm: Where to send requests (model, base URL, protocol, concurrency); temperature is set to 0 and
            the output cap to ``max_new_tokens`` here. A list of configs for the same model (e.g. two
            local llama.cpp servers) shares the requests round-robin.
        run_dir: Where to write the run (``runs/<name>``); ``None`` writes nothing.
        split: ``"test"``, ``"validation"`` or ``"train"``.
        top_k: Chats per question for ``rag``.
        retriever: ``"dense"`` or ``"bm25"`` (``rag``; ``full`` uses it to choose what to drop).
        embedder: An :class:`~pv4kit.embed.Embedder` for dense retrieval (default: MiniLM on CPU when
            a dense ranking is needed).
        embed_cache: Embedding cache (see :func:`pv4kit.embed.embed_texts`).
        cache: SQLite response cache and usage ledger of :func:`pv4kit.llm.complete` (``True``: the shared
            default file; ``None``: off).
        max_model_len: Model context length (default: :func:`default_max_model_len`).
        max_new_tokens: Output token cap.
        margin: Tokens kept free besides the output (chat-template tokens, counting slack).
        token_counter: How to count prompt tokens (default: ``ceil(chars / 4)``).
        system: System prompt.
        users: Only these users.
        limit: Only the first N questions (sorted by user and question index).
        client: An injected OpenAI-like client (tests).
        progress: Progress bars.
        extra_config: More fields for ``config.json``.

    Returns:
        An :class:`AnswerRun`.
    """
    if method not in METHODS:
        import difflib

        close = difflib.get_close_matches(str(method), METHODS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"method must be one of {METHODS}, got {method!r}{hint}")
    if method == "rag" and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    llms = [
        dataclasses.replace(c, temperature=0.0, max_output_tokens=max_new_tokens)
        for c in (llm if isinstance(llm, list | tuple) else [llm])
    ]
    if not llms or len({(c.model, c.protocol) for c in llms}) != 1:
        raise ValueError(f"llm: expected one model and protocol across the configs, got {llm!r}")
    llm = llms[0]
    max_model_len = max_model_len or default_max_model_len(llm.model)
    budget = max_model_len - max_new_tokens - margin
    if budget <= 0:
        raise ValueError(
            f"max_model_len ({max_model_len}) leaves no room for a prompt after max_new_tokens "
            f"({max_new_tokens}) and margin ({margin})"
        )
    counter = token_counter or CharEstimate()
    questions = select_questions(data, split=split, users=users, limit=limit)
    needs_dense = method in ("rag", "full") and retriever == "dense"
    if needs_dense and embedder is None:
        from pv4kit.embed import get_embedder

        embedder = get_embedder("minilm", device="cpu")
    logger.info(
        "%s on %s: %d questions of %d users, model %s",
        method,
        split,
        len(questions),
        questions["user_id"].nunique(),
        llm.model,
    )

    calls = cached = errors = 0
    extra: dict[str, Any] = {}
    attribute_docs = None
    if method == "attributes":
        attribute_docs, extra = attribute_contexts(
            data,
            questions,
            llm=llms,
            cache=cache,
            counter=counter,
            budget=budget,
            system=system,
            client=client,
            progress=progress,
        )
        calls, cached, errors = extra.pop("calls"), extra.pop("cached"), extra.pop("errors")
    plans = _plans(
        method,
        data,
        questions,
        top_k=top_k,
        retriever=retriever,
        embedder=embedder,
        embed_cache=embed_cache,
        attribute_docs=attribute_docs,
    )

    memo: dict[str, int] = {}
    sep_tokens = max(1, counter.count(["\n\n"])[0])
    messages, fitted = [], []
    for q, plan in zip(questions["question"], plans, strict=True):
        fixed = fixed_prompt_tokens(q, system=system, counter=counter)
        fit = fit_documents(
            count_documents(plan.documents, counter, memo=memo),
            fixed_tokens=fixed,
            budget=budget,
            priority=plan.priority,
            separator_tokens=sep_tokens,
        )
        fitted.append(fit)
        messages.append(build_messages(q, [plan.documents[i] for i in fit.kept], system=system))
    n_trunc = sum(f.truncated for f in fitted)
    if n_trunc:
        logger.warning(
            "%s: %d of %d prompts dropped documents to fit %d tokens", method, n_trunc, len(fitted), budget
        )

    responses: list[Any] = [None] * len(questions)
    step = "attributes:answer" if method == "attributes" else f"answer:{method}"
    for uid, rows in questions.groupby("user_id", sort=True):
        pos = list(rows.index)
        got = complete_sharded(
            [messages[i] for i in pos],
            llm=llms,
            cache=cache,
            step=step,
            user_id=int(uid),
            progress=progress,
            client=client,
        )
        for i, r in zip(pos, got, strict=True):
            responses[i] = r
    calls += sum(not r.cached for r in responses)
    cached += sum(r.cached for r in responses)
    errors += sum(r.error is not None for r in responses)
    if errors:
        logger.warning("%s: %d requests failed after retries; their generations are empty", method, errors)

    gens = pd.DataFrame(
        {
            "user_id": questions["user_id"].astype("int64"),
            "question_index": questions["question_index"].astype("int64"),
            "split": questions["split"].astype(str),
            "generation": [r.text for r in responses],
            "method": method,
            "model": llm.model,
            "retrieved_ids": [
                [p.doc_ids[i] for i in f.kept] if p.doc_ids else []
                for p, f in zip(plans, fitted, strict=True)
            ],
            "retrieved_scores": [
                [p.scores[i] for i in f.kept] if p.doc_ids else [] for p, f in zip(plans, fitted, strict=True)
            ],
            "dropped_ids": [
                [p.doc_ids[i] for i in f.dropped] if p.doc_ids else []
                for p, f in zip(plans, fitted, strict=True)
            ],
            "n_documents": [len(f.kept) for f in fitted],
            "prompt_tokens": [f.prompt_tokens for f in fitted],
            "truncated": [f.truncated for f in fitted],
            "finish_reason": [r.finish_reason for r in responses],
            "error": [r.error for r in responses],
        }
    )
    if method == "attributes":
        gens["n_attributes"] = extra.pop("n_attributes_per_question")
        gens["attributes_fallback"] = extra.pop("fallback_per_question")
    context = context_report(
        [f.prompt_tokens for f in fitted],
        full_tokens=[f.full_tokens for f in fitted],
        truncated=[f.truncated for f in fitted],
        fits=[f.fits for f in fitted],
        documents_dropped=[len(f.dropped) for f in fitted],
        max_model_len=max_model_len,
        max_input_tokens=budget,
        counter=counter.name,
    )
    config = {
        "data": getattr(data, "source", None),
        "data_fingerprint": getattr(data, "fingerprint", None),
        "method": method,
        "reference_method": REFERENCE_NAMES.get(method, f"rag_top{top_k}" if method == "rag" else method),
        "model": llm.model,
        "base_url": redact_url(llm.base_url) if len(llms) == 1 else [redact_url(c.base_url) for c in llms],
        "protocol": llm.protocol,
        "split": split,
        "users": users,
        "limit": limit,
        "n_questions": len(questions),
        "top_k": top_k if method == "rag" else None,
        "retriever": retriever if method in ("rag", "full") else None,
        "embedder": getattr(embedder, "name", None) if needs_dense else None,
        "system_prompt": system,
        "prompt_version": PROMPT_VERSION,
        "temperature": 0.0,
        "max_new_tokens": max_new_tokens,
        "max_model_len": max_model_len,
        "margin": margin,
        "token_counter": counter.name,
        "llm_cache": str(cache) if cache is not None else None,
        "llm_calls": calls,
        "llm_cached": cached,
        "llm_errors": errors,
        **({"attributes": extra} if method == "attributes" else {}),
        **(extra_config or {}),
    }
    out_dir = None
    if run_dir is not None:
        from pv4kit.runs import write_generations

        out_dir = write_generations(run_dir, gens, config=config)
        atomic_write_json(out_dir / CONTEXT_FILE, context)
        logger.info(
            "%s: wrote %s (%d generations; %d called, %d cached)", method, out_dir, len(gens), calls, cached
        )
    return AnswerRun(gens, context, config, out_dir, calls=calls, cached=cached, errors=errors, extra=extra)
