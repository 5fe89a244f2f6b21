"""PV4's scoring rule on PersonaFeedback: generate from the persona, right when nearer ``chosen``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.related._common import accuracy_table, encode
from pv4kit.related.personafeedback.calls import complete_messages, reply_columns

__all__ = [
    "GENERATE_PROMPT_VERSION",
    "GENERATE_SYSTEM",
    "generate_answers",
    "generation_messages",
    "pv4_score",
    "pv4_score_accuracy",
]

GENERATE_PROMPT_VERSION = "pf_generate/v1"
GENERATE_SYSTEM = "You are a helpful assistant. Tailor your answer to the user described below."


def generation_messages(persona: str, question: str) -> list[dict[str, str]]:
    """Messages asking a model for a personalised answer given the persona (pure)."""
    return [
        {"role": "system", "content": GENERATE_SYSTEM},
        {"role": "user", "content": f"About me:\n{persona}\n\nMy question: {question}"},
    ]


def generate_answers(
    pairs: pd.DataFrame,
    *,
    config: Any,
    cache: Any = None,
    client: Any = None,
    complete_fn: Callable[..., Any] | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Generate one personalised answer per pair; returns ``pair_id, generation, error``."""
    usable = pairs[pairs["persona"].notna()]
    messages = [generation_messages(p, q) for p, q in zip(usable["persona"], usable["question"], strict=True)]
    llm = dict(config=config, cache=cache, client=client, complete_fn=complete_fn, progress=progress)
    replies = reply_columns(complete_messages(messages, step="pf_generate", llm=llm))
    return pd.DataFrame(
        {"pair_id": usable["pair_id"].to_numpy(), "generation": replies["reply"], "error": replies["error"]}
    )


def pv4_score(
    pairs: pd.DataFrame,
    generations: pd.DataFrame,
    *,
    embedder: Any = None,
    cache: Any = True,
) -> pd.DataFrame:
    """PV4's scoring rule on PersonaFeedback: right when the generation is nearer ``chosen``.

    Cosine similarity under the embedder; a tie, an empty generation or a generation error counts as
    wrong (``failed`` marks the latter two).

    Args:
        pairs: The pairs frame.
        generations: ``pair_id, generation`` (and optionally ``error``), e.g. from
            :func:`generate_answers`.
        embedder: See :func:`pv4kit.related._common.encode`.
        cache: Embedding cache, passed to ``pv4kit.embeddings.models.embed_texts``.

    Returns:
        One row per pair with a generation: ``set, tier, pair_id, sim_chosen, sim_rejected, margin,
        failed, correct``.
    """
    merged = pairs.merge(generations, on="pair_id", how="inner", validate="one_to_one")
    if "error" not in merged.columns:
        merged["error"] = None
    gen = merged["generation"].fillna("").astype(str)
    failed = (gen.str.strip() == "") | merged["error"].notna()
    texts = pd.concat([gen, merged["chosen"], merged["rejected"]]).tolist()
    vectors = encode(texts, embedder=embedder, cache=cache)
    n = len(merged)
    g, c, r = vectors[:n], vectors[n : 2 * n], vectors[2 * n :]
    sim_c, sim_r = np.einsum("ij,ij->i", g, c), np.einsum("ij,ij->i", g, r)
    out = merged[[c for c in ("set", "tier", "user_id", "pair_id") if c in merged.columns]].copy()
    out["sim_chosen"], out["sim_rejected"] = sim_c.astype(float), sim_r.astype(float)
    out["margin"] = out["sim_chosen"] - out["sim_rejected"]
    out["failed"] = failed.to_numpy()
    out["correct"] = (out["margin"] > 0) & ~out["failed"]
    return out.reset_index(drop=True)


def pv4_score_accuracy(
    scores: pd.DataFrame, *, confidence: float = 0.95, interval: str = "wilson"
) -> pd.DataFrame:
    """Accuracy of :func:`pv4_score` per set x tier with intervals and the count of failed generations."""
    return accuracy_table(scores, extra_counts=["failed"], confidence=confidence, interval=interval)
