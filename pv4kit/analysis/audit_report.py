"""Run every PV4 audit and report: :func:`run_audit` (tables + text summary) and :func:`write_audit`.

The audits themselves live in :mod:`pv4kit.analysis.audit` (one module per family) and
:mod:`pv4kit.analysis.audit_sequence` (the letter sequence by row index); this module only runs them on a
:class:`~pv4kit.dataset.load.PV4Data`, joins the per-question flags, writes the tables and summarises the
findings.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit._options import check_number, merge_options
from pv4kit.analysis.audit.categories import category_groups
from pv4kit.analysis.audit.common import BASE_COLUMNS, cutoffs, embedder_name
from pv4kit.analysis.audit.flags import question_flags
from pv4kit.analysis.audit.leakage import leakage_audit, leakage_summary
from pv4kit.analysis.audit.similarity import duplicate_questions, similarity_audit
from pv4kit.analysis.audit.solvers import candidate_only_predictions, llm_candidate_only, solver_accuracy
from pv4kit.analysis.audit.structure import length_audit, length_summary, position_audit
from pv4kit.analysis.audit_sequence import (
    letter_sequence_audit,
    letter_sequence_summary,
    row_letter_predictions,
)
from pv4kit.embeddings.models import resolve_embedder

__all__ = ["AuditOptions", "AuditResult", "run_audit", "stored_audit", "summarize", "write_audit"]

logger = logging.getLogger(__name__)


@dataclass
class AuditResult:
    """All audit tables of one dataset (see :func:`run_audit`)."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    summary: str = ""

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self.tables:
            raise KeyError(f"no audit table {name!r}; tables: {sorted(self.tables)}")
        return self.tables[name]


@dataclass(frozen=True)
class AuditOptions:
    """Everything :func:`run_audit` takes besides the data.

    Attributes:
        embedder: An embedder or a name for :func:`~pv4kit.embeddings.models.get_embedder` (default:
            :func:`~pv4kit.embeddings.models.get_audit_embedder`'s: Qwen3-Embedding-4B with CUDA, else the
            static model distilled from MiniLM on a CPU).
        cache: Embedding cache.
        llm_config: Also run the LLM candidate-only solver with this :class:`~pv4kit.llm.client.LLMConfig`.
        llm_cache: The LLM response cache (default: the shared ``.cache/pv4kit/llm.sqlite``).
        llm_client: Injected OpenAI-like client (tests).
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed.
        store: A folder that keeps finished audits (e.g. ``.cache/pv4kit/audits``): a result computed
            before for the same questions, data files, embedder, options and audit code is read back
            instead of recomputed (notebooks 02 and 07 share one). Not used with ``llm_config``.
    """

    embedder: Any = None
    cache: Any = True
    llm_config: Any = None
    llm_cache: str | os.PathLike[str] | None = None
    llm_client: Any = None
    n_boot: int = 2000
    seed: int = 0
    store: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        check_number(self.n_boot, "n_boot", ge=1, integer=True)
        check_number(self.seed, "seed", ge=0, integer=True)


def run_audit(data: Any, *, options: AuditOptions | None = None, **overrides: Any) -> AuditResult:
    """Run every audit on a :class:`~pv4kit.dataset.load.PV4Data` and summarise the findings.

    Args:
        data: The loaded dataset.
        options: The settings (:class:`AuditOptions`; default: Qwen3 or static, cached, no LLM solver,
            2000 bootstrap replicates, seed 0, no store).
        **overrides: Any field of :class:`AuditOptions` by name (``embedder=``, ``cache=``, ``llm_config=``,
            ``llm_cache=``, ``llm_client=``, ``n_boot=``, ``seed=``, ``store=``), replacing the one in
            ``options``.

    Returns:
        An :class:`AuditResult` with tables ``lengths, length_summary, positions, letter_sequence,
        letter_sequence_summary, solver_predictions, solver_accuracy, solver_accuracy_by_category,
        similarity, leakage, leakage_summary, duplicates, categories, flags`` (with
        ``solved_by_row_letter``) and a text summary. Every table drawn from embeddings names it in an
        ``embedder`` column (``solver_predictions``, ``solver_accuracy*``, ``similarity``, ``duplicates``,
        ``categories``, ``flags``), and so does the summary.

    Raises:
        TypeError: An unknown option (with the closest name).
    """
    opts = merge_options(AuditOptions, options, overrides, where="run_audit")
    embedder = resolve_embedder(opts.embedder, audit=True)
    key = None
    if opts.store is not None and opts.llm_config is None:
        key = _audit_key(data, embedder, n_boot=opts.n_boot, seed=opts.seed)
        found = _read_stored(Path(opts.store), key)
        if found is not None:
            return found
    result = _run(data, embedder, opts)
    if key is not None:
        _write_stored(Path(opts.store), key, result)
    return result


