"""Answer runs: the PV4 baselines over five memory settings, on any OpenAI-compatible endpoint.

:func:`answer` writes ``runs/<name>/`` in the run format (:mod:`pv4kit.scoring.runs`) plus ``context.json``.
Methods (what goes in the user turn before the question):

* ``no_docs``: nothing (the reference's ``closed_book``);
* ``rag``: the ``top_k`` chats most similar to the question, most similar first (dense with the
  embedder and its cache, or ``retriever="bm25"``);
* ``full``: every chat in topic order (the reference's ``full_context``); an over-long prompt is cut
  from the front of its tokens as the reference does (:mod:`pv4kit.answer.truncation`), or with
  ``truncation="relevance"`` the chats *least similar to the question* are dropped, the rest staying in
  topic order;
* ``persona``: the explicit persona profile instead of chats (the PersonaFeedback setting, an upper
  bound on what memory could give);
* ``attributes``: the Re-Centering pipeline applied to PV4 (:mod:`pv4kit.answer.attributes`): attributes
  extracted from the chats once per user, the relevant ones selected per question, the answer written
  from them.

Decoding is greedy with at most ``max_new_tokens`` (256) new tokens. Every call goes through
:func:`pv4kit.llm.client.complete` with its response cache, so rerunning a finished run makes no requests;
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
from pv4kit.answer.attributes import attribute_contexts, complete_sharded, count_documents
from pv4kit.answer.prompting import (
    DEFAULT_MARGIN,
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    CharEstimate,
    FitResult,
    TokenCounter,
    build_messages,
    fit_documents,
    fixed_prompt_tokens,
)
from pv4kit.answer.tokens import (
    FULL_CONTEXT_LENGTH,
    FULL_CONTEXT_YARN_FACTOR,
    NO_THINKING,
    REFERENCE_CONTEXT_KEYS,
    ChatTokenizer,
    ServerInfo,
    get_chat_tokenizer,
    probe_server,
    reference_context,
    vllm_serve_flags,
)
from pv4kit.answer.truncation import Request, front_requests
from pv4kit.llm.client import LLMConfig
from pv4kit.redact import redact_url
from pv4kit.schema import QUESTION_KEY
from pv4kit.scoring.failures import STATUS_FAILED, STATUS_OK, previous_answers

logger = logging.getLogger(__name__)

METHODS = ("no_docs", "rag", "full", "persona", "attributes")
#: the reference's folder names for the same settings
REFERENCE_NAMES = {"no_docs": "closed_book", "full": "full_context"}
CONTEXT_FILE = "context.json"
#: ``"front"``: the reference's cut of the whole prompt's tokens; ``"relevance"``: pv4kit's dropping of chats
TRUNCATIONS = ("front", "relevance")
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
        errors: Requests that failed after their retries (``status`` ``failed``, no generation).
    """

    generations: pd.DataFrame
    context: dict[str, Any]
    config: dict[str, Any]
    run_dir: Path | None = None
    calls: int = 0
    cached: int = 0
    errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def default_max_model_len(model: str, *, method: str | None = None) -> int:
    """The context length of a run: the local model's ``n_ctx``, else the reference's window.

    8192 for the local model; 65,536 for ``full`` (PV4's full context, YaRN x2) and 32,768 for the other
    methods.
    """
    from pv4kit.llm.local import LOCAL_ALIAS, LOCAL_MODEL_ID

    if model in (LOCAL_MODEL_ID, LOCAL_ALIAS):
        return LOCAL_MAX_MODEL_LEN
    return FULL_CONTEXT_LENGTH if method == "full" else DEFAULT_MAX_MODEL_LEN


def _check_server(llms: list[LLMConfig], max_model_len: int, *, method: str) -> ServerInfo:
    """Probe the endpoint before anything is sent; refuse a served context length other than the run's."""
    info = probe_server(llms[0].base_url, llms[0].model, api_key_env=llms[0].api_key_env)
    if info.max_model_len is not None and info.max_model_len != max_model_len:
        yarn = FULL_CONTEXT_YARN_FACTOR if method == "full" and max_model_len == FULL_CONTEXT_LENGTH else None
        flags = " ".join(vllm_serve_flags(max_model_len=max_model_len, yarn_factor=yarn))
        raise ValueError(
            f"max_model_len: the server at {llms[0].endpoint} serves {llms[0].model!r} with max_model_len "
            f"{info.max_model_len}, but this run uses {max_model_len}; serve it with `vllm serve "
            f"{llms[0].model} {flags}` or pass --max-model-len {info.max_model_len} (not the reference "
            "protocol)"
        )
    if info.kind == "vllm" and method == "full":
        logger.info(
            "vLLM serves %s with max_model_len %s; YaRN cannot be read over HTTP: serve it with %s",
            llms[0].model,
            info.max_model_len,
            " ".join(vllm_serve_flags(max_model_len=max_model_len, yarn_factor=FULL_CONTEXT_YARN_FACTOR)),
        )
    logger.info("endpoint %s: %s (max_model_len %s)", llms[0].endpoint, info.kind, info.max_model_len)
    return info


