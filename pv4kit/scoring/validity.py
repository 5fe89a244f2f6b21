"""How far a run's nearest-candidate scores can be trusted: judge agreement, sensitivity, margins.

:func:`validity` writes ``RUN/validity/``: the judges' ``judgments.parquet`` (unparsed and failed readings
counted, left out of every rate), ``agreement.csv``, ``judge_positions.csv``, ``sensitivity.csv`` (other
numerics and embedders), ``margins.csv`` and ``summary.json``/``summary.txt``; intervals resample users.
Agreement says how often two readings coincide, not which is right (docs/scoring.md, "Scorer validity").
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import atomic_write_json, atomic_write_text, provenance
from pv4kit.embeddings.models import Embedder, resolve_embedder
from pv4kit.llm.client import complete
from pv4kit.llm.config import LLMConfig
from pv4kit.schema import LETTERS, QUESTION_KEY
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.choices import (
    CHOICE_PROMPT_VERSION,
    NONE,
    ORDER_COLUMN,
    choice_listing,
    choice_order,
    original_letter,
    parse_choice,
    position_table,
    shown_letter,
)
from pv4kit.scoring.runs import TIDY_DTYPES, VALIDITY_DIR, read_metrics, read_predictions, rewrite_run
from pv4kit.scoring.score import CARRIED_COLUMNS, score_frame
from pv4kit.scoring.stats import cohen_kappa_ci, compare

logger = logging.getLogger(__name__)

JUDGE_PROMPT_VERSION = "pv4kit-judge-1"
JUDGE_SYSTEM = "You read an answer to a question and say which of the listed options it expresses."
JUDGE_TEMPLATE = (
    "# Question\n{question}\n\n# Answer\n{generation}\n\n# Options\n{listing}\n\n"
    "Which option does the answer express? Reply with its letter (A, B, C, D or E), or NONE if the answer "
    "expresses none of them. Reply with nothing else."
)
_READ = ["picked", "none"]
_PAIRED = ("diff", "diff_low", "diff_high", "run_only", "variant_only", "mcnemar_p")
_COLUMNS = ["judge", "scope", "group", "metric", "value", "ci_low", "ci_high", "n"]


def judge_messages(question: str, generation: str, shown: Sequence[str]) -> list[dict[str, str]]:
    """The judge's chat messages for one question (pure); ``shown`` are the candidates as lettered."""
    listing = choice_listing(list(shown), range(len(shown)), none=True)
    user = JUDGE_TEMPLATE.format(question=question, generation=generation, listing=listing)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def _kept(predictions: pd.DataFrame) -> pd.DataFrame:
    """The rows of requests that did not fail."""
    if "failed" not in predictions:
        return predictions
    return predictions[~predictions["failed"].fillna(False).astype(bool)]


