# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (pv4kit)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 Related benchmarks: PersonaFeedback and Re-Centering
#
# Two benchmarks from the design documents, loaded and evaluated with pv4kit's machinery
# (`pv4kit.related`; see `docs/related.md`):
#
# * **PersonaFeedback** (`PersonalAILab/PersonaFeedback`): explicit persona + question + two responses;
#   pick the more personalised one. A Bradley-Terry reward head on frozen MiniLM embeddings, an LLM judge
#   with randomised positions, and PV4's own nearest-candidate scoring.
# * **Re-Centering Humans in LLM Personalization** (`leczhang/recenter-personalization`): attribute
#   acceptance (stage 1), attribute relevance (stage 2) and generic-vs-personalised ratings (stage 3).
#
# By default everything runs on the small hand-written fixtures in `tests/fixtures/` (the numbers are
# therefore meaningless). To run on the real data, download both datasets
# (`hf download PersonalAILab/PersonaFeedback --repo-type dataset --local-dir DIR/personafeedback` and
# `hf download leczhang/recenter-personalization --repo-type dataset --local-dir DIR/recenter`) and set
# `DATA = Path("DIR")` below (or the `PV4KIT_RELATED_DATA` environment variable).
#
# The LLM-judge cells run only when an endpoint is configured: `PV4KIT_BASE_URL` (OpenAI-compatible) and
# `PV4KIT_MODEL`, optionally `PV4KIT_PROTOCOL` (`chat` or `responses`).
#
# Expected time on the fixtures on a 2-core CPU: about 25 s the first time, 12 s after (docs/notebooks.md).

# %%
import os
from pathlib import Path

import pv4kit
from pv4kit.related import personafeedback as pf
from pv4kit.related import recenter as rc
from pv4kit.related.reward_model import reward_model_baseline

PATHS = pv4kit.project_paths()
DATA = Path(os.environ.get("PV4KIT_RELATED_DATA", PATHS["PROJECT"] / "tests" / "fixtures"))
LLM_CACHE = PATHS["LLM_CACHE"]
PF_DATA, RC_DATA = DATA / "personafeedback", DATA / "recenter"
SEED = 0
ON_FIXTURES = "tests/fixtures" in DATA.resolve().as_posix()
# the fixtures' vectors are kept apart from the real data's (a folder of their own beside the cache)
EMBED_CACHE = PATHS["CACHE"].with_name("embeddings-fixtures") if ON_FIXTURES else PATHS["CACHE"]
BASE_URL = os.environ.get("PV4KIT_BASE_URL")
MODEL = os.environ.get("PV4KIT_MODEL", "gpt-4.1-mini")
print(f"data: {DATA.resolve()}  (fixtures: {ON_FIXTURES}); LLM endpoint: {BASE_URL or 'none'}")

# %% [markdown]
# ## PersonaFeedback: load and check the persona join
#
# Personas come as `persona/<N>.json` (the id is `N`) or as `persona/all_personas.jsonl` (the id is the
# 1-based line, a third-party loader's rule); with both present they are compared. Rows that join no
# persona and personas no row uses are listed.

# %%
pfd = pf.load_personafeedback(PF_DATA)
print(
    f"{len(pfd.pairs)} pairs (paper: {pf.PAPER_TOTAL:,}), {len(pfd.personas)} personas, "
    f"layout {pfd.layout} of {pfd.layouts_found}, join rule {pfd.id_rule}, "
    f"{len(pfd.layout_disagreements)} layout disagreements"
)
pfd.counts

# %%
pfd.unjoined[["pair_id", "user_id", "question"]]

# %%
pfd.unused_personas[["persona_key", "file", "name"]]

# %%
print(pfd.pairs.dropna(subset=["persona"]).iloc[0]["persona"])

# %% [markdown]
# ## Reward-model baseline (Bradley-Terry on frozen embeddings)
#
# `r(x, y) = w . [e(y), e(x) * e(y)]`, loss `-log sigmoid(r(chosen) - r(rejected))`, trained on a seeded
# half of each set x tier and scored on the other half. `cosine` (no training) is the floor.

# %%
embedder = pv4kit.get_embedder("minilm", device="cpu")
rm_preds, rm_acc, head = reward_model_baseline(pfd.pairs, embedder=embedder, cache=EMBED_CACHE, seed=SEED)
rm_acc

