"""``make demo``: the whole pipeline on the sample in ``raw/``, on the local SmolLM2 model, on a CPU.

Stages, each logged with its wall time: ``data`` (steps 5 and 6, only when ``data/`` is stale); the runs of
:data:`DEMO_RUNS` answered on a local vLLM server with the reference's protocol (every call cached, so a
rerun makes no requests); ``score`` (MiniLM in process); ``score (vLLM embeddings)`` (one run again through
vLLM's ``/v1/embeddings``, compared with in-process); ``hard`` (``runs/demo_hard_subset.csv``, never over
``raw/hard_subset.csv``); ``validity`` (a multiple-choice run and the scorer-validity report); then the
results table and the notebooks. docs/baselines.md describes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit._io import default_llm_cache
from pv4kit.scoring.runs import tidy_metrics

logger = logging.getLogger(__name__)

#: the demo's runs: name -> (method, top_k)
DEMO_RUNS: dict[str, tuple[str, int]] = {
    "no_docs": ("no_docs", 1),
    "rag_top1": ("rag", 1),
    "rag_top5": ("rag", 5),
    "persona": ("persona", 1),
}
#: the run scored a second time through vLLM's embeddings endpoint
ENDPOINT_SCORED_RUN = "rag_top1"
#: the demo's second embedder for ``validity(against=)``: MiniLM with an instruction prefix (the only other
#: embedder the offline sample has)
DEMO_AGAINST_INSTRUCTION = "Represent the meaning of this answer: "
_KEPT = {"called": 0, "cached": 0, "errors": 0, "kept": 1}


@contextlib.contextmanager
def _stage(timings: dict[str, float], name: str) -> Iterator[None]:
    """Time the ``with`` block as stage ``name`` into ``timings`` (logged at start and end)."""
    logger.info("== %s", name)
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
        logger.info("== %s done in %.1fs", name, timings[name])


def _newest_mtime(paths: list[Path]) -> float:
    return max((p.stat().st_mtime for p in paths if p.is_file()), default=0.0)


def ensure_data(raw: str | os.PathLike[str], data: str | os.PathLike[str], *, force: bool = False) -> bool:
    """Build ``data/`` from ``raw/`` (steps 5 and 6); whether it was built.

    Only when ``data/`` is missing or older than a file under ``raw/users``, ``raw/personas`` or the hard
    subset; ``qa.csv`` files are written where missing and rewritten where a ``qa/*.txt`` is newer.
    """
    from pv4kit.dataset.questions import write_qa_tables
    from pv4kit.dataset.splits import build_dataset
    from pv4kit.dataset.tree import list_users

    raw, data = Path(raw), Path(data)
    users_dir = raw / "users"
    if not users_dir.is_dir():
        raise FileNotFoundError(f"raw: no users/ folder in {raw}")
    manifest = data / "manifest.json"
    sources = [*users_dir.rglob("*"), raw / "hard_subset.csv", *(raw / "personas").glob("*")]
    fresh = manifest.is_file() and (data / "test.parquet").is_file()
    if not force and fresh and _newest_mtime(sources) <= manifest.stat().st_mtime:
        logger.info("data: %s is up to date with %s", data, raw)
        return False
    stale_qa = []
    for uid in list_users(users_dir):
        udir = users_dir / f"user_{uid}"
        qa_csv = udir / "qa.csv"
        if qa_csv.is_file() and _newest_mtime(sorted((udir / "qa").glob("*.txt"))) > qa_csv.stat().st_mtime:
            stale_qa.append(uid)
    write_qa_tables(users_dir)  # missing ones
    if stale_qa:
        write_qa_tables(users_dir, overwrite=True, user_ids=stale_qa)
    hard = raw / "hard_subset.csv"
    summary = build_dataset(users_dir, data, hard_subset=hard if hard.is_file() else None)
    logger.info("data: built %s\n%s", data, summary.to_string(index=False))
    return True


def _fmt(v: float | None) -> str:
    return "n/a" if v is None or pd.isna(v) else f"{100 * v:.1f}"


def _interval(row: Any) -> str:
    return f"{_fmt(row['value'])} [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"


def results_table(metrics: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per run: ``method, accuracy [95% CI], accuracy_hard [95% CI], n, n_hard`` (percent)."""
    rows = []
    for name, m in metrics.items():
        tidy = tidy_metrics(m, run=name)
        acc = tidy[tidy["metric"] == "accuracy"].set_index("subset")
        hard = acc.loc["hard"] if "hard" in acc.index else None
        rows.append(
            {
                "method": name,
                "accuracy [95% CI]": _interval(acc.loc["all"]),
                "accuracy_hard [95% CI]": "n/a"
                if hard is None or pd.isna(hard["value"])
                else _interval(hard),
                "n": int(acc.loc["all", "n"]),
                "n_hard": None if hard is None else int(hard["n"]),
            }
        )
    return pd.DataFrame(rows)


def _run_notebooks(data: Path, runs_dir: Path) -> str | None:
    """Execute the notebooks on ``data`` and ``runs_dir``; the error, if any."""
    from pv4kit.analysis.notebooks import execute_notebooks

    try:
        done = execute_notebooks(params={"data": str(data.resolve()), "runs": str(runs_dir.resolve())})
    except Exception as exc:  # noqa: BLE001 - the results are logged already; report and go on
        logger.error("notebooks: %s: %s", type(exc).__name__, exc)
        return f"{type(exc).__name__}: {exc}"
    logger.info("notebooks: executed\n%s", done.to_string(index=False))
    return None


def _finished(run_dir: Path, dataset: Any, settings: dict[str, Any], method: str, top_k: int | None) -> bool:
    """Whether ``run_dir`` holds this run complete, answered by the local vLLM server with ``settings``."""
    from pv4kit.llm.local import LOCAL_MODEL_ID
    from pv4kit.scoring.runs import read_run_config

    config = read_run_config(run_dir)
    want = {
        **settings,
        "method": method,
        "top_k": top_k if method == "rag" else None,
        "model": LOCAL_MODEL_ID,
        "server_kind": "vllm",
        "truncation": "front",
        "data_fingerprint": getattr(dataset, "fingerprint", None),
        "n_failed": 0,
    }
    return (run_dir / "generations.parquet").is_file() and all(config.get(k) == v for k, v in want.items())


def _answer_runs(
    dataset: Any, embedder: Any, timings: dict[str, float], runs_dir: Path, cache: Any, progress: bool,
    settings: dict[str, Any],
) -> dict[str, dict[str, int]]:  # fmt: skip
    """Answer every run of :data:`DEMO_RUNS` on a local vLLM server; the LLM requests per run.

    ``settings`` (``split``, ``limit``, ``max_new_tokens``) go to :func:`~pv4kit.baselines.run.answer`.
    Runs already complete with the same settings and data are kept (no server starts when all are).
    """
    from pv4kit.baselines.run import answer
    from pv4kit.llm.local import local_llm_config, resolve_endpoint

    todo = {
        name: spec
        for name, spec in DEMO_RUNS.items()
        if not _finished(runs_dir / f"demo_{name}", dataset, settings, *spec)
    }
    calls = {name: dict(_KEPT) for name in DEMO_RUNS if name not in todo}
    if calls:
        logger.info("answers: %s complete with these settings in %s; kept", ", ".join(calls), runs_dir)
    if not todo:
        return calls
    with contextlib.ExitStack() as stack:
        with _stage(timings, "server start"):
            endpoint = stack.enter_context(resolve_endpoint("local"))
        llm = local_llm_config(endpoint)
        for name, (method, top_k) in todo.items():
            with _stage(timings, f"answer {name}"):
                run = answer(
                    dataset,
                    method=method,
                    llm=llm,
                    run_dir=runs_dir / f"demo_{name}",
                    top_k=top_k,
                    embedder=embedder,
                    cache=cache,
                    progress=progress,
                    **settings,
                )
                calls[name] = {"called": run.calls, "cached": run.cached, "errors": run.errors, "kept": 0}
                logger.info(
                    "%s: %d answers, %d called, %d cached", name, len(run.generations), run.calls, run.cached
                )
        with _stage(timings, "server stop"):
            stack.close()
    return {name: calls[name] for name in DEMO_RUNS}


def _scored_metrics(run_dir: Path, embedder: str | None) -> dict[str, Any] | None:
    """The run's ``metrics.json`` when it scores its current generations with ``embedder``, else ``None``."""
    from pv4kit.scoring.runs import read_metrics

    try:
        metrics = read_metrics(run_dir)
    except (OSError, ValueError):
        return None
    return metrics if (metrics.get("embedder") or {}).get("name") == embedder else None


def _score_through_endpoint(runs_dir: Path, dataset: Any, progress: bool) -> dict[str, Any]:
    """Score :data:`ENDPOINT_SCORED_RUN` through vLLM's embeddings endpoint; how it compares with in-process.

    Returns:
        ``{"run", "n", "n_equal" (predicted letters equal), "max_abs_sim_diff", "accuracy",
        "accuracy_in_process"}``.
    """
    import shutil

    import numpy as np

    from pv4kit.embeddings.models import get_embedder
    from pv4kit.llm.local import LOCAL_EMBED_MODEL_ID, local_embed_server
    from pv4kit.scoring.runs import read_metrics, read_predictions
    from pv4kit.scoring.score import score_run

    src = runs_dir / f"demo_{ENDPOINT_SCORED_RUN}"
    dst = runs_dir / f"demo_{ENDPOINT_SCORED_RUN}_vllm_embed"
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
    m_remote, m_local = read_metrics(dst), read_metrics(src)
    sims = [c for c in local.columns if c.startswith("sim_")]
    a, b = remote[sims].to_numpy(float), local[sims].to_numpy(float)
    diff = np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b))  # no candidate on both sides: equal
    out = {
        "run": dst.name,
        "n": len(local),
        "n_equal": int((remote["predicted_letter"].to_numpy() == local["predicted_letter"].to_numpy()).sum()),
        "max_abs_sim_diff": float(diff.max()),  # NaN where only one side has a similarity
        "accuracy": m_remote["accuracy"],
        "accuracy_in_process": m_local["accuracy"],
    }
    logger.info("vLLM embeddings vs in-process MiniLM: %s", out)
    return out


def _validity_stage(
    dataset: Any, embedder: Any, timings: dict[str, float], runs_dir: Path, cache: Any, progress: bool,
    settings: dict[str, Any],
) -> tuple[dict[str, Any], str, dict[str, int]]:  # fmt: skip
    """Scorer validity on the sample: a multiple-choice ``no_docs`` run, and ``validity`` on ``demo_no_docs``.

    The local model answers as multiple choice (``runs/demo_mcq_no_docs``, scored by the letter) and judges
    which candidate each ``demo_no_docs`` answer expresses; the run is also rescored with a second embedder
    and in float32. The tiny model shows the machinery, not a result.

    Returns:
        The multiple-choice run's metrics, the validity report's text, its LLM requests.
    """
    from pv4kit.baselines.run import answer
    from pv4kit.embeddings.models import get_embedder
    from pv4kit.llm.local import local_llm_config, resolve_endpoint
    from pv4kit.scoring.runs import VALIDITY_DIR, read_run_config
    from pv4kit.scoring.score import score_run
    from pv4kit.scoring.validity import read_validity, summary_text, validity

    mcq_dir, report_dir = runs_dir / "demo_mcq_no_docs", runs_dir / "demo_no_docs"
    done = _finished(mcq_dir, dataset, settings, "mcq_no_docs", None) and "mcq" in read_run_config(mcq_dir)
    if done and (report_dir / VALIDITY_DIR / "summary.json").is_file():  # warm: no server
        mcq = _scored_metrics(mcq_dir, None) or score_run(mcq_dir, data=dataset, progress=progress)[1]
        return mcq, summary_text(read_validity(report_dir)["summary"]), dict(_KEPT)
    with resolve_endpoint("local") as endpoint:
        llm = local_llm_config(endpoint)
        with _stage(timings, "answer mcq_no_docs"):
            run = answer(
                dataset, method="no_docs", mcq=True, llm=llm, run_dir=runs_dir / "demo_mcq_no_docs",
                cache=cache, progress=progress, **settings,
            )  # fmt: skip
        with _stage(timings, "validity"):
            against = get_embedder("minilm", device="cpu", instruction=DEMO_AGAINST_INSTRUCTION)
            judge = dataclasses.replace(llm, max_output_tokens=8)
            report = validity(
                runs_dir / "demo_no_docs", judges=[judge], against=[against], embedder=embedder,
                llm_cache=cache, progress=progress,
            )  # fmt: skip
    _, mcq = score_run(run.run_dir, data=dataset, progress=progress)
    calls = {"called": run.calls, "cached": run.cached, "errors": run.errors, "kept": 0}
    return mcq, summary_text(report), calls


def _hard_subset(raw: Path, runs_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The hard subset (rule ``any``) written to ``runs_dir/demo_hard_subset.csv``, and its report."""
    from pv4kit.baselines.hard import derive_hard_subset, hard_report, write_subset

    no_docs, rag1 = runs_dir / "demo_no_docs", runs_dir / "demo_rag_top1"
    subset = derive_hard_subset(no_docs, rag1, rule="any")
    write_subset(subset, runs_dir / "demo_hard_subset.csv")
    existing = raw / "hard_subset.csv"
    return subset, hard_report(no_docs, rag1, existing=existing if existing.is_file() else None)


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
        raw: The raw tree (``users/``, ``personas/``, ``hard_subset.csv``); ``data/`` is built from it.
        data: Where the parquet dataset is built.
        runs_dir: Where the ``demo_*`` runs and ``demo_hard_subset.csv`` go.
        split: The split to answer (``test``: the sample's two evaluation users).
        cache: The LLM response cache (default: :func:`~pv4kit._io.default_llm_cache`).
        max_new_tokens: Output cap per answer (32 keeps the demo to minutes; the reference uses 256).
        endpoint_scoring: Score one run again through vLLM's embeddings endpoint and compare.
        limit: Only the first N questions (smoke tests).
        notebooks: Execute the notebooks afterwards.
        progress: Progress bars.

    Returns:
        ``{"results", "hard", "timings"}`` frames, ``metrics`` (per run) and ``calls`` (per run: LLM
        requests ``called``, ``cached``, ``errors``, ``kept``), ``endpoint_scoring`` (the comparison, or
        ``None``), ``notebook_error`` (``None`` when they ran or were skipped), ``validity`` (the report's
        text), ``split``, ``hard_subset`` (the written file) and ``n_hard`` (its questions).

    Raises:
        FileNotFoundError: The local engine is not set up (before anything else; names ``make vllm``).
    """
    from pv4kit.dataset.load import load
    from pv4kit.embeddings.models import get_embedder
    from pv4kit.llm.local import smollm2_dir, vllm_python
    from pv4kit.scoring.score import score_run

    vllm_python(), smollm2_dir()  # the local engine is set up (else one message naming `make vllm`)
    timings: dict[str, float] = {}
    raw, data_dir, runs_dir = Path(raw), Path(data), Path(runs_dir)
    cache = cache or default_llm_cache()
    settings = {"split": split, "limit": limit, "max_new_tokens": max_new_tokens}
    with _stage(timings, "data"):
        ensure_data(raw, data_dir)
        dataset = load(data_dir)
    with _stage(timings, "embedder"):
        embedder = get_embedder("minilm", device="cpu")
    calls = _answer_runs(dataset, embedder, timings, runs_dir, cache, progress, settings)
    metrics: dict[str, dict[str, Any]] = {}
    with _stage(timings, "score"):
        for name in DEMO_RUNS:
            run_dir = runs_dir / f"demo_{name}"
            metrics[name] = (
                _scored_metrics(run_dir, embedder.name)
                or score_run(run_dir, data=dataset, embedder=embedder, progress=progress)[1]
            )  # a run scored from these generations with this embedder is kept (and its validity report)
    compared = None
    if endpoint_scoring:
        with _stage(timings, "score (vLLM embeddings)"):
            compared = _score_through_endpoint(runs_dir, dataset, progress)
    with _stage(timings, "hard"):
        subset, report = _hard_subset(raw, runs_dir)
    metrics["mcq_no_docs"], text, calls["mcq_no_docs"] = _validity_stage(
        dataset, embedder, timings, runs_dir, cache, progress, settings
    )
    results = results_table(metrics)
    notebook_error = None
    if notebooks:  # the notebooks take minutes: show the results first
        logger.info("results (before the notebooks):\n%s", results.to_string(index=False))
        with _stage(timings, "notebooks"):
            notebook_error = _run_notebooks(data_dir, runs_dir)
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
    return "\n".join(
        [
            *lines,
            f"\nHard subset (rule any) -> {out['hard_subset']}: {out['n_hard']} questions",
            out["hard"].to_string(index=False, float_format=lambda v: f"{v:.3f}"),
            *([f"\n{out['validity']}"] if out.get("validity") else []),
            "\nTimings (s):",
            out["timings"].to_string(index=False),
        ]
    )
