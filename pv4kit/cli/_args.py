"""Options the command groups share: range-checked numbers, user ids, the LLM endpoint, embedders."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pv4kit._io import default_llm_cache
from pv4kit._options import check_number
from pv4kit.schema import DEFAULT_TEST_USERS, DEFAULT_TRAIN_USERS, SPLITS


def number(kind: type = int, **bounds: float) -> Callable[[str], Any]:
    """An argparse ``type``: the text as a ``kind`` within ``bounds`` (``argument --n-boot: must be ...``)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            kind_text = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {kind_text}, got {text!r}") from None
        try:
            return check_number(value, None, integer=kind is int, **bounds)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


positive_int = number(int, ge=1)
nonnegative_int = number(int, ge=0)  # seeds (numpy takes none below 0), counts where 0 means none/all
positive_float = number(float, gt=0)
nonnegative_float = number(float, ge=0)
fraction = number(float, gt=0, lt=1)
validation_fraction = number(float, ge=0, lt=1)


def check_output_dir(path: str | os.PathLike[str], *, option: str) -> None:
    """Refuse an output folder that names an existing file, before any work (``option`` names the flag)."""
    if Path(path).exists() and not Path(path).is_dir():
        raise NotADirectoryError(f"{option} {path}: is a file, not a directory; name a folder for the output")


def parse_id_range(text: str, *, name: str) -> tuple[int, int]:
    """Parse ``"6-125"`` into ``(6, 125)`` (``"7"`` into ``(7, 7)``); the error names the option ``name``."""
    parts = str(text).split("-")
    try:
        lo, hi = (int(parts[0]), int(parts[1])) if len(parts) == 2 else (int(parts[0]), int(parts[0]))
    except ValueError:
        raise ValueError(f"{name}: expected a user-id range like '6-125', got {text!r}") from None
    if lo > hi:
        raise ValueError(f"{name}: range start {lo} is above its end {hi} in {text!r}")
    return lo, hi


def user_ids(text: str) -> list[int]:
    """An argparse ``type``: ``"126,127"`` as ``[126, 127]``."""
    try:
        return [int(u) for u in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated user ids like '126,127', got {text!r}"
        ) from None


def run_name(text: str) -> str:
    """An argparse ``type``: a run's folder name, one path part, so the run stays inside ``--runs-dir``."""
    if not text or text in (".", "..") or Path(text).name != text or "\\" in text:
        raise argparse.ArgumentTypeError(
            f"expected a folder name inside --runs-dir (no '/', '..' or absolute path), got {text!r}"
        )
    return text


def id_range_text(ids: tuple[int, int]) -> str:
    """``(6, 125)`` as an option value, ``"6-125"``."""
    return f"{ids[0]}-{ids[1]}"


def add_user_ranges(parser: argparse.ArgumentParser, *, train_help: str, test_help: str) -> None:
    """Add ``--train-users`` and ``--test-users`` (defaults: :mod:`pv4kit.schema`'s ranges)."""
    parser.add_argument("--train-users", default=id_range_text(DEFAULT_TRAIN_USERS), help=train_help)
    parser.add_argument("--test-users", default=id_range_text(DEFAULT_TEST_USERS), help=test_help)


def user_ranges(args: argparse.Namespace) -> dict[str, tuple[int, int]]:
    """``train_users`` and ``test_users`` parsed from the options :func:`add_user_ranges` added."""
    return {
        "train_users": parse_id_range(args.train_users, name="--train-users"),
        "test_users": parse_id_range(args.test_users, name="--test-users"),
    }


def llm_cache_arg(value: str | os.PathLike[str] | None) -> Path | None:
    """Resolve a ``--cache`` option: ``None`` gives the shared default cache, ``"none"`` disables it."""
    if value is None:
        return default_llm_cache()
    return None if str(value).lower() == "none" else Path(value)


def pick(args: argparse.Namespace, *names: str, **renamed: str) -> dict[str, Any]:
    """Keyword arguments from parsed options: ``names`` as they are, ``renamed`` as ``keyword=option``."""
    return {**{n: getattr(args, n) for n in names}, **{k: getattr(args, v) for k, v in renamed.items()}}


def add_llm_cache(
    parser: argparse.ArgumentParser,
    *,
    help: str = "LLM response cache, 'none' to disable [.cache/pv4kit/llm.sqlite]",
) -> None:
    """Add ``--cache`` (read with :func:`llm_cache_arg`)."""
    parser.add_argument("--cache", default=None, help=help)


def add_base_url(parser: argparse.ArgumentParser, *, help: str) -> None:
    """Add ``--base-url``, an OpenAI-compatible endpoint (unset: the OpenAI API)."""
    parser.add_argument("--base-url", default=None, help=help)


def add_protocol(
    parser: argparse.ArgumentParser,
    *,
    default: str | None,
    choices: tuple[str, ...] = ("chat", "responses"),
    help: str | None = None,
) -> None:
    """Add ``--protocol``: ``chat`` (Chat Completions) or ``responses`` (the OpenAI Responses API)."""
    parser.add_argument("--protocol", choices=list(choices), default=default, help=help)


def add_api_key_env(parser: argparse.ArgumentParser, *, help: str) -> None:
    """Add ``--api-key-env``, the environment variable holding the API key [OPENAI_API_KEY]."""
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help=help)


def add_split(parser: argparse.ArgumentParser, *, help: str | None = None) -> None:
    """Add ``--split`` (one of :data:`pv4kit.schema.SPLITS`, default ``test``)."""
    parser.add_argument("--split", default="test", choices=list(SPLITS), help=help)


def add_embedder_endpoint(parser: argparse.ArgumentParser) -> None:
    """Add ``--embed-base-url``, ``--embed-api-key-env``, ``--embed-timeout`` and ``--embed-concurrency``."""
    url_help = (
        "the server's base URL (vLLM, TEI, llama.cpp ...); comma-separated URLs shard the texts across "
        "servers [$PV4KIT_EMBED_BASE_URL, else the OpenAI API]"
    )
    for flag, kind, default, text in (
        ("--embed-base-url", None, None, url_help),
        (
            "--embed-api-key-env",
            None,
            "OPENAI_API_KEY",
            "environment variable with the API key [OPENAI_API_KEY]",
        ),
        ("--embed-timeout", positive_float, 120.0, "seconds per request"),
        ("--embed-concurrency", positive_int, 4, "requests in flight per server [4]"),
    ):
        parser.add_argument(flag, type=kind, default=default, help=f"for openai:MODEL: {text}")


def embedder_endpoint(args: argparse.Namespace) -> dict[str, Any]:
    """``get_embedder``'s endpoint keywords: none unless ``--embedder openai:...`` or ``--embed-base-url``."""
    from pv4kit.embeddings.endpoint import PREFIX  # numpy: only when a command runs

    if args.embed_base_url is None and not (args.embedder or "").lower().startswith(PREFIX):
        return {}
    return pick(
        args,
        base_url="embed_base_url",
        api_key_env="embed_api_key_env",
        timeout="embed_timeout",
        max_concurrency="embed_concurrency",
    )
