"""The CLI's shared option helpers (``pv4kit/cli/_args.py``) and the library calls the handlers make."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pv4kit.cli import build_parser
from pv4kit.cli._args import add_embedder_endpoint, embedder_endpoint, pick
from pv4kit.cli.baselines import _embedder
from pv4kit.dataset.load import load

RAW = Path(__file__).resolve().parents[1] / "raw"


def test_pick_takes_names_as_they_are_and_renames_the_others():
    args = argparse.Namespace(model="m", concurrency=3, timeout=9.0)
    assert pick(args, "model", "timeout", max_concurrency="concurrency") == {
        "model": "m",
        "timeout": 9.0,
        "max_concurrency": 3,
    }
    with pytest.raises(AttributeError):
        pick(args, "base_url")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--embedder", "minilm"], {}),
        ([], {}),
        (
            ["--embedder", "OpenAI:text-embedding-3-small"],
            {"base_url": None, "api_key_env": "OPENAI_API_KEY", "timeout": 120.0, "max_concurrency": 4},
        ),
        (
            ["--embedder", "x", "--embed-base-url", "http://127.0.0.1:9", "--embed-concurrency", "2"],
            {
                "base_url": "http://127.0.0.1:9",
                "api_key_env": "OPENAI_API_KEY",
                "timeout": 120.0,
                "max_concurrency": 2,
            },
        ),
    ],
)
def test_embedder_endpoint_only_for_an_endpoint_embedder(argv, expected):
    parser = argparse.ArgumentParser()
    parser.add_argument("--embedder", default=None)
    add_embedder_endpoint(parser)
    assert embedder_endpoint(parser.parse_args(argv)) == expected


@pytest.mark.parametrize(
    ("method", "retriever", "truncation", "loads"),
    [
        ("rag", "dense", "front", True),
        ("rag", "bm25", "front", False),
        (
            "full",
            "dense",
            "front",
            False,
        ),  # full ranks its chats only to choose what relevance truncation drops
        ("full", "dense", "relevance", True),
        ("no_docs", "dense", "relevance", False),
        ("persona", "dense", "front", False),
    ],
)
def test_answer_loads_a_dense_embedder_only_when_the_method_ranks(method, retriever, truncation, loads):
    argv = [
        "answer",
        "--model",
        "m",
        "--method",
        method,
        "--retriever",
        retriever,
        "--truncation",
        truncation,
    ]
    args = build_parser().parse_args([*argv, "--embedder", "minilm", "--device", "cpu"])
    embedder = _embedder(args)
    if loads:  # the real offline MiniLM, as --embedder names it
        assert "minilm" in embedder.name.lower()
    else:
        assert embedder is None


def test_per_user_counts_questions_by_split_and_chats():
    data = load(RAW)
    table = data.per_user()
    q = data.questions
    assert sorted(table.index) == sorted(q["user_id"].unique())
    for user_id, row in table.iterrows():
        mine = q[q["user_id"] == user_id]
        for split in ("train", "validation", "test"):
            assert row.get(split, 0) == int((mine["split"] == split).sum())
        assert row["chats"] == len(data.documents(user_id))
    assert int(table[["train", "validation", "test"]].to_numpy().sum()) == len(q)


def test_library_advice_is_said_as_flags():
    """Library errors name parameters; the command line prints them as its flags."""
    from pv4kit.cli import _as_flags

    message = "score with failed='wrong', or pass force=True, data=SOURCE or max_model_len=8192; split: bad"
    want = "score with --failed wrong, or pass --force, --data SOURCE or --max-model-len 8192; split: bad"
    assert _as_flags(message) == want
