"""The ``pv4kit`` command line: one subcommand per pipeline step.

Each ``pv4kit.cli.<group>`` module defines ``register(subparsers)`` that adds its subcommands, each with
``set_defaults(func=handler)``; the handler takes the parsed arguments and returns an exit code. Heavy
imports stay inside the handlers so ``pv4kit --help`` is fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# command groups, in the order they appear in ``pv4kit --help``
_GROUPS = [
    "pv4kit.cli.dataset",  # validate, qa-table, build, info
    "pv4kit.cli.generation",  # generate, usage
    "pv4kit.cli.scoring",  # score, compare, export, import
    "pv4kit.cli.baselines",  # answer, hard, demo
    "pv4kit.cli.analysis",  # audit, figures
    "pv4kit.cli.related",  # personafeedback, recenter
]


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every available subcommand."""
    from pv4kit import __version__

    parser = argparse.ArgumentParser(
        prog="pv4kit",
        description="pv4kit: build, score and analyse the PersonalizationV4 benchmark.",
    )
    parser.add_argument("--version", action="version", version=f"pv4kit {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _GROUPS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a group not present in this build
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def _redact_logs() -> None:
    """Redact credentials in URLs of every log line (pv4kit's, httpx's at -vv, ...)."""
    from pv4kit.redact import RedactingFilter

    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.quiet else (logging.DEBUG if args.verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    _redact_logs()
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
    except (ValueError, FileNotFoundError, FileExistsError, KeyError, RuntimeError, OSError) as exc:
        # clear one-line errors for bad input; tracebacks with -vv
        if args.verbose > 1:
            raise
        from pv4kit.redact import redact_text

        print(f"pv4kit {args.command}: error: {redact_text(str(exc))}", file=sys.stderr)
        return 1
