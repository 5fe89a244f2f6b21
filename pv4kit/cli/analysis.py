"""Analysis commands: ``audit`` (distractor and shortcut audits), ``notebooks`` and ``figures``."""

from __future__ import annotations

import argparse
import os

from pv4kit.cli._args import check_output_dir, llm_cache_arg, nonnegative_int, positive_int


def _audit(args: argparse.Namespace) -> int:
    from pv4kit.analysis.audit import run_audit, write_audit
    from pv4kit.dataset.load import load
    from pv4kit.embeddings.models import get_audit_embedder
    from pv4kit.llm.config import endpoint_config

    out = args.output_dir or os.path.join(args.data, "audit")
    check_output_dir(out, option="-o/--output-dir")
    data = load(args.data)
    embedder = get_audit_embedder(args.embedder, device=args.device)
    llm = args.llm_model and endpoint_config(
        args.llm_model,
        base_url=args.llm_base_url,
        protocol=args.llm_protocol,
        max_output_tokens=args.llm_max_tokens,
    )
    kw = {"llm_config": llm or None, "llm_cache": llm_cache_arg(args.llm_cache), "n_boot": args.n_boot}
    result = run_audit(data, embedder=embedder, cache=not args.no_cache, seed=args.seed, **kw)
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
    from pv4kit.analysis.notebooks import execute_notebooks, list_notebooks

    if not args.execute:
        print("\n".join(list_notebooks(args.notebooks_dir)))
        return 0
    params = dict(args.param or [])
    table = execute_notebooks(
        args.only or None, notebooks_dir=args.notebooks_dir, timeout=args.timeout, params=params
    )
    print(table.to_string(index=False))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``audit``, ``notebooks`` and ``figures`` to the ``pv4kit`` command line."""
    a = subparsers.add_parser(
        "audit",
        help="distractor and shortcut audits: tables + summary",
        description="Length, answer position, candidate-only solvers, distractor similarity, leakage and "
        "duplicate audits of a PV4 data folder; writes CSV tables and summary.txt.",
    )
    a.add_argument("--data", default="data", help="data folder, raw tree or hub id [data]")
    a.add_argument(
        "--embedder",
        default=None,
        help="'static' (distilled from MiniLM once), 'minilm', 'qwen3' or a model id "
        "[qwen3 with CUDA, else static]",
    )
    a.add_argument("--device", default=None)
    a.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    a.add_argument("-o", "--output-dir", default=None, help="where to write the tables [DATA/audit]")
    a.add_argument("--llm-model", default=None, help="also run an LLM that sees only question and choices")
    a.add_argument("--llm-base-url", default=None, help="OpenAI-compatible base URL of --llm-model")
    a.add_argument("--llm-protocol", choices=["responses", "chat"], default=None)
    a.add_argument("--llm-max-tokens", type=positive_int, default=None)
    a.add_argument("--llm-cache", default=None, help="LLM response cache [.cache/pv4kit/llm.sqlite]")
    a.add_argument("--n-boot", type=positive_int, default=2000)
    a.add_argument("--seed", type=nonnegative_int, default=0)
    a.set_defaults(func=_audit)

    n = subparsers.add_parser("notebooks", help="list the notebooks, or execute them headless (--execute)")
    n.add_argument("--execute", action="store_true", help="execute and save the notebooks")
    n.add_argument(
        "--only", nargs="+", metavar="NAME", help="only these notebooks (e.g. 07_paper_figures or 07)"
    )
    n.set_defaults(func=_notebooks)
    f = subparsers.add_parser("figures", help="regenerate every figure in figures/ (runs 07_paper_figures)")
    f.set_defaults(func=_notebooks, execute=True, only=["07_paper_figures"])
    for p in (n, f):
        p.add_argument(
            "--notebooks-dir", default="notebooks", help="folder of the jupytext notebooks [notebooks]"
        )
        p.add_argument("--timeout", type=positive_int, default=600, help="seconds allowed per cell [600]")
        p.add_argument(
            "--param",
            action="append",
            type=_name_value,
            metavar="NAME=VALUE",
            help="passed to the notebooks as PV4KIT_<NAME> (e.g. data=/path/to/released/data)",
        )