# %%
pv4kit.plots.reward_model_accuracy(rm_acc)

# %% [markdown]
# ## LLM judge and PV4-style scoring (needs an endpoint)
#
# The judge sees the persona, the question and the two responses; the chosen response's position is a
# seeded coin per pair, and `both_orders=True` asks both ways to measure position bias. Replies are
# parsed strictly: an unparseable reply counts as wrong. PV4's scoring generates an answer from the
# persona and counts it right when it is nearer `chosen` than `rejected` under MiniLM.

# %%
if BASE_URL:
    # chat (unless PV4KIT_PROTOCOL says otherwise) and temperature 0 at the base URL
    config = pv4kit.endpoint_config(
        MODEL, base_url=BASE_URL, protocol=os.environ.get("PV4KIT_PROTOCOL"), max_output_tokens=16
    )
    judge = pf.judge_pairs(pfd.pairs, config=config, cache=LLM_CACHE, seed=SEED, both_orders=True)
    display(pf.judge_accuracy(judge))  # noqa: F821 - IPython builtin
    display(pf.position_bias(judge))  # noqa: F821
else:
    print("PV4KIT_BASE_URL is not set: skipping the LLM judge")

# %%
if BASE_URL:
    gen_config = pv4kit.endpoint_config(MODEL, base_url=BASE_URL, protocol=config.protocol)
    gens = pf.generate_answers(pfd.pairs, config=gen_config, cache=LLM_CACHE)
    pv4 = pf.pv4_score(pfd.pairs, gens, embedder=embedder, cache=EMBED_CACHE)
    display(pf.pv4_score_accuracy(pv4))  # noqa: F821
else:
    print("PV4KIT_BASE_URL is not set: skipping PV4-style scoring")

# %% [markdown]
# ## Re-Centering stage 1: attribute acceptance and annotator agreement
#
# An attribute is accepted when more than half of the annotators who judged it said `ok`.

# %%
s1 = rc.load_stage1(RC_DATA)
acceptance = rc.stage1_acceptance(s1)
print(f"accepted by majority: {acceptance['accepted'].mean():.3f} of {len(acceptance)} attributes")
acceptance.groupby("source", dropna=False)["accepted"].agg(["size", "mean"])

# %%
rc.stage1_agreement(s1)

# %% [markdown]
# ## Stage 2: relevance of an attribute to a prompt
#
# Human labels collapse to binary as the authors do (`necessary_explicit`, `necessary_implicit` and
# `optional` relevant; `none` missing); the majority decides with ties -> relevant; pairs nobody rated
# are kept (missing) and counted in `coverage`. Thresholds of the MiniLM and BM25 baselines are the
# F1-best on a seeded half of the prompts; the table is on the other half.

# %%
s2 = rc.load_stage2(RC_DATA)
print(s2.coverage.to_string(index=False))
rc.stage2_yes_rates(s2)

# %%
s2_preds = rc.stage2_predictions(s2, embedder=embedder, cache=EMBED_CACHE, seed=SEED)
s2_metrics = rc.stage2_metrics(s2_preds, subset="test")
s2_metrics[["method", "n", "n_missing", "precision", "recall", "f1", "positive_rate", "human_positive_rate"]]

# %%
s2_agree = rc.stage2_agreement(s2)
s2_cohen = s2_agree["statistic"] == "cohen_kappa"
print(s2_agree[~s2_cohen][["group", "statistic", "n", "value"]].to_string(index=False))
s2_agree[s2_cohen].groupby("group", sort=False)[["agreement", "value"]].mean()

# %% [markdown]
# ## Stage 3: generic vs personalised (1 = prefer generic, 5 = prefer personalised)

# %%
s3_data = rc.load_stage3(RC_DATA)
s3 = rc.stage3_ratings(s3_data)
print(s3_data.coverage.to_string(index=False))
rc.stage3_summary(s3)

# %% [markdown]
# Ratings by the side that showed the personalised response (`display_assignment`): with canonical
# ratings the two sides should agree up to noise.

# %%
rc.stage3_orientation(s3)

# %%
pv4kit.plots.rating_distribution(rc.stage3_distribution(s3))

# %%
rc.stage3_correlation(s3)
