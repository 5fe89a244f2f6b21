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
# # 01 Dataset overview
#
# Users, splits and questions of PV4; how the questions spread over each user's categories, and which
# category names recur across users (names differ per user, so they are grouped by embedding and shown
# on a UMAP). Runs on the sample in `raw/` (or `data/` once built); point `DATA` at the released data
# to run it there.

# %%
import numpy as np
import pandas as pd

import pv4kit
from pv4kit.analysis import audit, plots
from pv4kit.analysis.notebooks import project_paths
from pv4kit.embeddings.models import get_embedder

PATHS = project_paths()
DATA = PATHS["DATA"]  # <- the one line to change for the released data: "MemoryAsModality/PersonalizationV4"
CACHE = PATHS["CACHE"]
EMBEDDER = None  # None: Qwen3-Embedding-4B with CUDA, else MiniLM on CPU

data = pv4kit.load(DATA)
data

# %%
data.summary()

# %% [markdown]
# ## Users

# %%
users = data.users.assign(
    chats=data.users["documents"].map(len),
    chat_words=data.users["documents"].map(lambda d: int(sum(len(c.split()) for c in d))),
    categories=data.users["categories"].map(lambda c: len(c) if c is not None else None),
)
per_user = data.questions.groupby("user_id").agg(
    questions=("question_index", "size"),
    hard=("hard", "sum"),
    splits=("split", lambda s: ", ".join(sorted(set(s)))),
)
users[["user_id", "role", "chats", "chat_words", "categories"]].merge(per_user, on="user_id")

# %% [markdown]
# ## Questions per category

# %%
plots.category_balance(data.questions).show()

# %%
embedder = get_embedder(EMBEDDER)
categories = audit.category_groups(data.questions, embedder=embedder, cache=CACHE)
shared = categories.groupby("group_label").agg(users=("user_id", "nunique"), names=("category_name", list))
shared[shared["users"] > 1].sort_values("users", ascending=False)

# %%
plots.category_groups(categories).show()

# %%
xy = plots.umap_2d(np.stack(categories["vector"]), seed=0)
plots.category_map(categories.assign(x=xy[:, 0], y=xy[:, 1])).show()

# %% [markdown]
# ## Question and choice lengths

# %%
lengths = audit.length_audit(data.questions)
pd.concat(
    [
        data.questions["question"].str.split().str.len().describe().rename("question words"),
        lengths["ref_words"].describe().rename("reference words"),
        lengths["distractor_words_mean"].describe().rename("distractor words (mean of 4)"),
    ],
    axis=1,
).round(1)
