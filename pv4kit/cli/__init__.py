"""The ``pv4kit`` command line: one subcommand per pipeline step.

Each ``pv4kit.cli.<group>`` module defines ``register(subparsers)`` that adds its subcommands, each with
``set_defaults(func=handler)``; the handler takes the parsed arguments and returns an exit code. A command
registers only its own group, and heavy imports stay inside the handlers, so ``pv4kit --help`` is fast and
``pv4kit answer`` loads no other group's modules.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys

# each subcommand's group; ``pv4kit --help`` lists the groups in this order
_COMMANDS = {
    **dict.fromkeys(["validate", "qa-table", "build", "info"], "pv4kit.cli.dataset"),
    **dict.fromkeys(["generate", "usage"], "pv4kit.cli.generation"),
    **dict.fromkeys(["score", "compare", "export", "import"], "pv4kit.cli.scoring"),
    **dict.fromkeys(["answer", "hard", "demo"], "pv4kit.cli.baselines"),
    **dict.fromkeys(["audit", "notebooks", "figures"], "pv4kit.cli.analysis"),
    **dict.fromkeys(["personafeedback", "recenter"], "pv4kit.cli.related"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser: only ``command``'s group when it is a known command, else every group."""
    from pv4kit import __version__

    parser = argparse.ArgumentParser(
        prog="pv4kit",
        description="pv4kit: build, score and analyse the PersonalizationV4 benchmark.",
    )
    parser.add_argument("--version", action="version", version=f"pv4kit {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups = [_COMMANDS[command]] if command in _COMMANDS else dict.fromkeys(_COMMANDS.values())
    for name in groups:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a group not present in this build
            if exc.name != name:
                raise
            continue
        module.register(sub)
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


def _redact_logs() -> None:
    """Redact credentials in URLs of every log line (pv4kit's, httpx's at -vv, ...)."""
    from pv4kit.redact import RedactingFilter

    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
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
    except (ValueError, KeyError, RuntimeError, OSError, ImportError) as exc:
        # clear one-line errors for bad input and missing extras (they name the install); tracebacks with -vv
        if args.verbose > 1:
            raise
        from pv4kit.redact import redact_text

        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # str(KeyError) adds quotes
        print(f"pv4kit {args.command}: error: {_as_flags(redact_text(str(text)))}", file=sys.stderr)
        return 1
