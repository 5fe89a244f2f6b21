"""The CLI's shared option helpers (``pv4kit/cli/_args.py``) and the library calls the handlers make."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pv4kit.cli import build_parser, main
from pv4kit.cli._args import add_options, pick
from pv4kit.cli.baselines import _embedder
from pv4kit.cli.scoring import EMBED_ENDPOINT, embedder_endpoint
from pv4kit.dataset.load import load
from pv4kit.embeddings.models import get_embedder

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


def test_add_options_reads_the_signature_and_the_docstring():
    def func(path, *, n_boot: int = 2000, seed: int = 0, force: bool = False, name: str | None = None):
        """Do it.

        Args:
            n_boot: Bootstrap replicates, as
                :func:`~pv4kit.scoring.stats.compare` takes ``n_boot``.
            seed: A seed; None is not allowed.
        """

    parser = argparse.ArgumentParser()
    add_options(parser, func, "n_boot", "seed", "force", renamed={"name": "run"}, seed={"help": "mine"})
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["n_boot"] == "bootstrap replicates, as compare takes n_boot [%(default)s]"
    assert helps["seed"] == "mine" and helps["force"] is None
    assert vars(parser.parse_args([])) == {"n_boot": 2000, "seed": 0, "force": False, "run": None}
    args = parser.parse_args(["--seed", "0", "--force", "--run", "x"])
    assert pick(args, "seed", "force", name="run") == {"seed": 0, "force": True, "name": "x"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--n-boot", "0"])  # any other int is >= 1


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
    add_options(parser, get_embedder, renamed=EMBED_ENDPOINT)
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


def _numeric_actions(parser: argparse.ArgumentParser, prefix: str = ""):
    """``(command, option, type)`` of every option of ``parser`` and its subcommands, recursively."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _numeric_actions(sub, f"{prefix} {name}".strip())
        elif action.type in (int, float):
            yield prefix, action.option_strings, action.type


def test_every_numeric_option_is_range_checked():
    # a bare int/float type lets --n-boot 0, --timeout 0 or --max-new-tokens -5 through to a traceback
    assert list(_numeric_actions(build_parser())) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["answer", "--model", "m", "--method", "rag", "--max-new-tokens", "-5"],
            "argument --max-new-tokens: must be an integer >= 1, got -5",
        ),
        (
            ["answer", "--model", "m", "--method", "rag", "--timeout", "0"],
            "argument --timeout: must be a number > 0, got 0.0",
        ),
        (
            ["answer", "--model", "m", "--method", "rag", "--top-k", "x"],
            "argument --top-k: expected an integer, got 'x'",
        ),
        (["score", "runs/a", "--n-boot", "-3"], "argument --n-boot: must be an integer >= 1, got -3"),
        (["score", "runs/a", "--n-boot", "0"], "argument --n-boot: must be an integer >= 1, got 0"),
        (["compare", "a", "b", "--n-boot", "0"], "argument --n-boot: must be an integer >= 1, got 0"),
        (["audit", "--seed", "-1"], "argument --seed: must be an integer >= 0, got -1"),
        (
            ["build", "--users-dir", "u", "--output-dir", "o", "--validation-fraction", "1.5"],
            "argument --validation-fraction: must be a number >= 0 and < 1, got 1.5",
        ),
        (
            ["generate", "--persona-dir", "p", "--output-dir", "o", "--temperature", "nan"],
            "argument --temperature: must be a number >= 0, got nan",
        ),
        (["notebooks", "--timeout", "0"], "argument --timeout: must be an integer >= 1, got 0"),
        (
            ["personafeedback", "reward-model", "--out", "o", "--test-fraction", "1"],
            "argument --test-fraction: must be a number > 0 and < 1, got 1.0",
        ),
    ],
)
def test_numeric_options_out_of_range_name_the_option(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--users", "abc", "argument --users: expected comma-separated user ids like '126,127', got 'abc'"),
        (
            "--users",
            "126,,x",
            "argument --users: expected comma-separated user ids like '126,127', got '126,,x'",
        ),
        ("--name", "../outside", "argument --name: expected a folder name inside --runs-dir"),
        ("--name", "/tmp/elsewhere", "argument --name: expected a folder name inside --runs-dir"),
        ("--name", "a/../../b", "argument --name: expected a folder name inside --runs-dir"),
        ("--name", "..", "argument --name: expected a folder name inside --runs-dir"),
    ],
)
def test_answer_users_and_run_name_are_checked_before_anything_runs(option, value, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["answer", "--model", "m", "--method", "no_docs", option, value])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_answer_users_parse_to_ids():
    args = build_parser().parse_args(["answer", "--model", "m", "--method", "no_docs", "--users", "126, 127"])
    assert args.users == [126, 127]
    assert (
        build_parser().parse_args(["answer", "--model", "m", "--method", "no_docs", "--name", "x_1"]).name
        == "x_1"
    )


@pytest.mark.parametrize(
    ("error", "printed"),
    [
        (
            ImportError("executing notebooks needs jupytext and nbclient: pip install -e '.[notebooks]'"),
            "pip install -e '.[notebooks]'",
        ),
        (KeyError("no audit table 'x'; tables: ['a']"), "error: no audit table 'x'; tables: ['a']\n"),
        (
            ValueError("n_boot must be an integer >= 1, got 0"),
            "error: n_boot must be an integer >= 1, got 0\n",
        ),
    ],
)
def test_library_errors_are_one_line_without_a_traceback(monkeypatch, capsys, error, printed):
    import functools

    import pv4kit.cli.analysis as cli_analysis

    @functools.wraps(cli_analysis.execute_notebooks)  # its signature gives the command's options
    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(cli_analysis, "execute_notebooks", fail)
    assert main(["notebooks", "--execute"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pv4kit notebooks: error: ") and printed in err and err.count("\n") == 1, err


def test_library_advice_is_said_as_flags():
    """Library errors name parameters; the command line prints them as its flags."""
    from pv4kit.cli import _as_flags

    message = "score with failed='wrong', or pass force=True, data=SOURCE or max_model_len=8192; split: bad"
    want = "score with --failed wrong, or pass --force, --data SOURCE or --max-model-len 8192; split: bad"
    assert _as_flags(message) == want
