"""Shared helpers for the related benchmarks: source resolution, JSONL reading, intervals, embedding."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import iter_jsonl  # noqa: F401 - re-exported for the loaders
from pv4kit._options import merge_options
from pv4kit.dataset.hub import download_dataset, looks_like_hub_id
from pv4kit.scoring.accuracy import accuracy_table as scored_accuracy_table
from pv4kit.scoring.stats import wilson_interval  # noqa: F401 - re-exported
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


@dataclass(frozen=True)
class SummaryOptions:
    """The interval settings of :func:`accuracy_table`.

    Attributes:
        confidence: Interval level.
        chance: The chance level, copied into a ``chance`` column.
        interval: ``"wilson"`` (binomial, decisions independent) or ``"bootstrap"``
            (``pv4kit.scoring.stats.bootstrap_ci`` resampling ``cluster`` groups, e.g. personas that recur).
        cluster: Cluster column for the bootstrap.
        seed: Bootstrap seed.
    """

    confidence: float = 0.95
    chance: float = 0.5
    interval: str = "wilson"
    cluster: str = "user_id"
    seed: int = 0


def accuracy_table(
    frame: pd.DataFrame,
    *,
    by: Sequence[str] = ("set", "tier"),
    outer: Sequence[str] = (),
    correct: str = "correct",
    extra_counts: Sequence[str] = (),
    options: SummaryOptions | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """Accuracy per group with an interval, plus ``"all"`` summary rows.

    The numbers are :func:`pv4kit.scoring.accuracy.accuracy_table`'s, computed once per summary level.

    Within each ``outer`` group (e.g. a method or a judge order, never pooled) there is one row per
    ``by`` group, one per value of ``by[0]`` with the other keys ``"all"``, and one all-``"all"`` row.

    Args:
        frame: One row per decision with a boolean ``correct`` column.
        by: Grouping columns that get summary rows (e.g. ``set``, ``tier``).
        outer: Grouping columns that are never pooled.
        correct: The boolean column to average.
        extra_counts: Boolean columns to count per group (e.g. ``unparsed``).
        options: The interval settings (:class:`SummaryOptions`: Wilson 95%, chance 0.5).
        **overrides: Any field of :class:`SummaryOptions` by name (``confidence=``, ``chance=``,
            ``interval=``, ``cluster=``, ``seed=``), replacing the one in ``options``.

    Returns:
        Tidy frame ``*outer, *by, n, n_correct, accuracy, ci_low, ci_high, chance, *extra_counts``.
    """
    opts = merge_options(SummaryOptions, options, overrides, where="accuracy_table")
    interval = opts.interval
    if interval not in ("wilson", "bootstrap"):
        raise ValueError(f"interval must be 'wilson' or 'bootstrap', got {interval!r}")
    by, outer = list(by), list(outer)
    levels = [by, *([by[:1]] if len(by) > 1 else []), []]  # every group, per by[0], all pooled
    tables = []
    for keys in levels:
        table = scored_accuracy_table(
            frame,
            by=[*outer, *keys],
            value=correct,
            interval=interval,
            cluster=opts.cluster,
            seed=opts.seed,
            level=opts.confidence,
        ).drop(columns="metric")
        if extra_counts:
            counts = scored_accuracy_table(
                frame, by=[*outer, *keys], value=list(extra_counts), interval="none"
            )
            for col in extra_counts:
                table[col] = counts.loc[counts["metric"] == col, "n_correct"].to_numpy()
        tables.append(table.assign(chance=opts.chance, **{col: "all" for col in by[len(keys) :]}))
    out = pd.concat(tables, ignore_index=True)
    if outer:  # each outer group's rows together: its groups, then its summary rows
        out = out.sort_values(outer, kind="stable").reset_index(drop=True)
    columns = ["n", "n_correct", "accuracy", "ci_low", "ci_high", "chance"]
    return out[[*outer, *by, *columns, *extra_counts]]


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
        from pv4kit.embeddings.models import embed_texts, resolve_embedder

        embedder = resolve_embedder(embedder)
        vectors = np.asarray(embed_texts(texts, embedder=embedder, cache=cache), dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ValueError(f"embedder returned shape {vectors.shape} for {len(texts)} texts")
    return unit_rows(vectors)  # a zero row (an empty text under a toy embedder) stays zero
