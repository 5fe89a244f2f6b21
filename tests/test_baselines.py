"""Answer runs: prompt layout, the context budget, retrieval order in runs, caching, the attributes steps."""

from __future__ import annotations

import json
import re
import sqlite3

import pandas as pd
import pytest

from pv4kit.baselines.attributes import (
    attribute_document,
    parse_attributes,
    parse_selection,
    selection_messages,
)
from pv4kit.baselines.prompting import SYSTEM_PROMPT, build_messages, fit_documents
from pv4kit.baselines.run import answer, select_questions
from pv4kit.baselines.tokens import CharEstimate, get_token_counter
from pv4kit.dataset.load import PV4Data
from pv4kit.llm.config import LLMConfig
from pv4kit.scoring.runs import read_generations, read_run_config
from tests.llm_server import FakeLLMServer, prompt_of

CHATS = {
    130: ["I bake sourdough every weekend.", "My dog Rex loves the beach.", "I fix my own bike."],
    131: ["I am vegan.", "I play chess online.", "I live in Oslo.", "I teach piano."],
}


def _data() -> PV4Data:
    rows = []
    for uid in (130, 131):
        for i in range(3):
            rows.append(
                {
                    "user_id": uid,
                    "split": "test",
                    "question_index": i,
                    "category": 0,
                    "category_name": "c",
                    "question": f"  question {i} of user {uid}?",
                    "choices": ["a", "b", "c", "d", "e"],
                    "answer": "a",
                    "answer_letter": "A",
                    "hard": i == 0,
                    "rationale": None,
                }
            )
    users = pd.DataFrame(
        {
            "user_id": [130, 131],
            "role": ["test", "test"],
            "documents": [CHATS[130], CHATS[131]],
            "persona": ["Persona of 130.", "Persona of 131."],
            "seed": [None, None],
            "categories": [None, None],
            "topics": [None, None],
        }
    )
    return PV4Data(pd.DataFrame(rows), users, source="memory", fingerprint="f" * 64)


@pytest.fixture
def data() -> PV4Data:
    return _data()


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


def _llm(server: FakeLLMServer) -> LLMConfig:
    return LLMConfig(model="fake-model", base_url=server.base_url, protocol="chat", max_retries=0)


# --------------------------------------------------------------------------- prompts


def test_build_messages_layout():
    msgs = build_messages(" Which one? ", ["doc one", "doc two"])
    assert msgs == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "doc one\n\ndoc two\n\n Which one? "},
    ]
    assert build_messages("Q?", [])[1]["content"] == "Q?"
    assert build_messages("Q?", [], system=None) == [{"role": "user", "content": "Q?"}]
    assert build_messages("Q?", ["d"], suffix=" Answer briefly.")[1]["content"] == "d\n\nQ? Answer briefly."
    with pytest.raises(TypeError, match=r"documents\[1\]"):
        build_messages("Q?", ["d", None])  # type: ignore[list-item]


def test_fit_documents_drops_least_relevant_first():
    # display order 0,1,2,3; priority says 2 is most relevant, then 0, 3, 1
    fit = fit_documents(
        [10, 10, 10, 10], fixed_tokens=5, budget=30, priority=[2, 0, 3, 1], separator_tokens=0
    )
    assert fit.kept == [0, 2] and fit.dropped == [1, 3]
    assert fit.prompt_tokens == 25 and fit.full_tokens == 45 and fit.fits and fit.truncated
    # default priority: display order, so the last document goes first
    fit = fit_documents([10, 10, 10], fixed_tokens=0, budget=21, separator_tokens=1)
    assert fit.kept == [0] and fit.dropped == [2, 1] and fit.prompt_tokens == 11
    # everything fits: nothing dropped
    assert not fit_documents([1, 2], fixed_tokens=3, budget=100).truncated


