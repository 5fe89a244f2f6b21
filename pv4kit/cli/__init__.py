"""The ``pv4kit`` command line: one subcommand per pipeline step.

Each ``pv4kit.cli.<group>`` module's ``register(subparsers)`` adds its subcommands, each handler returning
the exit code. A command imports only its own group (``pv4kit_cli.COMMANDS``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys

from pv4kit import __version__
from pv4kit.redact import RedactingFilter, redact_text
from pv4kit_cli import COMMANDS, top_parser


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser: only ``command``'s group when it is a known command, else every group."""
    parser, sub = top_parser(__version__)
    groups = [COMMANDS[command][0]] if command in COMMANDS else dict.fromkeys(g for g, _ in COMMANDS.values())
    for group in groups:
        importlib.import_module(f"pv4kit.cli.{group}").register(sub)
    return parser


# the parameters library errors advise (``failed='wrong'``), said as flags (``--failed wrong``)
_ADVICE = re.compile(
    r"\b(data|split|force|failed|truncation|max_model_len|tokenizer)=('[^']*'|\"[^\"]*\"|\w+)"
)


def _as_flags(message: str) -> str:
    """A library error message with its parameter advice spoken as flags (``force=True`` -> ``--force``)."""

    def flag(m: re.Match[str]) -> str:
        name, value = "--" + m[1].replace("_", "-"), m[2].strip("'\"")
        return name if value == "True" else f"{name} {value}"

    return _ADVICE.sub(flag, message)


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args = parser.parse_args(argv)
    level = logging.WARNING if args.quiet else (logging.DEBUG if args.verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # credentials in URLs of every log line (httpx's at -vv)
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    for noisy in ("httpx", "httpx2", "httpcore", "openai", "urllib3", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, KeyError, RuntimeError, OSError, ImportError) as exc:
        # clear one-line errors for bad input and missing extras (they name the install); tracebacks with -vv
        if args.verbose > 1:
            raise
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # str(KeyError) adds quotes
        print(f"pv4kit {args.command}: error: {_as_flags(redact_text(str(text)))}", file=sys.stderr)
        return 1
