"""Parsing of command-line values shared by the command groups (user-id ranges, the ``--cache`` option)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pv4kit._io import default_llm_cache
from pv4kit.schema import DEFAULT_TEST_USERS, DEFAULT_TRAIN_USERS


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
