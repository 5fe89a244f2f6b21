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
# on a UMAP). `DATA` is the released data (the dataset card's hub id); where the hub cannot be reached
# the sample in `data/` (once built) or `raw/` is loaded instead, with a warning saying why.
# `PV4KIT_DATA=DIR` (what the tests and `pv4kit demo` set) overrides it.
#
# Expected time at release size on a 2-core CPU: about 1 min the first time, under 15 s after
# (docs/notebooks.md).

# %%
import os

import pandas as pd

import pv4kit

PATHS = pv4kit.project_paths()
DATA = "MemoryAsModality/PersonalizationV4"  # <- the release (hub id or a folder); else the sample
CACHE = PATHS["CACHE"]
EMBEDDER = os.environ.get("PV4KIT_EMBEDDER")  # None: Qwen3-Embedding-4B with CUDA, else "static" on CPU

data = pv4kit.load_notebook_data(DATA)
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
pv4kit.plots.category_balance(data.questions).show()

# %% [markdown]
# Category names grouped across users by embedding, then placed on a UMAP (1,490 names at release size).

# %%
embedder = pv4kit.get_audit_embedder(EMBEDDER, export_dir=CACHE.parent / "static")
categories = pv4kit.audit.category_groups(data.questions, embedder=embedder, cache=CACHE)
shared = categories.groupby("group_label").agg(users=("user_id", "nunique"), names=("category_name", list))
shared[shared["users"] > 1].sort_values("users", ascending=False)

# %%
pv4kit.plots.category_groups(categories).show()

# %%
pv4kit.plots.category_map(pv4kit.with_category_umap(categories, seed=0, cache=CACHE.parent / "umap")).show()

# %% [markdown]
# ## Question and choice lengths

# %%
lengths = pv4kit.audit.length_audit(data.questions)
pd.concat(
    [
        data.questions["question"].str.split().str.len().describe().rename("question words"),
        lengths["ref_words"].describe().rename("reference words"),
        lengths["distractor_words_mean"].describe().rename("distractor words (mean of 4)"),
    ],
    axis=1,
).round(1)