def stored_audit(data: Any, *, options: AuditOptions | None = None, **overrides: Any) -> AuditResult | None:
    """The result :func:`run_audit` would read back from its ``store`` for these options, or ``None``.

    Nothing is computed: ``None`` when no ``store`` is given, with ``llm_config`` (never stored), or when
    the store holds no result for the same questions, data files, embedder, options and audit code.
    Takes the same options as :func:`run_audit`.
    """
    opts = merge_options(AuditOptions, options, overrides, where="stored_audit")
    if opts.store is None or opts.llm_config is not None:
        return None
    key = _audit_key(data, resolve_embedder(opts.embedder, audit=True), n_boot=opts.n_boot, seed=opts.seed)
    return _read_stored(Path(opts.store), key)


def _run(data: Any, embedder: Any, opts: AuditOptions) -> AuditResult:
    """Every audit table of ``data`` with the (resolved) ``embedder``, and the summary."""
    cache, n_boot, seed = opts.cache, opts.n_boot, opts.seed
    q = data.questions.reset_index(drop=True)
    t: dict[str, pd.DataFrame] = {}
    t["lengths"] = length_audit(q)
    t["length_summary"] = length_summary(t["lengths"], n_boot=n_boot, seed=seed)
    t["positions"] = position_audit(q)
    t["letter_sequence"] = letter_sequence_audit(q)
    t["letter_sequence_summary"] = letter_sequence_summary(q, seed=seed)
    preds = candidate_only_predictions(q, embedder=embedder, cache=cache)
    if opts.llm_config is not None:
        preds = pd.concat(
            [
                preds,
                llm_candidate_only(
                    q, config=opts.llm_config, cache=opts.llm_cache or True, client=opts.llm_client
                ),
            ],
            ignore_index=True,
        )
    t["similarity"] = similarity_audit(q, embedder=embedder, cache=cache)
    if "rationale_correct" in t["similarity"]:
        rat = t["similarity"].dropna(subset=["rationale_pick"])
        preds = pd.concat(
            [
                preds,
                rat[[*[c for c in BASE_COLUMNS if c in q], "rationale_pick", "rationale_correct"]]
                .rename(columns={"rationale_pick": "predicted_letter", "rationale_correct": "correct"})
                .assign(solver="rationale_as_generation"),
            ],
            ignore_index=True,
        )
    t["solver_predictions"] = preds
    t["solver_accuracy"] = solver_accuracy(preds, n_boot=n_boot, seed=seed)
    if q["category_name"].notna().any():
        t["solver_accuracy_by_category"] = solver_accuracy(
            preds, by="category_name", n_boot=n_boot, seed=seed
        )
    t["leakage"] = leakage_audit(q, data.users)
    t["leakage_summary"] = leakage_summary(t["leakage"])
    t["duplicates"] = duplicate_questions(q, embedder=embedder, cache=cache)
    t["categories"] = category_groups(q, embedder=embedder, cache=cache)
    t["flags"] = question_flags(
        t["lengths"],
        pd.concat(
            [preds[preds["solver"] != "rationale_as_generation"], row_letter_predictions(q)],
            ignore_index=True,
        ),
        t["similarity"],
        t["leakage"],
        t["duplicates"],
    )
    name = embedder_name(embedder)
    for table in _EMBEDDED:
        if table in t:
            t[table] = t[table].assign(embedder=name)
    return AuditResult(tables=t, summary=summarize(t, embedder=name))


