"""Shared helpers for the related benchmarks: source resolution, JSONL reading, intervals, embedding."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import iter_jsonl  # noqa: F401 - re-exported for the loaders
from pv4kit.dataset.hub import download_dataset, looks_like_hub_id
from pv4kit.vectors import unit_rows

logger = logging.getLogger(__name__)


def resolve_source(source: str | os.PathLike[str], *, repo_id: str) -> Path:
    """A local folder for ``source``: the folder itself, or a snapshot of a Hugging Face dataset id.

    Args:
        source: A local directory, or a hub dataset id such as ``repo_id`` (``owner/name``).
        repo_id: The dataset's canonical hub id, used in the error message.

    Returns:
        The local directory holding the release.

    Raises:
        FileNotFoundError: If ``source`` is neither an existing folder nor a hub id.
        RuntimeError: If the hub download fails (offline, ``HF_HUB_OFFLINE=1``, unknown id); the
            message says how to download by hand.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    text = str(source)
    if not looks_like_hub_id(source):
        raise FileNotFoundError(f"source: no such folder {text!r} (nor a hub id like {repo_id!r})")
    return download_dataset(text)


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (``(nan, nan)`` when ``n == 0``)."""
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def accuracy_table(
    frame: pd.DataFrame,
    *,
    by: Sequence[str] = ("set", "tier"),
    outer: Sequence[str] = (),
    correct: str = "correct",
    extra_counts: Sequence[str] = (),
    confidence: float = 0.95,
    chance: float = 0.5,
    interval: str = "wilson",
    cluster: str = "user_id",
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy per group with an interval, plus ``"all"`` summary rows.

    Within each ``outer`` group (e.g. a method or a judge order, never pooled) there is one row per
    ``by`` group, one per value of ``by[0]`` with the other keys ``"all"``, and one all-``"all"`` row.

    Args:
        frame: One row per decision with a boolean ``correct`` column.
        by: Grouping columns that get summary rows (e.g. ``set``, ``tier``).
        outer: Grouping columns that are never pooled.
        correct: The boolean column to average.
        extra_counts: Boolean columns to count per group (e.g. ``unparsed``).
        confidence: Interval level.
        chance: The chance level, copied into a ``chance`` column.
        interval: ``"wilson"`` (binomial, decisions independent) or ``"bootstrap"``
            (``pv4kit.scoring.stats.bootstrap_ci`` resampling ``cluster`` groups, e.g. personas that recur).
        cluster: Cluster column for the bootstrap.
        seed: Bootstrap seed.

    Returns:
        Tidy frame ``*outer, *by, n, n_correct, accuracy, ci_low, ci_high, chance, *extra_counts``.
    """
    if interval not in ("wilson", "bootstrap"):
        raise ValueError(f"interval must be 'wilson' or 'bootstrap', got {interval!r}")
    by, outer = list(by), list(outer)
    outer_groups = frame.groupby(outer, sort=True) if outer else [((), frame)]
    rows = []
    for okey, oframe in outer_groups:
        okey = okey if isinstance(okey, tuple) else (okey,)
        groups: list[tuple[tuple[Any, ...], pd.DataFrame]] = []
        for key, part in oframe.groupby(by, sort=True, dropna=False):
            groups.append((key if isinstance(key, tuple) else (key,), part))
        if len(by) > 1:
            for key, part in oframe.groupby(by[0], sort=True):
                groups.append(((key, *["all"] * (len(by) - 1)), part))
        groups.append((tuple(["all"] * len(by)), oframe))
        for key, part in groups:
            n = len(part)
            k = int(part[correct].astype(bool).sum())
            if interval == "bootstrap" and n:
                from pv4kit.scoring.stats import bootstrap_ci

                ci = bootstrap_ci(
                    part.assign(_c=part[correct].astype(float)),
                    value="_c",
                    cluster=cluster,
                    seed=seed,
                    level=confidence,
                )
                lo, hi = float(ci["low"]), float(ci["high"])
            else:
                lo, hi = wilson_interval(k, n, confidence=confidence)
            row = dict(zip(outer, okey, strict=True))
            row.update(zip(by, key, strict=True))
            row.update(
                n=n, n_correct=k, accuracy=k / n if n else float("nan"), ci_low=lo, ci_high=hi, chance=chance
            )
            for col in extra_counts:
                row[col] = int(part[col].astype(bool).sum())
            rows.append(row)
    return pd.DataFrame(rows)


def encode(texts: Sequence[str], *, embedder: Any = None, cache: Any = True) -> np.ndarray:
    """Embed ``texts`` as L2-normalised float32 rows.

    Args:
        texts: The texts.
        embedder: ``None`` (``pv4kit.embeddings.models.get_embedder()``'s default), a name for
            ``get_embedder`` (``"minilm"``), an embedder from ``pv4kit.embeddings.models`` (anything with
            ``encode`` and ``cache_key``), or a plain function ``list[str] -> array`` (handy in tests).
        cache: Passed to ``pv4kit.embeddings.models.embed_texts`` (``True``: the default on-disk cache).

    Returns:
        ``len(texts) x dim`` float32 array with unit-norm rows.
    """
    texts = [str(t) for t in texts]
    if callable(embedder) and not hasattr(embedder, "encode"):
        vectors = np.asarray(embedder(texts), dtype=np.float32)
    else:
        from pv4kit.embeddings.models import embed_texts, get_embedder

        if embedder is None or isinstance(embedder, str):
            embedder = get_embedder(embedder)
        vectors = np.asarray(embed_texts(texts, embedder=embedder, cache=cache), dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ValueError(f"embedder returned shape {vectors.shape} for {len(texts)} texts")
    return unit_rows(vectors)  # a zero row (an empty text under a toy embedder) stays zero
