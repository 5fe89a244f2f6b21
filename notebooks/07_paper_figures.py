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
# Expected time at release size on a 2-core CPU: about 15 s, plus about 30 s when the figures change and
# their PNGs and PDFs are rendered (docs/notebooks.md).

# %%
import os

import pandas as pd

import pv4kit

PATHS = pv4kit.project_paths()
DATA = "MemoryAsModality/PersonalizationV4"  # <- the release (hub id or a folder); else the sample
RUNS, FIGURES, CACHE = PATHS["RUNS"], PATHS["FIGURES"], PATHS["CACHE"]
EMBEDDER = os.environ.get("PV4KIT_EMBEDDER")  # None: Qwen3-Embedding-4B with CUDA, else "static" on CPU
DERIVED = RUNS / "demo_hard_subset.csv"  # used for the hard-subset figure when the data marks none hard

data = pv4kit.load_notebook_data(DATA)
embedder = pv4kit.get_audit_embedder(EMBEDDER, export_dir=CACHE.parent / "static")
result = pv4kit.run_audit(data, embedder=embedder, cache=CACHE, store=CACHE.parent / "audits")  # 02's result
runs = pv4kit.load_scored_runs(RUNS)
print(f"{data!r}\nscored runs: {list(runs) or 'none'}", end="; ")
print(f"static export: {pv4kit.browser_path() or 'off (HTML only)'}")

# %%
categories = pv4kit.with_category_umap(result["categories"], seed=0, cache=CACHE.parent / "umap")
lengths, note = pv4kit.with_fallback_subset(
    pv4kit.audit.with_category_groups(result["lengths"], categories), DERIVED
)
print(f"hard-subset figure: {note}")
by_group = pv4kit.audit.with_category_groups(result["solver_predictions"], categories)

figures = {
    "category_balance": pv4kit.plots.category_balance(data.questions),
    "category_groups": pv4kit.plots.category_groups(categories),
    "category_map": pv4kit.plots.category_map(categories),
    "answer_positions": pv4kit.plots.answer_positions(result["positions"]),
    "length_bias": pv4kit.plots.length_bias(result["length_summary"]),
    "word_spread": pv4kit.plots.word_spread(result["lengths"]),
    "shortcut_solvers": pv4kit.plots.accuracy_dots(
        result["solver_accuracy"], title="Candidate-only solvers vs chance"
    ),
    "shortcut_solvers_by_category": pv4kit.plots.accuracy_dots(
        pv4kit.audit.solver_accuracy(by_group[by_group["solver"] == "longest"], by="group_label"),
        title="The longest-choice solver per category group",
    ),
    "distractor_similarity": pv4kit.plots.distractor_similarity(result["similarity"]),
    "leakage": pv4kit.plots.leakage(result["leakage"]),
    "hard_composition": pv4kit.plots.hard_composition(lengths),
}

# %%
if runs:
    preds = pv4kit.stack_runs(runs)
    grouped = pv4kit.audit.with_category_groups(preds, categories)
    figures["accuracy_by_category"] = pv4kit.plots.accuracy_dots(
        pv4kit.accuracy_table(grouped, by={"solver": "run", "group": "group_label"}),
        title="Accuracy per category group",
        label="run",
    )
    figures["wrong_position"] = pv4kit.plots.wrong_position(preds)
    figures["margin_distribution"] = pv4kit.plots.margin_distribution(preds)
    figures["per_user_accuracy"] = pv4kit.plots.per_user_accuracy(preds)
    on_map = pv4kit.with_question_umap(preds, data.questions, embedder=embedder, cache=CACHE)
    figures["question_map"] = pv4kit.plots.question_map(on_map)
    if len(runs) >= 2:
        a, b = list(runs)[:2]
        figures["paired_comparison"] = pv4kit.plots.paired_comparison(
            pv4kit.compare(runs[a], runs[b]), name_a=a, name_b=b
        )
    reports = {
        n: pv4kit.read_validity(RUNS / n) for n in runs if (RUNS / n / "validity" / "summary.json").is_file()
    }
    if reports:  # `pv4kit validity RUN` (the demo makes one for demo_no_docs)
        margins = pd.concat([r["margins"].assign(run=n) for n, r in reports.items()], ignore_index=True)
        figures["scorer_margins"] = pv4kit.plots.margin_curve(margins)
        judged = [r for r in reports.values() if "agreement" in r]
        if judged:
            figures["scorer_agreement"] = pv4kit.plots.scorer_agreement(
                judged[0]["agreement"], judged[0].get("sensitivity")
            )
else:
    print("no scored runs: the error-analysis figures are skipped")

# %%
written = pv4kit.save_figures(figures, figures_dir=FIGURES)  # the PNGs and PDFs in one batch
print(f"wrote {len(written)} files for {len(figures)} figures into {FIGURES}")
print(result.summary)

# %%
figures["shortcut_solvers"].show()
