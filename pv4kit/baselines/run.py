"""Answer runs: the PV4 baselines over five memory settings, on any OpenAI-compatible endpoint.

:func:`answer` writes ``runs/<name>/`` in the run format (:mod:`pv4kit.scoring.runs`) plus ``context.json``.
The methods (what goes in the user turn before the question: ``no_docs``, ``rag``, ``full``, ``persona``,
``attributes``) are rows of the table :data:`~pv4kit.baselines.methods.METHODS`, each a small plan function
(described in :mod:`pv4kit.baselines.methods`).

:func:`answer` itself does the same for every method: it **plans** (the method's plan function, after
ranking the chats when the method asks for it), **fits** the prompts to the budget, **calls** the model,
**frames** the answers and **writes** the run. A new method is one plan function and one
:class:`~pv4kit.baselines.methods.Method` row (:func:`~pv4kit.baselines.methods.register_method`).

Decoding is greedy with at most ``max_new_tokens`` (256) new tokens. Every call goes through
:func:`pv4kit.llm.client.complete` with its response cache, so rerunning a finished run makes no requests;
calls are labelled in the ledger as ``answer:<method>`` (and ``attributes:*`` for the pipeline's steps).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit.baselines.methods import (
    DEFAULT_MAX_MODEL_LEN,
    METHODS,
    AnswerOptions,
    Method,
    MethodPlan,
    Plan,
    PlanRequest,
    answer_options,
    get_method,
    register_method,
)
from pv4kit.baselines.prompting import PROMPT_VERSION, CharEstimate, FitResult, TokenCounter, build_messages
from pv4kit.baselines.retrieve import DENSE_RANKINGS, rank_questions
from pv4kit.baselines.tokens import (
    NO_THINKING,
    ChatTokenizer,
    ServerInfo,
    get_chat_tokenizer,
    probe_server,
    reference_budget,
    vllm_serve_flags,
)
from pv4kit.baselines.truncation import Request, context_report, front_requests, relevance_requests
from pv4kit.embeddings.models import get_embedder
from pv4kit.llm.client import cache_key, complete
from pv4kit.llm.config import LLMConfig, LLMResponse
from pv4kit.llm.local import LOCAL_ALIAS, LOCAL_MAX_MODEL_LEN, LOCAL_MODEL_ID
from pv4kit.redact import redact_url
from pv4kit.schema import QUESTION_KEY
from pv4kit.scoring.choices import CHOICE_PROMPT_VERSION, ORDER_COLUMN, choice_order, mcq_suffix
from pv4kit.scoring.failures import STATUS_FAILED, STATUS_OK, previous_answers
from pv4kit.scoring.runs import read_run_config, write_generations

__all__ = [
    "METHODS",
    "AnswerOptions",
    "AnswerRun",
    "Method",
    "MethodPlan",
    "Plan",
    "PlanRequest",
    "answer",
    "context_report",
    "default_max_model_len",
    "register_method",
    "select_questions",
]

logger = logging.getLogger(__name__)

#: the reference's folder names for the same settings
REFERENCE_NAMES = {m.name: m.reference_name for m in METHODS.values() if m.reference_name}
CONTEXT_FILE = "context.json"
#: ``"front"``: the reference's cut of the whole prompt's tokens; ``"relevance"``: pv4kit's dropping of chats
TRUNCATIONS = ("front", "relevance")


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
    """The context length of a run: the local model's, else the method's window.

    8192 for the local model; 65,536 for ``full`` (PV4's full context, YaRN x2) and 32,768 for the other
    methods (:attr:`Method.max_model_len <pv4kit.baselines.methods.Method.max_model_len>`).
    """
    if model in (LOCAL_MODEL_ID, LOCAL_ALIAS):
        return LOCAL_MAX_MODEL_LEN
    return METHODS[method].max_model_len if method in METHODS else DEFAULT_MAX_MODEL_LEN


def _check_server(llms: list[LLMConfig], max_model_len: int, *, method: Method) -> ServerInfo:
    """Probe the endpoint before anything is sent; refuse a served context length other than the run's."""
    info = probe_server(llms[0].base_url, llms[0].model, api_key_env=llms[0].api_key_env)
    if info.max_model_len is not None and info.max_model_len != max_model_len:
        yarn = method.yarn_factor if max_model_len == method.max_model_len else None
        flags = " ".join(vllm_serve_flags(max_model_len=max_model_len, yarn_factor=yarn))
        raise ValueError(
            f"max_model_len: the server at {llms[0].endpoint} serves {llms[0].model!r} with max_model_len "
            f"{info.max_model_len}, but this run uses {max_model_len}; serve it with `vllm serve "
            f"{llms[0].model} {flags}` or pass max_model_len={info.max_model_len} (not the reference "
            "protocol)"
        )
    if info.kind == "vllm" and method.yarn_factor is not None:
        logger.info(
            "vLLM serves %s with max_model_len %s; YaRN cannot be read over HTTP: serve it with %s",
            llms[0].model,
            info.max_model_len,
            " ".join(vllm_serve_flags(max_model_len=max_model_len, yarn_factor=method.yarn_factor)),
        )
    logger.info("endpoint %s: %s (max_model_len %s)", llms[0].endpoint, info.kind, info.max_model_len)
    return info


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


# --------------------------------------------------------------------------- settle: what the run uses


@dataclass
class _Settings:
    """What :func:`answer` settled before planning: the method row, endpoints, budget and token counting."""

    method: Method
    llms: list[LLMConfig]
    max_model_len: int
    budget: int
    server: ServerInfo | None
    counter: TokenCounter
    chat_tok: ChatTokenizer | None
    ranks: bool
    dense: bool
    embedder: Any

    @property
    def llm(self) -> LLMConfig:
        return self.llms[0]

    @property
    def counter_name(self) -> str:
        return self.chat_tok.name if self.chat_tok is not None else self.counter.name

    @property
    def exact(self) -> bool:
        return bool(self.chat_tok is not None and self.chat_tok.exact)


def _endpoints(opts: AnswerOptions) -> list[LLMConfig]:
    """The greedy configs of the run, all for one model and protocol."""
    llms = [
        dataclasses.replace(c, temperature=0.0, max_output_tokens=opts.max_new_tokens)
        for c in (opts.llm if isinstance(opts.llm, list | tuple) else [opts.llm])
    ]
    if not llms or len({(c.model, c.protocol) for c in llms}) != 1:
        raise ValueError(f"llm: expected one model and protocol across the configs, got {opts.llm!r}")
    return llms


def _settle(opts: AnswerOptions) -> _Settings:
    """Check the options, probe the server and choose the token counting (before any question is read)."""
    method = get_method(opts.method)
    if method.top_k and opts.top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {opts.top_k}")
    llms = _endpoints(opts)
    if opts.truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {opts.truncation!r}")
    if opts.dense_ranking not in DENSE_RANKINGS:
        raise ValueError(f"dense_ranking must be one of {DENSE_RANKINGS}, got {opts.dense_ranking!r}")
    max_model_len = opts.max_model_len or default_max_model_len(llms[0].model, method=method.name)
    budget = reference_budget(max_model_len, opts.max_new_tokens, margin=opts.margin)
    if max_model_len - opts.max_new_tokens - opts.margin < 1:
        logger.warning(
            "max_model_len %d leaves no room for a prompt after max_new_tokens %d and margin %d: the budget "
            "is clamped to 1 token, as the reference does, so every prompt is cut to its last token",
            max_model_len,
            opts.max_new_tokens,
            opts.margin,
        )
    server = None
    if opts.check_server and opts.client is None:
        server = _check_server(llms, max_model_len, method=method)
    if server is not None and server.kind == "vllm":
        llms = [
            dataclasses.replace(c, chat_template_kwargs=dict(NO_THINKING)) if c.protocol == "chat" else c
            for c in llms
        ]
    chat_tok = None
    if opts.truncation == "front":
        tok, llm = opts.tokenizer, llms[0]
        chat_tok = (
            tok
            if isinstance(tok, ChatTokenizer)
            else get_chat_tokenizer(
                tok, base_url=llm.base_url, model=llm.model, server=server, api_key_env=llm.api_key_env
            )
        )
    ranks = method.ranks(opts.truncation)
    return _Settings(
        method=method,
        llms=llms,
        max_model_len=max_model_len,
        budget=budget,
        server=server,
        counter=opts.token_counter or CharEstimate(),
        chat_tok=chat_tok,
        ranks=ranks,
        dense=ranks and opts.retriever == "dense",
        embedder=opts.embedder,
    )


# --------------------------------------------------------------------------- plan


def _choice_orders(questions: pd.DataFrame, opts: AnswerOptions) -> list[list[int]] | None:
    """The seeded candidate order of every question of a multiple-choice run (``None`` otherwise)."""
    if not opts.mcq:
        return None
    return [
        choice_order(u, i, seed=opts.mcq_seed)
        for u, i in zip(questions["user_id"], questions["question_index"], strict=True)
    ]


def _plan(data: Any, questions: pd.DataFrame, opts: AnswerOptions, s: _Settings) -> MethodPlan:
    """The method's plans, with the chats ranked first when the method asks for it."""
    ranked = None
    if s.ranks:
        ranked = rank_questions(
            data,
            questions,
            retriever=opts.retriever,
            embedder=s.embedder,
            cache=opts.embed_cache,
            top_k=opts.top_k if s.method.top_k else None,
            dense_ranking=opts.dense_ranking,
        )
    request = PlanRequest(data, questions, opts, ranked, s.llms, s.counter, s.budget)
    planned = s.method.plan(request)
    if len(planned.plans) != len(questions):
        raise ValueError(
            f"method {s.method.name!r}: its plan function returned {len(planned.plans)} plans for "
            f"{len(questions)} questions"
        )
    return planned


# --------------------------------------------------------------------------- fit


def _front_fit(request: Request, n_documents: int) -> FitResult:
    """A front-truncated prompt keeps every document position (some may be cut in part or whole)."""
    return FitResult(
        kept=list(range(n_documents)),
        dropped=[],
        prompt_tokens=request.prompt_tokens,
        full_tokens=request.full_tokens,
        fits=True,
    )


def _fit_front(
    questions: pd.DataFrame, plans: list[Plan], opts: AnswerOptions, s: _Settings
) -> tuple[list[Request], list[FitResult]]:
    """The reference's rule: every document in the prompt, the whole prompt's tokens cut from the front."""
    requests = front_requests(
        [
            build_messages(q, plan.documents, system=opts.system)
            for q, plan in zip(questions["question"], plans, strict=True)
        ],
        tokenizer=s.chat_tok,
        budget=s.budget,
        server_kind=s.server.kind if s.server else "other",
        protocol=s.llm.protocol,
        progress=opts.progress,
    )
    return requests, [_front_fit(r, len(p.documents)) for r, p in zip(requests, plans, strict=True)]


def _fit_relevance(
    questions: pd.DataFrame, plans: list[Plan], opts: AnswerOptions, s: _Settings
) -> tuple[list[Request], list[FitResult]]:
    """pv4kit's rule (:func:`~.truncation.relevance_requests`), with a warning if it dropped."""
    requests, fitted = relevance_requests(
        list(questions["question"]),
        [p.documents for p in plans],
        [p.priority for p in plans],
        system=opts.system,
        counter=s.counter,
        budget=s.budget,
    )
    n_trunc = sum(f.truncated for f in fitted)
    if n_trunc:
        logger.warning(
            "%s: %d of %d prompts dropped documents to fit %d tokens",
            s.method.name,
            n_trunc,
            len(fitted),
            s.budget,
        )
    return requests, fitted


# --------------------------------------------------------------------------- call


def _send(
    requests: list[Request], questions: pd.DataFrame, opts: AnswerOptions, s: _Settings
) -> tuple[list[Any], list[bool]]:
    """Send every request not answered in the run already (failed rows are asked again).

    Returns:
        The responses in question order, and whether each was taken from the existing run.
    """
    completions = [dataclasses.replace(c, protocol="completions") for c in s.llms]
    keys = [cache_key(r.messages, (completions if r.completions else s.llms)[0]) for r in requests]
    done = previous_answers(opts.run_dir) if opts.run_dir is not None else {}
    responses: list[Any] = [None] * len(requests)
    resumed = [False] * len(requests)
    for i, k in enumerate(keys):
        if k in done:
            text, finish = done[k]
            responses[i] = LLMResponse(text=text, cached=True, finish_reason=finish, key=k)
            resumed[i] = True
    step = s.method.ledger_step
    if any(resumed):
        logger.info(
            "%s: %d answers kept from the existing run, %d to ask", step, sum(resumed), resumed.count(False)
        )
    for uid, rows in questions.groupby("user_id", sort=True):
        for is_completion in (False, True):
            pos = [i for i in rows.index if not resumed[i] and requests[i].completions is is_completion]
            if not pos:
                continue
            got = complete(
                [requests[i].messages for i in pos],
                llm=completions if is_completion else s.llms,
                cache=opts.cache,
                step=step,
                user_id=int(uid),
                progress=opts.progress,
                client=opts.client,
            )
            for i, r in zip(pos, got, strict=True):
                responses[i] = r
    return responses, resumed


@dataclass
class _Answers:
    """What came back: the requests sent, their fits, the responses and the request counts."""

    requests: list[Request]
    fitted: list[FitResult]
    responses: list[Any]
    resumed: list[bool]
    calls: int
    cached: int
    errors: int
    n_empty: int


def _call(
    prompts: tuple[list[Request], list[FitResult]],
    planned: MethodPlan,
    questions: pd.DataFrame,
    opts: AnswerOptions,
    s: _Settings,
) -> _Answers:
    """Send the requests and count what was called, cached, failed and empty (planning's requests too)."""
    requests, fitted = prompts
    responses, resumed = _send(requests, questions, opts, s)
    calls = planned.calls + sum(not r.cached for r in responses)  # rows kept from the run count as cached
    cached = planned.cached + sum(r.cached for r in responses)
    errors = planned.errors + sum(r.error is not None for r in responses)
    n_empty = sum(r.error is None and not (r.text or "").strip() for r in responses)
    if errors:
        logger.warning(
            "%s: %d requests failed after retries; recorded as failed (no generation), rerun to resume them",
            s.method.name,
            errors,
        )
    if n_empty:
        logger.warning(
            "%s: %d answers came back empty or whitespace (scored as the reference does)",
            s.method.name,
            n_empty,
        )
    return _Answers(requests, fitted, responses, resumed, calls, cached, errors, n_empty)


# --------------------------------------------------------------------------- frame


def _kept(plans: list[Plan], fitted: list[FitResult], attr: str, which: str) -> list[list[Any]]:
    """Per question, ``plan.<attr>`` at the fit's ``kept`` or ``dropped`` positions ([] without chat ids)."""
    return [
        [getattr(p, attr)[i] for i in getattr(f, which)] if p.doc_ids else []
        for p, f in zip(plans, fitted, strict=True)
    ]


def _frame(
    questions: pd.DataFrame, planned: MethodPlan, got: _Answers, opts: AnswerOptions, s: _Settings
) -> pd.DataFrame:
    """The ``generations.parquet`` frame: one row per question, the method's own columns last."""
    responses, requests, fitted = got.responses, got.requests, got.fitted
    failed = [r.error is not None for r in responses]
    gens = pd.DataFrame(
        {
            "user_id": questions["user_id"].astype("int64"),
            "question_index": questions["question_index"].astype("int64"),
            "split": questions["split"].astype(str),
            "generation": [None if bad else r.text for r, bad in zip(responses, failed, strict=True)],
            "status": [STATUS_FAILED if bad else STATUS_OK for bad in failed],
            "method": s.method.name,
            "model": s.llm.model,
            "retrieved_ids": _kept(planned.plans, fitted, "doc_ids", "kept"),
            "retrieved_scores": _kept(planned.plans, fitted, "scores", "kept"),
            "dropped_ids": _kept(planned.plans, fitted, "doc_ids", "dropped"),
            "n_documents": [len(f.kept) for f in fitted],
            "prompt_tokens": [r.prompt_tokens for r in requests],
            "full_prompt_tokens": [r.full_tokens for r in requests],
            "truncated": [
                r.truncated if opts.truncation == "front" else f.truncated
                for r, f in zip(requests, fitted, strict=True)
            ],
            "sent_as": [r.sent_as for r in requests],
            "finish_reason": [r.finish_reason for r in responses],
            "error": [r.error for r in responses],
            "empty_generation": [r.error is None and not (r.text or "").strip() for r in responses],
            "request_key": [r.key for r in responses],
        }
    )
    for name, values in planned.columns.items():
        gens[name] = values
    return gens


def _served_model(got: _Answers, opts: AnswerOptions, s: _Settings) -> str | list[str] | None:
    """The model(s) the responses name (for answers kept from the run, its ``config.json``'s record).

    A name that is not the requested model (nor a dated snapshot of it, as the OpenAI API reports) is
    warned about: the server, or a gateway before it, answered with another model.
    """
    names = {r.model for r in got.responses if r.model}
    if any(got.resumed):
        before = read_run_config(opts.run_dir).get("served_model")
        names.update([before] if isinstance(before, str) else before or [])
    snapshot = re.compile(re.escape(s.llm.model) + r"(-\d{4}-\d{2}-\d{2}|-\d{4})?")
    other = sorted(n for n in names if not snapshot.fullmatch(n))
    if other:
        logger.warning(
            "%s: the server answered as %s, not the requested model %r (recorded as served_model)",
            s.method.name,
            other,
            s.llm.model,
        )
    ordered = sorted(names)
    return ordered[0] if len(ordered) == 1 else (ordered or None)


def _engine(server: ServerInfo | None) -> dict[str, str | None]:
    """``server_version`` and ``served_from`` of the endpoint (``None`` where unreported)."""
    return {
        "server_version": server.version if server else None,
        "served_from": server.served_model if server else None,
    }


def _config(
    data: Any, questions: pd.DataFrame, planned: MethodPlan, got: _Answers, opts: AnswerOptions, s: _Settings
) -> dict[str, Any]:
    """The ``config.json`` record (without provenance): the settings, then what the requests did."""
    llm, method = s.llm, s.method
    base_urls = [redact_url(c.base_url) for c in s.llms]
    return {
        "data": getattr(data, "source", None),
        "data_fingerprint": getattr(data, "fingerprint", None),
        "method": method.name,
        "reference_method": method.reference_method(opts.top_k),
        "model": llm.model,
        "served_model": _served_model(got, opts, s),
        "base_url": base_urls[0] if len(base_urls) == 1 else base_urls,
        "protocol": llm.protocol,
        "split": opts.split,
        "users": opts.users,
        "limit": opts.limit,
        "n_questions": len(questions),
        "top_k": opts.top_k if method.top_k else None,
        "retriever": opts.retriever if s.ranks else None,
        "embedder": getattr(s.embedder, "name", None) if s.dense else None,
        **({"dense_ranking": opts.dense_ranking} if s.dense else {}),  # only runs that rank by embeddings
        "system_prompt": opts.system,
        "prompt_version": PROMPT_VERSION,
        "temperature": 0.0,
        "max_new_tokens": opts.max_new_tokens,
        "max_model_len": s.max_model_len,
        "margin": opts.margin,
        "truncation": opts.truncation,
        "token_counter": s.counter_name,
        "token_count_exact": s.exact,
        "server_kind": s.server.kind if s.server else None,
        "server_max_model_len": s.server.max_model_len if s.server else None,
        # the engine's version and what it served the model from, when the server reports them (vLLM)
        **{k: v for k, v in _engine(s.server).items() if v is not None},
        "chat_template_kwargs": dict(llm.chat_template_kwargs) if llm.chat_template_kwargs else None,
        "n_failed": int(sum(r.error is not None for r in got.responses)),
        "n_empty_answers": got.n_empty,
        "llm_cache": str(opts.cache) if opts.cache is not None else None,
        "llm_calls": got.calls,
        "llm_resumed": int(sum(got.resumed)),
        "llm_cached": got.cached,
        "llm_errors": got.errors,
        **({method.name: planned.config} if planned.config is not None else {}),
        **(opts.extra_config or {}),
    }


# --------------------------------------------------------------------------- answer


def answer(data: Any, options: AnswerOptions | None = None, **overrides: Any) -> AnswerRun:
    """Answer the questions of one split with one memory setting and write the run.

    Args:
        data: A :class:`~pv4kit.dataset.load.PV4Data` (see :func:`pv4kit.dataset.load.load`).
        options: The run's :class:`~pv4kit.baselines.methods.AnswerOptions` (every knob documented there).
        **overrides: The same knobs by name, e.g. ``answer(data, method="rag", llm=config, top_k=3)``;
            with ``options`` they replace its fields. ``method`` (a name in
            :data:`~pv4kit.baselines.methods.METHODS`) and ``llm`` are required.

    Returns:
        An :class:`AnswerRun`.

    Raises:
        TypeError: For an unknown option name (with the closest one) or a missing ``method``/``llm``.
        ValueError: For an unknown method (with the closest one) or an option out of range.
    """
    opts = answer_options(options, **overrides)
    s = _settle(opts)
    questions = select_questions(data, split=opts.split, users=opts.users, limit=opts.limit)
    if s.dense and s.embedder is None:
        s.embedder = get_embedder("qwen3")
    logger.info(
        "%s on %s: %d questions of %d users, model %s",
        f"mcq_{s.method.name}" if opts.mcq else s.method.name,
        opts.split,
        len(questions),
        questions["user_id"].nunique(),
        s.llm.model,
    )
    planned = _plan(data, questions, opts, s)
    fit = _fit_front if opts.truncation == "front" else _fit_relevance
    orders = _choice_orders(questions, opts)
    asked = questions
    if orders is not None:  # the candidates follow the question, lettered in a seeded order
        suffixes = [mcq_suffix(c, o) for c, o in zip(questions["choices"], orders, strict=True)]
        asked = questions.assign(
            question=[q + x for q, x in zip(questions["question"], suffixes, strict=True)]
        )
    requests, fitted = fit(asked, planned.plans, opts, s)
    got = _call((requests, fitted), planned, asked, opts, s)
    gens = _frame(questions, planned, got, opts, s)
    context = context_report(
        requests,
        fitted,
        max_model_len=s.max_model_len,
        max_input_tokens=s.budget,
        truncation=opts.truncation,
        counter=s.counter_name,
        exact=s.exact,
        server=s.server,
    )
    config = _config(data, questions, planned, got, opts, s)
    if orders is not None:
        gens[ORDER_COLUMN] = orders
        gens["method"] = config["method"] = f"mcq_{s.method.name}"
        config["mcq"] = {
            "memory": s.method.name,
            "seed": opts.mcq_seed,
            "prompt_version": CHOICE_PROMPT_VERSION,
        }
    out_dir = None
    if opts.run_dir is not None:
        out_dir = write_generations(opts.run_dir, gens, config=config, files={CONTEXT_FILE: context})
        logger.info(
            "%s: wrote %s (%d generations; %d called, %d cached)",
            s.method.name,
            out_dir,
            len(gens),
            got.calls,
            got.cached,
        )
    extra = planned.config if planned.config is not None else {}
    return AnswerRun(
        gens, context, config, out_dir, calls=got.calls, cached=got.cached, errors=got.errors, extra=extra
    )
