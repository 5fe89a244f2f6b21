"""Options from the library's signatures (:func:`add_options`), range-checked numbers, user ids, run names."""

from __future__ import annotations

import argparse
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pv4kit._io import default_llm_cache
from pv4kit._options import check_number
from pv4kit.schema import DEFAULT_TEST_USERS, DEFAULT_TRAIN_USERS
from pv4kit_cli import COMMANDS


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

#: the range of a numeric parameter by its name; any other ``int`` is >= 1 and any other ``float`` > 0
RANGES = dict.fromkeys(("seed", "max_retries", "margin", "user_start", "user_end"), nonnegative_int)
RANGES |= dict.fromkeys(("temperature", "near_tie"), number(float, ge=0))
RANGES |= dict.fromkeys(("test_fraction", "tune_fraction"), number(float, gt=0, lt=1))
RANGES["validation_fraction"] = number(float, ge=0, lt=1)


def _doc_args(func: Callable[..., Any]) -> dict[str, str]:
    """The ``Args:`` (or ``Attributes:``) entries of ``func``'s Google-style docstring, as plain text."""
    section = re.search(r"^(?:Args|Attributes):\n((?: {4}.*\n?|\n)*)", inspect.getdoc(func) or "", re.M)
    entries = re.finditer(r"^ {4}(\w+): (.*(?:\n {8}.*)*)", section[1] if section else "", re.M)
    texts = {m[1]: " ".join(m[2].split()) for m in entries}
    for name, text in texts.items():  # ``x`` and :func:`~a.b.x` as x, None as unset; % is argparse's
        text = re.sub(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`", r"\1", text).replace("``", "").replace("%", "%%")
        text = re.sub(r"\bNone\b", "unset", text).rstrip(".")
        first = text.split()[0]
        texts[name] = text[0].lower() + text[1:] if first[1:] == first[1:].lower() else text
    return texts


def add_options(
    parser: Any,
    func: Callable[..., Any],
    *names: str,
    renamed: dict[str, str] | None = None,
    **overrides: dict[str, Any],
) -> None:
    """Add ``--name`` for each parameter in ``names`` of ``func``, as its signature and docstring give it.

    The default is the signature's; ``int``/``float`` parameters take the range of :data:`RANGES`; a ``bool``
    that defaults to ``False`` is a switch; the help is the docstring's ``Args`` entry. ``renamed`` maps a
    parameter to its option's name when that is not the parameter's (as :func:`pick` takes it back);
    ``overrides`` maps a parameter to more ``add_argument`` keywords (``choices``, ``help``, ``default`` ...)
    and ``flag``, the option strings (space-separated, e.g. ``"-o --output-dir"``).
    """
    params, docs, renamed = inspect.signature(func).parameters, _doc_args(func), renamed or {}
    for name in dict.fromkeys([*names, *renamed, *overrides]):
        param, extra = params[name], dict(overrides.get(name, {}))
        kinds = {part.strip() for part in str(param.annotation).split("|")}
        default = extra.get("default", None if param.default is param.empty else param.default)
        kw: dict[str, Any] = {"default": default, "help": docs.get(name)}
        if kw["help"] and default is not None and default is not False:
            kw["help"] += " [%(default)s]"
        if "bool" in kinds and default is False:
            kw["action"] = "store_true"
        elif kinds & {"int", "float"}:
            kw["type"] = RANGES.get(name, positive_int if "int" in kinds else positive_float)
        flags = extra.pop("flag", "--" + renamed.get(name, name).replace("_", "-")).split()
        parser.add_argument(*flags, **{**kw, **extra})


#: ``--protocol`` of a command that sends chat requests unless told otherwise (for :func:`add_options`)
PROTOCOL = {"choices": ["chat", "responses"], "default": "chat"}
PROTOCOL["help"] = "chat (Chat Completions) or responses (the OpenAI Responses API) [%(default)s]"


def command(sub: argparse._SubParsersAction, name: str, handler: Callable[..., int], **kw: Any) -> Any:
    """Add the subcommand ``name`` with its help line from :data:`pv4kit_cli.COMMANDS`, run by ``handler``."""
    parser = sub.add_parser(name, help=COMMANDS[name][1], **kw)
    parser.set_defaults(func=handler)
    return parser


def pick(args: argparse.Namespace, *names: str, **renamed: str) -> dict[str, Any]:
    """Keyword arguments from parsed options: ``names`` as they are, ``renamed`` as ``keyword=option``."""
    return {**{n: getattr(args, n) for n in names}, **{k: getattr(args, v) for k, v in renamed.items()}}


def check_output_dir(path: str | os.PathLike[str], *, option: str) -> None:
    """Refuse an output folder that names an existing file, before any work (``option`` names the flag)."""
    if Path(path).exists() and not Path(path).is_dir():
        raise NotADirectoryError(f"{option} {path}: is a file, not a directory; name a folder for the output")


def parse_id_range(text: str, *, name: str) -> tuple[int, int]:
    """Parse ``"6-125"`` into ``(6, 125)`` (``"7"`` into ``(7, 7)``); the error names the option ``name``."""
    first, sep, last = str(text).partition("-")
    try:
        lo, hi = int(first), int(last if sep else first)
    except ValueError:
        raise ValueError(f"{name}: expected a user-id range like '6-125', got {text!r}") from None
    if lo > hi:
        raise ValueError(f"{name}: range start {lo} is above its end {hi} in {text!r}")
    return lo, hi


def id_range_text(ids: tuple[int, int]) -> str:
    """``(6, 125)`` as an option value, ``"6-125"``."""
    return f"{ids[0]}-{ids[1]}"


def add_user_ranges(parser: argparse.ArgumentParser, *, how: str) -> None:
    """Add ``--train-users`` and ``--test-users`` (defaults: :mod:`pv4kit.schema`'s ranges)."""
    train, test = id_range_text(DEFAULT_TRAIN_USERS), id_range_text(DEFAULT_TEST_USERS)
    parser.add_argument("--train-users", default=train, help=f"training users, {how} [{train}]")
    parser.add_argument("--test-users", default=test, help=f"evaluation users, {how} [{test}]")


def user_ranges(args: argparse.Namespace) -> dict[str, tuple[int, int]]:
    """``train_users`` and ``test_users`` parsed from the options :func:`add_user_ranges` added."""
    return {
        "train_users": parse_id_range(args.train_users, name="--train-users"),
        "test_users": parse_id_range(args.test_users, name="--test-users"),
    }


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


def add_llm_cache(parser: argparse.ArgumentParser, *, help: str = "LLM response cache") -> None:
    """Add ``--cache`` (read with :func:`llm_cache_arg`)."""
    where = "$PV4KIT_CACHE/llm.sqlite, else .cache/pv4kit/llm.sqlite"
    parser.add_argument("--cache", help=f"{help}, 'none' to disable [{where}]")


def llm_cache_arg(value: str | os.PathLike[str] | None) -> Path | None:
    """Resolve a ``--cache`` option: ``None`` gives the shared default cache, ``"none"`` disables it."""
    if value is None:
        return default_llm_cache()
    return None if str(value).lower() == "none" else Path(value)
