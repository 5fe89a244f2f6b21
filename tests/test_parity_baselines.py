"""Parity of ``pv4kit answer`` with the reference's baselines (``evaluate_baselines.py``); failed requests.

The reference rules are transcribed here independently, from reading ``evaluate_baselines.py`` and
``memorilla/data.py`` (commit a5c2d6f), not imported:

* prompt: system ``"You are a helpful assistant."``; user turn = documents joined by a blank line, a blank
  line, the question as stored (no documents: the question alone); rendered with the chat template
  (``add_generation_prompt=True, enable_thinking=False``), encoded with ``add_special_tokens=False``;
* budget ``max(max_model_len - max_new_tokens - 32, 1)``; an over-long prompt keeps its **last** ``budget``
  ids;
* ``context.json``: fit rate in percent rounded to 2 decimals, mean to 1, NumPy percentiles, all over the
  untruncated lengths.

The tokenizer is real: a byte-level BPE trained here with the ``tokenizers`` library, given special tokens
and a ChatML template that (like Qwen3's) adds an empty think block when ``enable_thinking`` is false, so a
prompt built without ``enable_thinking=False`` has other ids. The server is the loopback fake of
``tests/llm_server.py`` speaking vLLM's ``/v1/models`` (``owned_by``, ``max_model_len``), ``/tokenize`` and
``/v1/completions``.
"""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pandas as pd
import pytest

from pv4kit.baselines.run import answer
from pv4kit.baselines.tokens import EstimateChatTokenizer, reference_context
from pv4kit.dataset.load import PV4Data
from pv4kit.llm.config import LLMConfig
from pv4kit.scoring.runs import read_generations
from pv4kit.scoring.score import FailedRowsError, score_run
from tests.llm_server import FakeLLMServer, Reply

SYSTEM = "You are a helpful assistant."
TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{% endif %}{% endif %}"
)
CHATS = {
    140: [  # long: its full-context prompts go over the budget
        "User: I bake sourdough every weekend and keep a starter called Bubbles.\nAssistant: Lovely!",
        "User: My dog Rex loves the beach, we walk there at six.\nAssistant: Sounds fun.",
        "User: I repair my own road bike and ride to work in the rain.\nAssistant: Impressive.",
        "User: I am learning Norwegian before moving to Bergen next spring.\nAssistant: Lykke til!",
    ],
    141: ["User: I teach piano.\nAssistant: Nice."],  # short: fits
}
MAX_MODEL_LEN, MAX_NEW_TOKENS = 260, 64


# --------------------------------------------------------------------------- the reference, transcribed


def ref_user_turn(question: str, documents: list[str]) -> str:
    return "\n\n".join(documents) + "\n\n" + question if documents else question


def ref_prompt_ids(tok, question: str, documents: list[str]) -> list[int]:
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": ref_user_turn(question, documents)},
    ]
    text = tok.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    return tok.encode(text, add_special_tokens=False)


def ref_budget(max_model_len: int, max_new_tokens: int) -> int:
    return max(max_model_len - max_new_tokens - 32, 1)


