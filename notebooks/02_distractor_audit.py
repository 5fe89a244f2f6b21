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
# # 02 Distractor audit: can the answer be found without knowing the user?
#
# Shortcut audits in the spirit of PersonaMem #41/#42: length and structure of the reference against
# its distractors, answer position, solvers that see only the candidates (and the question), how close
# distractors sit to the reference, lexical leakage from the chats, and near-duplicate questions.
# Chance is 20% everywhere; intervals resample users. `pv4kit audit --data DIR` writes the same tables.
# `DATA` is the released data (the dataset card's hub id), the sample when the hub cannot be reached
# (`PV4KIT_DATA=DIR` overrides it).

# %%
import os

import pv4kit

PATHS = pv4kit.project_paths()
DATA = "MemoryAsModality/PersonalizationV4"  # <- the release (hub id or a folder); else the sample
CACHE = PATHS["CACHE"]
EMBEDDER = os.environ.get("PV4KIT_EMBEDDER")  # None: Qwen3-Embedding-4B with CUDA, else "static" on CPU

data = pv4kit.load_notebook_data(DATA)
embedder = pv4kit.get_audit_embedder(EMBEDDER, export_dir=CACHE.parent / "static")  # distilled once
print(f"audit embedder: {embedder.name}")

# %% [markdown]
# **The embedder.** With no GPU the audit embeds with `static` (a static model distilled once from MiniLM,
# then a table lookup): trust it for the aggregate figures (solver accuracies, flag rates, groups),
# not for per-question verdicts, which agree with MiniLM's far less (docs/analysis.md); set `EMBEDDER`
# (or `PV4KIT_EMBEDDER`) to `"minilm"` or `"qwen3"` for those. Every table and figure names its embedder.
#
# The LLM candidate-only solver runs only when an endpoint is configured: set `PV4KIT_BASE_URL` (an
# OpenAI-compatible server, e.g. `vllm serve` or `pv4kit.llm.local.local_server()`) and `PV4KIT_MODEL`, or
# `PV4KIT_MODEL` alone for the OpenAI API with `OPENAI_API_KEY`. Responses are cached in
# `.cache/pv4kit/llm.sqlite`.
#
# Expected time at release size on a 2-core CPU: under a minute with `static` the first time, about 10 s
# after; with MiniLM about 34 min the first time (docs/notebooks.md).

# %%
llm_config = None
if os.environ.get("PV4KIT_MODEL") or os.environ.get("PV4KIT_BASE_URL"):
    # chat and temperature 0 at a base URL, else the Responses API
    llm_config = pv4kit.endpoint_config(
        os.environ.get("PV4KIT_MODEL", "local"), base_url=os.environ.get("PV4KIT_BASE_URL")
    )
print("LLM candidate-only solver:", llm_config.model if llm_config else "off (no endpoint configured)")

result = pv4kit.run_audit(
    data,
    embedder=embedder,
    cache=CACHE,
    llm_config=llm_config,
    llm_cache=PATHS["LLM_CACHE"],
    store=PATHS["CACHE"].parent / "audits",  # notebook 07 reads the same result back
)
print(result.summary)

# %% [markdown]
# ## Candidate-only solvers

# %%
pv4kit.plots.accuracy_dots(
    result["solver_accuracy"], title="Candidate-only solvers against the 20% chance line"
).show()
result["solver_accuracy"].round(3)

# %%
by_group = pv4kit.audit.with_category_groups(result["solver_predictions"], result["categories"])
acc_group = pv4kit.audit.solver_accuracy(by_group[by_group["solver"] == "longest"], by="group_label")
pv4kit.plots.accuracy_dots(acc_group, title="The longest-choice solver per category group").show()

# %% [markdown]
# ## Length, structure and position

# %%
pv4kit.plots.length_bias(result["length_summary"]).show()
result["length_summary"].round(3)

# %%
pv4kit.plots.word_spread(result["lengths"]).show()

# %%
pv4kit.plots.answer_positions(result["positions"]).show()
pv4kit.plots.answer_positions(pv4kit.audit.position_audit(data.questions, by="split")).show()

# %% [markdown]
# Letters by row index: the share of users whose correct letter at row k (`question_index`) is the row's
# modal letter, and a solver that answers with the other users' letter at the same row.

# %%
print(result["letter_sequence_summary"].round(3).to_string(index=False))
result["letter_sequence"].head(10)

# %% [markdown]
# ## Distractor similarity and the rationale as a generation

# %%
pv4kit.plots.distractor_similarity(result["similarity"]).show()
result["similarity"].sort_values("ref_nearest_distractor", ascending=False).head(5)

# %% [markdown]
# ## Leakage and duplicates

# %%
pv4kit.plots.leakage(result["leakage"]).show()
result["leakage_summary"].round(3)

# %%
result["duplicates"].head(10)

# %% [markdown]
# ## Per-question flags
# One row per question; `n_flags` counts the shortcuts that apply. The most flagged questions first.

# %%
flags = result["flags"]
flags.sort_values("n_flags", ascending=False).head(10)

# %%
flags.drop(
    columns=[
        c
        for c in (
            "user_id",
            "question_index",
            "split",
            "category",
            "category_name",
            "hard",
            "n_flags",
            "embedder",
        )
        if c in flags
    ]
).mean().round(3).rename("share of questions").to_frame()