def _front_fit(request: Request, n_documents: int) -> FitResult:
    """A front-truncated prompt keeps every document position (some may be cut in part or whole)."""
    return FitResult(
        kept=list(range(n_documents)),
        dropped=[],
        prompt_tokens=request.prompt_tokens,
        full_tokens=request.full_tokens,
        fits=True,
    )


def _send(
    requests: list[Request],
    questions: pd.DataFrame,
    *,
    llms: list[LLMConfig],
    cache: Any,
    step: str,
    client: Any,
    progress: bool,
    run_dir: str | os.PathLike[str] | None,
) -> tuple[list[Any], list[bool]]:
    """Send every request not answered in the run already (failed rows are asked again).

    Returns:
        The responses in question order, and whether each was taken from the existing run.
    """
    from pv4kit.llm.client import LLMResponse, cache_key

    completions = [dataclasses.replace(c, protocol="completions") for c in llms]
    keys = [cache_key(r.messages, (completions if r.completions else llms)[0]) for r in requests]
    done = previous_answers(run_dir) if run_dir is not None else {}
    responses: list[Any] = [None] * len(requests)
    resumed = [False] * len(requests)
    for i, k in enumerate(keys):
        if k in done:
            text, finish = done[k]
            responses[i] = LLMResponse(text=text, cached=True, finish_reason=finish, key=k)
            resumed[i] = True
    if any(resumed):
        logger.info(
            "%s: %d answers kept from the existing run, %d to ask", step, sum(resumed), resumed.count(False)
        )
    for uid, rows in questions.groupby("user_id", sort=True):
        for is_completion in (False, True):
            pos = [i for i in rows.index if not resumed[i] and requests[i].completions is is_completion]
            if not pos:
                continue
            got = complete_sharded(
                [requests[i].messages for i in pos],
                llm=completions if is_completion else llms,
                cache=cache,
                step=step,
                user_id=int(uid),
                progress=progress,
                client=client,
            )
            for i, r in zip(pos, got, strict=True):
                responses[i] = r
    return responses, resumed


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
    q = q.sort_values(QUESTION_KEY, kind="stable").reset_index(drop=True)
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
    rank_full: bool = True,
) -> list[_Plan]:
    from pv4kit.answer.retrieve import rank_questions

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
    if method == "full" and not rank_full:  # every chat in topic order, nothing to rank
        plans = []
        for uid in questions["user_id"]:
            docs = data.documents(int(uid))
            plans.append(_Plan(list(docs), list(range(len(docs))), [float("nan")] * len(docs)))
        return plans
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


