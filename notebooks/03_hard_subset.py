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
# # 03 The hard subset
#
# How the hard questions differ from the others: which users, categories, answer positions and lengths
# they come from, and whether the candidate-only shortcuts work less well on them. `DATA` is the released
# data (the dataset card's hub id), the sample when the hub cannot be reached (`PV4KIT_DATA=DIR`
# overrides it); with no question marked hard, the subset `make demo` derived is shown instead.
#
# Expected time at release size on a 2-core CPU: about 10 s after notebook 02 (docs/notebooks.md).

# %%
import os

import pv4kit

PATHS = pv4kit.project_paths()
DATA = "MemoryAsModality/PersonalizationV4"  # <- the release (hub id or a folder); else the sample
CACHE = PATHS["CACHE"]
EMBEDDER = os.environ.get("PV4KIT_EMBEDDER")  # None: Qwen3-Embedding-4B with CUDA, else "static" on CPU
DERIVED = PATHS["RUNS"] / "demo_hard_subset.csv"  # used when the data marks no question hard

data = pv4kit.load_notebook_data(DATA)
tables = pv4kit.hard_subset_tables(
    data,
    derived=DERIVED,
    embedder=pv4kit.get_audit_embedder(EMBEDDER, export_dir=CACHE.parent / "static"),
    cache=CACHE,
    store=CACHE.parent / "audits",  # 02's audit
)
q, lengths, solvers = tables["questions"], tables["lengths"], tables["solvers"]
print(f"{tables['note']}; tables: {tables['source']}")

# %%
lengths.groupby("hard")[
    ["ref_words", "distractor_words_mean", "word_spread", "ref_longest", "ref_shortest"]
].mean().round(3)

# %%
pv4kit.plots.hard_composition(lengths).show()

# %%
q.groupby(["split", "hard"]).size().rename("questions").reset_index()

# %% [markdown]
# ## Shortcuts on hard vs other questions
# The candidate-only solvers' predictions (`tables["solvers"]`, from the first cell) on hard and other
# questions.

# %%
acc = pv4kit.audit.solver_accuracy(
    solvers.assign(hard=solvers["hard"].map({True: "hard", False: "not hard"})), by="hard"
)
pv4kit.plots.accuracy_dots(
    acc.assign(group=acc["solver"] + " / " + acc["group"]),
    title="Candidate-only solvers on hard vs other questions",
).show()
acc.round(3)
