"""Methods as a table: a new memory setting is one plan function and one row; the options and their errors."""

from __future__ import annotations

import inspect
import logging
import sqlite3

import pytest

from pv4kit.baselines.methods import Method, MethodPlan, Plan, PlanRequest, register_method
from pv4kit.baselines.run import METHODS, answer
from pv4kit.llm.config import LLMConfig
from pv4kit.scoring.runs import read_generations, read_run_config
from tests.llm_server import FakeLLMServer
from tests.test_baselines import CHATS, _data


def plan_recent(request: PlanRequest) -> MethodPlan:
    """The toy method: the last ``top_k`` chats in topic order."""
    plans, first = [], []
    for uid in request.questions["user_id"]:
        docs = request.data.documents(int(uid))
        ids = list(range(len(docs)))[-request.top_k :]
        plans.append(Plan([docs[i] for i in ids], ids, [float("nan")] * len(ids)))
        first.append(ids[0])
    return MethodPlan(plans, config={"window": request.top_k}, columns={"first_chat": first})


def plan_least_similar(request: PlanRequest) -> MethodPlan:
    """A toy that ranks: the ``top_k`` most similar chats, shown least similar first."""
    plans = []
    for r in request.ranked.itertuples(index=False):
        docs = request.data.documents(int(r.user_id))
        ids, scores = list(r.ranked_ids)[::-1], list(r.ranked_scores)[::-1]
        plans.append(Plan([docs[i] for i in ids], ids, scores))
    return MethodPlan(plans)


@pytest.fixture
def toy_methods():
    added = [
        register_method(Method("recent", plan_recent, "the last top_k chats", top_k=True)),
        register_method(Method("least_similar", plan_least_similar, ranking="always", top_k=True)),
    ]
    yield added
    for m in added:
        del METHODS[m.name]


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


def _llm(server: FakeLLMServer) -> LLMConfig:
    return LLMConfig(model="fake-model", base_url=server.base_url, protocol="chat", max_retries=0)


def test_the_table_holds_the_five_methods():
    assert tuple(METHODS) == ("no_docs", "rag", "full", "persona", "attributes")
    assert METHODS["no_docs"].reference_method(5) == "closed_book"
    assert METHODS["rag"].reference_method(3) == "rag_top3"
    assert METHODS["full"].reference_method(5) == "full_context" and METHODS["full"].max_model_len == 65536
    assert METHODS["full"].ranks("relevance") and not METHODS["full"].ranks("front")
    assert METHODS["attributes"].ledger_step == "attributes:answer"
    assert METHODS["persona"].ledger_step == "answer:persona"


def test_a_new_method_is_one_plan_function_and_one_row(toy_methods, server, tmp_path):
    data, cache = _data(), tmp_path / "llm.sqlite"
    run = answer(data, method="recent", top_k=2, llm=_llm(server), run_dir=tmp_path / "r", cache=cache)
    prompts = {p for _, p, _ in server.requests}
    for uid, chats in CHATS.items():
        for i in range(3):
            assert "\n\n".join([*chats[-2:], f"  question {i} of user {uid}?"]) in prompts
    gens = read_generations(tmp_path / "r")
    assert set(gens["method"]) == {"recent"} and len(gens) == 6
    assert [list(ids) for ids in gens["retrieved_ids"]] == [[1, 2]] * 3 + [[2, 3]] * 3
    assert list(gens["first_chat"]) == [1] * 3 + [2] * 3
    cfg = read_run_config(tmp_path / "r")
    assert cfg["method"] == "recent" and cfg["reference_method"] == "recent_top2" and cfg["top_k"] == 2
    assert cfg["recent"] == {"window": 2} and run.extra == {"window": 2}
    assert cfg["retriever"] is None and cfg["embedder"] is None  # it asked for no ranking
    steps = sqlite3.connect(cache).execute("SELECT DISTINCT step FROM usage").fetchall()
    assert steps == [("answer:recent",)]
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        answer(data, method="recent", top_k=0, llm=_llm(server), cache=None)
    with pytest.raises(ValueError, match="dense_ranking must be one of"):  # though no_docs ranks nothing
        answer(data, method="no_docs", dense_ranking="fastest", llm=_llm(server), cache=None)


def test_a_new_method_gets_the_ranking_it_asks_for(toy_methods, server):
    run = answer(
        _data(), method="least_similar", top_k=2, retriever="bm25", llm=_llm(server), users=[131], cache=None
    )
    rag = answer(_data(), method="rag", top_k=2, retriever="bm25", llm=_llm(server), users=[131], cache=None)
    for mine, theirs in zip(run.generations["retrieved_ids"], rag.generations["retrieved_ids"], strict=True):
        assert list(mine) == list(theirs)[::-1]
    assert run.config["retriever"] == "bm25" and run.config["reference_method"] == "least_similar_top2"


def test_a_plan_function_must_plan_every_question(server):
    register_method(Method("broken", lambda request: MethodPlan([Plan([], [], [])])))
    try:
        with pytest.raises(ValueError, match="returned 1 plans for 6 questions"):
            answer(_data(), method="broken", llm=_llm(server), cache=None)
    finally:
        del METHODS["broken"]
    assert server.requests == []


def test_register_method_refuses_a_taken_name_and_a_bad_row():
    with pytest.raises(ValueError, match="already registered"):
        register_method(Method("rag", plan_recent))
    with pytest.raises(ValueError, match="ranking must be one of"):
        Method("x", plan_recent, ranking="sometimes")
    with pytest.raises(TypeError, match="expected a Method"):
        register_method("recent")  # type: ignore[arg-type]


def test_the_knobs_are_keyword_arguments_and_unknown_or_missing_ones_are_named():
    params = inspect.signature(answer).parameters
    assert params["top_k"].default == 5 and params["truncation"].default == "front"
    assert all(p.kind is p.KEYWORD_ONLY for name, p in params.items() if name != "data")
    llm = LLMConfig(model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match="unexpected keyword argument 'topk'"):
        answer(_data(), method="rag", llm=llm, topk=3)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'method'"):
        answer(_data(), llm=llm)


def test_the_model_that_answered_is_recorded_and_a_mismatch_is_warned(server, tmp_path, caplog):
    """config.json names the model the responses came from (issue 23.7), and a rerun keeps it."""
    data, llm = _data(), _llm(server)
    options = {"method": "no_docs", "llm": llm, "users": [130], "limit": 3, "cache": None, "progress": False}
    assert answer(data, **options).config["served_model"] == "fake-model"
    server.served_as = "other-model-7b"
    with caplog.at_level(logging.WARNING, logger="pv4kit.baselines.run"):
        answer(data, **options, run_dir=tmp_path / "run")
    assert read_run_config(tmp_path / "run")["served_model"] == "other-model-7b"
    assert "answered as ['other-model-7b'], not the requested model 'fake-model'" in caplog.text
    server.served_as = None
    sent = len(server.requests)
    again = answer(data, **options, run_dir=tmp_path / "run")  # every answer kept from the run
    assert len(server.requests) == sent and again.config["served_model"] == "other-model-7b"