def test_fit_documents_never_drops_the_question():
    fit = fit_documents([5, 5], fixed_tokens=50, budget=20)
    assert fit.kept == [] and fit.prompt_tokens == 50 and not fit.fits
    with pytest.raises(ValueError, match="priority"):
        fit_documents([1, 2], fixed_tokens=0, budget=10, priority=[0, 0])


def test_token_counters():
    assert CharEstimate().count(["abcd", "abcde", ""]) == [1, 2, 0]
    assert get_token_counter("chars").name == "chars/4"
    assert get_token_counter(None).name == "chars/4"  # no base URL: the estimate
    with pytest.raises(ValueError, match="base_url"):
        get_token_counter("server")


def test_attribute_parsing_is_strict():
    text = "Here you go:\n- Likes tea\n* likes tea\n2. Owns a dog\nnot a bullet\n  -  Runs marathons  "
    assert parse_attributes(text) == ["Likes tea", "Owns a dog", "Runs marathons"]
    assert parse_selection("2, 5", 6) == [1, 4]
    assert parse_selection(" 3. ", 3) == [2]
    assert parse_selection("NONE", 3) == []
    assert parse_selection("7", 3) is None  # out of range
    assert parse_selection("I think 1 and 2", 3) is None
    assert parse_selection("", 3) is None
    assert "1. a\n2. b" in selection_messages("Q?", ["a", "b"])[-1]["content"]
    assert attribute_document([]) == ""
    assert attribute_document(["a", "b"]).endswith("- a\n- b")


# --------------------------------------------------------------------------- runs


def test_select_questions(data):
    q = select_questions(data, split="test", limit=4)
    assert list(zip(q.user_id, q.question_index, strict=True))[:4] == [(130, 0), (130, 1), (130, 2), (131, 0)]
    with pytest.raises(ValueError, match="users"):
        select_questions(data, users=[999])
    with pytest.raises(ValueError, match="no questions"):
        select_questions(data, split="train")


def test_no_docs_run_and_rerun_makes_no_requests(data, server, tmp_path):
    cache = tmp_path / "llm.sqlite"
    run = answer(
        data, method="no_docs", llm=_llm(server), run_dir=tmp_path / "r", cache=cache, progress=False
    )
    assert run.calls == 6 and run.cached == 0 and len(server.requests) == 6
    body = next(b for _, p, b in server.requests if "question 0 of user 130" in p)
    assert body["temperature"] == 0 and body["max_tokens"] == 256
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert body["messages"][1]["content"] == "  question 0 of user 130?"  # not stripped
    gens = read_generations(tmp_path / "r")
    assert gens["generation"].iloc[0] == "echo:   question 0 of user 130?"
    assert set(gens["method"]) == {"no_docs"}
    cfg = read_run_config(tmp_path / "r")
    assert cfg["method"] == "no_docs" and cfg["data"] == "memory" and cfg["max_new_tokens"] == 256
    ctx = json.loads((tmp_path / "r" / "context.json").read_text())
    for key in (
        "max_model_len",
        "max_input_tokens",
        "num_prompts",
        "num_truncated",
        "fit_rate",
        "mean_prompt_tokens",
        "max_prompt_tokens",
        "tokens_dropped",
        "p50_prompt_tokens",
        "p90_prompt_tokens",
        "p95_prompt_tokens",
        "p99_prompt_tokens",
    ):
        assert key in ctx
    assert ctx["num_prompts"] == 6 and ctx["fit_rate"] == 100.0 and ctx["max_model_len"] == 32768

    again = answer(
        data, method="no_docs", llm=_llm(server), run_dir=tmp_path / "r", cache=cache, progress=False
    )
    assert again.calls == 0 and again.cached == 6 and len(server.requests) == 6  # zero new requests
    pd.testing.assert_frame_equal(read_generations(tmp_path / "r"), gens)


