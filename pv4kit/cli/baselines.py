"""Baseline commands: ``answer`` (answer runs), ``hard`` (hard-subset derivation) and ``demo``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from pv4kit.baselines.methods import METHODS, get_method
from pv4kit.cli._args import (
    PROTOCOL,
    add_llm_cache,
    add_options,
    command,
    llm_cache_arg,
    pick,
    run_name,
    user_ids,
)
from pv4kit.schema import SPLITS

#: ``pv4kit answer`` options passed to :func:`pv4kit.baselines.run.answer` under their own names
ANSWER_OPTIONS = ("split", "top_k", "retriever", "dense_ranking", "max_model_len", "max_new_tokens", "margin")
ANSWER_OPTIONS += ("tokenizer", "truncation", "users", "limit")
#: the options of its :class:`~pv4kit.llm.config.LLMConfig`, and one renamed
LLM_OPTIONS = ("protocol", "api_key_env", "reasoning_effort", "timeout", "max_retries")
CONCURRENCY = {"max_concurrency": "concurrency"}


def _default_name(model: str, method: str, top_k: int, *, mcq: bool = False) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model.split("/")[-1]).strip("_")
    return f"{slug}_{'mcq_' if mcq else ''}{method}" + (f"_top{top_k}" if method == "rag" else "")


def _memory(args: argparse.Namespace) -> str:
    """The memory setting of the run: ``--method``, or ``--memory`` under ``--method mcq``."""
    if args.method != "mcq":
        if args.memory is not None:
            raise ValueError(f"--memory is for --method mcq; for a free-text run use --method {args.memory}")
        return args.method
    return args.memory or "no_docs"


def _embedder(args: argparse.Namespace) -> Any:
    """The dense retriever's embedder, loaded only when the method ranks chats with it (else ``None``)."""
    if args.retriever != "dense" or not get_method(args.method).ranks(args.truncation):
        return None
    from pv4kit.embeddings.models import get_embedder

    return get_embedder(args.embedder, device=args.device)


def _answer_command(args: argparse.Namespace) -> int:
    from pv4kit.baselines.run import answer, default_max_model_len
    from pv4kit.baselines.tokens import get_token_counter
    from pv4kit.dataset.load import load
    from pv4kit.llm.local import local_llm_config, resolve_endpoint, smollm2_dir

    args.mcq, args.method = args.method == "mcq", _memory(args)
    data = load(args.data, splits=[args.split])
    embedder = _embedder(args)
    name = args.name or _default_name(args.model, args.method, args.top_k, mcq=args.mcq)
    max_model_len = args.max_model_len or default_max_model_len(args.model, method=args.method)
    with resolve_endpoint(args.model, args.base_url, max_model_len=max_model_len) as endpoint:
        llm = local_llm_config(endpoint, **pick(args, *LLM_OPTIONS, **CONCURRENCY))
        counter = None
        if args.truncation == "relevance":
            tokenizer = args.tokenizer or (str(smollm2_dir()) if endpoint.local else None)
            counter = get_token_counter(tokenizer, base_url=endpoint.base_url)
        options = pick(args, "method", "mcq", *ANSWER_OPTIONS)
        options |= {"cache": llm_cache_arg(args.cache), "progress": not args.quiet, "token_counter": counter}
        run = answer(data, llm=llm, run_dir=Path(args.runs_dir) / name, embedder=embedder, **options)
    c = run.context
    print(
        f"{run.run_dir}: {len(run.generations)} answers ({run.calls} called, {run.cached} cached, "
        f"{run.errors} failed); prompts p50 {c['p50_prompt_tokens']:.0f} / max {c['max_prompt_tokens']} "
        f"tokens ({c['pv4kit']['token_counter']}), fit rate {c['fit_rate']:.2f}%, {c['num_truncated']} "
        f"truncated ({args.truncation})"
    )
    if run.errors:
        print(f"{run.errors} requests failed (status 'failed'); run the same command again to resume them")
    if args.method == "attributes":
        print(f"attributes: {run.config['attributes']['n_fallback']} unparseable selections fell back to all")
    if args.score and not run.errors:
        from pv4kit.scoring.score import score_run

        _, m = score_run(run.run_dir, data=data, embedder=args.score_embedder, progress=not args.quiet)
        lo, hi = m["accuracy_ci"]
        print(f"accuracy {100 * m['accuracy']:.2f}% [{100 * lo:.2f}, {100 * hi:.2f}] on {m['n']} questions")
    return 1 if run.errors else 0


