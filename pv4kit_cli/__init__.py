"""The ``pv4kit`` console script: the listing from :data:`COMMANDS`, any command via :func:`pv4kit.cli.main`.

It lives outside ``pv4kit``, whose ``__init__`` imports pandas, numpy and pyarrow (half a second or more).
"""

from __future__ import annotations

import argparse
import sys

#: command -> (group registering it, its help line), in listing order (a test checks the groups agree)
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("dataset", "check a raw tree and list every problem with file and line"),
    "qa-table": ("dataset", "step 5: parse qa/{i}.txt into qa.csv for every user"),
    "build": ("dataset", "step 6: per-user splits -> {train,validation,test}.parquet"),
    "info": ("dataset", "load a dataset (data/, raw tree or hub id) and summarise it"),
    "generate": ("generation", "generate users: categories, topics, chats, questions, qa.csv (resumable)"),
    "usage": ("generation", "tokens and estimated cost from an LLM cache's ledger"),
    "score": ("scoring", "score runs: predictions.parquet + metrics.json"),
    "compare": ("scoring", "paired comparison of two scored runs"),
    "validity": ("scoring", "how far a run's scores hold: judge agreement, embedder/numerics, margins"),
    "export": ("scoring", "write a scored run in the reference's format"),
    "import": ("scoring", "turn a reference predictions.jsonl into a run"),
    "answer": ("baselines", "answer a split with one memory setting -> runs/<name>/"),
    "hard": ("baselines", "hard subset from a no_docs run and a rag top-1 run (scored)"),
    "demo": ("baselines", "the whole pipeline on the sample with the local model (make demo)"),
    "audit": ("analysis", "distractor and shortcut audits: tables + summary"),
    "notebooks": ("analysis", "list the notebooks, or execute them headless (--execute)"),
    "figures": ("analysis", "regenerate every figure in figures/ (runs 07_paper_figures)"),
    "personafeedback": ("related", "PersonaFeedback: load, LLM judge, reward model, PV4 scoring"),
    "recenter": ("related", "Re-Centering: stage 1-3 metrics from the human annotations"),
}


def top_parser(version: str) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The ``pv4kit`` parser's own options, and the subparsers its commands are added to."""
    parser = argparse.ArgumentParser(
        prog="pv4kit", description="pv4kit: build, score and analyse the PersonalizationV4 benchmark."
    )
    parser.add_argument("--version", action="version", version=f"pv4kit {version}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit code; the listing imports nothing of pv4kit."""
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["-h"], ["--help"]):
        from pv4kit.cli import main as run

        return run(argv)
    parser, sub = top_parser(version="")  # --version goes to pv4kit.cli
    for name, (_, text) in COMMANDS.items():
        sub.add_parser(name, help=text)
    parser.print_help()
    return 0
