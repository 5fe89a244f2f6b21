"""Shared helpers for the related benchmarks: source resolution, choices, accuracy table, embedding."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.dataset.hub import download_dataset, looks_like_hub_id
from pv4kit.scoring.accuracy import accuracy_table as scored_accuracy_table
from pv4kit.vectors import unit_rows


def resolve_source(source: str | os.PathLike[str], *, repo_id: str) -> Path:
    """A local folder for ``source``: the folder itself, or a snapshot of the hub dataset id.

    Raises ``FileNotFoundError`` (naming ``repo_id`` as an example) if ``source`` is neither; a failed
    download raises the hub's one error that says how to download by hand.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    if not looks_like_hub_id(source):
        raise FileNotFoundError(f"source: no such folder {str(source)!r} (nor a hub id like {repo_id!r})")
    return download_dataset(str(source))


def check_choice(value: Any, name: str, allowed: Sequence[Any]) -> None:
    """Raise ``ValueError`` naming ``name``, the allowed values and ``value`` unless it is allowed."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def accuracy_table(
    frame: pd.DataFrame,
    *,
    outer: Sequence[str] = (),
    extra_counts: Sequence[str] = (),
    confidence: float = 0.95,
    chance: float = 0.5,
    interval: str = "wilson",
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy per set x tier with an interval, plus ``"all"`` rows, per ``outer`` group (never pooled).

    Rows per set x tier, per set (tier ``"all"``) and all pooled, from ``correct``; ``extra_counts`` columns
    are counted; ``interval`` is ``"wilson"`` or ``"bootstrap"`` (users resampled with ``seed``). Returns
    ``*outer, set, tier, n, n_correct, accuracy, ci_low, ci_high, chance, *extra_counts``.
    """
    tables = []
    for keys in (["set", "tier"], ["set"], []):  # every group, per set, all pooled
        group = [*outer, *keys]
        table = scored_accuracy_table(frame, by=group, interval=interval, seed=seed, level=confidence)
        table = table.drop(columns="metric").assign(chance=chance)
        if extra_counts:
            counts = scored_accuracy_table(frame, by=group, value=list(extra_counts), interval="none")
            for col in extra_counts:
                table[col] = counts.loc[counts["metric"] == col, "n_correct"].to_numpy()
        tables.append(table.assign(**{col: "all" for col in ("set", "tier")[len(keys) :]}))
    out = pd.concat(tables, ignore_index=True)
    if outer:  # each outer group's rows together: its groups, then its summary rows
        out = out.sort_values(list(outer), kind="stable").reset_index(drop=True)
    return out


def encode(texts: Sequence[str], *, embedder: Any = None, cache: Any = True) -> np.ndarray:
    """Embed ``texts`` as L2-normalised float32 rows (a zero row stays zero).

    ``embedder`` is ``None`` (the default of ``pv4kit.embeddings.models.get_embedder``), a name for it, an
    embedder (with ``encode`` and ``cache_key``) or a function ``list[str] -> array`` (tests); ``cache`` goes
    to ``pv4kit.embeddings.models.embed_texts`` (``True``: the default on-disk cache).
    """
    texts = [str(t) for t in texts]
    if callable(embedder) and not hasattr(embedder, "encode"):
        vectors = embedder(texts)
    else:
        from pv4kit.embeddings.models import embed_texts, resolve_embedder

        vectors = embed_texts(texts, embedder=resolve_embedder(embedder), cache=cache)
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ValueError(f"embedder returned shape {vectors.shape} for {len(texts)} texts")
    return unit_rows(vectors)
