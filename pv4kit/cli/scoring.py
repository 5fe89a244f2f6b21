"""Scoring commands: ``score``, ``compare``, ``validity``, ``export`` and ``import``."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pv4kit._io import atomic_write_text
from pv4kit.cli._args import PROTOCOL, add_llm_cache, add_options, command, llm_cache_arg, pick
from pv4kit.embeddings.endpoint import PREFIX
from pv4kit.embeddings.models import get_embedder
from pv4kit.llm.config import LLMConfig
from pv4kit.llm.local import local_llm_config, resolve_endpoint
from pv4kit.scoring.choices import ORDER_COLUMN
from pv4kit.scoring.refformat import export_reference, import_reference
from pv4kit.scoring.runs import GENERATIONS_FILE
from pv4kit.scoring.score import score_run
from pv4kit.scoring.stats import compare
from pv4kit.scoring.validity import compare_agreed, summary_text, validity

SCORE_OPTIONS = ("data", "numerics", "n_boot", "seed", "batch_size", "failed")
VALIDITY_OPTIONS = ("embedder", "seed", "n_boot", "near_tie")
#: the judges' :class:`~pv4kit.llm.config.LLMConfig` fields and their options
JUDGE = {"api_key_env": "judge_api_key_env", "max_output_tokens": "judge_max_tokens"}
JUDGE.update(max_concurrency="judge_concurrency", max_retries="judge_max_retries")
#: ``get_embedder``'s endpoint parameters and their options (``--embed-base-url`` ...)
EMBED_ENDPOINT = {name: f"embed_{name}" for name in ("base_url", "api_key_env", "timeout")}
EMBED_ENDPOINT["max_concurrency"] = "embed_concurrency"


def embedder_endpoint(args: argparse.Namespace) -> dict[str, Any]:
    """``get_embedder``'s endpoint keywords: none unless ``--embedder openai:...`` or ``--embed-base-url``."""
    if args.embed_base_url is None and not (args.embedder or "").lower().startswith(PREFIX):
        return {}
    return pick(args, **EMBED_ENDPOINT)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"


def _score(args: argparse.Namespace) -> int:
    for run_dir in args.run_dirs:  # cheap checks before the model loads
        if not (Path(run_dir) / GENERATIONS_FILE).is_file():
            raise FileNotFoundError(f"{run_dir}: no {GENERATIONS_FILE} (not a run directory)")
    # a multiple-choice run is scored by the letter: the embedder loads only for a free-text run
    free = [r for r in args.run_dirs if ORDER_COLUMN not in pq.read_schema(Path(r) / GENERATIONS_FILE).names]
    options = {**pick(args, "device", "instruction"), **embedder_endpoint(args)}
    embedder = get_embedder(args.embedder, **options) if free else None
    for run_dir in args.run_dirs:
        _, m = score_run(
            run_dir,
            embedder=embedder,
            cache=False if args.no_cache else (args.cache_dir or True),
            **pick(args, *SCORE_OPTIONS),
            progress=not args.quiet,
        )
        (lo, hi), (hlo, hhi) = m["accuracy_ci"], m["accuracy_hard_ci"]
        hard = f"{_pct(m['accuracy_hard'])} [{_pct(hlo)}, {_pct(hhi)}] (n={m['n_hard']})"
        parts = [
            f"{run_dir}: accuracy {_pct(m['accuracy'])} [{_pct(lo)}, {_pct(hi)}] on {m['n']} questions, "
            f"{m['n_users']} users",
            f"hard {'n/a (no hard questions)' if m['accuracy_hard'] is None else hard}",
            f"ties {m['n_ties']}",
        ]
        if m.get("n_failed"):
            parts.append(f"{m['n_failed']} failed requests counted {m['failed_policy']}")
        if m.get("n_empty_generations"):
            parts.append(f"{m['n_empty_generations']} empty answers")
        if m.get("scored_by") == "letter":
            parts.append(f"scored by the letter, {m['n_unparsed']} unparsed")
        print("; ".join(parts))
    return 0


def _compare(args: argparse.Namespace) -> int:
    kwargs = pick(args, "run_a", "run_b", "n_boot", "seed", "force")
    if args.judge_agreed is not None:
        table = compare_agreed(judge=args.judge_agreed or None, **kwargs)
    else:
        table = compare(**kwargs)
    if args.output:
        atomic_write_text(args.output, table.to_csv(index=False))
    with_pct = table.copy()
    for col in [c for c in table.columns if c in ("accuracy_a", "accuracy_b") or c.startswith("diff")]:
        with_pct[col] = with_pct[col].map(lambda v: None if v is None else round(100 * v, 2))
    print(with_pct.to_string(index=False))
    only_a, only_b = table.attrs["only_in_a"], table.attrs["only_in_b"]
    if only_a or only_b:
        print(f"\n{only_a} questions only in A, {only_b} only in B (left out)")
    if table.attrs.get("data_differs"):
        print("\nthe two runs were scored on different data (compared anyway: --force)")
    return 0


