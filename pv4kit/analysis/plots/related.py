"""Figures of the related benchmarks (notebook 08): PersonaFeedback and Re-Centering.

PersonaFeedback's reward-model accuracy and the Re-Centering stage-3 rating distributions.

They take the tidy frames of :mod:`pv4kit.related` (``reward_model_baseline``'s accuracy table,
``recenter.stage3_distribution``) without importing it: ``analysis`` and ``related`` stay independent.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pv4kit.analysis.plots.common import TEMPLATE


def _px():
    try:
        import plotly.express as px
    except ImportError:  # pragma: no cover - a declared dependency
        raise ImportError("figures need plotly: pip install plotly") from None
    return px


def reward_model_accuracy(accuracy: pd.DataFrame, *, chance: float = 0.5) -> Any:
    """Held-out accuracy per tier, method and set with intervals, against the pairwise chance line.

    Args:
        accuracy: ``set, tier, method, accuracy, ci_low, ci_high`` (the ``"all"`` tier rows are dropped).
        chance: The chance rate of a two-way choice.
    """
    plot = accuracy[accuracy["tier"] != "all"].assign(
        err_hi=lambda f: f["ci_high"] - f["accuracy"], err_lo=lambda f: f["accuracy"] - f["ci_low"]
    )
    fig = _px().bar(
        plot,
        x="tier",
        y="accuracy",
        color="method",
        barmode="group",
        facet_col="set",
        error_y="err_hi",
        error_y_minus="err_lo",
        title=f"PersonaFeedback: reward-model accuracy on the held-out half (chance {chance:g})",
        template=TEMPLATE,
    )
    fig.add_hline(y=chance, line_dash="dot")
    return fig


def rating_distribution(distribution: pd.DataFrame) -> Any:
    """Share of each rating per rater, one panel per kind (``rating, share, rater, kind``)."""
    return _px().bar(
        distribution,
        x="rating",
        y="share",
        color="rater",
        barmode="group",
        facet_row="kind",
        title="Stage 3: rating distributions per rater",
        template=TEMPLATE,
    )