def ref_context(lengths: list[int], max_model_len: int, budget: int) -> dict:
    over = [n > budget for n in lengths]
    out = {
        "max_model_len": max_model_len,
        "max_input_tokens": budget,
        "num_prompts": len(lengths),
        "num_truncated": sum(over),
        "fit_rate": round(100 * float(np.mean([not o for o in over])), 2),
        "mean_prompt_tokens": round(float(np.mean(lengths)), 1),
        "max_prompt_tokens": max(lengths),
        "tokens_dropped": sum(max(n - budget, 0) for n in lengths),
    }
    for q in (50, 90, 95, 99):
        out[f"p{q}_prompt_tokens"] = float(np.percentile(np.asarray(lengths, dtype=np.int64), q))
    return out


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [c for chats in CHATS.values() for c in chats] + [f"question {i} of user?" for i in range(5)]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus * 5, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = TEMPLATE
    path = tmp_path_factory.mktemp("tok") / "chatml-bpe"
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tok(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


def _data() -> PV4Data:
    rows = []
    for uid in CHATS:
        for i in range(3):
            rows.append(
                {
                    "user_id": uid,
                    "split": "test",
                    "question_index": i,
                    "category": 0,
                    "category_name": "c",
                    "question": f" question {i} of user {uid}? ",
                    "choices": ["sourdough", "the beach", "bikes", "Norwegian", "piano"],
                    "answer": "piano" if uid == 141 else "sourdough",
                    "answer_letter": "E" if uid == 141 else "A",
                    "hard": i == 0,
                    "rationale": None,
                }
            )
    users = pd.DataFrame(
        {
            "user_id": list(CHATS),
            "role": ["test"] * len(CHATS),
            "documents": list(CHATS.values()),
            "persona": [None] * len(CHATS),
            "seed": [None] * len(CHATS),
            "categories": [None] * len(CHATS),
            "topics": [None] * len(CHATS),
        }
    )
    return PV4Data(pd.DataFrame(rows), users, source="memory", fingerprint="e" * 64)


def _llm(server: FakeLLMServer, **kw) -> LLMConfig:
    return LLMConfig(model="fake-model", base_url=server.base_url, protocol="chat", max_retries=0, **kw)


# --------------------------------------------------------------------------- items 6, 7, 9, 10


@pytest.mark.parametrize("source", ["server", "hf"])
def test_front_truncation_is_the_reference_to_the_token(tok, tokenizer_dir, tmp_path, source):
    data = _data()
    with FakeLLMServer(owned_by="vllm", max_model_len=MAX_MODEL_LEN, tokenizer=tok) as server:
        run = answer(
            data,
            method="full",
            llm=_llm(server),
            run_dir=tmp_path / "r",
            max_model_len=MAX_MODEL_LEN,
            max_new_tokens=MAX_NEW_TOKENS,
            tokenizer=None if source == "server" else str(tokenizer_dir),
            cache=None,
            progress=False,
        )
        budget = ref_budget(MAX_MODEL_LEN, MAX_NEW_TOKENS)
        lengths, n_cut = [], 0
        for uid in CHATS:
            for i in range(3):
                question = f" question {i} of user {uid}? "
                ids = ref_prompt_ids(tok, question, CHATS[uid])
                lengths.append(len(ids))
                sent = [
                    b
                    for p, _, b in server.requests
                    if p == "completions" and question in tok.decode(b["prompt"])
                ]
                chat = [
                    b
                    for p, _, b in server.requests
                    if p == "chat" and question in b["messages"][-1]["content"]
                ]
                if len(ids) > budget:
                    n_cut += 1
                    assert not chat and len(sent) == 1
                    assert sent[0]["prompt"] == ids[-budget:]  # exact to the token
                    assert sent[0]["max_tokens"] == MAX_NEW_TOKENS and sent[0]["temperature"] == 0
                    text = tok.decode(sent[0]["prompt"])
                    assert not text.startswith("<|im_start|>system")  # the system turn went first
                    assert text.endswith(
                        question + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                    )
                else:
                    assert not sent and len(chat) == 1
                    assert chat[0]["messages"] == [
                        {"role": "system", "content": SYSTEM},
                        {"role": "user", "content": ref_user_turn(question, CHATS[uid])},
                    ]
                    assert chat[0]["chat_template_kwargs"] == {"enable_thinking": False}
        assert 0 < n_cut < len(lengths)  # both cases are exercised
    # context.json: the reference's keys in its order, then pv4kit's own
    ctx = json.loads((tmp_path / "r" / "context.json").read_text())
    expected = ref_context(lengths, MAX_MODEL_LEN, budget)
    assert list(ctx) == [*expected, "pv4kit"]
    assert json.dumps({k: ctx[k] for k in expected}, indent=2) == json.dumps(expected, indent=2)
    assert ctx["pv4kit"]["exact"] is True and ctx["pv4kit"]["truncation"] == "front"
    assert ctx["pv4kit"]["sent_as"] == {"token ids": n_cut, "chat": len(lengths) - n_cut}
    gens = read_generations(tmp_path / "r")
    assert list(gens["full_prompt_tokens"]) == lengths
    assert list(gens["prompt_tokens"]) == [min(n, budget) for n in lengths]
    assert run.config["server_kind"] == "vllm" and run.config["token_count_exact"] is True
    if source == "server":
        assert server.tokenize_requests[0]["chat_template_kwargs"] == {"enable_thinking": False}
        assert server.tokenize_requests[0]["add_generation_prompt"] is True


def test_enable_thinking_changes_the_ids(tok):
    # the parity test above can fail: a prompt rendered with thinking on has other ids
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "q?"}]
    on = tok.encode(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    assert on != ref_prompt_ids(tok, "q?", [])


def test_context_json_units_and_rounding():
    lengths, budget = [10, 11, 12, 1000, 7, 11, 9], 11
    got = reference_context(lengths, max_model_len=75, max_input_tokens=budget)
    expected = ref_context(lengths, 75, budget)
    assert json.dumps(got, indent=2) + "\n" == json.dumps(expected, indent=2) + "\n"  # bytes, key order
    assert got["fit_rate"] == 71.43 and got["mean_prompt_tokens"] == 151.4 and got["tokens_dropped"] == 990
    assert isinstance(got["p50_prompt_tokens"], float) and got["p99_prompt_tokens"] == pytest.approx(
        940.72
    )  # 12 + 0.94 * 988


def test_server_context_length_mismatch_is_refused_before_sending(tok):
    with FakeLLMServer(owned_by="vllm", max_model_len=32768, tokenizer=tok) as server:
        with pytest.raises(ValueError, match=r"max_model_len 32768, but this run uses 65536") as err:
            answer(_data(), method="full", llm=_llm(server), cache=None, progress=False)
        assert "--hf-overrides" in str(err.value) and '"factor":2.0' in str(err.value)
        assert server.requests == [] and server.tokenize_requests == []


def test_only_vllm_gets_chat_template_kwargs():
    with FakeLLMServer() as server:  # not vLLM: the OpenAI API rejects unknown fields
        answer(_data(), method="no_docs", llm=_llm(server), users=[141], cache=None, progress=False)
        assert all("chat_template_kwargs" not in b for _, _, b in server.requests)


def test_chars_estimate_is_logged_recorded_and_cuts_from_the_front(caplog):
    with FakeLLMServer() as server, caplog.at_level(logging.WARNING, logger="pv4kit.baselines.tokens"):
        run = answer(
            _data(),
            method="full",
            llm=_llm(server),
            users=[140],
            max_model_len=150,
            max_new_tokens=MAX_NEW_TOKENS,
            cache=None,
            progress=False,
        )
    assert "ceil(chars / 4)" in caplog.text
    pv = run.context["pv4kit"]
    assert pv["exact"] is False and pv["token_counter"].startswith("estimate: chars/4")
    assert pv["sent_as"] == {"messages (estimate)": 3}
    for _, _, body in server.requests:
        assert [m["role"] for m in body["messages"]] == ["user"]  # the system turn went first
        assert re.search(r"\n\n question \d of user 140\? $", body["messages"][0]["content"])  # question kept
    assert run.context["num_truncated"] == 3


def test_estimate_truncation_keeps_the_longest_fitting_suffix():
    est = EstimateChatTokenizer()
    msgs = [{"role": "system", "content": "s" * 40}, {"role": "user", "content": "abcdefgh" * 20 + "Q?"}]
    cut = est.truncate_messages(msgs, 30)
    assert len(cut) == 1 and est.length(cut) <= 30
    longer = [{"role": "user", "content": msgs[1]["content"][-len(cut[0]["content"]) - 4 :]}]
    assert est.length(longer) > 30 and cut[0]["content"].endswith("Q?")


def test_front_truncation_refused_where_ids_cannot_be_sent(tok, tokenizer_dir):
    with FakeLLMServer() as server:  # an OpenAI-like endpoint: no token-id prompts
        with pytest.raises(ValueError, match="pass truncation='relevance'"):
            answer(
                _data(),
                method="full",
                llm=_llm(server),
                max_model_len=MAX_MODEL_LEN,
                max_new_tokens=MAX_NEW_TOKENS,
                tokenizer=str(tokenizer_dir),
                cache=None,
                progress=False,
            )
        assert server.requests == []


# --------------------------------------------------------------------------- issue 13.1: failed requests


def test_http_500_is_a_failure_not_an_empty_answer_and_is_resumed(tmp_path, make_fake_embedder):
    data = _data()
    emb = make_fake_embedder({})
    with FakeLLMServer(lambda protocol, body, nth: Reply(status=500, error="boom")) as broken:
        run = answer(
            data, method="no_docs", llm=_llm(broken), run_dir=tmp_path / "r", cache=None, progress=False
        )
    assert run.errors == 6
    gens = read_generations(tmp_path / "r")
    assert gens["generation"].isna().all() and set(gens["status"]) == {"failed"}
    assert gens["error"].str.contains("500").all()
    with pytest.raises(FailedRowsError, match=r"6 of 6 requests failed.*failed='wrong'"):
        score_run(tmp_path / "r", data=data, embedder=emb, progress=False, n_boot=10, cache=False)
    assert not (tmp_path / "r" / "predictions.parquet").exists()
    pred, m = score_run(
        tmp_path / "r", data=data, embedder=emb, progress=False, n_boot=10, cache=False, failed="wrong"
    )
    assert m["n_failed"] == 6 and m["failed_policy"] == "wrong" and m["accuracy"] == 0.0 and m["n"] == 6
    assert pred["predicted_letter"].isna().all() and pred["failed"].all()

    # the next run asks only the failed rows; two fail again and are asked on the run after
    with FakeLLMServer(lambda protocol, body, nth: "sourdough") as healthy:
        healthy.faults = [Reply(status=500), Reply(status=500)]
        again = answer(
            data, method="no_docs", llm=_llm(healthy), run_dir=tmp_path / "r", cache=None, progress=False
        )
        assert len(healthy.requests) == 6 and again.errors == 2
        third = answer(
            data, method="no_docs", llm=_llm(healthy), run_dir=tmp_path / "r", cache=None, progress=False
        )
        assert len(healthy.requests) == 8 and third.errors == 0 and third.config["llm_resumed"] == 4
        fourth = answer(
            data, method="no_docs", llm=_llm(healthy), run_dir=tmp_path / "r", cache=None, progress=False
        )
        assert len(healthy.requests) == 8 and fourth.config["llm_resumed"] == 6
    gens = read_generations(tmp_path / "r")
    assert set(gens["status"]) == {"ok"} and set(gens["generation"]) == {"sourdough"}
    _, m = score_run(tmp_path / "r", data=data, embedder=emb, progress=False, n_boot=10, cache=False)
    assert m["n_failed"] == 0 and m["failed_policy"] is None


def test_failed_rows_can_be_excluded(tmp_path, make_fake_embedder):
    data = _data()
    with FakeLLMServer(lambda protocol, body, nth: "sourdough") as server:
        server.faults = [Reply(status=500)]
        llm = LLMConfig(
            model="fake-model", base_url=server.base_url, protocol="chat", max_retries=0, max_concurrency=1
        )
        answer(data, method="no_docs", llm=llm, run_dir=tmp_path / "r", cache=None, progress=False)
    pred, m = score_run(
        tmp_path / "r",
        data=data,
        embedder=make_fake_embedder({}),
        progress=False,
        n_boot=10,
        cache=False,
        failed="exclude",
    )
    assert m["n"] == 5 and m["n_failed"] == 1 and m["failed_policy"] == "exclude" and len(pred) == 5


def test_empty_answer_is_scored_as_the_reference_counted_and_flagged(tmp_path, make_fake_embedder):
    data = _data()
    emb = make_fake_embedder(
        {
            "": [1, 0],
            "sourdough": [1, 0.1],
            "the beach": [0, -1],
            "bikes": [-1, 0],
            "Norwegian": [-1, -1],
            "piano": [0, 1],
        }
    )
    with FakeLLMServer(
        lambda protocol, body, nth: " \n " if "question 1 of user 140" in str(body) else "piano"
    ) as s:
        run = answer(data, method="no_docs", llm=_llm(s), run_dir=tmp_path / "r", cache=None, progress=False)
    assert run.errors == 0 and run.config["n_empty_answers"] == 1
    gens = read_generations(tmp_path / "r")
    row = gens[(gens.user_id == 140) & (gens.question_index == 1)].iloc[0]
    assert row["status"] == "ok" and row["empty_generation"] and row["generation"] == " \n "
    pred, m = score_run(tmp_path / "r", data=data, embedder=emb, progress=False, n_boot=10, cache=False)
    p = pred[(pred.user_id == 140) & (pred.question_index == 1)].iloc[0]
    # the reference embeds the stripped text "" and takes the nearest candidate: here "sourdough", correct
    assert p["generation"] == "" and p["predicted_letter"] == "A" and p["correct"] and p["empty_generation"]
    assert m["n_empty_generations"] == 1 and m["n_failed"] == 0


def test_cli_answer_failures_then_score_refuses_unless_told(tmp_path, capsys):
    from pv4kit.cli import main
    from pv4kit.dataset.splits import build_dataset
    from tests.rawtree import make_tree

    tree = make_tree(tmp_path / "raw", train=[6], test=[126], n_categories=2, per_category=2)
    build_dataset(tree / "users", tmp_path / "data", progress=False)
    run = tmp_path / "runs" / "x"
    common = ["--data", str(tmp_path / "data"), "--method", "no_docs", "--model", "fake-model"]
    common += ["--runs-dir", str(tmp_path / "runs"), "--name", "x", "--cache", "none", "--max-retries", "0"]
    with FakeLLMServer(lambda protocol, body, nth: Reply(status=500)) as broken:
        assert main(["-q", "answer", *common, "--base-url", broken.base_url]) == 1
    assert "run the same command again to resume" in capsys.readouterr().out
    n = len(read_generations(run))
    assert main(["-q", "score", str(run), "--embedder", "minilm", "--n-boot", "10"]) == 1
    assert "--failed wrong" in capsys.readouterr().err
    assert main(["-q", "score", str(run), "--embedder", "minilm", "--n-boot", "10", "--failed", "wrong"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["n_failed"] == n and metrics["accuracy"] == 0.0
    with FakeLLMServer() as healthy:
        assert main(["-q", "answer", *common, "--base-url", healthy.base_url]) == 0
        assert len(healthy.requests) == n


def test_budget_below_289_tokens_is_clamped_to_one_token_as_the_reference(tok, tmp_path, caplog):
    # prepare_prompts: max(200 - 256 - 32, 1) = 1, so each prompt goes as its last token id
    data = _data()
    with FakeLLMServer(owned_by="vllm", max_model_len=200, tokenizer=tok) as server:
        with caplog.at_level(logging.WARNING, logger="pv4kit.baselines.run"):
            answer(
                data,
                method="no_docs",
                llm=_llm(server),
                run_dir=tmp_path / "r",
                max_model_len=200,
                users=[141],
                cache=None,
                progress=False,
            )
        sent = [b["prompt"] for p, _, b in server.requests if p == "completions"]
        question = " question 0 of user 141? "
        assert sent and all(len(ids) == 1 for ids in sent)
        assert ref_prompt_ids(tok, question, [])[-1:] in sent  # the last token of the whole prompt
    assert ref_budget(200, 256) == 1
    ctx = json.loads((tmp_path / "r" / "context.json").read_text())
    assert ctx["max_model_len"] == 200 and ctx["max_input_tokens"] == 1 and ctx["fit_rate"] == 0.0
    assert "clamped to 1 token" in caplog.text
