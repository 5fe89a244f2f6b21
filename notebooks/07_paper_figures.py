# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (pv4kit)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 Paper figures
#
# Regenerates every figure in `figures/` (HTML always; PNG and PDF when Chromium is installed) from the
# data and the scored runs. Run it with `make figures` or `pv4kit figures` (= `pv4kit notebooks --execute
# --only 07_paper_figures`). `DATA` is the released data (the dataset card's hub id), the sample when
# the hub cannot be reached (`PV4KIT_DATA=DIR` overrides it).
#
# Time at release size (`benchmarks/bench_notebooks.py`, 149 users, 20,860 questions, 5 scored runs, on an
# otherwise idle 2-core CPU with MiniLM): 14 s after notebook 02 ran cold (the audit is 02's stored result;
# without it, it is computed here, see 02) and 14 s with the cache filled, both with the figures
# unchanged. Writing the 17 PNGs and PDFs through Chromium takes 27 s in one batch when they change
# (`save_figures` renders only the files whose figure changed; `force=True` renders all). Not measured on
# a GPU.

# %%
import os

from pv4kit.analysis import audit, plots
from pv4kit.analysis.audit_report import run_audit
from pv4kit.analysis.figures import browser_path, save_figures
from pv4kit.analysis.notebooks import load_notebook_data, load_scored_runs, project_paths, stack_runs
from pv4kit.analysis.projection import with_category_umap, with_question_umap
from pv4kit.baselines.hard import with_fallback_subset
from pv4kit.embeddings.models import get_audit_embedder
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.stats import compare

PATHS = project_paths()
DATA = "MemoryAsModality/PersonalizationV4"  # <- the release (hub id or a folder); else the sample
RUNS, FIGURES, CACHE = PATHS["RUNS"], PATHS["FIGURES"], PATHS["CACHE"]
EMBEDDER = os.environ.get("PV4KIT_EMBEDDER")  # None: Qwen3-Embedding-4B with CUDA, else "static" on CPU
DERIVED = RUNS / "demo_hard_subset.csv"  # used for the hard-subset figure when the data marks none hard

data = load_notebook_data(DATA)
embedder = get_audit_embedder(EMBEDDER, export_dir=CACHE.parent / "static")
result = run_audit(data, embedder=embedder, cache=CACHE, store=CACHE.parent / "audits")  # 02's result
runs = load_scored_runs(RUNS)
print(f"{data!r}\nscored runs: {list(runs) or 'none'}; static export: {browser_path() or 'off (HTML only)'}")

# %%
categories = with_category_umap(result["categories"], seed=0, cache=CACHE.parent / "umap")
lengths, note = with_fallback_subset(audit.with_category_groups(result["lengths"], categories), DERIVED)
print(f"hard-subset figure: {note}")
by_group = audit.with_category_groups(result["solver_predictions"], categories)

figures = {
    "category_balance": plots.category_balance(data.questions),
    "category_groups": plots.category_groups(categories),
    "category_map": plots.category_map(categories),
    "answer_positions": plots.answer_positions(result["positions"]),
    "length_bias": plots.length_bias(result["length_summary"]),
    "word_spread": plots.word_spread(result["lengths"]),
    "shortcut_solvers": plots.accuracy_dots(
        result["solver_accuracy"], title="Candidate-only solvers vs chance"
    ),
    "shortcut_solvers_by_category": plots.accuracy_dots(
        audit.solver_accuracy(by_group[by_group["solver"] == "longest"], by="group_label"),
        title="The longest-choice solver per category group",
    ),
    "distractor_similarity": plots.distractor_similarity(result["similarity"]),
    "leakage": plots.leakage(result["leakage"]),
    "hard_composition": plots.hard_composition(lengths),
}

# %%
if runs:
    preds = stack_runs(runs)
    grouped = audit.with_category_groups(preds, categories)
    figures["accuracy_by_category"] = plots.accuracy_dots(
        accuracy_table(grouped, by={"solver": "run", "group": "group_label"}),
        title="Accuracy per category group",
        label="run",
    )
    figures["wrong_position"] = plots.wrong_position(preds)
    figures["margin_distribution"] = plots.margin_distribution(preds)
    figures["per_user_accuracy"] = plots.per_user_accuracy(preds)
    on_map = with_question_umap(preds, data.questions, embedder=embedder, cache=CACHE)
    figures["question_map"] = plots.question_map(on_map)
    if len(runs) >= 2:
        a, b = list(runs)[:2]
        figures["paired_comparison"] = plots.paired_comparison(compare(runs[a], runs[b]), name_a=a, name_b=b)
else:
    print("no scored runs: the error-analysis figures are skipped")

# %%
written = save_figures(figures, figures_dir=FIGURES)  # the PNGs and PDFs in one batch
print(f"wrote {len(written)} files for {len(figures)} figures into {FIGURES}")
print(result.summary)

# %%
figures["shortcut_solvers"].show()
