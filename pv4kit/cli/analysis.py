"""Analysis commands: ``audit`` (distractor and shortcut audits), ``notebooks`` and ``figures``."""

from __future__ import annotations

import argparse
import os

from pv4kit.analysis.audit import run_audit, write_audit
from pv4kit.analysis.notebooks import execute_notebooks, list_notebooks
from pv4kit.cli._args import add_options, check_output_dir, command, llm_cache_arg, pick
from pv4kit.dataset.load import load
from pv4kit.embeddings.models import get_audit_embedder
from pv4kit.llm.config import LLMConfig, endpoint_config

#: the :class:`~pv4kit.llm.config.LLMConfig` of the audit's LLM solver, from its ``--llm-*`` options
AUDIT_LLM = {"model": "llm_model", "base_url": "llm_base_url", "protocol": "llm_protocol"}
AUDIT_LLM["max_output_tokens"] = "llm_max_tokens"


def _audit(args: argparse.Namespace) -> int:
    out = args.output_dir or os.path.join(args.data, "audit")
    check_output_dir(out, option="-o/--output-dir")
    result = run_audit(
        load(args.data),
        embedder=get_audit_embedder(args.embedder, device=args.device),
        cache=not args.no_cache,
        llm_config=endpoint_config(**pick(args, **AUDIT_LLM)) if args.llm_model else None,
        llm_cache=llm_cache_arg(args.llm_cache),
        **pick(args, "n_boot", "seed"),
    )
    paths = write_audit(result, out)
    print(result.summary)
    print(f"wrote {len(paths)} files to {out}")
    return 0


def _name_value(text: str) -> tuple[str, str]:
    """An argparse ``type`` for ``--param``: ``NAME=VALUE`` as ``(NAME, VALUE)``."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (e.g. data=/path/to/data), got {text!r}")
    return name.strip(), value


def _notebooks(args: argparse.Namespace) -> int:
    if not args.execute:
        print("\n".join(list_notebooks(args.notebooks_dir)))
        return 0
    params = dict(args.param or [])
    table = execute_notebooks(args.only or None, **pick(args, "notebooks_dir", "timeout"), params=params)
    print(table.to_string(index=False))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``audit``, ``notebooks`` and ``figures`` to the ``pv4kit`` command line."""
    about = "Length, answer position, candidate-only solvers, distractor similarity, leakage and duplicate "
    about += "audits of a PV4 data folder: tables, summary."
    a = command(subparsers, "audit", _audit, description=about)
    a.add_argument("--data", default="data", help="data folder, raw tree or hub id [data]")
    embedders = "static (distilled from MiniLM once), minilm, qwen3 or a model id"
    a.add_argument("--embedder", help=f"{embedders} [CUDA: qwen3, else static]")
    a.add_argument("--device")
    a.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    a.add_argument("-o", "--output-dir", help="where to write the tables [DATA/audit]")
    model = {"help": "also run an LLM that sees only question and choices"}
    protocol = {
        "choices": ["responses", "chat"],
        "default": None,
        "help": "[chat at a base URL, else responses]",
    }
    add_options(a, LLMConfig, renamed=AUDIT_LLM, model=model, protocol=protocol)
    a.add_argument("--llm-cache", help="LLM response cache [.cache/pv4kit/llm.sqlite]")
    add_options(a, run_audit, "n_boot", "seed")

    n = command(subparsers, "notebooks", _notebooks)
    n.add_argument("--execute", action="store_true", help="execute and save the notebooks")
    only_help = "only these notebooks (e.g. 07_paper_figures or 07)"
    n.add_argument("--only", nargs="+", metavar="NAME", help=only_help)
    f = command(subparsers, "figures", _notebooks)
    f.set_defaults(execute=True, only=["07_paper_figures"])
    for p in (n, f):
        add_options(p, execute_notebooks, "notebooks_dir", "timeout")
        param_help = "passed to the notebooks as PV4KIT_<NAME> (e.g. data=/path/to/released/data)"
        p.add_argument("--param", action="append", type=_name_value, metavar="NAME=VALUE", help=param_help)
