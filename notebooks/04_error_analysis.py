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
# run is wrong, the scorer's margins, a UMAP of the questions coloured by correctness, per-user accuracy, and
# how far the scorer itself can be trusted (scorer validity, at the end).
# `DATA` is the released data (the dataset card's hub id), the sample when the hub cannot be reached
# (`PV4KIT_DATA=DIR` overrides it).
#
# Expected time at release size on a 2-core CPU: about 30 s the first time, 12 s after (docs/notebooks.md).

# %%
import os

import numpy as np
from IPython.display import display

import pv4kit

PATHS = pv4kit.project_paths()
DATA = "MemoryAsModality/PersonalizationV4"  # <- the release (hub id or a folder); else the sample
RUNS = PATHS["RUNS"]
CACHE = PATHS["CACHE"]
EMBEDDER = os.environ.get("PV4KIT_EMBEDDER")  # None: Qwen3-Embedding-4B with CUDA, else "static" on CPU

runs = pv4kit.load_scored_runs(RUNS)
if not runs:
    print(
        f"No scored runs under {RUNS} yet: run `make demo` (or `pv4kit answer ...` then `pv4kit score ...`). "
        "The cells below do nothing until then."
    )
else:
    print(f"{len(runs)} scored run(s): {', '.join(runs)}")
preds = pv4kit.stack_runs(runs)

# %%
if runs:
    summary = pv4kit.metrics_frame(RUNS)  # every metrics.json as tidy rows
    display(summary[summary["subset"] != "category"])

# %%
if runs:
    data = pv4kit.load_notebook_data(DATA)
    embedder = pv4kit.get_audit_embedder(EMBEDDER, export_dir=CACHE.parent / "static")
    categories = pv4kit.audit.category_groups(data.questions, embedder=embedder, cache=CACHE)
    grouped = pv4kit.audit.with_category_groups(preds, categories)
    acc = pv4kit.accuracy_table(grouped, by={"solver": "run", "group": "group_label"})
    pv4kit.plots.accuracy_dots(acc, title="Accuracy per category group", label="run").show()

# %%
if len(runs) >= 2:
    name_a, name_b = list(runs)[:2]
    table = pv4kit.compare(runs[name_a], runs[name_b])
    pv4kit.plots.paired_comparison(table, name_a=name_a, name_b=name_b).show()
    display(table.round(3))
elif runs:
    print("one run only: nothing to compare")

# %%
if runs:
    pv4kit.plots.wrong_position(preds).show()
    pv4kit.plots.margin_distribution(preds).show()
    pv4kit.plots.per_user_accuracy(preds).show()

# %% [markdown]
# The question map: one UMAP fitted on the questions the runs answered (shared by every run's panel).

# %%
if runs:
    pv4kit.plots.question_map(
        pv4kit.with_question_umap(preds, data.questions, embedder=embedder, cache=CACHE)
    ).show()

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

# %% [markdown]
# ## Scorer validity
#
# How far the nearest-candidate scores hold (docs/scoring.md, "Scorer validity"). `pv4kit validity RUN
# --judge-model M --against EMBEDDER` writes `RUN/validity/`: how often an LLM judge reads the same candidate
# in the answer as the scorer picked (and Cohen's kappa), how often it reads none (NONE), the accuracy under
# its picks, the predictions that flip under another embedder or float32 numerics, and accuracy by the
# scorer's margin. Here the first free-text run with a report is shown; a run without one gets one made here
# without a judge (the float32 rescoring and the margins). Multiple-choice runs are scored by the letter and
# need none.

# %%
free = [name for name, p in runs.items() if "choice_order" not in p.columns]
if free:
    name = next((n for n in free if (RUNS / n / "validity" / "summary.json").is_file()), free[0])
    if not (RUNS / name / "validity" / "summary.json").is_file():
        pv4kit.validity(RUNS / name, embed_cache=CACHE, progress=False)
    report = pv4kit.read_validity(RUNS / name)
    print((RUNS / name / "validity" / "summary.txt").read_text())
    if "agreement" in report:
        pv4kit.plots.scorer_agreement(report["agreement"], report.get("sensitivity")).show()
        display(report["judge_positions"])
    if "sensitivity" in report:
        display(report["sensitivity"].round(4))
    pv4kit.plots.margin_curve(report["margins"]).show()
else:
    print("no free-text run scored yet: nothing to validate")