def test_rag_order_and_saved_ids(data, server, tmp_path, make_fake_embedder):
    # question 0 of user 131 points at chat 2, then chat 0; others are random
    table = {
        "question 0 of user 131?": [1, 0, 0],
        "I am vegan.": [0.6, 0.8, 0],
        "I play chess online.": [0, 0, 1],
        "I live in Oslo.": [1, 0, 0],
        "I teach piano.": [-1, 0, 0],
    }
    emb = make_fake_embedder(table)
    run = answer(
        data,
        method="rag",
        top_k=2,
        llm=_llm(server),
        embedder=emb,
        embed_cache=False,
        users=[131],
        cache=None,
        progress=False,
    )
    row = run.generations.iloc[0]
    assert list(row["retrieved_ids"]) == [2, 0]
    # cosines of the reference's float16 store: 0.6 is 0.60009765625 in float16
    assert row["retrieved_scores"][0] == pytest.approx(1.0) and row["retrieved_scores"][1] == pytest.approx(
        0.6, abs=2e-4
    )
    prompt = next(p for _, p, _ in server.requests if "question 0" in p)
    assert prompt == "I live in Oslo.\n\nI am vegan.\n\n  question 0 of user 131?"  # most similar first
    assert run.config["top_k"] == 2 and run.config["reference_method"] == "rag_top2"


def test_bm25_rag_and_full_truncation(data, server, tmp_path, make_fake_embedder):
    run = answer(
        data,
        method="rag",
        top_k=1,
        retriever="bm25",
        llm=_llm(server),
        users=[130],
        cache=None,
        progress=False,
    )
    assert all(len(ids) == 1 for ids in run.generations["retrieved_ids"])
    # full context with a budget that holds only part of the chats: the least similar are dropped,
    # the kept ones stay in topic order, and the question is always there
    emb = make_fake_embedder(
        {
            "question 1 of user 131?": [1, 0],
            "I am vegan.": [0, 1],
            "I play chess online.": [1, 0.1],
            "I live in Oslo.": [-1, 0],
            "I teach piano.": [1, 0.2],
        }
    )
    counter = CharEstimate()
    run = answer(
        data,
        method="full",
        llm=_llm(server),
        embedder=emb,
        embed_cache=False,
        users=[131],
        cache=None,
        token_counter=counter,
        truncation="relevance",
        max_model_len=36 + 24,
        max_new_tokens=24,
        margin=0,
        progress=False,
    )
    row = run.generations[run.generations["question_index"] == 1].iloc[0]
    assert row["truncated"] and list(row["retrieved_ids"]) == [1, 3]
    assert list(row["dropped_ids"]) == [2, 0]
    content = [r[2] for r in server.requests if "question 1 of user 131" in r[1]][-1]["messages"][1][
        "content"
    ]
    assert content == "I play chess online.\n\nI teach piano.\n\n  question 1 of user 131?"
    assert run.context["num_truncated"] == 3 and run.context["fit_rate"] == 0.0
    assert run.context["tokens_dropped"] > 0 and run.context["pv4kit"]["documents_dropped"] >= 6


def test_persona_run(data, server):
    run = answer(data, method="persona", llm=_llm(server), users=[130], limit=1, cache=None, progress=False)
    assert server.requests[0][1] == "Persona of 130.\n\n  question 0 of user 130?"
    assert list(run.generations["retrieved_ids"].iloc[0]) == []
    data.users.at[0, "persona"] = None
    with pytest.raises(ValueError, match="persona"):
        answer(data, method="persona", llm=_llm(server), users=[130], cache=None, progress=False)


