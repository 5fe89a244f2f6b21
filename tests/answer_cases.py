"""Answer runs on the sample through the fake loopback server, for the run-file regression test.

Each case in :data:`CASES` is one :func:`pv4kit.baselines.run.answer` call with keyword options as the
CLI, the demo and users pass them today; :func:`run_case` writes its run under a folder with a fixed
provenance record (version, commit, time) and the loopback port replaced by ``PORT`` in ``config.json``,
so two runs of the same code write the same bytes. ``tests/fixtures/answer_runs/`` holds the files the
method-table restructure's predecessor wrote (the ``answer`` of 315 lines, commit ade72a7), written once
with ``python -m tests.answer_cases tests/fixtures/answer_runs``; :mod:`tests.test_answer_runs` checks
that today's code writes the same.
"""

from __future__ import annotations

import dataclasses
import sys
import zlib
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
RUN_FILES = ("generations.parquet", "config.json", "context.json")
FIXTURES = ROOT / "tests" / "fixtures" / "answer_runs"
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{% endif %}{% endif %}"
)


def sample_data() -> Any:
    """The sample raw tree as loaded data, its source named ``sample`` (the path differs per checkout)."""
    from pv4kit.dataset.load import load

    return dataclasses.replace(load(ROOT / "raw"), source="sample")


def responder(protocol: str, body: dict[str, Any], nth: int) -> str:
    """Short deterministic replies: attribute lists, selections, else a digest of the prompt."""
    from tests.llm_server import prompt_of

    prompt = prompt_of(protocol, body)
    if "List the user's personal attributes" in prompt:
        return f"- Attribute {zlib.crc32(prompt.encode()) % 7}\n- Likes tea\n- Owns a bike\nno bullet"
    if prompt.startswith("Attributes of a user:"):
        n = zlib.crc32(prompt.encode()) % 4
        return ["1, 3", "none", "maybe?", "2"][n]
    if zlib.crc32(prompt.encode()) % 11 == 0:
        return "   "  # an empty answer now and then
    return f"answer {zlib.crc32(prompt.encode()):08x} of {len(prompt)} chars"


def failing_responder(protocol: str, body: dict[str, Any], nth: int) -> Any:
    """As :func:`responder`, but some prompts get an HTTP 500 (a failed row, asked again on a rerun)."""
    from tests.llm_server import Reply, prompt_of

    if zlib.crc32(prompt_of(protocol, body).encode()) % 5 == 1 and nth == 0:
        return Reply(status=500, error="scripted failure")
    return responder(protocol, body, nth)


def tiny_tokenizer(folder: Path) -> Any:
    """A small byte-level BPE with a ChatML template, trained on the sample's chats (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    corpus = sorted(
        p.read_text(encoding="utf-8") for p in (ROOT / "raw" / "users").glob("user_1*/chats/*.txt")
    )
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


@dataclass(frozen=True)
class Case:
    """One answer call: its keyword options, the fake server's settings and what it needs built."""

    options: dict[str, Any]
    server: dict[str, Any] = field(default_factory=dict)
    embedder: bool = False
    counter: bool = False
    tokenizer: bool = False
    repeat: int = 1
    failures: bool = False


CASES: dict[str, Case] = {
    "no_docs": Case({"method": "no_docs"}),
    "no_docs_resumed": Case({"method": "no_docs", "users": [147], "limit": 9}, repeat=2),
    "no_docs_failures": Case({"method": "no_docs", "users": [131]}, failures=True),
    "rag_failures_resumed": Case(
        {"method": "rag", "retriever": "bm25", "top_k": 2, "users": [147]}, failures=True, repeat=2
    ),
    "no_docs_train": Case(
        {"method": "no_docs", "split": "train", "users": [12, 64], "extra_config": {"note": "x"}}
    ),
    "rag_dense": Case({"method": "rag", "top_k": 5, "embed_cache": False}, embedder=True),
    "rag_bm25": Case({"method": "rag", "top_k": 3, "retriever": "bm25", "users": [131]}),
    "full_front_chars": Case(
        {"method": "full", "max_model_len": 3000, "max_new_tokens": 64, "tokenizer": "chars", "limit": 12}
    ),
    "full_front_vllm": Case(
        {"method": "full", "max_model_len": 4096, "max_new_tokens": 32, "users": [147], "limit": 6},
        server={"owned_by": "vllm", "max_model_len": 4096},
        tokenizer=True,
    ),
    "no_docs_vllm": Case(
        {"method": "no_docs", "users": [131], "limit": 5},
        server={"owned_by": "vllm", "max_model_len": 32768},
        tokenizer=True,
    ),
    "full_relevance_bm25": Case(
        {
            "method": "full",
            "truncation": "relevance",
            "retriever": "bm25",
            "max_model_len": 2500,
            "margin": 8,
        },
        counter=True,
    ),
    "full_relevance_dense": Case(
        {
            "method": "full",
            "truncation": "relevance",
            "max_model_len": 3500,
            "embed_cache": False,
            "limit": 20,
        },
        embedder=True,
        counter=True,
    ),
    "full_fits": Case({"method": "full", "users": [131], "limit": 3}),
    "persona": Case({"method": "persona", "system": "Be brief."}),
    "attributes": Case({"method": "attributes", "users": [131], "limit": 10}),
    "attributes_chunked": Case(
        {"method": "attributes", "users": [147], "limit": 4, "max_model_len": 1500, "max_new_tokens": 64},
        counter=True,
    ),
}


