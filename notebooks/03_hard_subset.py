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
# they come from, and whether the candidate-only shortcuts work less well on them.

# %%
import pv4kit
import pv4kit.answer.hard
from pv4kit.analysis import audit, plots
from pv4kit.analysis.notebooks import project_paths
from pv4kit.embeddings.models import get_embedder

PATHS = project_paths()
DATA = PATHS["DATA"]  # <- the one line to change for the released data
CACHE = PATHS["CACHE"]
EMBEDDER = None
DERIVED = PATHS["RUNS"] / "demo_hard_subset.csv"  # used when the data marks no question hard

data = pv4kit.load(DATA)
q = data.questions
if not q["hard"].any() and DERIVED.is_file():
    q = pv4kit.answer.hard.with_subset(q, pv4kit.answer.hard.read_subset(DERIVED))
    print(f"the data marks no question hard: showing the subset `make demo` derived ({DERIVED.name})")
n_hard = int(q["hard"].sum())
print(f"{n_hard} of {len(q)} questions are hard")
if n_hard == 0:
    print(
        "No question is marked hard in this data (raw/hard_subset.csv is empty or absent) and no derived "
        "subset was found; the panels below show only the non-hard questions."
    )

# %%
embedder = get_embedder(EMBEDDER)
categories = audit.category_groups(q, embedder=embedder, cache=CACHE)
lengths = audit.with_category_groups(audit.length_audit(q), categories)
lengths.groupby("hard")[
    ["ref_words", "distractor_words_mean", "word_spread", "ref_longest", "ref_shortest"]
].mean().round(3)

# %%
plots.hard_composition(lengths).show()

# %%
q.groupby(["split", "hard"]).size().rename("questions").reset_index()

# %% [markdown]
# ## Shortcuts on hard vs other questions

# %%
solvers = audit.candidate_only_predictions(q, embedder=embedder, cache=CACHE)
acc = audit.solver_accuracy(
    solvers.assign(hard=solvers["hard"].map({True: "hard", False: "not hard"})), by="hard"
)
plots.accuracy_dots(
    acc.assign(group=acc["solver"] + " / " + acc["group"]),
    title="Candidate-only solvers on hard vs other questions",
).show()
acc.round(3)