#: the tables drawn from embeddings: each gets an ``embedder`` column
_EMBEDDED = (
    "solver_predictions",
    "solver_accuracy",
    "solver_accuracy_by_category",
    "similarity",
    "duplicates",
    "categories",
    "flags",
)


#: the modules whose source is part of a stored audit's key (a code change invalidates the store)
_AUDIT_MODULES = ("pv4kit.analysis.audit", "pv4kit.analysis.audit_sequence", __name__, "pv4kit.scoring.stats")
_KEEP_STORED = 3


def _audit_key(data: Any, embedder: Any, *, n_boot: int, seed: int) -> str:
    """Hash of everything an audit result depends on: questions, data files, embedder, options, code."""
    import json

    from pv4kit import __version__

    q = data.questions
    rows = pd.util.hash_pandas_object(q[["user_id", "question_index", "question"]], index=False)
    parts = {
        "questions": hashlib.sha256(rows.to_numpy().tobytes()).hexdigest(),
        "n": int(len(q)),
        "data": getattr(data, "fingerprint", None),
        "embedder": getattr(embedder, "cache_key", getattr(embedder, "name", repr(embedder))),
        "n_boot": n_boot,
        "seed": seed,
        "pv4kit": __version__,
        "code": [hashlib.sha256(_source_bytes(m)).hexdigest() for m in _AUDIT_MODULES],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def _source_bytes(module: str) -> bytes:
    """The source of ``module`` (every file of it, when it is a package), for the audit key."""
    import importlib

    mod = importlib.import_module(module)
    root = Path(mod.__file__)
    files = sorted(root.parent.rglob("*.py")) if root.name == "__init__.py" else [root]
    return b"".join(f.read_bytes() for f in files)


def _read_stored(store: Path, key: str) -> AuditResult | None:
    import pickle

    path = store / key / "result.pkl"
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as fh:
            tables, summary = pickle.load(fh)
    except Exception as exc:  # a damaged entry is recomputed, never trusted
        logger.warning("%s: unreadable stored audit (%s); recomputing", path, exc)
        return None
    logger.info("audit: read back the stored result %s", path.parent)
    return AuditResult(tables=tables, summary=summary)


def _write_stored(store: Path, key: str, result: AuditResult) -> None:
    """Write the result into ``store/key`` as a whole (a temp folder renamed into place); keep the newest."""
    import pickle
    import shutil
    import tempfile

    store.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=store))
    try:
        with open(tmp / "result.pkl", "wb") as fh:
            pickle.dump((result.tables, result.summary), fh, protocol=5)
        try:
            os.replace(tmp, store / key)
        except OSError:  # another process stored the same key first
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    entries = sorted(
        (p for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in entries[_KEEP_STORED:]:
        shutil.rmtree(old, ignore_errors=True)


def summarize(tables: dict[str, pd.DataFrame], *, embedder: str = "") -> str:
    """A short plain-text report of the audit findings (which shortcuts beat chance)."""
    cut = cutoffs(embedder)
    lines = [f"PV4 distractor audit ({len(tables['lengths'])} questions; embedder {embedder})", ""]
    lines.append("Candidate-only solvers (chance 20%; 95% CI resamples users; * = CI above chance):")
    for r in tables["solver_accuracy"].itertuples(index=False):
        star = " *" if r.above_chance else ""
        lines.append(
            f"  {r.solver:<26} {100 * r.accuracy:5.1f}% [{100 * r.ci_low:5.1f}, {100 * r.ci_high:5.1f}]"
            f"  n={r.n}  binomial p={r.binom_p:.3g}{star}"
        )
    ls = tables["length_summary"].set_index("metric")
    lines += [
        "",
        "Length and structure:",
        f"  reference uniquely longest   {100 * ls.loc['ref_longest', 'rate']:5.1f}% (chance 20%)",
        f"  reference uniquely shortest  {100 * ls.loc['ref_shortest', 'rate']:5.1f}% (chance 20%)",
        f"  five choices within 2 words  {100 * ls.loc['within_2_words', 'rate']:5.1f}% (prompt: 100%)",
        f"  all five share a first word  {100 * ls.loc['all_share_first_word', 'rate']:5.1f}%",
    ]
    pos = tables["positions"]
    shares = ", ".join(f"{r.letter} {100 * r.share:.0f}%" for r in pos.itertuples(index=False))
    lines += ["", f"Answer position: {shares}; chi-square p = {pos['pvalue'].iloc[0]:.3g}"]
    if "letter_sequence_summary" in tables:
        lines += ["", *_letter_sequence_lines(tables["letter_sequence_summary"])]
    sim = tables["similarity"]
    lines += [
        "",
        "Distractor similarity:",
        f"  median reference-to-nearest-distractor cosine {sim['ref_nearest_distractor'].median():.3f}",
        f"  questions with a near-duplicate candidate pair (>= {cut['near_duplicate']:.3g}): "
        f"{int(sim['near_duplicate_candidates'].sum())}",
    ]
    if "rationale_correct" in sim:
        lines.append(
            "  rationale scored as a generation picks the reference "
            f"{100 * sim['rationale_correct'].mean():.1f}%"
        )
    lk = tables["leakage_summary"].set_index("role")
    lines += [
        "",
        f"Leakage: mean content-word overlap with the user's chats: reference "
        f"{lk.loc['reference', 'mean_overlap']:.3f}, distractors {lk.loc['distractor', 'mean_overlap']:.3f};",
        f"  the reference alone overlaps most in "
        f"{100 * lk.loc['reference_unique_top', 'mean_overlap']:.1f}% of questions (chance 20%)",
        f"Duplicates: {len(tables['duplicates'])} near-duplicate question pair(s) within a user "
        f"(cosine >= {cut['duplicate_question']:.3g})",
    ]
    if "categories" in tables and len(tables["categories"]):
        cats = tables["categories"]
        lines.append(
            f"Category names: {len(cats)} names in {cats['group'].nunique()} groups "
            f"(cosine distance < {cut['category_distance']:.3g})"
        )
    return "\n".join(lines) + "\n"


def write_audit(result: AuditResult, output_dir: Any) -> list[Any]:
    """Write every table as ``<name>.csv`` (vectors dropped) and ``summary.txt`` into ``output_dir``."""
    from pv4kit._io import atomic_write_text

    out = Path(output_dir)
    paths = []
    for name, frame in result.tables.items():
        frame = frame.drop(columns=[c for c in ("vector",) if c in frame])
        paths.append(atomic_write_text(out / f"{name}.csv", frame.to_csv(index=False)))
    paths.append(atomic_write_text(out / "summary.txt", result.summary))
    return paths


def _letter_sequence_lines(summary: pd.DataFrame) -> list[str]:
    """The summary lines of :func:`~pv4kit.analysis.audit_sequence.letter_sequence_summary`."""
    s = summary.set_index("metric")
    modal, row = s.loc["modal_letter_of_row"], s.loc["row_letter"]
    if not modal["n"]:
        return ["Letters by row index: no row index is shared by two or more users"]
    lines = [
        "Letters by row index (question_index) across users:",
        f"  {100 * modal['rate']:.0f}% of {int(modal['n'])} questions have their row's modal letter "
        f"(chance {100 * modal['chance']:.0f}%, each user's letters shuffled; p = {modal['pvalue']:.3g})",
        f"  the other users' letter at the same row answers {100 * row['rate']:.0f}% "
        f"(chance {100 * row['chance']:.0f}%, p = {row['pvalue']:.3g})",
    ]
    if modal["rate"] >= 1.0 - 1e-12:
        lines += [
            "  -> the same seed for every user gives every user the same letter sequence: a row-to-letter",
            "     map learnt on training users answers test users",
        ]
    elif modal["pvalue"] < 0.01:
        lines.append("  -> users share much of one letter sequence (the same shuffle seed for every user?)")
    return lines