def _validity(args: argparse.Namespace) -> int:
    models, urls = args.judge_model, args.judge_base_url or [None]
    if len(urls) > 1 and len(urls) != len(models):
        raise ValueError(
            f"--judge-base-url: give one URL, or one per --judge-model ({len(models)}), got {len(urls)}"
        )
    urls = urls * len(models) if len(urls) == 1 else urls
    options = pick(args, "protocol", **JUDGE)
    with contextlib.ExitStack() as stack:
        judges = [
            local_llm_config(stack.enter_context(resolve_endpoint(model, url)), **options)
            for model, url in zip(models, urls, strict=True)
        ]
        summary = validity(
            args.run_dir,
            judges=judges,
            against=args.against,
            numerics=not args.no_numerics,
            llm_cache=llm_cache_arg(args.cache),
            **pick(args, *VALIDITY_OPTIONS),
            progress=not args.quiet,
        )
    print(summary_text(summary), end="")
    print(f"tables in {args.run_dir}/validity/")
    return 0


def _export(args: argparse.Namespace) -> int:
    out = export_reference(args.run_dir, **pick(args, "data", "split", "metrics_form", out_dir="output_dir"))
    print(f"wrote {out / 'predictions.jsonl'} and {out / 'metrics.json'}")
    return 0


def _import(args: argparse.Namespace) -> int:
    kwargs = pick(args, "data", "run_dir", "method", "model", "force")
    gens, unmatched = import_reference(args.predictions, split=args.split or None, **kwargs)
    print(f"imported {len(gens)} rows into {args.run_dir}; {len(unmatched)} did not join")
    for row in unmatched.head(10).itertuples(index=False):
        print(f"  {args.predictions}:{row.line}: {row.reason}: {row.question[:80]!r}")
    return 0 if len(gens) else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``score``, ``compare``, ``validity``, ``export`` and ``import`` to the ``pv4kit`` command line."""
    p = command(subparsers, "score", _score)
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (runs/<name>)")
    add_options(p, get_embedder, "device", "instruction", name={"flag": "--embedder"})
    add_options(p, get_embedder, renamed=EMBED_ENDPOINT)
    data = {"help": "data source (default: 'data' in the run's config.json)"}
    failed_help = "how to count failed requests: as wrong answers, or left out (default: refuse the run)"
    failed = {"choices": ["wrong", "exclude"], "help": failed_help}
    numerics = {"choices": ["float16", "float32"]}
    add_options(p, score_run, *SCORE_OPTIONS, data=data, numerics=numerics, failed=failed)
    p.add_argument("--cache-dir", help="embedding cache [$PV4KIT_CACHE or .cache/pv4kit]")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")

    c = command(subparsers, "compare", _compare)
    c.add_argument("run_a")
    c.add_argument("run_b")
    boot = {"help": "bootstrap replicates (users resampled) [%(default)s]"}
    add_options(c, compare, "seed", n_boot=boot, force={"help": "compare runs scored on different data"})
    c.add_argument("-o", "--output", help="also write the table as CSV")
    agreed_help = (
        "also each difference where a `pv4kit validity` judge (default the first) agrees with both runs"
    )
    c.add_argument("--judge-agreed", nargs="?", const="", metavar="JUDGE", help=agreed_help)

    v = command(subparsers, "validity", _validity)
    v.add_argument("run_dir", metavar="RUN_DIR", help="a scored run (runs/<name>)")
    judge_help = "LLM judge (repeatable; two give judge-judge agreement); 'local' starts SmolLM2 here"
    v.add_argument("--judge-model", action="append", default=[], help=judge_help)
    v.add_argument("--judge-base-url", action="append", help="judge endpoint (one, or one each)")
    add_options(v, LLMConfig, renamed=JUDGE, protocol=PROTOCOL, max_output_tokens={"default": 16})
    add_llm_cache(v)
    v.add_argument("--against", action="append", default=[], help="another embedder to rescore with (repeat)")
    v.add_argument("--no-numerics", action="store_true", help="skip the rescoring in the other numerics")
    add_options(v, validity, *VALIDITY_OPTIONS)

    e = command(subparsers, "export", _export)
    e.add_argument("run_dir")
    metrics_help = (
        "metrics.json as evaluate_baselines.py writes it (accuracy_hard always, 0.0 without hard questions) "
        "or as evaluate.py does (accuracy_hard only when some question is hard) [%(default)s]"
    )
    forms = {"choices": ["baselines", "evaluate"], "help": metrics_help}
    add_options(e, export_reference, "data", "split", out_dir={"flag": "-o --output-dir"}, metrics_form=forms)

    i = command(subparsers, "import", _import)
    i.add_argument("predictions", help="the reference's predictions.jsonl")
    i.add_argument("run_dir", help="run directory to create")
    data = {"required": True, "help": "data source the predictions were made on"}
    split = {"help": "split to match against ('' for all) [%(default)s]"}
    add_options(i, import_reference, "method", "model", "force", data=data, split=split)
