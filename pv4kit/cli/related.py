"""Related-benchmark commands: ``pv4kit personafeedback ...`` and ``pv4kit recenter ...``.

Every command writes tidy CSV tables plus a ``config.json`` provenance record into ``--out``.
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from pv4kit._io import atomic_write_json, atomic_write_text, provenance
from pv4kit.cli._args import PROTOCOL, add_llm_cache, add_options, llm_cache_arg, nonnegative_int, pick
from pv4kit.llm.config import LLMConfig
from pv4kit.redact import redact_text
from pv4kit.related import personafeedback as pf
from pv4kit.related import recenter as rc
from pv4kit.related.pv4_pairs import load_pv4_pairs
from pv4kit.related.reward_model import reward_model_baseline
from pv4kit_cli import COMMANDS

#: the :class:`~pv4kit.llm.config.LLMConfig` options of a step that asks an LLM (``--concurrency`` aside)
LLM_OPTIONS = ("model", "base_url", "protocol", "temperature", "max_output_tokens", "max_retries")
CONCURRENCY = {"max_concurrency": "concurrency"}
_COVERAGE = ["kind", "rater", "n_rated", "n_unrated", "n_missing_label", "n_orphan"]


def _write(out_dir: str, tables: dict[str, Any], *, args: argparse.Namespace) -> None:
    tables = {name: frame for name, frame in tables.items() if frame is not None}
    options = {k: redact_text(v) if isinstance(v, str) else v for k, v in vars(args).items() if k != "func"}
    command = f"{args.command} {getattr(args, 'pf_command', None) or args.rc_command}"
    out = Path(out_dir)  # each file replaced atomically; the folder's other files stay
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        atomic_write_text(out / f"{name}.csv", frame.to_csv(index=False))
    atomic_write_json(out / "config.json", provenance(command=command, options=options))
    print(f"wrote {', '.join(f'{n}.csv' for n in tables)} and config.json to {out_dir}")


def _show(frame: Any, columns: list[str]) -> None:
    cols = [c for c in columns if c in frame.columns]
    print(frame[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def _embedding(args: argparse.Namespace) -> dict[str, Any]:
    return {"embedder": args.embedder, "cache": not args.no_embed_cache}


def _llm(args: argparse.Namespace) -> dict[str, Any]:
    config = LLMConfig(**pick(args, *LLM_OPTIONS, **CONCURRENCY))
    return {"config": config, "cache": llm_cache_arg(args.cache), "progress": not args.quiet}


def _pairs(args: argparse.Namespace) -> Any:
    if args.pv4:
        pairs = load_pv4_pairs(args.data, seed=args.seed, splits=args.splits)
    else:
        pairs = pf.load_personafeedback(args.data, id_rule=args.id_rule, layout=args.layout).pairs
    return pf.head_per_group(pairs, args.limit)


def _pf_load(args: argparse.Namespace) -> int:
    data = pf.load_personafeedback(args.data, id_rule=args.id_rule, layout=args.layout)
    print(
        f"{len(data.pairs)} pairs (the paper reports {pf.PAPER_TOTAL:,}), {len(data.personas)} personas "
        f"({data.layout} layout of {'+'.join(data.layouts_found)}), join rule {data.id_rule}, "
        f"{len(data.unjoined)} rows unjoined, {len(data.unused_personas)} personas unused, "
        f"{len(data.layout_disagreements)} layout disagreements"
    )
    _show(data.counts, ["set", "tier", "n_rows", "n_joined", "n_unjoined"])
    if len(data.unjoined):
        print("rows that join no persona (user_id: rows):")
        print(data.unjoined.groupby("user_id").size().to_string())
    if len(data.unused_personas):
        print(f"personas no row uses: {', '.join(data.unused_personas['persona_key'].tolist()[:50])}")
    if len(data.layout_disagreements):
        _show(data.layout_disagreements, ["persona_key", "problem", "file", "line"])
    if args.out:
        names = ("pairs", "unjoined", "counts", "unused_personas", "layout_disagreements", "personas")
        tables = {name: getattr(data, name).drop(columns=["record"], errors="ignore") for name in names}
        _write(args.out, tables, args=args)
    return 0


def _pf_judge(args: argparse.Namespace) -> int:
    preds = pf.judge_pairs(_pairs(args), **_llm(args), **pick(args, "seed", "both_orders"))
    acc = pf.judge_accuracy(preds, interval=args.interval)
    bias = pf.position_bias(preds) if args.both_orders else None
    _show(acc, ["order", "set", "tier", "n", "accuracy", "ci_low", "ci_high", "unparsed", "errored"])
    if bias is not None:
        _show(bias, ["set", "n_pairs", "acc_chosen_A", "acc_chosen_B", "bias", "consistent"])
    _write(args.out, {"predictions": preds, "accuracy": acc, "position_bias": bias}, args=args)
    failed = preds["error"].dropna()
    if len(failed):
        print(
            f"{len(failed)} judge requests failed (counted as wrong above; first: {failed.iloc[0]}); "
            "run the same command again to retry them"
        )
    return 1 if len(failed) else 0


def _pf_reward(args: argparse.Namespace) -> int:
    options = pick(args, "test_fraction", "seed", "l2")
    preds, acc, _ = reward_model_baseline(_pairs(args), **_embedding(args), **options)
    _show(acc, ["method", "set", "tier", "n", "accuracy", "ci_low", "ci_high"])
    _write(args.out, {"predictions": preds, "accuracy": acc}, args=args)
    return 0


def _pf_pv4_score(args: argparse.Namespace) -> int:
    pairs = _pairs(args)
    gens = pf.generate_answers(pairs, **_llm(args))
    scores = pf.pv4_score(pairs, gens, **_embedding(args))
    acc = pf.pv4_score_accuracy(scores, interval=args.interval)
    _show(acc, ["set", "tier", "n", "accuracy", "ci_low", "ci_high", "failed"])
    _write(args.out, {"generations": gens, "scores": scores, "accuracy": acc}, args=args)
    return 0


def _rc_stage1(args: argparse.Namespace) -> int:
    data = rc.load_stage1(args.data)
    acc, agree = rc.stage1_acceptance(data), rc.stage1_agreement(data)
    by_source = rc.acceptance_by_source(acc)
    print(f"{len(acc)} attributes, {acc['accepted'].mean():.3f} accepted by majority")
    _show(by_source, ["source", "n", "accepted"])
    _show(agree[agree["raters"].isin(["all", "pairs"])], ["metric", "scale", "n_items", "value"])
    _write(args.out, {"acceptance": acc, "acceptance_by_source": by_source, "agreement": agree}, args=args)
    return 0


def _rc_stage2(args: argparse.Namespace) -> int:
    data = rc.load_stage2(args.data)
    yes = rc.stage2_yes_rates(data)
    print(f"{len(data.items)} (item, attribute) pairs; ratings per rater:")
    _show(data.coverage, _COVERAGE)
    _show(yes, ["kind", "rater", "n", "yes_rate"])
    preds = rc.stage2_predictions(data, **_embedding(args), **pick(args, "seed", "tune_fraction"))
    metrics, agree = rc.stage2_metrics(preds, subset=["test", "all"]), rc.stage2_agreement(data)
    test = metrics[metrics["subset"] == "test"]
    _show(test, ["method", "n", "n_missing", "precision", "recall", "f1", "positive_rate", "threshold"])
    _show(rc.agreement_summary(agree), ["group", "agreement", "cohen_kappa"])
    _show(agree[agree["statistic"] != "cohen_kappa"], ["group", "statistic", "n", "value"])
    tables = {"predictions": preds, "metrics": metrics, "agreement": agree, "yes_rates": yes}
    _write(args.out, {**tables, "coverage": data.coverage}, args=args)
    return 0


def _rc_stage3(args: argparse.Namespace) -> int:
    data = rc.load_stage3(args.data)
    ratings = rc.stage3_ratings(data)
    summary, corr = rc.stage3_summary(ratings), rc.stage3_correlation(ratings)
    orientation = rc.stage3_orientation(ratings)
    gens = data.generations
    print(
        f"{len(data.items)} (item, attribute) pairs; {len(gens)} generations in "
        f"{gens['file'].nunique()} files, {int(gens['item_index'].notna().sum())} joined to an item"
    )
    _show(data.coverage, _COVERAGE)
    _show(orientation, ["kind", "personalised_side", "n", "mean_rating", "share_prefer_personalised"])
    _show(summary, ["kind", "rater", "n", "mean_rating", "share_not_preferred"])
    _show(corr, ["kind", "rater", "n", "spearman_rho", "p_value"])
    tables = {"ratings": ratings, "distribution": rc.stage3_distribution(ratings), "summary": summary}
    tables.update(correlation=corr, pairs=rc.stage3_pairs(data), orientation=orientation)
    tables["coverage"] = data.coverage
    _write(args.out, {**tables, "generations": gens.drop(columns=["response"])}, args=args)
    return 0


def _step(
    sub: argparse._SubParsersAction, name: str, handler: Any, text: str, *, load: Any, **options: Any
) -> Any:
    """Add the step ``name`` of a command group, run by ``handler``, with ``--data`` as ``load`` takes it."""
    p = sub.add_parser(name, help=text)
    p.set_defaults(func=handler)
    add_options(p, load, renamed={"source": "data"}, **options)
    return p


def _add_pairs(p: argparse.ArgumentParser, *, llm: bool = False, embed: bool = False) -> None:
    """The pair and output options of a ``personafeedback`` step, and those of its LLM or embedder."""
    pv4_help = "--data is a PV4 dataset: use its (reference, distractor) pairs"
    p.add_argument("--pv4", action="store_true", help=pv4_help)
    p.add_argument("--splits", nargs="+", default=None, help="with --pv4: the PV4 splits to use")
    limit_help = "at most this many pairs per set x tier (0: all)"
    p.add_argument("--limit", type=nonnegative_int, default=0, help=limit_help)
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--out", required=True, help="output folder for the tables")
    if llm:
        request = {"model": {"required": True}, "protocol": PROTOCOL, "temperature": {"default": 0.0}}
        add_options(p, LLMConfig, *LLM_OPTIONS, renamed=CONCURRENCY, **request)
        add_llm_cache(p)
        add_options(p, pf.judge_accuracy, interval={"choices": ["wilson", "bootstrap"]})
    if embed:
        _add_embed(p)


def _add_embed(p: argparse.ArgumentParser, default: str | None = None) -> None:
    p.add_argument("--embedder", default=default, help="embedder name for pv4kit.get_embedder")
    p.add_argument("--no-embed-cache", action="store_true", help="do not use the on-disk embedding cache")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``personafeedback`` and ``recenter`` command groups."""
    sub = subparsers.add_parser("personafeedback", help=COMMANDS["personafeedback"][1])
    sub = sub.add_subparsers(dest="pf_command", metavar="STEP", required=True)
    join = {"id_rule": {"choices": list(pf.ID_RULES)}, "layout": {"choices": list(pf.LAYOUTS)}}
    step = partial(_step, sub, load=pf.load_personafeedback, **join)
    p = step("load", _pf_load, "load and check the persona join")
    p.add_argument("--out", default=None, help="write the pairs, persona and join tables (.csv) here")
    p = step("judge", _pf_judge, "pairwise LLM judge, accuracy per set x tier")
    _add_pairs(p, llm=True)
    add_options(p, pf.judge_pairs, "both_orders")
    p = step("reward-model", _pf_reward, "Bradley-Terry linear head on frozen embeddings (CPU)")
    _add_pairs(p, embed=True)
    add_options(p, reward_model_baseline, "test_fraction", "l2")
    p = step("pv4-score", _pf_pv4_score, "generate from the persona; right when nearer chosen")
    _add_pairs(p, llm=True, embed=True)

    sub = subparsers.add_parser("recenter", help=COMMANDS["recenter"][1])
    sub = sub.add_subparsers(dest="rc_command", metavar="STAGE", required=True)
    for name, handler, load, text in (
        ("stage1", _rc_stage1, rc.load_stage1, "attribute acceptance and annotator agreement"),
        ("stage2", _rc_stage2, rc.load_stage2, "relevance: P/R/F1 of LLMs, embedding, BM25; kappas"),
        ("stage3", _rc_stage3, rc.load_stage3, "rating distributions and judge-human Spearman"),
    ):
        p = _step(sub, name, handler, text, load=load)
        p.add_argument("--out", required=True, help="output folder for the tables")
        if name == "stage2":
            _add_embed(p, default="minilm")
            add_options(p, rc.stage2_predictions, "tune_fraction", "seed")