def context_report(
    full_tokens: list[int],
    *,
    sent_tokens: list[int],
    max_model_len: int,
    max_input_tokens: int,
    truncation: str,
    counter: str,
    exact: bool,
    sent_as: list[str],
    documents_dropped: list[int],
    fits: list[bool],
    server: ServerInfo | None = None,
) -> dict[str, Any]:
    """The ``context.json`` record: the reference's keys, units and rounding, then pv4kit's under ``pv4kit``.

    The reference's figures describe the **untruncated** prompt lengths (``full_tokens``; ``fit_rate`` in
    percent, see :func:`pv4kit.answer.tokens.reference_context`). ``pv4kit`` holds how they were counted
    (``token_counter``, ``exact``: false for the chars/4 estimate), the truncation rule, how the cut
    prompts were sent, the sent lengths, and for ``truncation="relevance"`` the chats dropped and the
    prompts still over budget.
    """
    out = reference_context(full_tokens, max_model_len=max_model_len, max_input_tokens=max_input_tokens)
    assert tuple(out) == REFERENCE_CONTEXT_KEYS
    sent = np.asarray(sent_tokens, dtype=np.int64)
    how: dict[str, int] = {}
    for s in sent_as:
        how[s] = how.get(s, 0) + 1
    out["pv4kit"] = {
        "token_counter": counter,
        "exact": bool(exact),
        "truncation": truncation,
        "sent_as": how,
        "mean_sent_prompt_tokens": round(float(sent.mean()), 1),
        "max_sent_prompt_tokens": int(sent.max()),
        "documents_dropped": int(sum(documents_dropped)),
        "num_over_budget": int(sum(not f for f in fits)),
        "server_kind": server.kind if server else None,
        "server_max_model_len": server.max_model_len if server else None,
    }
    return out


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
    tokenizer: Any = None,
    truncation: str = "front",
    check_server: bool = True,
    system: str = SYSTEM_PROMPT,
    users: list[int] | None = None,
    limit: int | None = None,
    client: Any = None,
    progress: bool = True,
    extra_config: dict[str, Any] | None = None,
) -> AnswerRun:
    """Answer the questions of one split with one memory setting and write the run.

    Args:
        data: A :class:`~pv4kit.dataset.load.PV4Data` (see :func:`pv4kit.dataset.load.load`).
        method: One of :data:`METHODS`.
        llm: Where to send requests (model, base URL, protocol, concurrency); temperature is set to 0 and
            the output cap to ``max_new_tokens`` here. A list of configs for the same model (e.g. two
            local llama.cpp servers) shares the requests round-robin.
        run_dir: Where to write the run (``runs/<name>``); ``None`` writes nothing.
        split: ``"test"``, ``"validation"`` or ``"train"``.
        top_k: Chats per question for ``rag``.
        retriever: ``"dense"`` or ``"bm25"`` (``rag``; ``full`` uses it to choose what to drop).
        embedder: An :class:`~pv4kit.embeddings.models.Embedder` for dense retrieval (default: MiniLM on CPU
            when a dense ranking is needed).
        embed_cache: Embedding cache (see :func:`pv4kit.embeddings.models.embed_texts`).
        cache: SQLite response cache and usage ledger of :func:`pv4kit.llm.client.complete` (``True``: the
            shared default file; ``None``: off).
        max_model_len: Model context length (default: :func:`default_max_model_len`; 65,536 for ``full``,
            the reference's PV4 full-context window with YaRN x2).
        max_new_tokens: Output token cap.
        margin: Tokens kept free besides the output (the reference's 32).
        token_counter: ``truncation="relevance"`` only: how to count the parts of a prompt (default:
            ``ceil(chars / 4)``).
        tokenizer: ``truncation="front"``: the prompt tokenizer, a
            :class:`~pv4kit.answer.tokens.ChatTokenizer`, a Hugging Face name/path or tokenizer (its chat
            template with thinking off), ``"server"`` or ``"chars"``; ``None``: the server's own
            (vLLM, llama.cpp), else the logged chars/4 estimate (see :mod:`pv4kit.answer.tokens`).
        truncation: ``"front"`` (the reference: the whole prompt's tokens cut from the front, see
            :mod:`pv4kit.answer.truncation`) or ``"relevance"`` (pv4kit: the least relevant chats dropped).
        check_server: Ask the endpoint (``GET /v1/models``) what it is and its ``max_model_len`` before
            sending anything; a different context length is refused.
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
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    max_model_len = max_model_len or default_max_model_len(llm.model, method=method)
    budget = max_model_len - max_new_tokens - margin
    server = _check_server(llms, max_model_len, method=method) if check_server and client is None else None
    if server is not None and server.kind == "vllm":
        llms = [
            dataclasses.replace(c, chat_template_kwargs=dict(NO_THINKING)) if c.protocol == "chat" else c
            for c in llms
        ]
        llm = llms[0]
    if budget <= 0:
        raise ValueError(
            f"max_model_len ({max_model_len}) leaves no room for a prompt after max_new_tokens "
            f"({max_new_tokens}) and margin ({margin})"
        )
    counter = token_counter or CharEstimate()
    chat_tok = None
    if truncation == "front":
        chat_tok = (
            tokenizer
            if isinstance(tokenizer, ChatTokenizer)
            else get_chat_tokenizer(
                tokenizer, base_url=llm.base_url, model=llm.model, server=server, api_key_env=llm.api_key_env
            )
        )
    questions = select_questions(data, split=split, users=users, limit=limit)
    # full context ranks the chats only to choose what --truncation relevance drops
    ranks_full = method == "full" and truncation == "relevance"
    needs_dense = (method == "rag" or ranks_full) and retriever == "dense"
    if needs_dense and embedder is None:
        from pv4kit.embeddings.models import get_embedder

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
        rank_full=ranks_full,
    )

    if truncation == "front":
        requests = front_requests(
            [
                build_messages(q, plan.documents, system=system)
                for q, plan in zip(questions["question"], plans, strict=True)
            ],
            tokenizer=chat_tok,
            budget=max(budget, 1),
            server_kind=server.kind if server else "other",
            protocol=llm.protocol,
            progress=progress,
        )
        fitted = [_front_fit(r, len(p.documents)) for r, p in zip(requests, plans, strict=True)]
    else:
        memo: dict[str, int] = {}
        sep_tokens = max(1, counter.count(["\n\n"])[0])
        requests, fitted = [], []
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
            msgs = build_messages(q, [plan.documents[i] for i in fit.kept], system=system)
            requests.append(Request(msgs, False, fit.full_tokens, fit.prompt_tokens, "chat"))
        n_trunc = sum(f.truncated for f in fitted)
        if n_trunc:
            logger.warning(
                "%s: %d of %d prompts dropped documents to fit %d tokens",
                method,
                n_trunc,
                len(fitted),
                budget,
            )

    step = "attributes:answer" if method == "attributes" else f"answer:{method}"
    responses, resumed = _send(
        requests,
        questions,
        llms=llms,
        cache=cache,
        step=step,
        client=client,
        progress=progress,
        run_dir=run_dir,
    )
    calls += sum(not r.cached for r in responses)  # rows kept from the run count as cached
    cached += sum(r.cached for r in responses)
    errors += sum(r.error is not None for r in responses)
    n_empty = sum(r.error is None and not (r.text or "").strip() for r in responses)
    if errors:
        logger.warning(
            "%s: %d requests failed after retries; recorded as failed (no generation), rerun to resume them",
            method,
            errors,
        )
    if n_empty:
        logger.warning(
            "%s: %d answers came back empty or whitespace (scored as the reference does)", method, n_empty
        )

    gens = pd.DataFrame(
        {
            "user_id": questions["user_id"].astype("int64"),
            "question_index": questions["question_index"].astype("int64"),
            "split": questions["split"].astype(str),
            "generation": [None if r.error is not None else r.text for r in responses],
            "status": [STATUS_FAILED if r.error is not None else STATUS_OK for r in responses],
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
            "prompt_tokens": [r.prompt_tokens for r in requests],
            "full_prompt_tokens": [r.full_tokens for r in requests],
            "truncated": [
                r.truncated if truncation == "front" else f.truncated
                for r, f in zip(requests, fitted, strict=True)
            ],
            "sent_as": [r.sent_as for r in requests],
            "finish_reason": [r.finish_reason for r in responses],
            "error": [r.error for r in responses],
            "empty_generation": [r.error is None and not (r.text or "").strip() for r in responses],
            "request_key": [r.key for r in responses],
        }
    )
    if method == "attributes":
        gens["n_attributes"] = extra.pop("n_attributes_per_question")
        gens["attributes_fallback"] = extra.pop("fallback_per_question")
    context = context_report(
        [r.full_tokens for r in requests],
        sent_tokens=[r.prompt_tokens for r in requests],
        max_model_len=max_model_len,
        max_input_tokens=max(budget, 1),
        truncation=truncation,
        counter=chat_tok.name if chat_tok is not None else counter.name,
        exact=bool(chat_tok is not None and chat_tok.exact),
        sent_as=[r.sent_as for r in requests],
        documents_dropped=[len(f.dropped) for f in fitted],
        fits=[f.fits for f in fitted],
        server=server,
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
        "retriever": retriever if method == "rag" or ranks_full else None,
        "embedder": getattr(embedder, "name", None) if needs_dense else None,
        "system_prompt": system,
        "prompt_version": PROMPT_VERSION,
        "temperature": 0.0,
        "max_new_tokens": max_new_tokens,
        "max_model_len": max_model_len,
        "margin": margin,
        "truncation": truncation,
        "token_counter": chat_tok.name if chat_tok is not None else counter.name,
        "token_count_exact": bool(chat_tok is not None and chat_tok.exact),
        "server_kind": server.kind if server else None,
        "server_max_model_len": server.max_model_len if server else None,
        "chat_template_kwargs": dict(llm.chat_template_kwargs) if llm.chat_template_kwargs else None,
        "n_failed": int(sum(r.error is not None for r in responses)),
        "n_empty_answers": n_empty,
        "llm_cache": str(cache) if cache is not None else None,
        "llm_calls": calls,
        "llm_resumed": int(sum(resumed)),
        "llm_cached": cached,
        "llm_errors": errors,
        **({"attributes": extra} if method == "attributes" else {}),
        **(extra_config or {}),
    }
    out_dir = None
    if run_dir is not None:
        from pv4kit.scoring.runs import write_generations

        out_dir = write_generations(run_dir, gens, config=config)
        atomic_write_json(out_dir / CONTEXT_FILE, context)
        logger.info(
            "%s: wrote %s (%d generations; %d called, %d cached)", method, out_dir, len(gens), calls, cached
        )
    return AnswerRun(gens, context, config, out_dir, calls=calls, cached=cached, errors=errors, extra=extra)