def judge_predictions(
    predictions: pd.DataFrame,
    *,
    llm: LLMConfig,
    seed: int = 0,
    cache: str | os.PathLike[str] | bool | None = True,
    client: Any = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Ask one judge (temperature 0) which candidate each generation expresses; failed rows are not judged.

    ``seed`` orders the candidates per question; ``cache`` and ``client`` go to
    :func:`~pv4kit.llm.client.complete`. Returns ``user_id, question_index, judge, order, reply, error,
    status, shown_letter`` (the letter named, or NONE), ``judge_pick`` (the question's own letter, ``NONE``,
    or ``None`` when unparsed or failed), ``answer_position`` and ``scorer_position`` (shown letters of the
    answer and the scorer's pick).
    """
    rows = _kept(predictions).reset_index(drop=True)
    orders = [choice_order(u, i, seed=seed) for u, i in rows[list(QUESTION_KEY)].itertuples(index=False)]
    shown = [[list(c)[i] for i in o] for c, o in zip(rows["choices"], orders, strict=True)]
    questions = rows.get("question", [""] * len(rows))
    messages = [judge_messages(q, g, s) for q, g, s in zip(questions, rows["generation"], shown, strict=True)]
    config = dataclasses.replace(llm, temperature=0.0)
    replies = complete(
        messages, llm=config, cache=cache, step="validity:judge", client=client, progress=progress
    )
    letters = [
        None if r.error else parse_choice(r.text, s, none=True) for r, s in zip(replies, shown, strict=True)
    ]
    status = [
        "failed" if r.error else "unparsed" if x is None else "none" if x == NONE else "picked"
        for r, x in zip(replies, letters, strict=True)
    ]
    return rows[list(QUESTION_KEY)].assign(
        judge=llm.model,
        order=orders,
        reply=[None if r.error else r.text for r in replies],
        error=[r.error for r in replies],
        status=status,
        shown_letter=letters,
        judge_pick=[original_letter(x, o) for x, o in zip(letters, orders, strict=True)],
        answer_position=[shown_letter(a, o) for a, o in zip(rows["answer_letter"], orders, strict=True)],
        scorer_position=[shown_letter(p, o) for p, o in zip(rows["predicted_letter"], orders, strict=True)],
    )


def _judged(predictions: pd.DataFrame, judgments: pd.DataFrame) -> pd.DataFrame:
    """One judge's rows joined to the scorer's, with the 0/1 columns the tables average (NaN: no reading)."""
    keep = [c for c in ("category_name", "predicted_letter", "answer_letter", "correct") if c in predictions]
    rows = judgments.merge(predictions[[*QUESTION_KEY, *keep]], on=list(QUESTION_KEY), how="left")
    read = rows["status"].isin(_READ)
    pick = rows["judge_pick"]
    hits = {
        "agreement": pick == rows["predicted_letter"],
        "none_rate": pick == NONE,
        "judge_accuracy": pick == rows["answer_letter"],
        "scorer_accuracy": rows["correct"],
    }
    for col, hit in hits.items():
        rows[col] = hit.astype(float).where(read)
    rows["scorer_label"] = rows["predicted_letter"].where(read)
    rows["judge_label"] = pick.where(read)
    return rows


def _rates(frame: pd.DataFrame, by: dict[str, str], boot: dict[str, Any], metrics: list[str]) -> pd.DataFrame:
    t = accuracy_table(frame, by=by, value=metrics, **boot)
    return t.rename(columns={"accuracy": "value"}).drop(columns="n_correct")


def _overall(frame: pd.DataFrame, rates: list[str], a: str, b: str, boot: dict[str, Any]) -> pd.DataFrame:
    """The ``rates`` over the whole frame, then Cohen's kappa between the labels in ``a`` and ``b``."""
    k = cohen_kappa_ci(frame, a=a, b=b, labels=[*LETTERS, NONE], **boot)
    kappa = {"metric": "kappa", "value": k["estimate"], "ci_low": k["low"], "ci_high": k["high"], "n": k["n"]}
    return pd.concat([_rates(frame, {}, boot, rates), pd.DataFrame([kappa])], ignore_index=True)


def agreement_table(
    predictions: pd.DataFrame, judgments: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Agreement of each judge with the scorer (and of each pair of judges), overall and per category.

    ``judge, scope, group, metric, value, ci_low, ci_high, n``: ``agreement``, ``none_rate``,
        ``judge_accuracy``, ``scorer_accuracy`` and ``kappa`` over the questions the judge read, and the
        counts ``n_judged``, ``n_unparsed``, ``n_failed``; a pair ``"a vs b"``: ``agreement``, ``kappa``.
    """
    boot = {"n_boot": n_boot, "seed": seed}
    rates = ["agreement", "none_rate", "judge_accuracy", "scorer_accuracy"]
    frames = []
    per_judge = {name: _judged(predictions, j) for name, j in judgments.groupby("judge", sort=False)}
    for name, rows in per_judge.items():
        n = [int((rows["status"] == k).sum()) for k in ("unparsed", "failed")] + [len(rows)]
        counts = pd.DataFrame({"metric": ["n_unparsed", "n_failed", "n_judged"], "value": n, "n": len(rows)})
        overall = pd.concat([_overall(rows, rates, "scorer_label", "judge_label", boot), counts])
        parts = [overall.assign(scope="all", group="all")]
        if "category_name" in rows:
            parts.append(_rates(rows, {"group": "category_name"}, boot, rates).assign(scope="category"))
        frames.append(pd.concat(parts, ignore_index=True).assign(judge=name))
    for (na, ra), (nb, rb) in itertools.combinations(per_judge.items(), 2):
        cols = [*QUESTION_KEY, "judge_label"]
        both = ra[cols].merge(rb[cols], on=list(QUESTION_KEY), suffixes=("_a", "_b"))
        a, b = both["judge_label_a"], both["judge_label_b"]
        both["agreement"] = (a == b).astype(float).where(a.notna() & b.notna())
        pair = _overall(both, ["agreement"], "judge_label_a", "judge_label_b", boot)
        frames.append(pair.assign(judge=f"{na} vs {nb}", scope="all", group="all"))
    if not frames:
        return pd.DataFrame(columns=_COLUMNS)
    return pd.concat(frames, ignore_index=True)[_COLUMNS].astype(TIDY_DTYPES)


def judge_positions(judgments: pd.DataFrame) -> pd.DataFrame:
    """Each judge's position bias: ``judge, position, n, n_correct, accuracy, share_picked``.

    ``accuracy``: the judge's accuracy (NONE wrong) on the questions whose answer was shown at ``position``;
    ``share_picked``: the share of its readings naming that letter (NONE takes the rest).
    """
    columns = ["judge", "position", "n", "n_correct", "accuracy", "share_picked"]
    read = judgments[judgments["status"].isin(_READ)]
    read = read.assign(correct=read["shown_letter"] == read["answer_position"])  # the judge named the answer
    frames = [
        position_table(read[read["judge"] == name]).assign(judge=name) for name in judgments["judge"].unique()
    ]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def sensitivity_table(
    predictions: pd.DataFrame,
    variants: dict[str, tuple[Embedder, str]],
    *,
    cache: Any = True,
    n_boot: int = 2000,
    seed: int = 0,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The run rescored under each variant (``name -> (embedder, numerics)``), against its own predictions.

    One row for the run (``"as scored"``) and one per variant: ``variant, embedder, numerics, n, accuracy,
    ci_low, ci_high, n_flips, flip_rate`` (predictions naming another letter), ``diff, diff_low, diff_high``
    (variant minus run, paired), ``run_only, variant_only, mcnemar_p``.
    """
    base = _kept(predictions).sort_values(list(QUESTION_KEY)).reset_index(drop=True)  # as score_frame sorts
    questions = base[[*QUESTION_KEY, *(c for c in CARRIED_COLUMNS if c in base)]]
    generations = base[[*QUESTION_KEY, "split", "generation"]]
    boot = {"n_boot": n_boot, "seed": seed}
    rows = []
    for name, (embedder, numerics) in {"as scored": (None, None), **variants}.items():
        other = base
        if embedder is not None:
            logger.info("validity: rescoring with %s (%s)", name, numerics)
            other = score_frame(
                questions, generations, embedder=embedder, cache=cache, numerics=numerics, progress=progress
            )
        acc = accuracy_table(other, **boot).iloc[0]
        row = {"variant": name, "embedder": getattr(embedder, "name", None), "numerics": numerics}
        row |= {"n": int(acc["n"]), **{k: float(acc[k]) for k in ("accuracy", "ci_low", "ci_high")}}
        if embedder is not None:
            flips = int((base["predicted_letter"] != other["predicted_letter"]).sum())
            paired = compare(other, base, **boot).iloc[0]  # the "overall" row: variant minus the run
            paired = paired.rename({"a_only": "variant_only", "b_only": "run_only"})
            row |= {"n_flips": flips, "flip_rate": flips / len(base) if len(base) else float("nan")}
            row |= paired[list(_PAIRED)].to_dict()
        rows.append(row)
    return pd.DataFrame(rows)


def margin_table(
    predictions: pd.DataFrame,
    judgments: pd.DataFrame | None = None,
    *,
    bins: Sequence[float] = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, np.inf),
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy, and each judge's agreement with the scorer, by bins of the scorer's margin.

    ``bin, lower, metric, value, ci_low, ci_high, n, share`` (the bin's share of the questions with a
    margin); ``metric`` ``accuracy`` or ``agreement:<judge>``. Questions without a margin are left out.
    """
    rows = _kept(predictions).dropna(subset=["margin"])
    lower = pd.cut(rows["margin"].astype(float), bins=list(bins), right=False, labels=list(bins[:-1]))
    rows = rows.assign(lower=lower.astype(float))  # each bin by its lower bound: they sort as numbers
    boot = {"n_boot": n_boot, "seed": seed}
    parts = [accuracy_table(rows, by="lower", **boot).assign(metric="accuracy")]
    for name, j in judgments.groupby("judge", sort=False) if judgments is not None else ():
        both = rows[[*QUESTION_KEY, "lower"]].merge(_judged(predictions, j)[[*QUESTION_KEY, "agreement"]])
        table = accuracy_table(both, by="lower", value="agreement", **boot)
        parts.append(table.assign(metric=f"agreement:{name}"))
    out = pd.concat(parts, ignore_index=True).rename(columns={"accuracy": "value"})
    out = out.sort_values(["metric", "lower"], kind="stable")
    out["bin"] = out["lower"].map({a: f"[{a:g}, {b:g})" for a, b in itertools.pairwise(bins)})
    out["share"] = out["lower"].map(rows["lower"].value_counts()).astype(float) / max(len(rows), 1)
    return out[["bin", "lower", "metric", "value", "ci_low", "ci_high", "n", "share"]].reset_index(drop=True)


def validity(
    run_dir: str | os.PathLike[str],
    *,
    judges: LLMConfig | Sequence[LLMConfig] = (),
    against: Sequence[Embedder | str] = (),
    numerics: bool = True,
    embedder: Embedder | str | None = None,
    seed: int = 0,
    n_boot: int = 2000,
    near_tie: float = 0.01,
    llm_cache: str | os.PathLike[str] | bool | None = True,
    embed_cache: Any = True,
    client: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write ``run_dir/validity/``: judge agreement, embedder and numerics sensitivity, margins.

    Returns the summary written to ``summary.json``, with the tables (frames) under ``"tables"``.

    Args:
        run_dir: A run scored by embeddings.
        judges: The judges' endpoints (none: no judge tables).
        against: Embedders (or names for :func:`~pv4kit.embeddings.models.get_embedder`) to rescore with.
        numerics: Also rescore with the run's embedder in the other numerics.
        embedder: The run's own embedder, for ``numerics`` (default: the name in ``metrics.json``).
        seed: Seed of the judge's candidate order and of the bootstrap.
        n_boot: Bootstrap replicates (users resampled).
        near_tie: A margin below this is a near-tie.
        llm_cache: The judges' response cache.
        embed_cache: The embedding cache of the rescoring.
        client: An injected OpenAI-like client for the judges (tests).
        progress: Progress bars.

    Raises:
        ValueError: The run was scored by the letter (multiple-choice), or a judge model is given twice.
    """
    run_dir = Path(run_dir)
    predictions, metrics = read_predictions(run_dir), read_metrics(run_dir)
    if ORDER_COLUMN in predictions.columns:
        raise ValueError(
            f"run_dir: {run_dir} is a multiple-choice run, scored by the letter; nothing to validate"
        )
    judges = [judges] if isinstance(judges, LLMConfig) else list(judges)
    models = [j.model for j in judges]
    if len(set(models)) != len(models):
        raise ValueError(f"judges: each judge model once, got {models}")
    boot = {"n_boot": n_boot, "seed": seed}
    ask = {"seed": seed, "cache": llm_cache, "client": client, "progress": progress}
    judged = [judge_predictions(predictions, llm=j, **ask) for j in judges]
    judgments = pd.concat(judged, ignore_index=True) if judges else None
    tables: dict[str, pd.DataFrame] = {}
    if judges:
        tables["agreement"] = agreement_table(predictions, judgments, **boot)
        tables["judge_positions"] = judge_positions(judgments)
    run_numerics = metrics.get("numerics") or "float16"
    variants: dict[str, tuple[Embedder, str]] = {}
    if numerics:
        name = embedder if embedder is not None else (metrics.get("embedder") or {}).get("name")
        if name is None:
            raise ValueError("embedder: metrics.json names no embedder; pass the run's embedder")
        other = "float32" if run_numerics == "float16" else "float16"
        variants[other] = (resolve_embedder(name), other)
    for item in against:
        emb = resolve_embedder(item)
        label = item if isinstance(item, str) else getattr(emb, "name", str(emb))
        if getattr(emb, "instruction", None):
            label += f" + instruction {emb.instruction!r}"
        variants[f"against {label}"] = (emb, run_numerics)
    if variants:
        tables["sensitivity"] = sensitivity_table(
            predictions, variants, cache=embed_cache, progress=progress, **boot
        )
    tables["margins"] = margin_table(predictions, judgments, **boot)
    scored = _kept(predictions).dropna(subset=["margin"])
    near = scored.loc[scored["margin"].astype(float) < near_tie, "correct"]
    summary: dict[str, Any] = {
        "run": str(run_dir),
        **{k: metrics.get(k) for k in ("method", "model", "accuracy", "accuracy_ci")},
        "n": int(len(predictions)),
        "embedder": (metrics.get("embedder") or {}).get("name"),
        "numerics": metrics.get("numerics"),
        "margins": {
            "near_tie": near_tie,
            "n_near_ties": len(near),
            "share_near_ties": len(near) / len(scored) if len(scored) else None,
            "accuracy_near_ties": float(near.mean()) if len(near) else None,
            "n_exact_ties": int(predictions["tie"].sum()) if "tie" in predictions else None,
        },
        "judges": {},
        "sensitivity": json.loads(tables["sensitivity"].to_json(orient="records")) if variants else [],
        "settings": {
            "seed": seed,
            "n_boot": n_boot,
            "cluster": "user_id",
            "judge_prompt_version": JUDGE_PROMPT_VERSION,
            "choice_prompt_version": CHOICE_PROMPT_VERSION,
            "judges": [{"model": j.model, "base_url": j.base_url, "protocol": j.protocol} for j in judges],
        },
        "provenance": provenance(),
    }
    for row in tables["agreement"].query("scope == 'all'").to_dict("records") if judges else ():
        figures = {k: None if pd.isna(row[k]) else float(row[k]) for k in ("value", "ci_low", "ci_high")}
        figures["n"] = None if pd.isna(row["n"]) else int(row["n"])
        summary["judges"].setdefault(row["judge"], {})[row["metric"]] = figures
    with rewrite_run(run_dir, drop=(VALIDITY_DIR,)) as tmp:  # tables of an earlier report go
        (tmp / VALIDITY_DIR).mkdir()
        if judgments is not None:
            judgments.to_parquet(tmp / VALIDITY_DIR / "judgments.parquet", index=False)
        for name, table in tables.items():
            atomic_write_text(tmp / VALIDITY_DIR / f"{name}.csv", table.to_csv(index=False))
        atomic_write_json(tmp / VALIDITY_DIR / "summary.json", summary)
        atomic_write_text(tmp / VALIDITY_DIR / "summary.txt", summary_text(summary))
    logger.info("validity: wrote %s\n%s", run_dir / VALIDITY_DIR, summary_text(summary))
    return {**summary, "tables": tables}


def _fmt(r: dict[str, Any] | None, *, pct: bool = True) -> str:
    if not r or r.get("value") is None:
        return "n/a"
    f = (lambda v: f"{100 * v:.1f}%") if pct else (lambda v: f"{v:.3f}")
    ci = f" [{f(r['ci_low'])}, {f(r['ci_high'])}]" if r.get("ci_low") is not None else ""
    return f"{f(r['value'])}{ci}"


def summary_text(summary: dict[str, Any]) -> str:
    """The text of ``summary.txt``: one block per figure, with the intervals (users resampled)."""
    lines = [
        f"Scorer validity of {summary['run']} ({summary.get('method')}, {summary.get('model')}; "
        f"{summary['n']} questions, scorer {summary.get('embedder')} {summary.get('numerics')})"
    ]
    if summary.get("accuracy") is not None:
        lo, hi = summary.get("accuracy_ci") or (None, None)
        lines.append(
            f"accuracy as scored: {_fmt({'value': summary['accuracy'], 'ci_low': lo, 'ci_high': hi})}"
        )
    for name, j in summary["judges"].items():
        agree, kappa = _fmt(j.get("agreement")), _fmt(j.get("kappa"), pct=False)
        if " vs " in name:
            lines.append(f"judges {name}: agreement {agree}, kappa {kappa}")
            continue
        n = {k: int(j[k]["value"]) if k in j else 0 for k in ("n_judged", "n_unparsed", "n_failed")}
        lines += [
            f"judge {name}: {n['n_judged']} judged, {n['n_unparsed']} unparsed replies, "
            f"{n['n_failed']} failed requests (both left out of the rates)",
            f"  agreement with the scorer's pick {agree}; kappa {kappa}",
            f"  NONE (the judge reads no candidate in the answer) {_fmt(j.get('none_rate'))}",
            f"  accuracy under the judge's picks {_fmt(j.get('judge_accuracy'))} vs the scorer's "
            f"{_fmt(j.get('scorer_accuracy'))} on the same questions",
        ]
    for s in summary["sensitivity"][1:]:  # the first row is the run as scored
        acc = _fmt({"value": s["accuracy"], "ci_low": s["ci_low"], "ci_high": s["ci_high"]})
        diff = _fmt({"value": s["diff"], "ci_low": s["diff_low"], "ci_high": s["diff_high"]})
        lines.append(
            f"{s['variant']} ({s['numerics']}): accuracy {acc}; {int(s['n_flips'])} of {s['n']} predictions "
            f"flip ({100 * s['flip_rate']:.1f}%); difference {diff}, McNemar p={s['mcnemar_p']:.3g}"
        )
    m = summary["margins"]
    if m["share_near_ties"] is not None:
        near_acc = "n/a" if m["accuracy_near_ties"] is None else f"{100 * m['accuracy_near_ties']:.1f}%"
        lines.append(
            f"near-ties (top-1 minus top-2 similarity < {m['near_tie']:g}): {m['n_near_ties']} questions "
            f"({100 * m['share_near_ties']:.1f}%), accuracy on them {near_acc}; "
            f"exact ties {m['n_exact_ties']}"
        )
    return "\n".join(lines) + "\n"


def read_validity(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """What :func:`validity` wrote: ``summary`` (the JSON) and each table present, by name."""
    out = Path(run_dir) / VALIDITY_DIR
    if not (out / "summary.json").is_file():
        raise FileNotFoundError(
            f"run_dir: no {VALIDITY_DIR}/summary.json in {run_dir}; run `pv4kit validity` first"
        )
    found: dict[str, Any] = {"summary": json.loads((out / "summary.json").read_text(encoding="utf-8"))}
    found |= {p.stem: pd.read_parquet(p) for p in out.glob("judgments.parquet")}
    return found | {p.stem: pd.read_csv(p) for p in sorted(out.glob("*.csv"))}


def compare_agreed(
    run_a: str | os.PathLike[str],
    run_b: str | os.PathLike[str],
    *,
    judge: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    force: bool = False,
) -> pd.DataFrame:
    """:func:`~pv4kit.scoring.stats.compare`, plus the difference on the questions the judge agrees on.

    A question is kept when, in each run, ``judge`` (default: the first of each run's judgments) picked
    the scorer's candidate (a multiple-choice run keeps every question). Adds ``n_agreed, diff_agreed,
    diff_agreed_low, diff_agreed_high`` to each row of the comparison.
    """
    full = compare(run_a, run_b, n_boot=n_boot, seed=seed, level=level, force=force)
    kept_a, kept_b = (_agreed(Path(r), judge) for r in (run_a, run_b))
    both = kept_a[list(QUESTION_KEY)].merge(kept_b[list(QUESTION_KEY)])  # compare both on the same questions
    sub = compare(kept_a.merge(both), kept_b.merge(both), n_boot=n_boot, seed=seed, level=level, force=True)
    sub = sub[["scope", "group", "n", "diff", "diff_low", "diff_high"]].rename(
        columns=lambda c: "n_agreed" if c == "n" else c.replace("diff", "diff_agreed")
    )
    out = full.merge(sub, on=["scope", "group"], how="left")
    out["n_agreed"] = out["n_agreed"].fillna(0).astype("int64")
    out.attrs.update(full.attrs, judge=judge)
    return out


def _agreed(run_dir: Path, judge: str | None) -> pd.DataFrame:
    """The predictions of ``run_dir`` on the questions where ``judge`` agreed with its scorer."""
    predictions = read_predictions(run_dir)
    if ORDER_COLUMN in predictions.columns:
        return predictions
    path = run_dir / VALIDITY_DIR / "judgments.parquet"
    if not path.is_file():
        raise FileNotFoundError(
            f"run_dir: no {VALIDITY_DIR}/judgments.parquet in {run_dir}; run `pv4kit validity {run_dir} "
            "--judge-model M` first"
        )
    judgments = pd.read_parquet(path)
    names = list(dict.fromkeys(judgments["judge"]))
    name = judge if judge is not None else names[0]
    if name not in names:
        raise ValueError(f"judge: {run_dir} was judged by {names}, not {name!r}")
    rows = _judged(predictions, judgments[judgments["judge"] == name])
    return predictions.merge(rows.loc[rows["agreement"] == 1, list(QUESTION_KEY)], on=list(QUESTION_KEY))