def _fixed_provenance(**extra: Any) -> dict[str, Any]:
    return {"pv4kit_version": "fixed", "git_commit": None, "created_utc": "fixed", **extra}


def run_case(name: str, out: Path) -> Path:
    """Run case ``name`` into ``out/<name>`` (``cache=None``: every request reaches the fake server)."""
    from pv4kit.baselines.run import answer
    from pv4kit.baselines.tokens import CharEstimate
    from pv4kit.llm.config import LLMConfig
    from tests.conftest import FakeEmbedder
    from tests.llm_server import FakeLLMServer

    case = CASES[name]
    run_dir = out / name
    kw = dict(case.options)
    if case.embedder:
        kw["embedder"] = FakeEmbedder(dim=16)
    if case.counter:
        kw["token_counter"] = CharEstimate()
    with ExitStack() as stack:
        stack.enter_context(mock.patch("pv4kit.scoring.runs.provenance", _fixed_provenance))
        server_kw = dict(case.server)
        if case.tokenizer:
            server_kw["tokenizer"] = tiny_tokenizer(out / f".{name}-tokenizer")
        server = stack.enter_context(
            FakeLLMServer(failing_responder if case.failures else responder, **server_kw)
        )
        llm = LLMConfig(model="fake-model", base_url=server.base_url, protocol="chat", max_retries=0)
        data = sample_data()
        for _ in range(case.repeat):
            answer(data, llm=llm, run_dir=run_dir, cache=None, progress=False, **kw)
        config = run_dir / "config.json"
        config.write_text(
            config.read_text(encoding="utf-8").replace(f"127.0.0.1:{server.port}", "127.0.0.1:PORT"),
            encoding="utf-8",
        )
    return run_dir


def _canonical(value: Any) -> Any:
    """A JSON-able form of a cell that keeps every float bit (``float.hex``) and the container kind."""
    import numpy as np

    if isinstance(value, np.ndarray | list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float | np.floating):
        return float(value).hex()
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    return value


def parquet_digests(path: Path) -> dict[str, str]:
    """SHA-256 of the file's bytes and of its content (columns, dtypes, every cell, exactly)."""
    import hashlib
    import json

    import pandas as pd

    frame = pd.read_parquet(path)
    content = {
        "columns": list(frame.columns),
        "dtypes": [str(t) for t in frame.dtypes],
        "rows": [[_canonical(v) for v in row] for row in frame.itertuples(index=False)],
    }
    blob = json.dumps(content, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return {
        "file_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "content_sha256": hashlib.sha256(blob).hexdigest(),
    }


def main(out: str) -> None:
    """Write every case's JSON files under ``out`` and ``manifest.json`` with the parquet digests."""
    import json
    import shutil

    import pyarrow

    root = Path(out)
    manifest: dict[str, Any] = {"pyarrow": pyarrow.__version__, "cases": {}}
    for name in CASES:
        run_dir = run_case(name, root)
        manifest["cases"][name] = parquet_digests(run_dir / "generations.parquet")
        for extra in run_dir.iterdir():
            if extra.name not in RUN_FILES[1:]:
                extra.unlink()
        shutil.rmtree(root / f".{name}-tokenizer", ignore_errors=True)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
