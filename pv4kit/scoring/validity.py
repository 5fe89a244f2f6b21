"""How far a run's nearest-candidate scores can be trusted: judge agreement, sensitivity, margins.

:func:`validity` reads a scored run (``predictions.parquet``, ``metrics.json``) and writes
``RUN/validity/``:

* ``judgments.parquet``: one row per question and judge. The judge (any OpenAI-compatible model, through
  :func:`pv4kit.llm.client.complete` and its cache) sees the question, the generation and the five
  candidates in a seeded per-question order labelled A-E (:mod:`pv4kit.scoring.choices`) and answers which
  candidate the generation expresses, or NONE. ``status`` is ``picked``, ``none``, ``unparsed`` (the reply
  names no option: counted and shown, never a pick) or ``failed`` (the request failed: a failure, left out
  of every figure and counted);
* ``agreement.csv``: per judge (and per pair of judges), overall and per category: ``agreement`` with the
  scorer's pick, ``none_rate``, ``kappa`` (Cohen's, labels A-E and NONE), ``judge_accuracy`` (accuracy
  under the judge's picks, NONE wrong) beside ``scorer_accuracy`` on the same questions; intervals
  resample users;
* ``judge_positions.csv``: the judge's position bias: how often it picks each shown letter, and its
  accuracy by the shown letter of the correct answer;
* ``sensitivity.csv``: the run rescored with float32 numerics and with each ``against`` embedder: accuracy
  with its interval, the share of predictions that flip, the paired difference and McNemar's test;
* ``margins.csv``: accuracy (and each judge's agreement) by bins of the top-1 minus top-2 similarity;
* ``summary.json`` and ``summary.txt``: the headline figures and the settings.

Not measured: whether the judge is right. A judge is another model with its own biases; agreement says how
often two readings of the answer coincide, not which is correct (docs/scoring.md, "Scorer validity").
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
from pv4kit.embeddings.models import Embedder, get_embedder, resolve_embedder
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
)
from pv4kit.scoring.runs import VALIDITY_DIR, read_metrics, read_predictions, rewrite_run
from pv4kit.scoring.score import score_frame
from pv4kit.scoring.stats import cohen_kappa_ci, compare

logger = logging.getLogger(__name__)

JUDGE_PROMPT_VERSION = "pv4kit-judge-1"
JUDGE_SYSTEM = "You read an answer to a question and say which of the listed options it expresses."
JUDGE_TEMPLATE = (
    "# Question\n{question}\n\n# Answer\n{generation}\n\n# Options\n{listing}\n\n"
    "Which option does the answer express? Reply with its letter (A, B, C, D or E), or NONE if the answer "
    "expresses none of them. Reply with nothing else."
)
#: top-1 minus top-2 similarity bins of ``margins.csv``
MARGIN_BINS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, np.inf)
#: a margin below this is a near-tie
NEAR_TIE = 0.01
#: the files of ``RUN/validity/``
FILES = ("judgments.parquet", "agreement.csv", "judge_positions.csv", "sensitivity.csv", "margins.csv")
_STATUSES = ("picked", "none", "unparsed", "failed")


def judge_messages(question: str, generation: str, shown: Sequence[str]) -> list[dict[str, str]]:
    """The judge's chat messages for one question (pure); ``shown`` are the candidates as lettered."""
    listing = choice_listing(list(shown), range(len(shown)), none=True)
    user = JUDGE_TEMPLATE.format(question=question, generation=generation, listing=listing)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def judge_predictions(
    predictions: pd.DataFrame,
    *,
    llm: LLMConfig,
    seed: int = 0,
    cache: str | os.PathLike[str] | bool | None = True,
    client: Any = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Ask one judge which candidate each generation expresses.

    Args:
        predictions: A scored run's predictions; rows of failed requests (``failed``) are not judged.
        llm: The judge's endpoint (temperature is set to 0).
        seed: Seed of the per-question order of the candidates.
        cache: The response cache of :func:`~pv4kit.llm.client.complete`.
        client: An injected OpenAI-like client (tests).
        progress: Progress bar.

    Returns:
        One row per judged question: ``user_id, question_index, judge, order, reply, error, status``,
        ``shown_letter`` (the letter the reply names, or NONE), ``judge_pick`` (the question's own letter,
        ``NONE``, or ``None`` when unparsed or failed), ``answer_position`` and ``scorer_position`` (the
        shown letters of the correct answer and of the scorer's pick).
    """
    rows = predictions[~_failed(predictions)].reset_index(drop=True)
    orders = [
        choice_order(u, i, seed=seed) for u, i in zip(rows["user_id"], rows["question_index"], strict=True)
    ]
    shown = [[list(c)[i] for i in o] for c, o in zip(rows["choices"], orders, strict=True)]
    questions = rows["question"] if "question" in rows else pd.Series([""] * len(rows))
    messages = [
        judge_messages(str(q), str(g), s)
        for q, g, s in zip(questions, rows["generation"], shown, strict=True)
    ]
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
    out = rows[list(QUESTION_KEY)].assign(
        judge=llm.model,
        order=orders,
        reply=[None if r.error else r.text for r in replies],
        error=[r.error for r in replies],
        status=status,
        shown_letter=letters,
        judge_pick=[original_letter(x, o) for x, o in zip(letters, orders, strict=True)],
        answer_position=[_shown(a, o) for a, o in zip(rows["answer_letter"], orders, strict=True)],
        scorer_position=[_shown(p, o) for p, o in zip(rows["predicted_letter"], orders, strict=True)],
    )
    counts = out["status"].value_counts()
    logger.info(
        "judge %s: %d picked, %d NONE, %d unparsed, %d failed",
        llm.model,
        *(int(counts.get(s, 0)) for s in _STATUSES),
    )
    return out


def _shown(letter: Any, order: Sequence[int]) -> str | None:
    """The shown letter of the question's own ``letter`` under ``order``."""
    if not isinstance(letter, str) or letter not in LETTERS:
        return None
    return LETTERS[list(order).index(LETTERS.index(letter))]


def _failed(predictions: pd.DataFrame) -> pd.Series:
    if "failed" in predictions:
        return predictions["failed"].fillna(False).astype(bool)
    return pd.Series(False, index=predictions.index)


# --------------------------------------------------------------------------- judge agreement


def _judged(predictions: pd.DataFrame, judgments: pd.DataFrame) -> pd.DataFrame:
    """One judge's rows joined to the scorer's, with the 0/1 columns the tables average (NaN: no reading)."""
    keep = [c for c in ("category_name", "predicted_letter", "answer_letter", "correct") if c in predictions]
    rows = judgments.merge(predictions[[*QUESTION_KEY, *keep]], on=list(QUESTION_KEY), how="left")
    read = rows["status"].isin(["picked", "none"]).to_numpy()
    pick = rows["judge_pick"]
    rows["agreement"] = np.where(read, (pick == rows["predicted_letter"]).astype(float), np.nan)
    rows["none_rate"] = np.where(read, (pick == NONE).astype(float), np.nan)
    rows["judge_accuracy"] = np.where(read, (pick == rows["answer_letter"]).astype(float), np.nan)
    rows["scorer_accuracy"] = np.where(read, rows["correct"].astype(float), np.nan)
    rows["scorer_label"] = rows["predicted_letter"].where(read)
    rows["judge_label"] = pick.where(read)
    return rows


_RATES = ("agreement", "none_rate", "judge_accuracy", "scorer_accuracy")
_COLUMNS = ["judge", "scope", "group", "metric", "value", "ci_low", "ci_high", "n"]


def _rates(
    frame: pd.DataFrame, *, by: dict[str, str], boot: dict[str, Any], metrics: Sequence[str] = _RATES
) -> pd.DataFrame:
    """:func:`accuracy_table` of the rate columns, as tidy ``metric, value, ci_low, ci_high, n`` rows."""
    t = accuracy_table(frame, by=by, value=list(metrics), **boot)
    return t.rename(columns={"accuracy": "value"}).drop(columns="n_correct")


def _kappa_row(frame: pd.DataFrame, a: str, b: str, boot: dict[str, Any]) -> dict[str, Any]:
    """The ``kappa`` row between the labels in columns ``a`` and ``b`` (A-E and NONE)."""
    k = cohen_kappa_ci(frame, a=a, b=b, labels=[*LETTERS, NONE], **boot)
    return {"metric": "kappa", "value": k["estimate"], "ci_low": k["low"], "ci_high": k["high"], "n": k["n"]}


def agreement_table(
    predictions: pd.DataFrame, judgments: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Agreement of each judge with the scorer (and of each pair of judges), overall and per category.

    Args:
        predictions: The run's predictions.
        judgments: Rows of :func:`judge_predictions` for one or more judges.
        n_boot: Bootstrap replicates (users resampled).
        seed: Bootstrap seed.

    Returns:
        ``judge, scope, group, metric, value, ci_low, ci_high, n`` with metrics ``agreement``,
        ``none_rate``, ``judge_accuracy``, ``scorer_accuracy`` and ``kappa`` (rates over the questions
        the judge read: picked or NONE), and the counts ``n_judged``, ``n_unparsed``, ``n_failed``
        (``value`` a count). A pair of judges (``judge`` ``"a vs b"``) has ``agreement`` and ``kappa``
        between their picks.
    """
    boot = {"n_boot": n_boot, "seed": seed}
    frames = []
    per_judge = {name: _judged(predictions, j) for name, j in judgments.groupby("judge", sort=False)}
    for name, rows in per_judge.items():
        counts = rows["status"].value_counts()
        extra = [_kappa_row(rows, "scorer_label", "judge_label", boot)] + [
            {"metric": f"n_{s}", "value": int(counts.get(s, 0)), "n": len(rows)}
            for s in ("unparsed", "failed")
        ]
        extra.append({"metric": "n_judged", "value": len(rows), "n": len(rows)})
        parts = [_rates(rows, by={}, boot=boot), pd.DataFrame(extra)]
        parts = [p.assign(scope="all", group="all") for p in parts]
        if "category_name" in rows:
            parts.append(_rates(rows, by={"group": "category_name"}, boot=boot).assign(scope="category"))
        frames.append(pd.concat(parts, ignore_index=True).assign(judge=name))
    for (na, ra), (nb, rb) in itertools.combinations(per_judge.items(), 2):
        both = ra[[*QUESTION_KEY, "judge_label"]].merge(
            rb[[*QUESTION_KEY, "judge_label"]], on=list(QUESTION_KEY), suffixes=("_a", "_b")
        )
        read = both["judge_label_a"].notna() & both["judge_label_b"].notna()
        same = (both["judge_label_a"] == both["judge_label_b"]).astype(float)
        both["agreement"] = np.where(read, same, np.nan)
        agree = _rates(both, by={}, boot=boot, metrics=["agreement"])
        kappa = pd.DataFrame([_kappa_row(both, "judge_label_a", "judge_label_b", boot)])
        pair = pd.concat([agree, kappa], ignore_index=True)
        frames.append(pair.assign(judge=f"{na} vs {nb}", scope="all", group="all"))
    if not frames:
        return pd.DataFrame(columns=_COLUMNS)
    out = pd.concat(frames, ignore_index=True)[_COLUMNS]
    for col in ("value", "ci_low", "ci_high"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("float64")
    out["n"] = out["n"].astype("Int64")
    return out


def judge_positions(judgments: pd.DataFrame) -> pd.DataFrame:
    """Each judge's position bias: ``judge, position, n, n_correct, accuracy, share_picked``.

    ``accuracy`` is the judge's accuracy on the questions whose correct answer was shown at ``position``
    (NONE is wrong); ``share_picked`` the share of its readings naming that letter (NONE takes the rest).
    """
    frames = []
    for name, rows in judgments.groupby("judge", sort=False):
        read = rows[rows["status"].isin(["picked", "none"])]
        read = read.assign(correct=(read["judge_pick"] == _own(read)).to_numpy(dtype=bool))
        frames.append(position_table(read).assign(judge=name))
    if not frames:
        return pd.DataFrame(columns=["judge", "position", "n", "n_correct", "accuracy", "share_picked"])
    out = pd.concat(frames, ignore_index=True)
    return out[["judge", "position", "n", "n_correct", "accuracy", "share_picked"]]


def _own(rows: pd.DataFrame) -> pd.Series:
    """The question's own letter of the correct answer, from ``answer_position`` and ``order``."""
    return pd.Series(
        [original_letter(p, o) for p, o in zip(rows["answer_position"], rows["order"], strict=True)],
        index=rows.index,
    )


# --------------------------------------------------------------------------- sensitivity and margins


def _rescore_inputs(predictions: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The questions and generations of a scored run, rebuilt from its predictions (failed rows left out)."""
    rows = predictions[~_failed(predictions)]
    qcols = [
        c
        for c in ("user_id", "question_index", "split", "category", "category_name", "hard", "question",
                  "choices", "answer")
        if c in rows
    ]  # fmt: skip
    return rows[qcols].reset_index(drop=True), rows[[*QUESTION_KEY, "split", "generation"]].reset_index(
        drop=True
    )


def sensitivity_table(
    predictions: pd.DataFrame,
    variants: dict[str, tuple[Embedder, str]],
    *,
    cache: Any = True,
    n_boot: int = 2000,
    seed: int = 0,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The run rescored under each variant, against the run's own predictions.

    Args:
        predictions: The run's predictions (the scorer as run).
        variants: ``name -> (embedder, numerics)``.
        cache: Embedding cache.
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed.
        progress: Progress bars while encoding.

    Returns:
        One row for the run (``variant`` ``"as scored"``) and one per variant: ``variant, embedder,
        numerics, n, accuracy, ci_low, ci_high, n_flips, flip_rate`` (predictions that name another letter),
        ``diff, diff_low, diff_high`` (variant minus the run, paired, users resampled), ``run_only,
        variant_only, mcnemar_p``.
    """
    base = predictions[~_failed(predictions)].reset_index(drop=True)
    questions, generations = _rescore_inputs(predictions)
    boot = {"n_boot": n_boot, "seed": seed}
    rows = [_variant_row("as scored", None, None, base, None, boot)]
    for name, (embedder, numerics) in variants.items():
        logger.info("validity: rescoring with %s (%s)", name, numerics)
        other = score_frame(
            questions, generations, embedder=embedder, cache=cache, numerics=numerics, progress=progress
        )
        rows.append(_variant_row(name, embedder, numerics, base, other, boot))
    return pd.DataFrame(rows)


def _variant_row(
    name: str, embedder: Any, numerics: str | None, base: pd.DataFrame, other: pd.DataFrame | None, boot: dict
) -> dict[str, Any]:
    frame = base if other is None else other
    acc = accuracy_table(frame, **boot).iloc[0]
    row: dict[str, Any] = {
        "variant": name,
        "embedder": getattr(embedder, "name", None),
        "numerics": numerics,
        "n": int(acc["n"]),
        "accuracy": float(acc["accuracy"]),
        "ci_low": float(acc["ci_low"]),
        "ci_high": float(acc["ci_high"]),
    }
    if other is None:
        return row
    merged = base[[*QUESTION_KEY, "predicted_letter"]].merge(
        other[[*QUESTION_KEY, "predicted_letter"]], on=list(QUESTION_KEY), suffixes=("", "_v")
    )
    flips = int((merged["predicted_letter"] != merged["predicted_letter_v"]).sum())
    paired = compare(other, base, **boot).iloc[0]  # the "overall" row: variant minus the run
    row.update(
        n_flips=flips,
        flip_rate=flips / len(merged) if len(merged) else float("nan"),
        diff=paired["diff"],
        diff_low=paired["diff_low"],
        diff_high=paired["diff_high"],
        run_only=int(paired["b_only"]),
        variant_only=int(paired["a_only"]),
        mcnemar_p=paired["mcnemar_p"],
    )
    return row


def _bin_labels(edges: Sequence[float]) -> list[str]:
    return [f"[{a:g}, {b:g})" for a, b in itertools.pairwise(edges)]


def margin_table(
    predictions: pd.DataFrame,
    judgments: pd.DataFrame | None = None,
    *,
    bins: Sequence[float] = MARGIN_BINS,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy, and each judge's agreement with the scorer, by bins of the scorer's margin.

    Returns:
        ``bin, lower, metric, value, ci_low, ci_high, n, share`` (``share``: the bin's share of the
        questions with a margin); ``metric`` is ``accuracy`` or ``agreement:<judge>``. Questions without
        a margin (failed, fewer than two candidates) are left out.
    """
    rows = predictions[~_failed(predictions) & predictions["margin"].notna()].copy()
    labels = _bin_labels(bins)
    rows["bin"] = pd.cut(rows["margin"].astype(float), bins=list(bins), right=False, labels=labels)
    rows["bin"] = rows["bin"].astype(str)
    boot = {"n_boot": n_boot, "seed": seed}
    parts = [accuracy_table(rows, by="bin", **boot).assign(metric="accuracy")]
    if judgments is not None and len(judgments):
        for name, j in judgments.groupby("judge", sort=False):
            judged = _judged(predictions, j)[[*QUESTION_KEY, "agreement"]]
            both = rows[[*QUESTION_KEY, "bin"]].merge(judged, on=list(QUESTION_KEY))
            t = accuracy_table(both, by="bin", value="agreement", **boot)
            parts.append(t.assign(metric=f"agreement:{name}"))
    out = pd.concat(parts, ignore_index=True).rename(columns={"accuracy": "value"})
    sizes = rows["bin"].value_counts()
    out["share"] = out["bin"].map(sizes).astype(float) / max(len(rows), 1)
    out["lower"] = out["bin"].map(dict(zip(labels, bins[:-1], strict=True)))
    order = {b: i for i, b in enumerate(labels)}
    out = out.sort_values(
        ["metric", "bin"], key=lambda s: s.map(order) if s.name == "bin" else s, kind="stable"
    )
    return out[["bin", "lower", "metric", "value", "ci_low", "ci_high", "n", "share"]].reset_index(drop=True)


# --------------------------------------------------------------------------- the report


def validity(
    run_dir: str | os.PathLike[str],
    *,
    judges: LLMConfig | Sequence[LLMConfig] = (),
    against: Sequence[Embedder | str] = (),
    numerics: bool = True,
    embedder: Embedder | str | None = None,
    seed: int = 0,
    n_boot: int = 2000,
    near_tie: float = NEAR_TIE,
    llm_cache: str | os.PathLike[str] | bool | None = True,
    embed_cache: Any = True,
    client: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write ``run_dir/validity/``: judge agreement, embedder and numerics sensitivity, margins.

    Args:
        run_dir: A scored run (``predictions.parquet`` and ``metrics.json``), scored by embeddings.
        judges: The judges' endpoints (none: no judge tables).
        against: Embedders (or names for :func:`~pv4kit.embeddings.models.get_embedder`) to rescore with.
        numerics: Also rescore with the run's embedder in the other numerics (float32 for a float16 run).
        embedder: The run's own embedder, for ``numerics`` (default: the name in ``metrics.json``).
        seed: Seed of the judge's candidate order and of the bootstrap.
        n_boot: Bootstrap replicates (users resampled).
        near_tie: A margin below this is a near-tie.
        llm_cache: The judges' response cache.
        embed_cache: The embedding cache of the rescoring.
        client: An injected OpenAI-like client for the judges (tests).
        progress: Progress bars.

    Returns:
        The summary written to ``summary.json``, with the tables under ``"tables"`` (frames, not written
        into the JSON).

    Raises:
        ValueError: The run was scored by the letter (``--method mcq``): its scores need no embedder to read.
    """
    run_dir = Path(run_dir)
    predictions = read_predictions(run_dir)
    metrics = read_metrics(run_dir)
    if ORDER_COLUMN in predictions.columns:
        raise ValueError(
            f"run_dir: {run_dir} is a multiple-choice run, scored by the letter; nothing to validate"
        )
    judges = [judges] if isinstance(judges, LLMConfig) else list(judges)
    models = [j.model for j in judges]
    if len(set(models)) != len(models):
        raise ValueError(f"judges: each judge model once, got {models}")
    boot = {"n_boot": n_boot, "seed": seed}
    judgments = pd.concat(
        [judge_predictions(predictions, llm=j, seed=seed, cache=llm_cache, client=client, progress=progress)
         for j in judges],
        ignore_index=True,
    ) if judges else None  # fmt: skip
    tables: dict[str, pd.DataFrame] = {}
    if judgments is not None:
        tables["agreement"] = agreement_table(predictions, judgments, **boot)
        tables["judge_positions"] = judge_positions(judgments)
    variants = _variants(metrics, against=against, numerics=numerics, embedder=embedder)
    if variants:
        tables["sensitivity"] = sensitivity_table(
            predictions, variants, cache=embed_cache, progress=progress, **boot
        )
    tables["margins"] = margin_table(predictions, judgments, **boot)
    summary = _summary(
        run_dir, predictions, metrics, tables, judges=judges, near_tie=near_tie, seed=seed, n_boot=n_boot
    )
    _write(run_dir, judgments, tables, summary)
    return {**summary, "tables": tables}


def _variants(
    metrics: dict[str, Any], *, against: Sequence[Any], numerics: bool, embedder: Any
) -> dict[str, tuple[Embedder, str]]:
    """``name -> (embedder, numerics)`` of the rescorings asked for."""
    run_numerics = metrics.get("numerics") or "float16"
    out: dict[str, tuple[Embedder, str]] = {}
    if numerics:
        name = embedder if embedder is not None else (metrics.get("embedder") or {}).get("name")
        if name is None:
            raise ValueError("embedder: metrics.json names no embedder; pass the run's embedder")
        other = "float32" if run_numerics == "float16" else "float16"
        out[other] = (resolve_embedder(name), other)
    for item in against:
        emb = get_embedder(item) if isinstance(item, str) else item
        label = item if isinstance(item, str) else getattr(emb, "name", str(emb))
        if getattr(emb, "instruction", None):
            label += f" + instruction {emb.instruction!r}"
        out[f"against {label}"] = (emb, run_numerics)
    return out


def _rate(table: pd.DataFrame, judge: str, metric: str) -> dict[str, Any]:
    row = table[(table["judge"] == judge) & (table["scope"] == "all") & (table["metric"] == metric)].iloc[0]
    return {k: None if pd.isna(row[k]) else float(row[k]) for k in ("value", "ci_low", "ci_high")} | {
        "n": None if pd.isna(row["n"]) else int(row["n"])
    }


def _summary(
    run_dir: Path,
    predictions: pd.DataFrame,
    metrics: dict[str, Any],
    tables: dict[str, pd.DataFrame],
    *,
    judges: list[LLMConfig],
    near_tie: float,
    seed: int,
    n_boot: int,
) -> dict[str, Any]:
    rows = predictions[~_failed(predictions) & predictions["margin"].notna()]
    near = rows["margin"].astype(float).to_numpy() < near_tie
    near_rows = rows[near]
    summary: dict[str, Any] = {
        "run": str(run_dir),
        "method": metrics.get("method"),
        "model": metrics.get("model"),
        "accuracy": metrics.get("accuracy"),
        "accuracy_ci": metrics.get("accuracy_ci"),
        "n": int(len(predictions)),
        "embedder": (metrics.get("embedder") or {}).get("name"),
        "numerics": metrics.get("numerics"),
        "margins": {
            "near_tie": near_tie,
            "n_near_ties": int(near.sum()),
            "share_near_ties": float(near.mean()) if len(rows) else None,
            "accuracy_near_ties": float(near_rows["correct"].mean()) if len(near_rows) else None,
            "n_exact_ties": int(predictions["tie"].sum()) if "tie" in predictions else None,
        },
        "judges": {},
        "sensitivity": [],
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
    agree = tables.get("agreement")
    if agree is not None:
        for name in agree["judge"].unique():
            metrics_here = agree[(agree["judge"] == name) & (agree["scope"] == "all")]["metric"]
            summary["judges"][name] = {m: _rate(agree, name, m) for m in metrics_here}
    if "sensitivity" in tables:
        summary["sensitivity"] = json.loads(tables["sensitivity"].to_json(orient="records"))
    return summary


def _fmt(r: dict[str, Any] | None, *, pct: bool = True) -> str:
    if not r or r.get("value") is None:
        return "n/a"
    f = (lambda v: f"{100 * v:.1f}%") if pct else (lambda v: f"{v:.3f}")
    ci = f" [{f(r['ci_low'])}, {f(r['ci_high'])}]" if r.get("ci_low") is not None else ""
    return f"{f(r['value'])}{ci}"


def _interval(row: dict[str, Any], value: str, low: str, high: str) -> str:
    return _fmt({"value": row[value], "ci_low": row[low], "ci_high": row[high]})


def summary_text(summary: dict[str, Any]) -> str:
    """The text of ``summary.txt``: one block per figure, with the intervals (users resampled)."""
    lines = [
        f"Scorer validity of {summary['run']} ({summary.get('method')}, {summary.get('model')}; "
        f"{summary['n']} questions, scorer {summary.get('embedder')} {summary.get('numerics')})",
    ]
    acc, (lo, hi) = summary.get("accuracy"), summary.get("accuracy_ci") or (None, None)
    if acc is not None:
        lines.append(f"accuracy as scored: {_fmt({'value': acc, 'ci_low': lo, 'ci_high': hi})}")
    for name, j in summary["judges"].items():
        kappa = _fmt(j.get("kappa"), pct=False)
        if " vs " in name:
            lines.append(f"judges {name}: agreement {_fmt(j.get('agreement'))}, kappa {kappa}")
            continue
        n = {k: int(j[k]["value"]) if k in j else 0 for k in ("n_judged", "n_unparsed", "n_failed")}
        lines += [
            f"judge {name}: {n['n_judged']} judged, {n['n_unparsed']} unparsed replies, "
            f"{n['n_failed']} failed requests (both left out of the rates)",
            f"  agreement with the scorer's pick {_fmt(j.get('agreement'))}; kappa {kappa}",
            f"  NONE (the judge reads no candidate in the answer) {_fmt(j.get('none_rate'))}",
            f"  accuracy under the judge's picks {_fmt(j.get('judge_accuracy'))} vs the scorer's "
            f"{_fmt(j.get('scorer_accuracy'))} on the same questions",
        ]
    for s in summary["sensitivity"]:
        if s["variant"] == "as scored":
            continue
        lines.append(
            f"{s['variant']} ({s['numerics']}): accuracy {_interval(s, 'accuracy', 'ci_low', 'ci_high')}; "
            f"{int(s['n_flips'])} of {s['n']} predictions flip ({100 * s['flip_rate']:.1f}%); difference "
            f"{_interval(s, 'diff', 'diff_low', 'diff_high')}, McNemar p={s['mcnemar_p']:.3g}"
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


def _write(
    run_dir: Path, judgments: pd.DataFrame | None, tables: dict[str, pd.DataFrame], summary: dict[str, Any]
) -> None:
    """Replace ``run_dir/validity/`` as one unit, under the run's lock (tables of an earlier report go)."""
    with rewrite_run(run_dir, drop=(VALIDITY_DIR,)) as tmp:
        out = tmp / VALIDITY_DIR
        out.mkdir()
        if judgments is not None:
            judgments.to_parquet(out / "judgments.parquet", index=False)
        for name, table in tables.items():
            atomic_write_text(out / f"{name}.csv", table.to_csv(index=False))
        atomic_write_json(out / "summary.json", summary)
        atomic_write_text(out / "summary.txt", summary_text(summary))
    logger.info("validity: wrote %s\n%s", run_dir / VALIDITY_DIR, summary_text(summary))


def read_validity(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """What :func:`validity` wrote: ``summary`` (the JSON) and each table present, by name."""
    out = Path(run_dir) / VALIDITY_DIR
    path = out / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"run_dir: no {VALIDITY_DIR}/summary.json in {run_dir}; run `pv4kit validity` first"
        )
    found: dict[str, Any] = {"summary": json.loads(path.read_text(encoding="utf-8"))}
    for name in FILES:
        if (out / name).is_file():
            stem = name.split(".")[0]
            found[stem] = (
                pd.read_parquet(out / name) if name.endswith(".parquet") else pd.read_csv(out / name)
            )
    return found


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
    """:func:`~pv4kit.scoring.stats.compare`, with the difference on the questions the judge agrees on.

    A question is kept when, in each run, the judge picked the same candidate as the scorer (a
    multiple-choice run, scored by the letter, keeps every question). The columns ``n_agreed``,
    ``diff_agreed``, ``diff_agreed_low`` and ``diff_agreed_high`` are added to each row of the comparison.

    Args:
        run_a: A run directory (with ``validity/judgments.parquet`` unless it is multiple-choice).
        run_b: The same for the second run.
        judge: The judge model to read (default: the only one, or the first).
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed.
        level: Interval level.
        force: As for :func:`~pv4kit.scoring.stats.compare`.
    """
    full = compare(run_a, run_b, n_boot=n_boot, seed=seed, level=level, force=force)
    kept_a, kept_b = (_agreed(Path(r), judge) for r in (run_a, run_b))
    both = kept_a[list(QUESTION_KEY)].merge(kept_b[list(QUESTION_KEY)])  # compare both on the same questions
    kept_a, kept_b = (k.merge(both) for k in (kept_a, kept_b))
    sub = compare(kept_a, kept_b, n_boot=n_boot, seed=seed, level=level, force=True)
    sub = sub[["scope", "group", "n", "diff", "diff_low", "diff_high"]].rename(
        columns={
            "n": "n_agreed",
            "diff": "diff_agreed",
            "diff_low": "diff_agreed_low",
            "diff_high": "diff_agreed_high",
        }
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
    keep = rows.loc[rows["agreement"] == 1, list(QUESTION_KEY)]
    return predictions.merge(keep, on=list(QUESTION_KEY))
