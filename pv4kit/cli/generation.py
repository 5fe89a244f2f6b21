"""``pv4kit generate`` (steps 1-5) and ``pv4kit usage`` (the LLM cost ledger)."""

from __future__ import annotations

import argparse
import logging
import sys

from pv4kit.cli._args import (
    add_api_key_env,
    add_base_url,
    add_llm_cache,
    add_protocol,
    llm_cache_arg,
    nonnegative_float,
    nonnegative_int,
    pick,
    positive_float,
    positive_int,
)
from pv4kit.generation.defaults import (
    DEFAULT_CHAT_MODEL,
    DEFAULT_CHAT_REASONING_EFFORT,
    DEFAULT_MODEL,
    DEFAULT_REASONING_EFFORT,
    generation_llm_configs,
)

logger = logging.getLogger(__name__)

#: the ``--repair-*`` options, each also turned on by ``--pv4kit-repairs``
_REPAIRS = ("repair_lists", "repair_chats", "reask_malformed", "rewrite_stale_qa")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``generate`` and ``usage`` subcommands."""
    _add_generate(subparsers)
    _add_usage(subparsers)


def _add_generate(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate users: categories, topics, chats, questions, qa.csv (resumable)",
        description="Run generation steps 1-4 for each persona user_N.txt, then step 5 (qa.csv) for users "
        "whose question files all exist. Reruns complete what is missing; exits 1 when a user is incomplete "
        "or has stale files.",
    )
    p.add_argument("--persona-dir", required=True, help="folder of user_N.txt persona profiles")
    p.add_argument("--output-dir", required=True, help="users folder to write user_N/ into")
    p.add_argument("--user-start", type=nonnegative_int, default=None, help="first user id (inclusive)")
    p.add_argument("--user-end", type=nonnegative_int, default=None, help="last user id (inclusive)")
    _add_models(p)
    p.add_argument("--num-categories", type=positive_int, default=10)
    p.add_argument("--num-topics", type=positive_int, default=200)
    p.add_argument("--num-questions", type=positive_int, default=15)
    _add_requests(p)
    p.add_argument(
        "--regenerate-stale",
        action="store_true",
        help="regenerate files made from a different persona, prompt, model or options",
    )
    p.add_argument(
        "--reference-prompts",
        default=None,
        metavar="PATH",
        help="build the requests with the prompt functions of a local checkout of the reference repository "
        "(snap-stanford/memorilla; PATH is the checkout, its personalizationv4 folder or prompts.py) "
        "[pv4kit's own prompts]",
    )
    _add_repairs(p)
    p.add_argument(
        "--max-model-len",
        type=positive_int,
        default=8192,
        help="context length of the --model local server [8192]",
    )
    p.set_defaults(func=run_generate)


def _add_models(p: argparse.ArgumentParser) -> None:
    """``--model``, ``--chat-model`` and their reasoning efforts."""
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="model for categories, topics, questions; "
        f"'local' starts SmolLM2 on a vLLM server (make vllm) [{DEFAULT_MODEL}]",
    )
    p.add_argument(
        "--reasoning-effort",
        default=None,
        help=f"reasoning effort of --model [{DEFAULT_REASONING_EFFORT} with the Responses API, "
        "unset with chat]",
    )
    p.add_argument(
        "--chat-model",
        default=None,
        help=f"model for chats [{DEFAULT_CHAT_MODEL} for OpenAI gpt-* models, otherwise --model]",
    )
    p.add_argument(
        "--chat-reasoning-effort",
        default=None,
        help=f"reasoning effort of --chat-model [{DEFAULT_CHAT_REASONING_EFFORT} with the Responses API, "
        "unset with chat]",
    )


def _add_requests(p: argparse.ArgumentParser) -> None:
    """The endpoint, retries, timeout, sampling and cache of the requests."""
    p.add_argument("--max-workers", type=positive_int, default=50, help="requests in flight at once [50]")
    p.add_argument(
        "--max-retries",
        type=nonnegative_int,
        default=3,
        help="re-asks of an empty reply (and, with --reask-malformed, of a malformed one) [3]",
    )
    p.add_argument(
        "--http-retries", type=nonnegative_int, default=6, help="retries of a failed HTTP request [6]"
    )
    p.add_argument("--timeout", type=positive_float, default=300.0, help="seconds per HTTP request [300]")
    p.add_argument("--seed", type=nonnegative_int, default=42, help="seed of the step-5 answer shuffle [42]")
    add_base_url(p, help="OpenAI-compatible base URL (vLLM, llama.cpp, Ollama ...)")
    add_protocol(
        p,
        default=None,
        choices=("responses", "chat"),
        help="responses (OpenAI Responses API) or chat (Chat Completions) "
        "[responses without --base-url, else chat]",
    )
    add_api_key_env(p, help="environment variable with the API key")
    p.add_argument(
        "--temperature", type=nonnegative_float, default=None, help="sampling temperature [server default]"
    )
    p.add_argument(
        "--max-output-tokens", type=positive_int, default=None, help="output token cap [server default]"
    )
    add_llm_cache(
        p,
        help="SQLite response cache and usage ledger, 'none' to disable [$PV4KIT_CACHE/llm.sqlite, else "
        ".cache/pv4kit/llm.sqlite]",
    )


def _add_repairs(p: argparse.ArgumentParser) -> None:
    """The pv4kit repairs, each off by default."""
    repairs = p.add_argument_group(
        "pv4kit repairs (off by default: files are written as the reference writes them)"
    )
    repairs.add_argument(
        "--repair-lists", action="store_true", help="also accept 1) numbering and bullet items in lists"
    )
    repairs.add_argument(
        "--repair-chats",
        action="store_true",
        help="turn a literal \\n before 'Assistant:' into a line break, drop blank lines between the turns",
    )
    repairs.add_argument(
        "--reask-malformed",
        action="store_true",
        help="ask again (up to --max-retries times) for a list, chat or question file that fails its check",
    )
    repairs.add_argument(
        "--rewrite-stale-qa",
        action="store_true",
        help="rewrite an existing qa.csv that differs from what the question files give",
    )
    repairs.add_argument("--pv4kit-repairs", action="store_true", help="all four repairs above")


def _add_usage(subparsers: argparse._SubParsersAction) -> None:
    u = subparsers.add_parser("usage", help="tokens and estimated cost from an LLM cache's ledger")
    add_llm_cache(u, help="the SQLite cache file [.cache/pv4kit/llm.sqlite]")
    u.add_argument(
        "--by", default="step", help="comma-separated columns to group by: step,user_id,model [step]"
    )
    u.add_argument("--prices", default=None, help="price table JSON [pv4kit/llm/prices.json, example prices]")
    u.add_argument("--csv", default=None, help="also write the per-call ledger to this CSV file")
    u.set_defaults(func=run_usage)


def _configs(args: argparse.Namespace, model: str, base_url: str | None, protocol: str):
    return generation_llm_configs(
        model,
        chat_model=None if args.chat_model == "local" else args.chat_model,
        base_url=base_url,
        protocol=protocol,
        **pick(args, "reasoning_effort", "chat_reasoning_effort", "api_key_env", "temperature"),
        **pick(
            args, "max_output_tokens", "timeout", max_concurrency="max_workers", max_retries="http_retries"
        ),
    )


def run_generate(args: argparse.Namespace) -> int:
    """Handle ``pv4kit generate``."""
    from pv4kit.generation.steps import generate_users
    from pv4kit.llm.config import default_protocol
    from pv4kit.llm.local import resolve_endpoint

    if args.chat_model == "local" and args.model != "local":
        raise ValueError("--chat-model local needs --model local (one local server serves both)")
    cache = llm_cache_arg(args.cache)
    with resolve_endpoint(args.model, args.base_url, max_model_len=args.max_model_len) as endpoint:
        protocol = endpoint.protocol or args.protocol or default_protocol(endpoint.base_url)
        if endpoint.protocol and args.protocol and args.protocol != endpoint.protocol:
            raise ValueError(f"--model local serves the chat protocol only; got --protocol {args.protocol}")
        llm, chat_llm = _configs(args, endpoint.model, endpoint.base_url, protocol)
        report = generate_users(
            args.persona_dir,
            args.output_dir,
            llm=llm,
            chat_llm=chat_llm,
            **pick(args, "num_categories", "num_topics", "num_questions", "max_retries", "seed"),
            **pick(args, "regenerate_stale", "reference_prompts", "user_start", "user_end"),
            **{name: getattr(args, name) or args.pv4kit_repairs for name in _REPAIRS},
            cache=cache,
            progress=not args.quiet,
        )
    return _print_report(report)


def _print_report(report) -> int:
    out = sys.stdout
    cols = ["user_id", "status", "questions", "calls", "cached", "seconds"]
    print(report[cols].to_string(index=False, float_format=lambda x: f"{x:.1f}"), file=out)
    bad = 0
    for row in report.itertuples(index=False):
        notes = []
        if row.missing:
            notes.append(
                f"missing {len(row.missing)}: {', '.join(row.missing[:8])}"
                + (" ..." if len(row.missing) > 8 else "")
            )
        if row.stale:
            notes.append(
                f"stale {len(row.stale)} (rerun with --regenerate-stale): {', '.join(row.stale[:8])}"
            )
        if row.malformed:
            notes.append(f"kept malformed {len(row.malformed)}: {', '.join(row.malformed[:8])}")
        if row.untracked:
            notes.append(f"untracked (no manifest entry, kept) {len(row.untracked)}")
        if row.errors:
            notes.append(f"request errors {len(row.errors)}: {row.errors[0]}")
        if row.repairs:
            notes.append(f"pv4kit repairs {len(row.repairs)}: {'; '.join(row.repairs[:4])}")
        notes.extend(row.notes)
        for note in notes:
            print(f"  user {row.user_id}: {note}", file=out)
        bad += row.status != "complete"
    if bad:
        ids = [str(u) for u, s in zip(report["user_id"], report["status"], strict=True) if s != "complete"]
        print(f"{bad} of {len(report)} users not complete: {', '.join(ids)}", file=sys.stderr)
        return 1
    return 0


def run_usage(args: argparse.Namespace) -> int:
    """Handle ``pv4kit usage``."""
    from pv4kit.llm.store import usage_frame, usage_summary

    frame = usage_frame(llm_cache_arg(args.cache), prices=args.prices)
    if args.csv:
        from pv4kit._io import atomic_path

        with atomic_path(args.csv) as tmp:
            frame.to_csv(tmp, index=False)
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    unknown = [c for c in by if c not in frame.columns]
    if unknown:
        raise ValueError(
            f"--by: unknown column(s) {unknown}; choose from step, user_id, model, protocol, cached"
        )
    summary = usage_summary(frame, by=by)
    print(summary.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    total = frame.loc[~frame["cached"], "cost_usd"]
    note = " (some models have no price: NaN)" if total.isna().any() else ""
    print(
        f"total: {len(frame)} calls, {int(frame['cached'].sum())} cached, estimated cost "
        f"${total.sum():.4f}{note} - example prices, check pv4kit/llm/prices.json"
    )
    return 0
