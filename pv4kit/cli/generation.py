"""``pv4kit generate`` (steps 1-5) and ``pv4kit usage`` (the LLM cost ledger)."""

from __future__ import annotations

import argparse
import sys

from pv4kit._io import atomic_write_text
from pv4kit.cli._args import add_llm_cache, add_options, command, llm_cache_arg, pick, positive_int
from pv4kit.generation.defaults import (
    DEFAULT_CHAT_MODEL,
    DEFAULT_CHAT_REASONING_EFFORT,
    DEFAULT_MODEL,
    DEFAULT_REASONING_EFFORT,
    generation_llm_configs,
)
from pv4kit.generation.steps import generate_users
from pv4kit.llm.config import LLMConfig
from pv4kit.llm.local import resolve_endpoint
from pv4kit.llm.store import usage_frame, usage_summary

#: ``pv4kit generate`` options passed to :func:`~pv4kit.generation.steps.generate_users` as they are
GENERATE_OPTIONS = ("num_categories", "num_topics", "num_questions", "max_retries", "seed")
GENERATE_OPTIONS += ("regenerate_stale", "reference_prompts", "user_start", "user_end")
#: the ``--repair-*`` options, each also turned on by ``--pv4kit-repairs``
_REPAIRS = ("repair_lists", "repair_chats", "reask_malformed", "rewrite_stale_qa")
#: the options of both :class:`~pv4kit.llm.config.LLMConfig`, and those with other names
LLM_OPTIONS = ("api_key_env", "temperature", "max_output_tokens", "timeout")
RENAMED = {"max_concurrency": "max_workers", "max_retries": "http_retries"}
_EFFORTS = "with the Responses API, unset with chat]"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``generate`` and ``usage`` subcommands."""
    about = "Run generation steps 1-4 for each persona user_N.txt, then step 5 (qa.csv) for users whose "
    about += "question files all exist. Reruns complete what is missing; exits 1 when a user is incomplete."
    p = command(subparsers, "generate", run_generate, description=about)
    p.add_argument("--persona-dir", required=True, help="folder of user_N.txt persona profiles")
    p.add_argument("--output-dir", required=True, help="users folder to write user_N/ into")
    model_help = "model for categories, topics, questions; 'local' starts SmolLM2 on a vLLM server"
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"{model_help} (make vllm) [%(default)s]")
    effort_help = f"reasoning effort of --model [{DEFAULT_REASONING_EFFORT} {_EFFORTS}"
    p.add_argument("--reasoning-effort", help=effort_help)
    chat_help = f"model for chats [{DEFAULT_CHAT_MODEL} for OpenAI gpt-* models, otherwise --model]"
    p.add_argument("--chat-model", help=chat_help)
    chat_effort_help = f"reasoning effort of --chat-model [{DEFAULT_CHAT_REASONING_EFFORT} {_EFFORTS}"
    p.add_argument("--chat-reasoning-effort", help=chat_effort_help)
    add_options(p, generate_users, *GENERATE_OPTIONS, reference_prompts={"metavar": "PATH"})
    add_options(p, generation_llm_configs, "base_url", protocol={"choices": ["responses", "chat"]})
    defaults = {"timeout": {"default": 300.0}, "max_concurrency": {"default": 50}}
    add_options(p, LLMConfig, *LLM_OPTIONS, renamed=RENAMED, **defaults)
    add_llm_cache(p, help="SQLite response cache and usage ledger")
    length_help = "context length of the --model local server [8192]"
    p.add_argument("--max-model-len", type=positive_int, default=8192, help=length_help)
    repairs = p.add_argument_group(
        "pv4kit repairs (off by default: files are written as the reference writes them)"
    )
    add_options(repairs, generate_users, *_REPAIRS)
    repairs.add_argument("--pv4kit-repairs", action="store_true", help="all four repairs above")

    u = command(subparsers, "usage", run_usage)
    u.add_argument("--cache", help="the SQLite cache file [.cache/pv4kit/llm.sqlite]")
    by_help = "comma-separated columns to group by: step,user_id,model [step]"
    u.add_argument("--by", default="step", help=by_help)
    u.add_argument("--prices", help="price table JSON [pv4kit/llm/prices.json, example prices]")
    u.add_argument("--csv", help="also write the per-call ledger to this CSV file")


def _configs(args: argparse.Namespace, model: str, base_url: str | None, protocol: str):
    return generation_llm_configs(
        model,
        chat_model=None if args.chat_model == "local" else args.chat_model,
        base_url=base_url,
        protocol=protocol,
        **pick(args, "reasoning_effort", "chat_reasoning_effort", *LLM_OPTIONS, **RENAMED),
    )


def run_generate(args: argparse.Namespace) -> int:
    """Handle ``pv4kit generate``: exit 1 when a user is not complete."""
    if args.chat_model == "local" and args.model != "local":
        raise ValueError("--chat-model local needs --model local (one local server serves both)")
    with resolve_endpoint(args.model, args.base_url, max_model_len=args.max_model_len) as endpoint:
        protocol = endpoint.protocol or args.protocol  # None: chat at a base URL, else responses
        if endpoint.protocol and args.protocol and args.protocol != endpoint.protocol:
            raise ValueError(f"--model local serves the chat protocol only; got --protocol {args.protocol}")
        llm, chat_llm = _configs(args, endpoint.model, endpoint.base_url, protocol)
        report = generate_users(
            args.persona_dir,
            args.output_dir,
            llm=llm,
            chat_llm=chat_llm,
            **pick(args, *GENERATE_OPTIONS),
            **{name: getattr(args, name) or args.pv4kit_repairs for name in _REPAIRS},
            cache=llm_cache_arg(args.cache),
            progress=not args.quiet,
        )
    cols = ["user_id", "status", "questions", "calls", "cached", "seconds"]
    print(report[cols].to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    for row in report.itertuples(index=False):
        more = " ..." if len(row.missing) > 8 else ""
        notes = [  # (what it is about, the line printed when that is not empty)
            (row.missing, f"missing {len(row.missing)}: {', '.join(row.missing[:8])}{more}"),
            (
                row.stale,
                f"stale {len(row.stale)} (rerun with --regenerate-stale): {', '.join(row.stale[:8])}",
            ),
            (row.malformed, f"kept malformed {len(row.malformed)}: {', '.join(row.malformed[:8])}"),
            (row.untracked, f"untracked (no manifest entry, kept) {len(row.untracked)}"),
            (row.errors, f"request errors {len(row.errors)}: {row.errors[0] if row.errors else ''}"),
            (row.repairs, f"pv4kit repairs {len(row.repairs)}: {'; '.join(row.repairs[:4])}"),
        ]
        for note in [line for about, line in notes if about] + list(row.notes):
            print(f"  user {row.user_id}: {note}")
    bad = report.loc[report["status"] != "complete", "user_id"].astype(str).tolist()
    if bad:
        print(f"{len(bad)} of {len(report)} users not complete: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


def run_usage(args: argparse.Namespace) -> int:
    """Handle ``pv4kit usage``."""
    frame = usage_frame(llm_cache_arg(args.cache), prices=args.prices)
    if args.csv:
        atomic_write_text(args.csv, frame.to_csv(index=False))
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    if unknown := [c for c in by if c not in frame.columns]:
        raise ValueError(
            f"--by: unknown column(s) {unknown}; choose from step, user_id, model, protocol, cached"
        )
    print(usage_summary(frame, by=by).to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    total = frame.loc[~frame["cached"], "cost_usd"]
    note = " (some models have no price: NaN)" if total.isna().any() else ""
    print(
        f"total: {len(frame)} calls, {int(frame['cached'].sum())} cached, estimated cost "
        f"${total.sum():.4f}{note} - example prices, check pv4kit/llm/prices.json"
    )
    return 0
