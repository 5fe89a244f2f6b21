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
# # 04 Error analysis of scored runs
#
# Every run under `runs/` with a `predictions.parquet` (`pv4kit demo`, or `pv4kit answer` + `pv4kit score`):
# accuracy per category group with intervals, a paired comparison of two runs, which position wins when a
# run is wrong, the scorer's margins, a UMAP of the questions coloured by correctness, and per-user accuracy.
# `DATA` is the released data (the dataset card's hub id), the sample when the hub cannot be reached
# (`PV4KIT_DATA=DIR` overrides it).
#
# Time at release size (`benchmarks/bench_notebooks.py`, 149 users, 20,860 questions, 5 scored runs, on an
# otherwise idle 2-core CPU with MiniLM): 31 s with an empty cache (the question UMAP's fit, about 22 s, is
# most of it), 12.3 s with it filled; the paired comparison of two runs (302 category rows) takes about
# 1 s. Not measured on a GPU.

# %%
import os

import numpy as np
from IPython.display import display

from pv4kit.analysis import audit, plots
from pv4kit.analysis.notebooks import load_notebook_data, load_scored_runs, project_paths, stack_runs
from pv4kit.analysis.projection import with_question_umap
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.runs import metrics_frame
from pv4kit.scoring.stats import compare

PATHS = project_paths()
DATA = "MemoryAsModality/PersonalizationV4"  # <- the release (hub id or a folder); else the sample
RUNS = PATHS["RUNS"]
CACHE = PATHS["CACHE"]
EMBEDDER = os.environ.get("PV4KIT_EMBEDDER")  # None: Qwen3-Embedding-4B with CUDA, else "static" on CPU

runs = load_scored_runs(RUNS)
if not runs:
    print(
        f"No scored runs under {RUNS} yet: run `make demo` (or `pv4kit answer ...` then `pv4kit score ...`). "
        "The cells below do nothing until then."
    )
else:
    print(f"{len(runs)} scored run(s): {', '.join(runs)}")
preds = stack_runs(runs)

# %%
if runs:
    summary = metrics_frame(RUNS)  # every metrics.json as tidy rows
    display(summary[summary["subset"] != "category"])

# %%
if runs:
    from pv4kit.embeddings.models import get_audit_embedder

    data = load_notebook_data(DATA)
    embedder = get_audit_embedder(EMBEDDER, export_dir=CACHE.parent / "static")
    categories = audit.category_groups(data.questions, embedder=embedder, cache=CACHE)
    grouped = audit.with_category_groups(preds, categories)
    acc = accuracy_table(grouped, by={"solver": "run", "group": "group_label"})
    plots.accuracy_dots(acc, title="Accuracy per category group", label="run").show()

# %%
if len(runs) >= 2:
    name_a, name_b = list(runs)[:2]
    table = compare(runs[name_a], runs[name_b])
    plots.paired_comparison(table, name_a=name_a, name_b=name_b).show()
    display(table.round(3))
elif runs:
    print("one run only: nothing to compare")

# %%
if runs:
    plots.wrong_position(preds).show()
    plots.margin_distribution(preds).show()
    plots.per_user_accuracy(preds).show()

# %% [markdown]
# The question map: one UMAP fitted on the questions the runs answered (shared by every run's panel).

# %%
if runs:
    plots.question_map(with_question_umap(preds, data.questions, embedder=embedder, cache=CACHE)).show()

# %% [markdown]
# ## The questions every run gets wrong

# %%
if runs:
    wide = preds.pivot_table(
        index=["user_id", "question_index"], columns="run", values="correct", aggfunc="first"
    )
    always_wrong = wide[~wide.astype(bool).any(axis=1)].reset_index()
    display(
        always_wrong.merge(
            preds.drop_duplicates(["user_id", "question_index"])[
                ["user_id", "question_index", "category_name", "question", "answer"]
            ]
        ).head(10)
    )
    print(
        f"{len(always_wrong)} of {len(wide)} questions are wrong in every run; chance alone would give "
        f"{np.prod([0.8] * len(runs)):.0%}"
    )
