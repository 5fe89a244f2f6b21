"""``make demo``: the whole pipeline on the sample in ``raw/``, on the local SmolLM2 model, on a CPU.

Stages: ``data`` (steps 5 and 6 when stale), the runs of :data:`DEMO_RUNS` on a local vLLM server, ``score``
(MiniLM; one run again through vLLM's ``/v1/embeddings``), ``hard``, ``validity``, then the notebooks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import default_llm_cache
from pv4kit.analysis.notebooks import execute_notebooks
from pv4kit.baselines.hard import derive_hard_subset, hard_report, write_subset
from pv4kit.baselines.run import answer
from pv4kit.dataset.load import load
from pv4kit.dataset.questions import write_qa_tables
from pv4kit.dataset.splits import build_dataset
from pv4kit.dataset.tree import list_users
from pv4kit.embeddings.models import get_embedder
from pv4kit.llm.local import (
    LOCAL_EMBED_MODEL_ID,
    LOCAL_MODEL_ID,
    local_embed_server,
    local_llm_config,
    resolve_endpoint,
    smollm2_dir,
    vllm_python,
)
from pv4kit.scoring.runs import VALIDITY_DIR, read_metrics, read_predictions, read_run_config
from pv4kit.scoring.score import score_run
from pv4kit.scoring.validity import read_validity, summary_text, validity

logger = logging.getLogger(__name__)

#: the demo's runs: name -> options of their :func:`~pv4kit.baselines.run.answer` call
DEMO_RUNS: dict[str, dict[str, Any]] = {
    "no_docs": {"method": "no_docs"},
    "rag_top1": {"method": "rag", "top_k": 1},
    "rag_top5": {"method": "rag", "top_k": 5},
    "persona": {"method": "persona"},
    "mcq_no_docs": {"method": "no_docs", "mcq": True},
}


@contextlib.contextmanager
def _stage(timings: dict[str, float], name: str) -> Iterator[None]:
    """Time the ``with`` block as stage ``name`` into ``timings`` (logged at start and end)."""
    logger.info("== %s", name)
    start = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
    logger.info("== %s done in %.1fs", name, timings[name])


def _newest_mtime(paths: list[Path]) -> float:
    return max((p.stat().st_mtime for p in paths if p.is_file()), default=0.0)


def ensure_data(raw: str | os.PathLike[str], data: str | os.PathLike[str]) -> bool:
    """Build ``data/`` from ``raw/`` (steps 5 and 6); whether it was built.

    Only when ``data/`` is missing or older than a file under ``raw/users``, ``raw/personas`` or the hard
    subset; ``qa.csv`` files are written where missing and rewritten where a ``qa/*.txt`` is newer.
    """
    raw, data = Path(raw), Path(data)
    users_dir = raw / "users"
    if not users_dir.is_dir():
        raise FileNotFoundError(f"raw: no users/ folder in {raw}")
    manifest, hard = data / "manifest.json", raw / "hard_subset.csv"
    sources = [*users_dir.rglob("*"), hard, *(raw / "personas").glob("*")]
    fresh = manifest.is_file() and (data / "test.parquet").is_file()
    if fresh and _newest_mtime(sources) <= manifest.stat().st_mtime:
        logger.info("data: %s is up to date with %s", data, raw)
        return False
    write_qa_tables(users_dir)  # missing ones; then those older than one of their qa/*.txt

    def stale(user: Path) -> bool:
        return _newest_mtime([*user.glob("qa/*.txt")]) > _newest_mtime([user / "qa.csv"])

    if stale_qa := [uid for uid in list_users(users_dir) if stale(users_dir / f"user_{uid}")]:
        write_qa_tables(users_dir, overwrite=True, user_ids=stale_qa)
    summary = build_dataset(users_dir, data, hard_subset=hard if hard.is_file() else None)
    logger.info("data: built %s\n%s", data, summary.to_string(index=False))
    return True


def _interval(value: Any, ci: Any) -> str:
    """``value [ci_low, ci_high]`` in percent (``n/a`` for a missing value, alone, or bound)."""
    if pd.isna(value):
        return "n/a"
    low, high = ("n/a" if pd.isna(v) else f"{100 * v:.1f}" for v in ci or (None, None))
    return f"{100 * value:.1f} [{low}, {high}]"


def results_table(metrics: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per run: ``method, accuracy [95% CI], accuracy_hard [95% CI], n, n_hard`` (percent)."""
    rows = [
        {
            "method": name,
            "accuracy [95% CI]": _interval(m["accuracy"], m.get("accuracy_ci")),
            "accuracy_hard [95% CI]": _interval(m.get("accuracy_hard"), m.get("accuracy_hard_ci")),
            "n": int(m["n"]),
            "n_hard": int(m["n_hard"]) if "accuracy_hard" in m else None,
        }
        for name, m in metrics.items()
    ]
    return pd.DataFrame(rows)


def _finished(run_dir: Path, dataset: Any, settings: dict[str, Any], options: dict[str, Any]) -> bool:
    """Whether ``run_dir`` holds this run complete, answered by the local vLLM server with ``settings``."""
    config = read_run_config(run_dir)
    want = {
        **{k: settings[k] for k in ("split", "limit", "max_new_tokens")},
        "method": ("mcq_" if options.get("mcq") else "") + options["method"],
        "top_k": options.get("top_k"),
        "model": LOCAL_MODEL_ID,
        "server_kind": "vllm",
        "truncation": "front",
        "data_fingerprint": getattr(dataset, "fingerprint", None),
        "n_failed": 0,
    }
    return (run_dir / "generations.parquet").is_file() and all(config.get(k) == v for k, v in want.items())


def _answer_runs(
    dataset: Any, embedder: Any, timings: dict[str, float], runs_dir: Path, settings: dict[str, Any]
) -> dict[str, dict[str, int]]:
    """Answer the runs of :data:`DEMO_RUNS` on a local vLLM server; the LLM requests per run.

    Runs already complete with the same ``settings`` and data are kept (no server starts when all are).
    """
    calls = {
        name: {"called": 0, "cached": 0, "errors": 0, "kept": 1}
        for name, options in DEMO_RUNS.items()
        if _finished(runs_dir / f"demo_{name}", dataset, settings, options)
    }
    if calls:
        logger.info("answers: %s complete with these settings in %s; kept", ", ".join(calls), runs_dir)
    if len(calls) == len(DEMO_RUNS):
        return calls
    with contextlib.ExitStack() as stack:
        with _stage(timings, "server start"):
            llm = local_llm_config(stack.enter_context(resolve_endpoint("local")))
        for name, options in DEMO_RUNS.items():
            if name not in calls:
                with _stage(timings, f"answer {name}"):
                    run_dir = runs_dir / f"demo_{name}"
                    run = answer(dataset, llm=llm, run_dir=run_dir, embedder=embedder, **options, **settings)
                calls[name] = {"called": run.calls, "cached": run.cached, "errors": run.errors, "kept": 0}
        with _stage(timings, "server stop"):
            stack.close()
    return {name: calls[name] for name in DEMO_RUNS}


def _scored_metrics(run_dir: Path, embedder: str | None) -> dict[str, Any] | None:
    """The run's ``metrics.json`` when it scores its current generations with ``embedder``, else ``None``."""
    try:
        metrics = read_metrics(run_dir)
    except (OSError, ValueError):
        return None
    return metrics if (metrics.get("embedder") or {}).get("name") == embedder else None


def _score_through_endpoint(runs_dir: Path, dataset: Any, progress: bool) -> dict[str, Any]:
    """Score ``demo_rag_top1`` again through vLLM's embeddings endpoint; how it compares with in-process."""
    src, dst = runs_dir / "demo_rag_top1", runs_dir / "demo_rag_top1_vllm_embed"
    gens = "generations.parquet"
    same = (dst / gens).is_file() and (dst / gens).read_bytes() == (src / gens).read_bytes()
    if same and _scored_metrics(dst, f"openai:{LOCAL_EMBED_MODEL_ID}"):
        logger.info("vLLM embeddings: %s was scored from these generations before; kept", dst)
    else:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("predictions.parquet", "metrics.json"))
        with local_embed_server() as url:
            embedder = get_embedder(f"openai:{LOCAL_EMBED_MODEL_ID}", base_url=url)
            score_run(dst, data=dataset, embedder=embedder, progress=progress)
    remote, local = read_predictions(dst), read_predictions(src)
    sims = [c for c in local.columns if c.startswith("sim_")]
    a, b = remote[sims].to_numpy(float), local[sims].to_numpy(float)
    diff = np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b))  # no candidate on both sides: equal
    return {
        "run": dst.name,
        "n": len(local),
        "n_equal": int((remote["predicted_letter"].to_numpy() == local["predicted_letter"].to_numpy()).sum()),
        "max_abs_sim_diff": float(diff.max()),  # NaN where only one side has a similarity
        "accuracy": read_metrics(dst)["accuracy"],
        "accuracy_in_process": read_metrics(src)["accuracy"],
    }


def _validity(report_dir: Path, embedder: Any, *, cache: Any, progress: bool) -> str:
    """The text of ``report_dir``'s scorer-validity report, written first when missing.

    The local model judges which candidate each answer expresses (the tiny model shows the machinery, not a
    result); MiniLM with an instruction is the other embedder (the sample's only one).
    """
    if (report_dir / VALIDITY_DIR / "summary.json").is_file():  # warm: no server
        return summary_text(read_validity(report_dir)["summary"])
    with resolve_endpoint("local") as endpoint:
        judge = local_llm_config(endpoint, max_output_tokens=8)
        minilm = get_embedder("minilm", device="cpu", instruction="Represent the meaning of this answer: ")
        options = {"llm_cache": cache, "progress": progress}
        report = validity(report_dir, judges=[judge], against=[minilm], embedder=embedder, **options)
    return summary_text(report)


def run_demo(
    *,
    raw: str | os.PathLike[str] = "raw",
    data: str | os.PathLike[str] = "data",
    runs_dir: str | os.PathLike[str] = "runs",
    split: str = "test",
    cache: str | os.PathLike[str] | None = None,
    max_new_tokens: int = 32,
    endpoint_scoring: bool = True,
    limit: int | None = None,
    notebooks: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the demo pipeline; its results table and timings (:func:`demo_report` formats them).

    Args:
        raw: Raw tree to build data/ from (``users/``, ``personas/``, ``hard_subset.csv``).
        data: Dataset folder, rebuilt when stale.
        runs_dir: Where the ``demo_*`` runs and ``demo_hard_subset.csv`` go.
        split: The split answered.
        cache: LLM response cache (default: :func:`~pv4kit._io.default_llm_cache`).
        max_new_tokens: Output cap (32 keeps the demo to minutes; the reference uses 256).
        endpoint_scoring: Score one run again through vLLM's embeddings endpoint and compare.
        limit: Only the first N questions per run.
        notebooks: Execute the notebooks afterwards.
        progress: Progress bars.

    Returns ``{"results", "hard", "timings"}`` frames, ``metrics`` (per run) and ``calls`` (per run: LLM
    requests ``called``, ``cached``, ``errors``, ``kept``), ``endpoint_scoring`` (the comparison, or
    ``None``), ``notebook_error`` (``None`` when they ran or were skipped), ``validity`` (the report's text),
    ``split``, ``hard_subset`` (the written file) and ``n_hard`` (its questions).

    Raises:
        FileNotFoundError: The local engine is not set up (before anything else; names ``make vllm``).
    """
    vllm_python(), smollm2_dir()  # the local engine is set up (else one message naming `make vllm`)
    timings: dict[str, float] = {}
    raw, data_dir, runs_dir = Path(raw), Path(data), Path(runs_dir)
    settings = {"split": split, "limit": limit, "max_new_tokens": max_new_tokens}
    settings |= {"cache": cache or default_llm_cache(), "progress": progress}
    with _stage(timings, "data"):
        ensure_data(raw, data_dir)
        dataset = load(data_dir)
    with _stage(timings, "embedder"):
        embedder = get_embedder("minilm", device="cpu")
    calls = _answer_runs(dataset, embedder, timings, runs_dir, settings)
    metrics: dict[str, dict[str, Any]] = {}
    with _stage(timings, "score"):
        for name, options in DEMO_RUNS.items():  # a run scored from these generations by this scorer is kept
            run_dir, scorer = runs_dir / f"demo_{name}", None if options.get("mcq") else embedder
            metrics[name] = (
                _scored_metrics(run_dir, getattr(scorer, "name", None))
                or score_run(run_dir, data=dataset, embedder=scorer, progress=progress)[1]
            )
    compared = None
    if endpoint_scoring:
        with _stage(timings, "score (vLLM embeddings)"):
            compared = _score_through_endpoint(runs_dir, dataset, progress)
    with _stage(timings, "hard"):
        no_docs, rag1 = runs_dir / "demo_no_docs", runs_dir / "demo_rag_top1"
        subset = derive_hard_subset(no_docs, rag1, rule="any")
        write_subset(subset, runs_dir / "demo_hard_subset.csv")
        existing = raw / "hard_subset.csv"
        report = hard_report(no_docs, rag1, existing=existing if existing.is_file() else None)
    with _stage(timings, "validity"):
        text = _validity(no_docs, embedder, cache=settings["cache"], progress=progress)
    results = results_table(metrics)
    notebook_error = None
    if notebooks:  # the notebooks take minutes: show the results first
        logger.info("results (before the notebooks):\n%s", results.to_string(index=False))
        with _stage(timings, "notebooks"):
            params = {"data": str(data_dir.resolve()), "runs": str(runs_dir.resolve())}
            try:
                done = execute_notebooks(params=params)
                logger.info("notebooks: executed\n%s", done.to_string(index=False))
            except Exception as exc:  # noqa: BLE001 - the results are logged already; report and go on
                notebook_error = f"{type(exc).__name__}: {exc}"
                logger.error("notebooks: %s", notebook_error)
    seconds = [{"stage": k, "seconds": round(v, 1)} for k, v in timings.items()]
    return {
        "results": results,
        "hard": report,
        "timings": pd.DataFrame([*seconds, {"stage": "total", "seconds": round(sum(timings.values()), 1)}]),
        "metrics": metrics,
        "calls": calls,
        "endpoint_scoring": compared,
        "notebook_error": notebook_error,
        "validity": text,
        "split": split,
        "hard_subset": runs_dir / "demo_hard_subset.csv",
        "n_hard": len(subset),
    }


def demo_report(out: dict[str, Any]) -> str:
    """The text ``pv4kit demo`` prints from :func:`run_demo`'s ``out``: results, hard subset, timings."""
    lines = [
        f"\nResults (SmolLM2-135M on vLLM, the sample's {out['split']} split; percent, user-bootstrap "
        "95% CI):",
        out["results"].to_string(index=False),
    ]
    if e := out.get("endpoint_scoring"):
        lines.append(
            f"\n{e['run']} scored through vLLM's /v1/embeddings: {e['n_equal']} of {e['n']} predictions "
            f"equal to in-process MiniLM's (max |sim difference| {e['max_abs_sim_diff']:.1e}; accuracy "
            f"{100 * e['accuracy']:.1f} vs {100 * e['accuracy_in_process']:.1f})"
        )
    lines += [
        f"\nHard subset (rule any) -> {out['hard_subset']}: {out['n_hard']} questions",
        out["hard"].to_string(index=False, float_format=lambda v: f"{v:.3f}"),
        *([f"\n{out['validity']}"] if out.get("validity") else []),
        "\nTimings (s):",
        out["timings"].to_string(index=False),
    ]
    return "\n".join(lines)