def _hard(args: argparse.Namespace) -> int:
    from pv4kit.baselines.hard import derive_hard_subset, hard_report, write_subset

    report = hard_report(args.no_docs, args.rag, existing=args.existing, force=args.force)
    subset = derive_hard_subset(args.no_docs, args.rag, rule=args.rule, force=args.force)
    if args.output:
        write_subset(subset, args.output)
        print(f"wrote {args.output}: {len(subset)} hard questions (rule {args.rule})")
    print(report.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from pv4kit.pipeline.demo import demo_report, run_demo

    out = run_demo(
        **pick(args, "raw", "data", "runs_dir", "split", "max_new_tokens", "limit"),
        cache=llm_cache_arg(args.cache),
        endpoint_scoring=not args.no_endpoint_scoring,
        notebooks=not args.no_notebooks,
        progress=not args.quiet,
    )
    print(demo_report(out))
    failed = sum(c["errors"] for c in out["calls"].values())
    return 1 if failed or out["notebook_error"] else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``answer``, ``hard`` and ``demo`` to the ``pv4kit`` command line."""
    from pv4kit.baselines.hard import RULES, derive_hard_subset, hard_report
    from pv4kit.baselines.run import answer
    from pv4kit.llm.config import LLMConfig
    from pv4kit.pipeline.demo import run_demo

    p = command(sub, "answer", _answer_command)
    p.add_argument("--data", default="data", help="data source (data/ folder, raw tree or hub id)")
    method_help = "memory setting, or mcq: the five candidates lettered in a seeded order (with --memory)"
    p.add_argument("--method", required=True, choices=[*METHODS, "mcq"], help=method_help)
    memory_help = "--method mcq: the memory setting shown before the question [no_docs]"
    p.add_argument("--memory", default=None, choices=list(METHODS), help=memory_help)
    embedder_help = "dense retriever's embedder: qwen3 (the reference's Qwen3-Embedding-4B), minilm, id"
    p.add_argument("--embedder", default="qwen3", help=embedder_help)
    p.add_argument("--device", default=None, help="embedder device (cpu, cuda)")
    model_help = "model id at --base-url, or 'local' (SmolLM2 on a vLLM server started here; make vllm)"
    p.add_argument("--model", required=True, help=model_help)
    add_options(p, LLMConfig, "base_url", *LLM_OPTIONS, renamed=CONCURRENCY, protocol=PROTOCOL)
    p.add_argument("--name", type=run_name, help="run name [<model>_<method>[_top<k>]]")
    p.add_argument("--runs-dir", default="runs", help="the folder of the runs [runs]")
    add_llm_cache(p)
    add_options(
        p,
        answer,
        *ANSWER_OPTIONS,
        split={"choices": list(SPLITS)},
        retriever={"choices": ["dense", "bm25"]},
        dense_ranking={"choices": ["reference", "stable"]},
        truncation={"choices": ["front", "relevance"]},
        users={"type": user_ids, "help": "comma-separated user ids (default: all)"},
    )
    p.add_argument("--score", action="store_true", help="score the run afterwards")
    score_help = "scorer's embedder (default: qwen3 on CUDA, else minilm)"
    p.add_argument("--score-embedder", default=None, help=score_help)

    h = command(sub, "hard", _hard)
    required = {"required": True}
    add_options(h, hard_report, "no_docs", "rag", "existing", "force", no_docs=required, rag=required)
    add_options(h, derive_hard_subset, "rule", rule={"choices": list(RULES)})
    h.add_argument("--output", default=None, help="write user_id,question_index here (raw/hard_subset.csv)")

    d = command(sub, "demo", _demo)
    demo_options = ("raw", "data", "runs_dir", "split", "max_new_tokens", "limit")
    add_options(d, run_demo, *demo_options, split={"choices": list(SPLITS)})
    add_llm_cache(d)
    no_scoring_help = "do not score a run again through vLLM's embeddings endpoint"
    d.add_argument("--no-endpoint-scoring", action="store_true", help=no_scoring_help)
    d.add_argument("--no-notebooks", action="store_true", help="do not execute the notebooks afterwards")
