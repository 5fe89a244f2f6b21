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
# # 06 Generating users
#
# The generation pipeline (steps 1-4, then the question table of step 5) as `pv4kit generate` runs it:
# the prompts each step sends, a token and cost estimate for one user, and the usage ledger of the LLM
# cache. The generation itself runs only when an endpoint is configured (`PV4KIT_BASE_URL` for an
# OpenAI-compatible server such as `vllm serve` or `pv4kit.llm.local.local_server()`, or `PV4KIT_MODEL`
# with `OPENAI_API_KEY`); it writes into `build/generated/`, never into `raw/`.
#
# Expected time without an endpoint: about 3 s (docs/notebooks.md).

# %%
import os

import pandas as pd
from IPython.display import display

import pv4kit

PATHS = pv4kit.project_paths()
PROJECT = PATHS["PROJECT"]
PERSONAS = PROJECT / "raw" / "personas"
LLM_CACHE = PATHS["LLM_CACHE"]
persona_file = sorted(PERSONAS.glob("user_*.txt"))[0]
persona = persona_file.read_text(encoding="utf-8")
print(
    f"persona {persona_file.name}: {len(persona.split())} words; prompt set {pv4kit.prompts.PROMPT_VERSION}"
)

# %% [markdown]
# ## The prompts

# %%
pd.DataFrame(
    [
        {"step": s, "template_sha256": pv4kit.prompts.template_hash(s)[:16], "chars": len(t)}
        for s, t in pv4kit.prompts.TEMPLATES.items()
    ]
)

# %%
categories_msg = pv4kit.prompts.categories_messages(persona, n=10)
print(categories_msg[0]["content"][:1500])

# %%
print(
    pv4kit.prompts.questions_messages(persona, "Everyday food and cooking habits", n=15)[0]["content"][:2000]
)

# %% [markdown]
# ## Cost estimate for one user
# Prompt tokens are estimated as characters / 4; output tokens are typical sizes of each step's answer
# (`pv4kit.generation.defaults`). Prices are the example table in `pv4kit/llm/prices.json` (check your
# provider's).

# %%
steps = pv4kit.estimate_user_cost(persona, num_categories=10, num_topics=200, num_questions=15)
display(steps.round(4))
print(f"about ${steps['cost_usd'].sum():.2f} per user, ${150 * steps['cost_usd'].sum():.0f} for 150 users")

# %% [markdown]
# ## Usage ledger of the LLM cache

# %%
if LLM_CACHE.is_file():
    ledger = pv4kit.usage_frame(LLM_CACHE)
    display(pv4kit.usage_summary(ledger, by=["step", "model"]))
else:
    print(f"no LLM cache at {LLM_CACHE} yet (it appears after the first `pv4kit generate` or LLM baseline)")

# %% [markdown]
# ## Generate (only with an endpoint)

# %%
base_url, model = os.environ.get("PV4KIT_BASE_URL"), os.environ.get("PV4KIT_MODEL")
if base_url or model:
    # chat at a base URL, else the Responses API; sampled (temperature None), so a re-ask gets a new answer
    llm = pv4kit.endpoint_config(model or "local", base_url=base_url, temperature=None)
    user_id = int(persona_file.stem.split("_")[1])
    report = pv4kit.generate_users(
        PERSONAS,
        PROJECT / "build" / "generated",
        llm=llm,
        chat_llm=llm,
        num_categories=2,
        num_topics=4,
        num_questions=3,
        user_start=user_id,
        user_end=user_id,
        cache=LLM_CACHE,
    )
    display(report)
else:
    print(
        "no endpoint configured (set PV4KIT_BASE_URL or PV4KIT_MODEL); skipping generation. "
        "The full run is `pv4kit generate --persona-dir raw/personas --output-dir build/users`."
    )
