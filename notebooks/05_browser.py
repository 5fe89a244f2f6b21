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
# # 05 Browser
#
# Pick a user to see the persona, chats and questions; pick a question to see its candidates with each
# scored run's similarity bars (green: the run picked the reference, orange: it picked this distractor),
# the generations and, for retrieval runs, the chats they retrieved. Tick the box to list only questions
# some run got wrong. `DATA` is the released data (the dataset card's hub id), the sample when the hub
# cannot be reached (`PV4KIT_DATA=DIR` overrides it).
#
# Expected time at release size on a 2-core CPU: about 4 s, loading the data (docs/notebooks.md).

# %%
import pv4kit

PATHS = pv4kit.project_paths()
DATA = "MemoryAsModality/PersonalizationV4"  # <- the release (hub id or a folder); else the sample
RUNS = PATHS["RUNS"]

data = pv4kit.load_notebook_data(DATA)
runs = pv4kit.load_scored_runs(RUNS)
explorer = pv4kit.browser(data, runs)
explorer

# %% [markdown]
# The browser can also be driven from code, e.g. to jump to a question:

# %%
controls = explorer.controls
controls["user"].value = int(data.users["user_id"].iloc[-1])
controls["question"].value = controls["question"].options[0][1]
print(controls["question"].label)
