"""Scoring commands: ``score``, ``compare``, ``validity``, ``export`` and ``import``."""

from __future__ import annotations

import argparse
import logging

from pv4kit.cli._args import (
    add_embedder_endpoint,
    add_llm_cache,
    add_protocol,
    embedder_endpoint,
    llm_cache_arg,
    nonnegative_float,
    nonnegative_int,
    pick,
    positive_int,
)

logger = logging.getLogger(__name__)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"


def _score(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pyarrow.parquet as pq

    from pv4kit.embeddings.models import get_embedder
    from pv4kit.scoring.choices import ORDER_COLUMN
    from pv4kit.scoring.runs import GENERATIONS_FILE
    from pv4kit.scoring.score import score_run

    for run_dir in args.run_dirs:  # cheap checks before the model loads
        if not (Path(run_dir) / GENERATIONS_FILE).is_file():
            raise FileNotFoundError(f"{run_dir}: no {GENERATIONS_FILE} (not a run directory)")
    # a multiple-choice run is scored by the letter: the embedder loads only for a free-text run
    free = [r for r in args.run_dirs if ORDER_COLUMN not in pq.read_schema(Path(r) / GENERATIONS_FILE).names]
    embedder = None
    if free:
        embedder = get_embedder(
            args.embedder, **pick(args, "device", "instruction"), **embedder_endpoint(args)
        )
    for run_dir in args.run_dirs:
        _, m = score_run(
            run_dir,
            embedder=embedder,
            cache=False if args.no_cache else (args.cache_dir or True),
            **pick(args, "data", "numerics", "n_boot", "seed", "batch_size", "failed"),
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
    from pv4kit.scoring.stats import compare

    kwargs = pick(args, "run_a", "run_b", "n_boot", "seed", "force")
    if args.judge_agreed is not None:
        from pv4kit.scoring.validity import compare_agreed

        table = compare_agreed(judge=args.judge_agreed or None, **kwargs)
    else:
        table = compare(**kwargs)
    if args.output:
        from pv4kit._io import atomic_write_text

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
    import contextlib

    from pv4kit.llm.local import local_llm_config, resolve_endpoint
    from pv4kit.scoring.validity import summary_text, validity

    urls = args.judge_base_url or [None]
    if len(urls) > 1 and len(urls) != len(args.judge_model):
        raise ValueError(
            f"--judge-base-url: give one URL, or one per --judge-model ({len(args.judge_model)}), "
            f"got {len(urls)}"
        )
    urls = urls * len(args.judge_model) if len(urls) == 1 else urls
    with contextlib.ExitStack() as stack:
        judges = [
            local_llm_config(
                stack.enter_context(resolve_endpoint(model, url)),
                **pick(args, "protocol", api_key_env="judge_api_key_env"),
                **pick(args, max_output_tokens="judge_max_tokens", max_concurrency="judge_concurrency"),
                max_retries=args.judge_max_retries,
            )
            for model, url in zip(args.judge_model, urls, strict=True)
        ]
        summary = validity(
            args.run_dir,
            judges=judges,
            against=args.against,
            numerics=not args.no_numerics,
            llm_cache=llm_cache_arg(args.cache),
            **pick(args, "embedder", "seed", "n_boot", "near_tie"),
            progress=not args.quiet,
        )
    print(summary_text(summary), end="")
    print(f"tables in {args.run_dir}/validity/")
    return 0


def _export(args: argparse.Namespace) -> int:
    from pv4kit.scoring.refformat import export_reference

    out = export_reference(
        args.run_dir, out_dir=args.output_dir, **pick(args, "data", "split", "metrics_form")
    )
    print(f"wrote {out / 'predictions.jsonl'} and {out / 'metrics.json'}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from pv4kit.scoring.refformat import import_reference

    kwargs = pick(args, "data", "run_dir", "method", "model", "force")
    gens, unmatched = import_reference(args.predictions, split=args.split or None, **kwargs)
    print(f"imported {len(gens)} rows into {args.run_dir}; {len(unmatched)} did not join")
    for row in unmatched.head(10).itertuples(index=False):
        print(f"  {args.predictions}:{row.line}: {row.reason}: {row.question[:80]!r}")
    return 0 if len(gens) else 1


def _boot(p: argparse.ArgumentParser, *, seed_help: str | None = None) -> None:
    p.add_argument("--n-boot", type=positive_int, default=2000, help="bootstrap replicates (users resampled)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help=seed_help)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``score``, ``compare``, ``validity``, ``export`` and ``import`` to the ``pv4kit`` command line."""
    p = subparsers.add_parser("score", help="score runs: predictions.parquet + metrics.json")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (runs/<name>)")
    p.add_argument("--data", help="data source (default: 'data' in the run's config.json)")
    p.add_argument(
        "--embedder",
        help="'minilm' (offline CPU), 'qwen3' (Qwen/Qwen3-Embedding-4B), any sentence-transformers "
        "id or path, or 'openai:MODEL' for an OpenAI-compatible embeddings endpoint; default: qwen3 with "
        "CUDA, else minilm",
    )
    add_embedder_endpoint(p)
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: all GPUs for qwen3)")
    p.add_argument("--instruction", help="prefix for every embedded text (default: none)")
    p.add_argument("--batch-size", type=positive_int, default=None)
    p.add_argument("--cache-dir", help="embedding cache [$PV4KIT_CACHE or .cache/pv4kit]")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.add_argument(
        "--numerics",
        choices=["float16", "float32"],
        default="float16",
        help="cosine arithmetic: float16 arrays as the reference scorer (default) or float32",
    )
    _boot(p)
    p.add_argument(
        "--failed",
        choices=["wrong", "exclude"],
        help="how to count requests that failed: as wrong answers, or left out (default: refuse the run)",
    )
    p.set_defaults(func=_score)

    c = subparsers.add_parser("compare", help="paired comparison of two scored runs")
    c.add_argument("run_a")
    c.add_argument("run_b")
    _boot(c)
    c.add_argument("-o", "--output", help="also write the table as CSV")
    c.add_argument(
        "--force", action="store_true", help="compare runs scored on different data (else refused)"
    )
    c.add_argument(
        "--judge-agreed",
        nargs="?",
        const="",
        metavar="JUDGE",
        help="also show each difference on the questions where the judge (of `pv4kit validity`; default the "
        "first) agrees with the scorer in both runs",
    )
    c.set_defaults(func=_compare)

    v = subparsers.add_parser(
        "validity", help="how far a scored run's scores hold: judge agreement, embedder/numerics, margins"
    )
    v.add_argument("run_dir", metavar="RUN_DIR", help="a scored run (runs/<name>)")
    v.add_argument(
        "--judge-model",
        action="append",
        default=[],
        help="LLM judge (repeatable; two give judge-judge agreement); 'local' starts SmolLM2 here",
    )
    v.add_argument("--judge-base-url", action="append", help="judge endpoint (one, or one each)")
    add_protocol(v, default="chat", help="judge protocol [chat]")
    v.add_argument("--judge-api-key-env", default="OPENAI_API_KEY", help="judge API key variable")
    v.add_argument("--judge-max-tokens", type=positive_int, default=16, help="judge output cap [16]")
    v.add_argument("--judge-concurrency", type=positive_int, default=8, help="judge requests in flight [8]")
    v.add_argument(
        "--judge-max-retries", type=nonnegative_int, default=6, help="retries of a judge request [6]"
    )
    add_llm_cache(v)
    v.add_argument("--against", action="append", default=[], help="another embedder to rescore with (repeat)")
    v.add_argument("--no-numerics", action="store_true", help="skip the rescoring in the other numerics")
    v.add_argument("--embedder", help="the run's embedder (default: the one in metrics.json)")
    v.add_argument(
        "--near-tie", type=nonnegative_float, default=0.01, help="margin below which it is a near-tie"
    )
    _boot(v, seed_help="seed of the judge's candidate order and the bootstrap")
    v.set_defaults(func=_validity)

    e = subparsers.add_parser("export", help="write a scored run in the reference's format")
    e.add_argument("run_dir")
    e.add_argument("-o", "--output-dir", help="default: RUN_DIR/reference")
    e.add_argument("--data", help="data the run was scored on (default: 'data' in config.json)")
    e.add_argument("--split", help="split to export (needed when the run covers several)")
    e.add_argument(
        "--metrics-form",
        choices=["baselines", "evaluate"],
        default="baselines",
        help="metrics.json as evaluate_baselines.py writes it (accuracy_hard always, 0.0 without hard "
        "questions; default) or as evaluate.py does (accuracy_hard only when some question is hard)",
    )
    e.set_defaults(func=_export)

    i = subparsers.add_parser("import", help="turn a reference predictions.jsonl into a run")
    i.add_argument("predictions", help="the reference's predictions.jsonl")
    i.add_argument("run_dir", help="run directory to create")
    i.add_argument("--data", required=True, help="data source the predictions were made on")
    i.add_argument("--split", default="test", help="split to match against ('' for all)")
    i.add_argument("--method", default="imported")
    i.add_argument("--model", default=None)
    i.add_argument("--force", action="store_true", help="replace a run already in RUN_DIR (else refused)")
    i.set_defaults(func=_import)