def test_unknown_method_suggests():
    with pytest.raises(ValueError, match="did you mean 'no_docs'"):
        answer(_data(), method="no_doc", llm=LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"))


def test_attributes_pipeline_steps_and_fallback(data, tmp_path):
    def responder(protocol, body, nth):
        prompt = prompt_of(protocol, body)
        if "List the user's personal attributes" in prompt:
            return "- Bakes bread\n- Has a dog named Rex\n- Repairs things"
        if prompt.startswith("Attributes of a user:"):
            return "1, 3" if "question 0" in prompt else ("none" if "question 1" in prompt else "maybe?")
        return "final answer"

    cache = tmp_path / "llm.sqlite"
    with FakeLLMServer(responder) as server:
        run = answer(
            data,
            method="attributes",
            llm=_llm(server),
            users=[130],
            cache=cache,
            run_dir=tmp_path / "a",
            progress=False,
        )
        n_first = len(server.requests)
        assert n_first == 1 + 3 + 3  # one extraction (the chats fit), 3 selections, 3 answers
        answers = [
            r[1]
            for r in server.requests
            if not r[1].startswith("Attributes of a user:") and "List the user's" not in r[1]
        ]
        by_q = {int(re.search(r"question (\d)", a).group(1)): a for a in answers}
        assert by_q[0].startswith("Attributes of the user:\n- Bakes bread\n- Repairs things\n\n")
        assert by_q[1] == "  question 1 of user 130?"  # NONE selected: the question alone
        assert "- Has a dog named Rex" in by_q[2]  # unparseable: every attribute
        assert list(run.generations["n_attributes"]) == [2, 0, 3]
        assert list(run.generations["attributes_fallback"]) == [False, False, True]
        assert run.config["attributes"]["n_fallback"] == 1
        assert run.config["attributes"]["attributes"]["130"][0] == "Bakes bread"
        again = answer(data, method="attributes", llm=_llm(server), users=[130], cache=cache, progress=False)
        assert len(server.requests) == n_first and again.calls == 0
    steps = sqlite3.connect(cache).execute("SELECT step, COUNT(*) FROM usage GROUP BY step").fetchall()
    assert dict(steps) == {"attributes:extract": 2, "attributes:select": 6, "attributes:answer": 6}


def test_attribute_extraction_is_chunked_to_the_budget(data, tmp_path):
    seen = []

    def responder(protocol, body, nth):
        prompt = prompt_of(protocol, body)
        seen.append(prompt)
        return "- Likes things" if "List the user's" in prompt else "1"

    with FakeLLMServer(responder) as server:
        answer(
            data,
            method="attributes",
            llm=_llm(server),
            users=[131],
            limit=1,
            cache=None,
            token_counter=CharEstimate(),
            max_model_len=110,
            max_new_tokens=10,
            margin=0,
            progress=False,
        )
    extractions = [p for p in seen if "List the user's" in p]
    assert len(extractions) > 1  # the four chats did not fit one request
    assert sum(p.count("I ") for p in extractions) == 4  # every chat in exactly one request


def test_requests_are_shared_over_several_endpoints(data, tmp_path):
    with FakeLLMServer() as a, FakeLLMServer() as b:
        cache = tmp_path / "llm.sqlite"
        run = answer(data, method="no_docs", llm=[_llm(a), _llm(b)], cache=cache, progress=False)
        assert len(a.requests) + len(b.requests) == 6 and len(a.requests) > 0 and len(b.requests) > 0
        assert list(run.generations["generation"]) == [f"echo: {q}" for q in data.split("test")["question"]]
        assert run.config["base_url"] == [a.base_url, b.base_url]
        n_a = len(a.requests)
        answer(data, method="no_docs", llm=_llm(a), cache=cache, progress=False)  # one endpoint, same cache
        assert len(a.requests) == n_a
        with pytest.raises(ValueError, match="one model"):
            answer(
                data, method="no_docs", llm=[_llm(a), LLMConfig(model="other", protocol="chat")], cache=None
            )


def test_fit_documents_bad_array_priority_names_the_parameter():
    import numpy as np

    with pytest.raises(ValueError, match=r"priority: expected a permutation of 0..1, got \[0, 0\]"):
        fit_documents([1, 2], fixed_tokens=1, budget=10, priority=np.array([0, 0]))
