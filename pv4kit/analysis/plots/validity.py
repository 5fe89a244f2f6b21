"""Scorer-validity figures from :func:`pv4kit.scoring.validity.validity`'s tables."""

from __future__ import annotations

from typing import Any

import pandas as pd

from pv4kit.analysis.plots.common import _chance, _go, _layout


def _errors(frame: pd.DataFrame, value: str = "value") -> dict[str, Any]:
    return {
        "type": "data",
        "array": (frame["ci_high"] - frame[value]).tolist(),
        "arrayminus": (frame[value] - frame["ci_low"]).tolist(),
    }


def _short(label: str, width: int = 40) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def margin_curve(margins: pd.DataFrame, *, title: str | None = None) -> Any:
    """Accuracy (and each judge's agreement with the scorer) by bins of the scorer's margin.

    Args:
        margins: ``margins.csv`` (:func:`~pv4kit.scoring.validity.margin_table`), optionally with a ``run``
            column (one line per run and metric).
        title: Figure title.
    """
    go = _go()
    fig = go.Figure()
    frame = margins.assign(run=margins["run"] if "run" in margins else "")
    for (run, metric), t in frame.groupby(["run", "metric"], sort=False):
        name = f"{run}: {metric}" if run else str(metric)
        fig.add_scatter(
            x=t["bin"],
            y=t["value"],
            error_y=_errors(t),
            mode="lines+markers",
            name=name,
            customdata=t[["n", "share"]].to_numpy(),
            hovertemplate="%{x}: %{y:.1%} (n=%{customdata[0]}, %{customdata[1]:.1%} of questions)",
        )
    _chance(fig)
    fig.update_xaxes(title="scorer margin (top-1 minus top-2 cosine)", type="category")
    fig.update_yaxes(title="share (user-bootstrap 95% CI)", range=[0, 1.05], tickformat=".0%")
    return _layout(fig, title or "How decided is the scorer? Accuracy and judge agreement by margin")


def scorer_agreement(agreement: pd.DataFrame, sensitivity: pd.DataFrame | None = None) -> Any:
    """Each judge's agreement, NONE rate and accuracy under its picks vs the scorer's, with intervals.

    With ``sensitivity``, the share of predictions each rescoring flips is drawn too.

    Args:
        agreement: ``agreement.csv`` (:func:`~pv4kit.scoring.validity.agreement_table`).
        sensitivity: ``sensitivity.csv`` (:func:`~pv4kit.scoring.validity.sensitivity_table`).
    """
    go = _go()
    shown = {
        "agreement": "judge agrees with the scorer",
        "none_rate": "judge reads no candidate (NONE)",
        "judge_accuracy": "accuracy under the judge's picks",
        "scorer_accuracy": "accuracy under the scorer's picks",
    }
    rows = agreement[(agreement["scope"] == "all") & agreement["metric"].isin(list(shown))]
    fig = go.Figure()
    for judge, t in rows.groupby("judge", sort=False):
        fig.add_scatter(
            x=t["value"],
            y=t["metric"].map(shown),
            error_x=_errors(t),
            mode="markers",
            name=str(judge),
            marker_size=10,
        )
    if sensitivity is not None and "flip_rate" in sensitivity:
        s = sensitivity.dropna(subset=["flip_rate"])
        labels = [_short(f"flips: {v}") for v in s["variant"]]
        fig.add_scatter(
            x=s["flip_rate"],
            y=labels,
            mode="markers",
            name="rescored",
            marker_symbol="diamond",
            marker_size=10,
        )
    fig.update_xaxes(title="share (user-bootstrap 95% CI)", range=[0, 1.02], tickformat=".0%")
    fig.update_yaxes(title="")
    return _layout(fig, "Scorer validity: the judge's reading and the rescorings", margin_l=240)
