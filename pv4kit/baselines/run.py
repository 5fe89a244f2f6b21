"""Answer runs: the PV4 baselines over five memory settings, on any OpenAI-compatible endpoint.

:func:`answer` checks the arguments and the endpoint, picks the questions, **plans** each prompt
(:data:`~pv4kit.baselines.methods.METHODS`), **fits** it to the budget, **calls** the model and **writes**
``runs/<name>/``.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._options import check_number
from pv4kit.baselines.methods import DEFAULT_MAX_MODEL_LEN, METHODS, Method, PlanRequest, get_method
from pv4kit.baselines.prompting import (
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    build_messages,
    count_documents,
    fit_documents,
    fixed_prompt_tokens,
)
from pv4kit.baselines.retrieve import DENSE_RANKINGS, rank_questions
from pv4kit.baselines.tokens import (
    GENERATION_RESERVE,
    NO_THINKING,
    CharEstimate,
    ServerInfo,
    get_chat_tokenizer,
    probe_server,
    reference_budget,
    reference_context,
    vllm_serve_flags,
)
from pv4kit.llm.client import cache_key, complete
from pv4kit.llm.config import LLMConfig, LLMResponse
from pv4kit.llm.local import LOCAL_ALIAS, LOCAL_MAX_MODEL_LEN, LOCAL_MODEL_ID
from pv4kit.redact import redact_url
from pv4kit.schema import QUESTION_KEY
from pv4kit.scoring.choices import CHOICE_PROMPT_VERSION, ORDER_COLUMN, choice_order, mcq_suffix
from pv4kit.scoring.runs import STATUS_FAILED, STATUS_OK, previous_answers, read_run_config, write_generations

__all__ = ["METHODS", "AnswerRun", "Request", "answer", "default_max_model_len", "select_questions"]

logger = logging.getLogger(__name__)

#: ``"front"``: the reference's cut of the whole prompt's tokens; ``"relevance"``: pv4kit's dropping of chats
TRUNCATIONS = ("front", "relevance")


@dataclass
class AnswerRun:
    """The result of :func:`answer`.

    Attributes:
        generations: The ``generations.parquet`` frame; ``context`` and ``config`` (without provenance)
            likewise the ``context.json`` and ``config.json`` records.
        run_dir: Where the run was written (``None`` when not written).
        calls: LLM requests sent; ``cached`` answered from the cache, ``errors`` failed after retries.
        extra: The method's own ``config.json`` section.
    """

    generations: pd.DataFrame
    context: dict[str, Any]
    config: dict[str, Any]
    run_dir: Path | None = None
    calls: int = 0
    cached: int = 0
    errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    """What is sent for one question.

    Attributes:
        messages: The chat messages, or one ``{"role": "user", "content", "prompt_token_ids"}`` message for
            the completions endpoint.
        completions: Whether it goes to ``/v1/completions`` (a cut prompt) rather than the chat endpoint.
        full_tokens: The untruncated prompt length (``context.json``'s); ``prompt_tokens`` the length sent.
        sent_as: ``"chat"``, ``"token ids"``, ``"text"`` or ``"messages (estimate)"``.
        kept: The plan's document positions in the prompt (all of them for ``truncation="front"``).
        dropped: Positions dropped by ``truncation="relevance"``, least relevant first.
        fits: False when even the bare question is over the budget (``truncation="relevance"``).
    """

    messages: list[dict[str, Any]]
    completions: bool
    full_tokens: int
    prompt_tokens: int
    sent_as: str
    kept: Sequence[int]
    dropped: Sequence[int] = ()
    fits: bool = True

    @property
    def truncated(self) -> bool:
        """Whether the prompt was cut."""
        return self.prompt_tokens < self.full_tokens


def default_max_model_len(model: str, *, method: str | None = None) -> int:
    """The context length of a run: 8192 for the local model, else the method's (see :func:`answer`)."""
    if model in (LOCAL_MODEL_ID, LOCAL_ALIAS):
        return LOCAL_MAX_MODEL_LEN
    return METHODS[method].max_model_len if method in METHODS else DEFAULT_MAX_MODEL_LEN


def select_questions(
    data: Any, *, split: str = "test", users: list[int] | None = None, limit: int | None = None
) -> pd.DataFrame:
    """The questions of ``split`` (optionally some users), sorted by ``(user_id, question_index)``.

    ``limit`` keeps the first N after sorting (for smoke tests).
    """
    q = data.split(split)
    if users is not None:
        have = sorted(set(q["user_id"]))
        if unknown := sorted(set(users) - set(have)):
            raise ValueError(f"users: {unknown} have no {split!r} questions; have {have}")
        q = q[q["user_id"].isin(users)]
    q = q.sort_values(QUESTION_KEY, kind="stable").iloc[:limit].reset_index(drop=True)
    if q.empty:
        raise ValueError(f"split {split!r} of {getattr(data, 'source', 'the data')} has no questions")
    return q


def answer(
    data: Any,
    *,
    method: str,
    llm: LLMConfig | list[LLMConfig],
    run_dir: str | Path | None = None,
    split: str = "test",
    top_k: int = 5,
    retriever: str = "dense",
    embedder: Any = None,
    dense_ranking: str = "reference",
    embed_cache: Any = True,
    cache: str | Path | bool | None = True,
    max_model_len: int | None = None,
    max_new_tokens: int = 256,
    margin: int = GENERATION_RESERVE,
    token_counter: Any = None,
    tokenizer: Any = None,
    truncation: str = "front",
    check_server: bool = True,
    system: str = SYSTEM_PROMPT,
    mcq: bool = False,
    mcq_seed: int = 0,
    users: list[int] | None = None,
    limit: int | None = None,
    client: Any = None,
    progress: bool = True,
    extra_config: dict[str, Any] | None = None,
) -> AnswerRun:
    """Answer the questions of one split with one memory setting and write the run.

    Args:
        data: A :class:`~pv4kit.dataset.load.PV4Data`.
        method: A name in :data:`~pv4kit.baselines.methods.METHODS`.
        llm: Where to send requests (greedy, ``max_new_tokens``); a list of configs for the same model shares
            the requests round-robin.
        run_dir: Where to write the run; ``None`` writes nothing. Rows already answered there are kept.
        split: ``"test"``, ``"validation"`` or ``"train"``.
        top_k: Chats per question for ``rag``.
        retriever: ``"dense"`` or ``"bm25"`` (``rag``; ``full`` uses it to choose what to drop).
        embedder: Embedder of dense retrieval (default: the reference's Qwen3-Embedding-4B).
        dense_ranking: ``reference``: float16, ranked by torch as the reference; ``stable``: float32, ties in
            chat order (:func:`~pv4kit.baselines.retrieve.rank_questions`).
        embed_cache: Embedding cache (:func:`pv4kit.embeddings.models.embed_texts`).
        cache: Response cache of :func:`pv4kit.llm.client.complete` (``True``: the shared one; ``None``: off).
        max_model_len: Context length (default: :func:`default_max_model_len`: local 8192; full 65536, the
            reference's YaRN x2 window; else 32768).
        max_new_tokens: Output token cap.
        margin: Tokens kept free besides the output (the reference's 32).
        token_counter: ``truncation="relevance"`` and ``attributes``: the text counter (default chars/4).
        tokenizer: The prompt tokenizer (:func:`~pv4kit.baselines.tokens.get_chat_tokenizer`): the decoder's
            Hugging Face tokenizer (name/path; its chat template, thinking off), ``server`` (vLLM /tokenize,
            llama.cpp /apply-template + /tokenize) or ``chars`` (ceil(chars/4), logged); default: the
            server's, else the estimate.
        truncation: ``"front"`` (the reference: the prompt's last tokens, sent as token ids where the server
            takes them, refused before sending where not) or ``"relevance"`` (drop the least relevant chats).
        check_server: Ask the endpoint what it is and its ``max_model_len`` first; another length is refused.
        system: System prompt.
        mcq: Multiple choice: the candidates follow the question, lettered in a seeded order (``mcq_seed``);
            the run is named ``mcq_<method>`` and scored by the letter.
        mcq_seed: Seed of the per-question order of the candidates.
        users: Only these users.
        limit: Only the first N questions (sorted by user and question index).
        client: An injected OpenAI-like client (tests).
        progress: Progress bars.
        extra_config: More fields for ``config.json``.
    """
    check_number(max_model_len, "max_model_len", ge=1, integer=True, allow_none=True)
    check_number(max_new_tokens, "max_new_tokens", ge=1, integer=True)
    check_number(margin, "margin", ge=0, integer=True)
    check_number(limit, "limit", ge=1, integer=True, allow_none=True)
    m = get_method(method)
    if m.top_k and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    if dense_ranking not in DENSE_RANKINGS:  # methods that rank nothing never reach retrieve's check
        raise ValueError(f"dense_ranking must be one of {DENSE_RANKINGS}, got {dense_ranking!r}")
    configs = llm if isinstance(llm, list | tuple) else [llm]
    if not configs or len({(c.model, c.protocol) for c in configs}) != 1:
        raise ValueError(f"llm: expected one model and protocol across the configs, got {llm!r}")
    max_model_len = max_model_len or default_max_model_len(configs[0].model, method=m.name)
    budget = reference_budget(max_model_len, max_new_tokens, margin=margin)
    if max_model_len - max_new_tokens - margin < 1:
        msg = "max_model_len %d - max_new_tokens %d - margin %d < 1: the budget is clamped to 1 token, as "
        logger.warning(msg + "the reference does", max_model_len, max_new_tokens, margin)
    server = _check_server(configs[0], max_model_len, m) if check_server and client is None else None
    vllm_chat = server is not None and server.kind == "vllm" and configs[0].protocol == "chat"
    thinking = {"chat_template_kwargs": dict(NO_THINKING)} if vllm_chat else {}
    llms = [replace(c, temperature=0.0, max_output_tokens=max_new_tokens, **thinking) for c in configs]
    first = llms[0]
    counter = token_counter or CharEstimate()
    endpoint = {"base_url": first.base_url, "model": first.model, "api_key_env": first.api_key_env}
    chat_tok = get_chat_tokenizer(tokenizer, server=server, **endpoint) if truncation == "front" else None
    measured_by = chat_tok or counter  # what counted the prompts: named in config.json and context.json
    exact = bool(getattr(chat_tok, "exact", False))

    # plan: the documents before each question
    questions = select_questions(data, split=split, users=users, limit=limit)
    ranks = m.ranks(truncation)
    dense = ranks and retriever == "dense"
    if dense and embedder is None:
        from pv4kit.embeddings.models import get_embedder

        embedder = get_embedder("qwen3")
    name = f"mcq_{m.name}" if mcq else m.name
    msg = "%s on %s: %d questions of %d users, model %s"
    logger.info(msg, name, split, len(questions), questions["user_id"].nunique(), first.model)
    retrieval = dict(retriever=retriever, embedder=embedder, cache=embed_cache, dense_ranking=dense_ranking)
    ranked = rank_questions(data, questions, top_k=top_k if m.top_k else None, **retrieval) if ranks else None
    planned = m.plan(
        PlanRequest(data, questions, ranked, llms, counter, budget, top_k, system, cache, client, progress)
    )
    plans = planned.plans
    if len(plans) != len(questions):
        raise ValueError(
            f"method {m.name!r}: its plan function returned {len(plans)} plans for {len(questions)} questions"
        )
    asked, orders = list(questions["question"]), None
    if mcq:  # the candidates follow the question, lettered in a seeded order
        keys = zip(questions["user_id"], questions["question_index"], strict=True)
        orders = [choice_order(u, i, seed=mcq_seed) for u, i in keys]
        asked = [q + mcq_suffix(c, o) for q, c, o in zip(asked, questions["choices"], orders, strict=True)]

    # fit: the prompts to the budget
    if truncation == "front":
        kind = server.kind if server else "other"
        fit = {"server_kind": kind, "protocol": first.protocol, "progress": progress}
        requests = front_requests(asked, plans, system=system, tokenizer=chat_tok, budget=budget, **fit)
    else:
        requests = relevance_requests(asked, plans, system=system, counter=counter, budget=budget)
    if cut := [r for r in requests if r.truncated]:
        how = "were cut from the front" if truncation == "front" else "dropped their least relevant documents"
        msg = "%s: %d of %d prompts over %d tokens %s (sent as %s)"
        logger.warning(
            msg, m.name, len(cut), len(requests), budget, how, ", ".join(sorted({r.sent_as for r in cut}))
        )

    # call: every request not answered in the run already (failed ones are asked again), per user
    endpoints = {False: llms, True: [replace(c, protocol="completions") for c in llms]}  # cut prompts: True
    done = previous_answers(run_dir) if run_dir is not None else {}
    keys = [cache_key(r.messages, endpoints[r.completions][0]) for r in requests]
    responses: list[Any] = [
        LLMResponse(text=done[k][0], cached=True, finish_reason=done[k][1], key=k) if k in done else None
        for k in keys
    ]
    resumed = [r is not None for r in responses]
    if any(resumed):
        msg = "%s: %d answers kept from the existing run, %d to ask"
        logger.info(msg, m.ledger_step, sum(resumed), resumed.count(False))
    todo = pd.DataFrame({"user_id": questions["user_id"], "completions": [r.completions for r in requests]})
    shared = {"cache": cache, "step": m.ledger_step, "progress": progress, "client": client}
    for (uid, to_completions), rows in todo[[not r for r in resumed]].groupby(["user_id", "completions"]):
        messages = [requests[i].messages for i in rows.index]
        got = complete(messages, llm=endpoints[to_completions], user_id=int(uid), **shared)
        for i, r in zip(rows.index, got, strict=True):
            responses[i] = r
    calls = planned.calls + sum(not r.cached for r in responses)  # rows kept from the run count as cached
    cached = planned.cached + sum(r.cached for r in responses)
    errors = planned.errors + sum(r.error is not None for r in responses)
    failed = [r.error is not None for r in responses]
    empty = [r.error is None and not (r.text or "").strip() for r in responses]
    if errors:
        msg = "%s: %d requests failed after retries (status failed); rerun to resume"
        logger.warning(msg, m.name, errors)
    if any(empty):
        msg = "%s: %d answers came back empty or whitespace (scored as the reference does)"
        logger.warning(msg, m.name, sum(empty))

    # write: the generations, context.json and config.json
    gens = pd.DataFrame(
        {
            "user_id": questions["user_id"].astype("int64"),
            "question_index": questions["question_index"].astype("int64"),
            "split": questions["split"].astype(str),
            "generation": [None if bad else r.text for r, bad in zip(responses, failed, strict=True)],
            "status": [STATUS_FAILED if bad else STATUS_OK for bad in failed],
            "method": name,
            "model": first.model,
            "retrieved_ids": _kept(plans, requests, "doc_ids", "kept"),
            "retrieved_scores": _kept(plans, requests, "scores", "kept"),
            "dropped_ids": _kept(plans, requests, "doc_ids", "dropped"),
            "n_documents": [len(r.kept) for r in requests],
            "prompt_tokens": [r.prompt_tokens for r in requests],
            "full_prompt_tokens": [r.full_tokens for r in requests],
            "truncated": [r.truncated for r in requests],
            "sent_as": [r.sent_as for r in requests],
            "finish_reason": [r.finish_reason for r in responses],
            "error": [r.error for r in responses],
            "empty_generation": empty,
            "request_key": [r.key for r in responses],
        }
    ).assign(**planned.columns)
    full = [r.full_tokens for r in requests]
    context = reference_context(full, max_model_len=max_model_len, max_input_tokens=budget)
    sent = np.asarray([r.prompt_tokens for r in requests], dtype=np.int64)
    on_server = {
        "server_kind": getattr(server, "kind", None),
        "server_max_model_len": getattr(server, "max_model_len", None),
    }
    context["pv4kit"] = {  # how the prompts were counted, cut and sent
        "token_counter": measured_by.name,
        "exact": exact,
        "truncation": truncation,
        "sent_as": dict(Counter(r.sent_as for r in requests)),
        "mean_sent_prompt_tokens": round(float(sent.mean()), 1),
        "max_sent_prompt_tokens": int(sent.max()),
        "documents_dropped": int(sum(len(r.dropped) for r in requests)),
        "num_over_budget": int(sum(not r.fits for r in requests)),
        **on_server,
    }
    base_urls = [redact_url(c.base_url) for c in llms]
    served = _served_model(responses, run_dir if any(resumed) else None, first.model, m.name)
    config = {
        "data": getattr(data, "source", None),
        "data_fingerprint": getattr(data, "fingerprint", None),
        "method": name,
        "reference_method": m.reference_method(top_k),
        "model": first.model,
        "served_model": served,
        "base_url": base_urls[0] if len(base_urls) == 1 else base_urls,
        "protocol": first.protocol,
        "split": split,
        "users": users,
        "limit": limit,
        "n_questions": len(questions),
        "top_k": top_k if m.top_k else None,
        "retriever": retriever if ranks else None,
        "embedder": getattr(embedder, "name", None) if dense else None,
        **({"dense_ranking": dense_ranking} if dense else {}),  # only runs that rank by embeddings
        "system_prompt": system,
        "prompt_version": PROMPT_VERSION,
        "temperature": 0.0,
        "max_new_tokens": max_new_tokens,
        "max_model_len": max_model_len,
        "margin": margin,
        "truncation": truncation,
        "token_counter": measured_by.name,
        "token_count_exact": exact,
        **on_server,
        # the engine's version and what it served the model from, when the server reports them (vLLM)
        **({"server_version": server.version} if server and server.version else {}),
        **({"served_from": server.served_model} if server and server.served_model else {}),
        "chat_template_kwargs": dict(first.chat_template_kwargs) if first.chat_template_kwargs else None,
        "n_failed": int(sum(failed)),
        "n_empty_answers": int(sum(empty)),
        "llm_cache": str(cache) if cache is not None else None,
        "llm_calls": calls,
        "llm_resumed": int(sum(resumed)),
        "llm_cached": cached,
        "llm_errors": errors,
        **({m.name: planned.config} if planned.config is not None else {}),
        **(extra_config or {}),
    }
    if orders is not None:
        gens[ORDER_COLUMN] = orders
        config["mcq"] = {"memory": m.name, "seed": mcq_seed, "prompt_version": CHOICE_PROMPT_VERSION}
    out_dir = None
    if run_dir is not None:
        out_dir = write_generations(run_dir, gens, config=config, files={"context.json": context})
        msg = "%s: wrote %s (%d generations; %d called, %d cached)"
        logger.info(msg, m.name, out_dir, len(gens), calls, cached)
    extra = planned.config or {}
    return AnswerRun(gens, context, config, out_dir, calls=calls, cached=cached, errors=errors, extra=extra)


def _check_server(llm: LLMConfig, max_model_len: int, method: Method) -> ServerInfo:
    """Probe the endpoint before anything is sent; refuse a served context length other than the run's."""
    info = probe_server(llm.base_url, llm.model, api_key_env=llm.api_key_env)
    yarn = method.yarn_factor if max_model_len == method.max_model_len else None
    flags = " ".join(vllm_serve_flags(max_model_len=max_model_len, yarn_factor=yarn))
    if info.max_model_len is not None and info.max_model_len != max_model_len:
        raise ValueError(
            f"max_model_len: the server at {llm.endpoint} serves {llm.model!r} with max_model_len "
            f"{info.max_model_len}, but this run uses {max_model_len}; serve it with `vllm serve "
            f"{llm.model} {flags}` or pass max_model_len={info.max_model_len} (not the reference protocol)"
        )
    if info.kind == "vllm" and yarn is not None:
        msg = "vLLM serves %s with max_model_len %s; YaRN cannot be read over HTTP: serve it with %s"
        logger.info(msg, llm.model, info.max_model_len, flags)
    logger.info("endpoint %s: %s (max_model_len %s)", llm.endpoint, info.kind, info.max_model_len)
    return info


def front_requests(
    questions: Sequence[str],
    plans: Sequence[Any],
    *,
    system: str | None,
    tokenizer: Any,
    budget: int,
    server_kind: str,
    protocol: str,
    progress: bool = False,
) -> list[Request]:
    """The reference's rule: tokenise every chat, cut the over-long ones from the front, say how each is sent.

    ``tokenizer`` is a chat tokenizer (:func:`~pv4kit.baselines.tokens.get_chat_tokenizer`). A prompt that
    must be cut for an endpoint that cannot take it is a ``ValueError`` before anything is sent.
    """
    from tqdm.auto import tqdm

    out: list[Request] = []
    bar = {"desc": "prompt tokens", "disable": not progress, "leave": False}
    for question, plan in tqdm(list(zip(questions, plans, strict=True)), **bar):
        chat, every = build_messages(question, plan.documents, system=system), range(len(plan.documents))
        ids = tokenizer.encode_chat(chat) if tokenizer.exact else []
        full = len(ids) if tokenizer.exact else tokenizer.length(chat)
        if full <= budget:
            out.append(Request(chat, False, full, full, "chat", every))
        elif not tokenizer.exact:
            cut = tokenizer.truncate_messages(chat, budget)
            out.append(Request(cut, False, full, tokenizer.length(cut), "messages (estimate)", every))
        elif protocol == "chat" and server_kind in ("vllm", "llama.cpp"):  # completions take token ids
            # the reference's cut: the last ``budget`` ids
            message = {"role": "user", "content": "", "prompt_token_ids": ids[-budget:]}
            out.append(Request([message], True, full, budget, "token ids", every))
        elif protocol == "chat" and server_kind == "llama-cpp-python" and hasattr(tokenizer, "decode"):
            message = {"role": "user", "content": tokenizer.decode(ids[-budget:])}
            out.append(Request([message], True, full, budget, "text", every))
        else:
            out.append(Request(chat, False, full, full, "unsendable", every))
    if unsendable := [r.full_tokens for r in out if r.sent_as == "unsendable"]:
        raise ValueError(
            f"{len(unsendable)} of {len(out)} prompts are over the budget of {budget} tokens (max_model_len -"
            f" max_new_tokens - margin; the longest has {max(unsendable)}): the reference cuts them from the"
            f" front, but this endpoint ({server_kind}, protocol {protocol!r}) cannot take token ids (vLLM,"
            " llama.cpp can); pass truncation='relevance' (drop the least relevant chats) or max_model_len=N"
            f" that fits {max(unsendable)} tokens and the answer; nothing was sent"
        )
    return out


def relevance_requests(
    questions: Sequence[str], plans: Sequence[Any], *, system: str | None, counter: Any, budget: int
) -> list[Request]:
    """pv4kit's rule: whole documents dropped, lowest priority first, until each prompt fits ``budget``.

    Each plan's ``documents`` and ``priority`` (:class:`~pv4kit.baselines.methods.Plan`) are fitted by
    :func:`~pv4kit.baselines.prompting.fit_documents`; each distinct document is counted once.
    """
    memo: dict[str, int] = {}
    options = {"budget": budget, "separator_tokens": max(1, counter.count(["\n\n"])[0])}
    requests = []
    for q, plan in zip(questions, plans, strict=True):
        sizes = count_documents(plan.documents, counter, memo=memo)
        fixed = fixed_prompt_tokens(q, system=system, counter=counter)
        fit = fit_documents(sizes, fixed_tokens=fixed, priority=plan.priority, **options)
        msgs = build_messages(q, [plan.documents[i] for i in fit.kept], system=system)
        requests.append(Request(msgs, False, sent_as="chat", **asdict(fit)))  # FitResult's fields, by name
    return requests


def _kept(plans: list[Any], requests: list[Request], attr: str, which: str) -> list[list[Any]]:
    """Per question, ``plan.<attr>`` at the fit's ``kept`` or ``dropped`` positions ([] without chat ids)."""
    return [
        [getattr(p, attr)[i] for i in getattr(f, which)] if p.doc_ids else []
        for p, f in zip(plans, requests, strict=True)
    ]


def _served_model(
    responses: list[LLMResponse], resumed_from: Any, model: str, method: str
) -> str | list[str] | None:
    """The model(s) the responses name (and, for answers kept from a run, its ``config.json``'s record).

    A name other than the requested model (or a dated snapshot of it, as the OpenAI API reports) is warned of.
    """
    names = {r.model for r in responses if r.model}
    if resumed_from is not None:
        before = read_run_config(resumed_from).get("served_model")
        names.update([before] if isinstance(before, str) else before or [])
    snapshot = re.compile(re.escape(model) + r"(-\d{4}-\d{2}-\d{2}|-\d{4})?")
    if other := sorted(n for n in names if not snapshot.fullmatch(n)):
        msg = "%s: the server answered as %s, not the requested model %r (recorded as served_model)"
        logger.warning(msg, method, other, model)
    return min(names) if len(names) == 1 else (sorted(names) or None)
