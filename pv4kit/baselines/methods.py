"""The memory settings of :func:`pv4kit.baselines.run.answer` as a table, and the options they read.

A method is a :class:`Method` row in :data:`METHODS`: a small *plan* function that says, for every
question, which documents go in the user turn before it (in display order, with their chat ids and
similarities, and which to drop first when the prompt is over budget), plus what the run needs around it
(a ranking of the chats, ``top_k``, the default context length, the reference's name for the setting).
:func:`~pv4kit.baselines.run.answer` does the rest the same way for every method: it fits the prompts
to the budget, sends them, frames and writes the run.

The table's rows:

* ``no_docs``: nothing (the reference's ``closed_book``);
* ``rag``: the ``top_k`` chats most similar to the question, most similar first (dense with the
  embedder and its cache, or ``retriever="bm25"``);
* ``full``: every chat in topic order (the reference's ``full_context``); an over-long prompt is cut
  from the front of its tokens as the reference does (:mod:`pv4kit.baselines.truncation`), or with
  ``truncation="relevance"`` the chats *least similar to the question* are dropped, the rest staying in
  topic order;
* ``persona``: the explicit persona profile instead of chats (the PersonaFeedback setting, an upper
  bound on what memory could give);
* ``attributes``: the Re-Centering pipeline applied to PV4 (:mod:`pv4kit.baselines.attributes`): attributes
  extracted from the chats once per user, the relevant ones selected per question, the answer written
  from them.

Adding a memory setting is one plan function and one row::

    def plan_recent(request: PlanRequest) -> MethodPlan:
        plans = []
        for uid in request.questions["user_id"]:
            docs = request.data.documents(int(uid))
            ids = list(range(len(docs)))[-request.options.top_k :]
            plans.append(Plan([docs[i] for i in ids], ids, [float("nan")] * len(ids)))
        return MethodPlan(plans)

    register_method(Method("recent", plan_recent, "the last top_k chats", top_k=True))
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pv4kit._options import check_number, check_option_names, merge_options
from pv4kit.baselines.attributes import attribute_contexts
from pv4kit.baselines.prompting import DEFAULT_MARGIN, SYSTEM_PROMPT, TokenCounter
from pv4kit.baselines.tokens import FULL_CONTEXT_LENGTH, FULL_CONTEXT_YARN_FACTOR
from pv4kit.llm.config import LLMConfig

#: the context length of a method that sets none (the reference's window for every method but ``full``)
DEFAULT_MAX_MODEL_LEN = 32768
#: when a method ranks the user's chats: never, for every run, or only for ``truncation="relevance"``
RANKINGS = ("never", "always", "relevance")


@dataclass(frozen=True, kw_only=True)
class AnswerOptions:
    """The knobs of one answer run (the keyword arguments of :func:`~pv4kit.baselines.run.answer`).

    Attributes:
        method: A name in :data:`METHODS`.
        llm: Where to send requests (model, base URL, protocol, concurrency); temperature is set to 0 and
            the output cap to ``max_new_tokens``. A list of configs for the same model (e.g. two local
            vLLM servers) shares the requests round-robin.
        run_dir: Where to write the run (``runs/<name>``); ``None`` writes nothing.
        split: ``"test"``, ``"validation"`` or ``"train"``.
        top_k: Chats per question for ``rag``.
        retriever: ``"dense"`` or ``"bm25"`` (``rag``; ``full`` uses it to choose what to drop).
        embedder: An :class:`~pv4kit.embeddings.models.Embedder` for dense retrieval (default: the
            reference's ``Qwen/Qwen3-Embedding-4B`` on any device, loaded when a dense ranking is needed;
            MiniLM only when passed, e.g. ``get_embedder("minilm")``).
        dense_ranking: ``"reference"`` (float16 vectors ranked with the reference's torch lines, ties as
            torch orders them) or ``"stable"`` (float32 cosines, ties in chat order); see
            :func:`~pv4kit.baselines.retrieve.rank_questions`.
        embed_cache: Embedding cache (see :func:`pv4kit.embeddings.models.embed_texts`).
        cache: SQLite response cache and usage ledger of :func:`pv4kit.llm.client.complete` (``True``: the
            shared default file; ``None``: off).
        max_model_len: Model context length (default:
            :func:`~pv4kit.baselines.run.default_max_model_len`; 65,536 for ``full``, the reference's
            PV4 full-context window with YaRN x2).
        max_new_tokens: Output token cap.
        margin: Tokens kept free besides the output (the reference's 32).
        token_counter: ``truncation="relevance"`` only: how to count the parts of a prompt (default:
            ``ceil(chars / 4)``).
        tokenizer: ``truncation="front"``: the prompt tokenizer, a
            :class:`~pv4kit.baselines.tokens.ChatTokenizer`, a Hugging Face name/path or tokenizer (its chat
            template with thinking off), ``"server"`` or ``"chars"``; ``None``: the server's own
            (vLLM, llama.cpp), else the logged chars/4 estimate (see :mod:`pv4kit.baselines.tokens`).
        truncation: ``"front"`` (the reference: the whole prompt's tokens cut from the front, see
            :mod:`pv4kit.baselines.truncation`) or ``"relevance"`` (pv4kit: the least relevant chats dropped).
        check_server: Ask the endpoint (``GET /v1/models``) what it is and its ``max_model_len`` before
            sending anything; a different context length is refused.
        system: System prompt.
        mcq: Multiple choice (``pv4kit answer --method mcq``): the five candidates follow the question in a
            seeded order, labelled A-E, and the model answers with a letter; the run is scored by the letter
            (:mod:`pv4kit.scoring.choices`) and named ``mcq_<method>``.
        mcq_seed: Seed of the per-question order of the candidates.
        users: Only these users.
        limit: Only the first N questions (sorted by user and question index).
        client: An injected OpenAI-like client (tests).
        progress: Progress bars.
        extra_config: More fields for ``config.json``.
    """

    method: str
    llm: LLMConfig | list[LLMConfig]
    run_dir: str | os.PathLike[str] | None = None
    split: str = "test"
    top_k: int = 5
    retriever: str = "dense"
    embedder: Any = None
    dense_ranking: str = "reference"
    embed_cache: Any = True
    cache: str | os.PathLike[str] | bool | None = True
    max_model_len: int | None = None
    max_new_tokens: int = 256
    margin: int = DEFAULT_MARGIN
    token_counter: TokenCounter | None = None
    tokenizer: Any = None
    truncation: str = "front"
    check_server: bool = True
    system: str = SYSTEM_PROMPT
    mcq: bool = False
    mcq_seed: int = 0
    users: list[int] | None = None
    limit: int | None = None
    client: Any = None
    progress: bool = True
    extra_config: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        check_number(self.max_model_len, "max_model_len", ge=1, integer=True, allow_none=True)
        check_number(self.max_new_tokens, "max_new_tokens", ge=1, integer=True)
        check_number(self.margin, "margin", ge=0, integer=True)
        check_number(self.limit, "limit", ge=1, integer=True, allow_none=True)


def answer_options(options: AnswerOptions | None = None, /, **overrides: Any) -> AnswerOptions:
    """``options`` with ``overrides`` applied, or new options from ``overrides`` alone.

    Raises:
        TypeError: For a name that is not an option (with the closest one), or a missing ``method``/``llm``.
    """
    if options is None:
        check_option_names(AnswerOptions, overrides, where="answer", noun="an unknown option")
        missing = [n for n in ("method", "llm") if n not in overrides]
        if missing:
            raise TypeError(f"answer: missing option {missing[0]!r} (methods: {', '.join(METHODS)})")
    return merge_options(AnswerOptions, options, overrides, where="answer", noun="an unknown option")


@dataclass
class Plan:
    """What one question's prompt holds before the budget.

    Attributes:
        documents: The texts before the question, in display order.
        doc_ids: Their chat positions (empty when the documents are not chats, e.g. a persona).
        scores: Their similarities to the question (NaN when not ranked).
        priority: Positions into ``documents``, most relevant first (``truncation="relevance"`` drops from
            the end); ``None``: display order.
    """

    documents: list[str]
    doc_ids: list[int]
    scores: list[float]
    priority: list[int] | None = None


@dataclass
class MethodPlan:
    """A method's plans for every question, and what planning cost and found.

    Attributes:
        plans: One :class:`Plan` per question, in question order.
        calls: LLM requests planning sent (``attributes``: extraction and selection).
        cached: LLM requests planning took from the cache.
        errors: LLM requests of planning that failed.
        config: A section for ``config.json`` under the method's name (``None``: none).
        columns: More columns for ``generations.parquet`` (one value per question each).
    """

    plans: list[Plan]
    calls: int = 0
    cached: int = 0
    errors: int = 0
    config: dict[str, Any] | None = None
    columns: dict[str, list[Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanRequest:
    """What a plan function sees.

    Attributes:
        data: The :class:`~pv4kit.dataset.load.PV4Data`.
        questions: The questions of the run (``user_id, question_index, question, ...``), in order.
        options: The run's :class:`AnswerOptions`.
        ranked: For a method that ranks: one row per question with ``ranked_ids`` and ``ranked_scores``
            (most similar first; the first ``top_k`` for a method that uses ``top_k``), else ``None``.
        llms: The greedy endpoint configs (for a method that asks the model while planning).
        counter: The token counter of the run.
        budget: Largest prompt in tokens.
    """

    data: Any
    questions: pd.DataFrame
    options: AnswerOptions
    ranked: pd.DataFrame | None
    llms: list[LLMConfig]
    counter: TokenCounter
    budget: int


PlanFunction = Callable[[PlanRequest], MethodPlan]


@dataclass(frozen=True)
class Method:
    """One memory setting: its plan function and what the run needs around it.

    Attributes:
        name: The method's name (``config.json``'s ``method``, the CLI's ``--method``).
        plan: Builds every question's :class:`Plan` from a :class:`PlanRequest`.
        description: One line for the docs and the CLI.
        reference_name: The reference's folder name for the setting (``None``: the same name).
        ranking: When the user's chats are ranked for the plan, one of :data:`RANKINGS`.
        top_k: Whether the method keeps the first ``top_k`` chats (checked ``>= 1``, named
            ``<name>_top<k>`` by the reference, written to ``config.json``).
        max_model_len: The default context length of the method's runs.
        yarn_factor: The YaRN factor the reference serves the default context length with (``None``: none).
        step: Ledger label of the answer requests (default ``answer:<name>``).
    """

    name: str
    plan: PlanFunction
    description: str = ""
    reference_name: str | None = None
    ranking: str = "never"
    top_k: bool = False
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    yarn_factor: float | None = None
    step: str | None = None

    def __post_init__(self) -> None:
        if self.ranking not in RANKINGS:
            raise ValueError(f"Method {self.name!r}: ranking must be one of {RANKINGS}, got {self.ranking!r}")

    def ranks(self, truncation: str) -> bool:
        """Whether a run with this ``truncation`` ranks the chats."""
        return self.ranking == "always" or (self.ranking == "relevance" and truncation == "relevance")

    def reference_method(self, top_k: int) -> str:
        """The reference's name of a run (``rag_top5``, ``closed_book``, ...)."""
        name = self.reference_name or self.name
        return f"{name}_top{top_k}" if self.top_k else name

    @property
    def ledger_step(self) -> str:
        """The ``step`` of the answer requests in the usage ledger."""
        return self.step or f"answer:{self.name}"


# --------------------------------------------------------------------------- the plan functions


def plan_no_docs(request: PlanRequest) -> MethodPlan:
    """Nothing before the question (the reference's ``closed_book``)."""
    return MethodPlan([Plan([], [], []) for _ in range(len(request.questions))])


def plan_rag(request: PlanRequest) -> MethodPlan:
    """The ``top_k`` chats most similar to the question, most similar first."""
    assert request.ranked is not None
    plans = []
    for r in request.ranked.itertuples(index=False):
        docs = request.data.documents(int(r.user_id))
        ids, scores = list(r.ranked_ids), list(r.ranked_scores)
        plans.append(Plan([docs[i] for i in ids], ids, scores))
    return MethodPlan(plans)


def plan_full(request: PlanRequest) -> MethodPlan:
    """Every chat in topic order; with a ranking, the least similar are dropped first."""
    if request.ranked is None:  # nothing to rank: the reference's cut from the front decides
        plans = []
        for uid in request.questions["user_id"]:
            docs = request.data.documents(int(uid))
            plans.append(Plan(list(docs), list(range(len(docs))), [float("nan")] * len(docs)))
        return MethodPlan(plans)
    plans = []
    for r in request.ranked.itertuples(index=False):
        docs = request.data.documents(int(r.user_id))
        by_id = dict(zip(r.ranked_ids, r.ranked_scores, strict=True))
        ids = list(range(len(docs)))
        plans.append(Plan(list(docs), ids, [by_id[i] for i in ids], priority=list(r.ranked_ids)))
    return MethodPlan(plans)


def plan_persona(request: PlanRequest) -> MethodPlan:
    """The explicit persona profile instead of chats."""
    plans = []
    for uid in request.questions["user_id"]:
        persona = request.data.persona(int(uid))
        if not persona:
            raise ValueError(
                f"method 'persona': user {uid} has no persona profile in {request.data.source}; load the "
                "data next to its raw tree (raw/personas/user_N.txt)"
            )
        plans.append(Plan([persona], [], []))
    return MethodPlan(plans)


def plan_attributes(request: PlanRequest) -> MethodPlan:
    """The selected attributes of the user as one document (:mod:`pv4kit.baselines.attributes`)."""
    opts = request.options
    docs, info = attribute_contexts(
        request.data,
        request.questions,
        llm=request.llms,
        cache=opts.cache,
        counter=request.counter,
        budget=request.budget,
        system=opts.system,
        client=opts.client,
        progress=opts.progress,
    )
    calls, cached, errors = info.pop("calls"), info.pop("cached"), info.pop("errors")
    columns = {
        "n_attributes": info.pop("n_attributes_per_question"),
        "attributes_fallback": info.pop("fallback_per_question"),
    }
    keys = zip(request.questions["user_id"], request.questions["question_index"], strict=True)
    plans = [Plan([d] if (d := docs[(int(u), int(i))]) else [], [], []) for u, i in keys]
    return MethodPlan(plans, calls=calls, cached=cached, errors=errors, config=info, columns=columns)


# --------------------------------------------------------------------------- the table

#: every memory setting :func:`~pv4kit.baselines.run.answer` knows, by name (see :func:`register_method`)
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("no_docs", plan_no_docs, "nothing before the question", reference_name="closed_book"),
        Method("rag", plan_rag, "the top_k most similar chats", ranking="always", top_k=True),
        Method(
            "full",
            plan_full,
            "every chat in topic order",
            reference_name="full_context",
            ranking="relevance",
            max_model_len=FULL_CONTEXT_LENGTH,
            yarn_factor=FULL_CONTEXT_YARN_FACTOR,
        ),
        Method("persona", plan_persona, "the persona profile instead of chats"),
        Method(
            "attributes",
            plan_attributes,
            "attributes extracted from the chats, the relevant ones selected per question",
            step="attributes:answer",
        ),
    )
}


def register_method(method: Method, *, replace: bool = False) -> Method:
    """Add ``method`` to :data:`METHODS` (``replace=True`` to change an existing row); returns it."""
    if not isinstance(method, Method):
        raise TypeError(f"method: expected a Method, got {type(method).__name__}")
    if method.name in METHODS and not replace:
        raise ValueError(f"method {method.name!r} is already registered; pass replace=True to change it")
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    """The row of ``name`` in :data:`METHODS`; an unknown name gets the closest one."""
    if name in METHODS:
        return METHODS[name]
    close = difflib.get_close_matches(str(name), list(METHODS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"method must be one of {tuple(METHODS)}, got {name!r}{hint}")
