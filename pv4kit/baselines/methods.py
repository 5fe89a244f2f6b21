"""The memory settings of :func:`pv4kit.baselines.run.answer` as a table.

A method is a :class:`Method` row in :data:`METHODS`: a *plan* function that says, for every question, which
documents go before it, plus what the run needs around it. Adding one: :func:`register_method`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pv4kit.baselines.attributes import attribute_contexts
from pv4kit.llm.config import LLMConfig

#: the context length of a method's runs unless it says otherwise (the reference's, except for ``full``)
DEFAULT_MAX_MODEL_LEN = 32768
#: when a method ranks the user's chats: never, for every run, or only for ``truncation="relevance"``
RANKINGS = ("never", "always", "relevance")


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
        calls: LLM requests planning sent; ``cached`` and ``errors`` likewise.
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
        questions: The questions of the run (``user_id, question_index, question, ...``), in order.
        ranked: For a method that ranks: one row per question with ``ranked_ids`` and ``ranked_scores``
            (most similar first; the first ``top_k`` for a method that uses ``top_k``), else ``None``.
        llms: The greedy endpoint configs (for a method that asks the model while planning).
        counter: The run's text token counter.
        budget: Largest prompt in tokens.
        data, top_k, system, cache, client, progress: The :func:`~pv4kit.baselines.run.answer` arguments.
    """

    data: Any
    questions: pd.DataFrame
    ranked: pd.DataFrame | None
    llms: list[LLMConfig]
    counter: Any
    budget: int
    top_k: int
    system: str
    cache: Any
    client: Any
    progress: bool


@dataclass(frozen=True)
class Method:
    """One memory setting: its plan function and what the run needs around it.

    Attributes:
        plan: Builds every question's :class:`Plan` from a :class:`PlanRequest`.
        reference_name: The reference's folder name for the setting (``None``: the same name).
        ranking: When the user's chats are ranked for the plan, one of :data:`RANKINGS`.
        top_k: Whether the method keeps the first ``top_k`` chats (named ``<name>_top<k>`` by the reference).
        yarn_factor: The YaRN factor the reference serves the default ``max_model_len`` with.
        step: Ledger label of the answer requests (default ``answer:<name>``).
    """

    name: str
    plan: Callable[[PlanRequest], MethodPlan]
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
        return (self.reference_name or self.name) + (f"_top{top_k}" if self.top_k else "")

    @property
    def ledger_step(self) -> str:
        """The ``step`` of the answer requests in the usage ledger."""
        return self.step or f"answer:{self.name}"


def plan_no_docs(request: PlanRequest) -> MethodPlan:
    """Nothing before the question (the reference's ``closed_book``)."""
    return MethodPlan([Plan([], [], []) for _ in range(len(request.questions))])


def plan_rag(request: PlanRequest) -> MethodPlan:
    """The ``top_k`` chats most similar to the question, most similar first."""
    plans = []
    for r in request.ranked.itertuples(index=False):
        docs = request.data.documents(int(r.user_id))
        ids, scores = list(r.ranked_ids), list(r.ranked_scores)
        plans.append(Plan([docs[i] for i in ids], ids, scores))
    return MethodPlan(plans)


def plan_full(request: PlanRequest) -> MethodPlan:
    """Every chat in topic order; with a ranking, the least similar are dropped first."""
    plans = []
    for pos, uid in enumerate(request.questions["user_id"]):
        docs = list(request.data.documents(int(uid)))
        ids = list(range(len(docs)))
        if request.ranked is None:  # nothing to rank: the reference's cut from the front decides
            plans.append(Plan(docs, ids, [float("nan")] * len(docs)))
        else:
            ranked = request.ranked.iloc[pos]
            by_id = dict(zip(ranked["ranked_ids"], ranked["ranked_scores"], strict=True))
            plans.append(Plan(docs, ids, [by_id[i] for i in ids], priority=list(ranked["ranked_ids"])))
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
    options = {n: getattr(request, n) for n in ("cache", "counter", "budget", "system", "client", "progress")}
    docs, info = attribute_contexts(request.data, request.questions, llm=request.llms, **options)
    counts = {k: info.pop(k) for k in ("calls", "cached", "errors")}
    renamed = {"n_attributes": "n_attributes_per_question", "attributes_fallback": "fallback_per_question"}
    columns = {column: info.pop(key) for column, key in renamed.items()}
    keys = zip(request.questions["user_id"], request.questions["question_index"], strict=True)
    plans = [Plan([d] if (d := docs[(int(u), int(i))]) else [], [], []) for u, i in keys]
    return MethodPlan(plans, **counts, config=info, columns=columns)


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
            max_model_len=65_536,  # the reference's PV4 full-context window: YaRN x2 over Qwen3's 32,768
            yarn_factor=2.0,
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
