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
# some run got wrong.

# %%
import pv4kit
from pv4kit.analysis.notebooks import load_scored_runs, project_paths
from pv4kit.analysis.widgets import browser

PATHS = project_paths()
DATA = PATHS["DATA"]  # <- the one line to change for the released data
RUNS = PATHS["RUNS"]

data = pv4kit.load(DATA)
runs = load_scored_runs(RUNS)
explorer = browser(data, runs)
explorer

# %% [markdown]
# The browser can also be driven from code, e.g. to jump to a question:

# %%
controls = explorer.controls
controls["user"].value = int(data.users["user_id"].iloc[-1])
controls["question"].value = controls["question"].options[0][1]
print(controls["question"].label)
