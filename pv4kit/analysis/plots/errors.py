"""Error-analysis figures of scored runs: paired comparison, wrong positions, margins, maps, per user."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pv4kit.analysis.plots.common import (
    COLORS,
    HEIGHT,
    MAX_ROWS,
    WIDTH,
    _chance,
    _extremes,
    _go,
    _layout,
    _with_embedder,
)
from pv4kit.schema import LETTERS


def paired_comparison(
    table: pd.DataFrame, *, name_a: str = "A", name_b: str = "B", max_categories: int = MAX_ROWS - 2
) -> Any:
    """Accuracy difference A - B with intervals per scope (from :func:`pv4kit.scoring.stats.compare`).

    With more than ``max_categories`` category rows (one per user's category at release size) only the
    largest differences either way are drawn, with one pooled "others" row (question-weighted mean
    difference, no interval) between them; hover gives each row's counts.
    """
    go = _go()
    n_others = 0
    cats = table[table["scope"] == "category"]
    if len(cats) > max_categories:
        shown, others = _extremes(
            cats.sort_values("diff", ascending=False, kind="stable").index, keep=max_categories
        )
        rest = cats.loc[others]
        n_others = len(others)
        weights = rest["n"].to_numpy(dtype=float)
        pooled = float(np.average(rest["diff"], weights=weights)) if weights.sum() else np.nan
        other_row = pd.DataFrame(
            [
                {
                    "scope": "others",
                    "group": f"others ({n_others} categories, pooled)",
                    "n": int(rest["n"].sum()),
                    "diff": pooled,
                    "diff_low": pooled,
                    "diff_high": pooled,
                    "a_only": int(rest["a_only"].sum()),
                    "b_only": int(rest["b_only"].sum()),
                    "mcnemar_p": None,
                }
            ]
        )
        head = shown[: len(shown) - max_categories // 2]
        tail = shown[len(shown) - max_categories // 2 :]
        table = pd.concat(
            [table[table["scope"] != "category"], cats.loc[head], other_row, cats.loc[tail]],
            ignore_index=True,
        )
    t = table.assign(
        label=[
            f"{s}: {g}" if s == "category" else str(g)
            for s, g in zip(table["scope"], table["group"], strict=True)
        ]
    )
    fig = go.Figure(
        go.Scatter(
            x=t["diff"],
            y=t["label"],
            mode="markers",
            marker={
                "size": 10,
                "color": ["#d95f02" if p is not None and p < 0.05 else "#7570b3" for p in t["mcnemar_p"]],
            },
            error_x={
                "type": "data",
                "symmetric": False,
                "array": t["diff_high"] - t["diff"],
                "arrayminus": t["diff"] - t["diff_low"],
            },
            customdata=t[["n", "a_only", "b_only", "mcnemar_p"]],
            hovertemplate="%{y}<br>diff %{x:.1%} (n=%{customdata[0]})<br>only A %{customdata[1]}, only B "
            "%{customdata[2]}<br>McNemar p=%{customdata[3]:.3g}<extra></extra>",
        )
    )
    fig.add_vline(x=0, line_color="grey")
    fig.update_xaxes(title=f"accuracy {name_a} minus {name_b} (95% CI, users resampled)", tickformat=".0%")
    fig.update_yaxes(autorange="reversed")
    more = f"; {max_categories} largest of {max_categories + n_others} categories" if n_others else ""
    return _layout(
        fig,
        f"Paired comparison: {name_a} vs {name_b} (orange: McNemar p < 0.05{more})",
        height=max(HEIGHT, 22 * len(t) + 160),
        margin_l=260,
    )


def wrong_position(predictions: pd.DataFrame) -> Any:
    """When a run is wrong, which letter wins? Shares of predicted letters among wrong answers, per run."""
    go = _go()
    wrong = predictions[~predictions["correct"].astype(bool)]
    fig = go.Figure()
    for run, sub in wrong.groupby("run", sort=False):
        share = sub["predicted_letter"].value_counts(normalize=True).reindex(list(LETTERS), fill_value=0)
        fig.add_bar(x=share.index, y=share.to_numpy(), name=f"{run} (n={len(sub)})")
    _chance(fig, label="uniform 20%")
    fig.update_xaxes(title="letter of the winning distractor")
    fig.update_yaxes(title="share of wrong answers", tickformat=".0%")
    return _layout(fig, "Which position wins when the answer is wrong")


def margin_distribution(predictions: pd.DataFrame) -> Any:
    """Margins (best minus second-best similarity) of correct vs wrong predictions, per run."""
    go = _go()
    fig = go.Figure()
    for label, flag in (("correct", True), ("wrong", False)):
        sub = predictions[predictions["correct"].astype(bool) == flag]
        fig.add_violin(
            x=sub["run"],
            y=sub["margin"],
            name=label,
            side="positive" if flag else "negative",
            line_color=COLORS[label],
            meanline_visible=True,
            points=False,
            spanmode="hard",
        )
    fig.update_layout(violinmode="overlay", violingap=0.1)
    fig.update_xaxes(title="run")
    fig.update_yaxes(title="margin (cosine, best minus second best)")
    return _layout(fig, "Scorer margins: how decisive are correct and wrong answers?")


def question_map(frame: pd.DataFrame, *, seed: int = 0) -> Any:
    """Question embeddings on a UMAP (columns ``x, y``) coloured by correctness, one panel per run.

    Each panel is one trace whose points are drawn in a seeded random order, so neither colour is
    always on top: where thousands of questions overlap (release size), the mix of colours shows the
    share correct instead of whichever class was drawn last. Panel titles give each run's accuracy;
    two legend-only traces name the colours; hover shows the question and whether it was right.
    """
    _go()
    import numpy as np
    from plotly.subplots import make_subplots

    runs = list(dict.fromkeys(frame["run"]))
    cols = min(len(runs), 3)
    rows = -(-len(runs) // cols)
    correct = frame["correct"].astype(bool)
    titles = [f"{run} ({correct[frame['run'] == run].mean():.0%} correct)" for run in runs]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.04)
    per_panel = len(frame) / max(len(runs), 1)
    size, opacity = (7, 0.8) if per_panel <= 1000 else ((4, 0.6) if per_panel <= 5000 else (3, 0.5))
    rng = np.random.default_rng(seed)
    for i, run in enumerate(runs):
        sub = frame[frame["run"] == run]
        sub = sub.iloc[rng.permutation(len(sub))]
        ok = sub["correct"].astype(bool)
        label = np.where(ok, "correct", "wrong")
        text = sub["question"].str.slice(0, 90) if "question" in sub else pd.Series("", index=sub.index)
        fig.add_scatter(
            x=sub["x"].to_numpy(),
            y=sub["y"].to_numpy(),
            mode="markers",
            name=run,
            showlegend=False,
            marker={  # 1/0 on a two-colour scale: plotly validates 20k colour strings one by one (~1.3 s)
                "color": ok.to_numpy().astype(np.int8),
                "colorscale": [[0, COLORS["wrong"]], [1, COLORS["correct"]]],
                "cmin": 0,
                "cmax": 1,
                "showscale": False,
                "size": size,
                "opacity": opacity,
            },
            customdata=label,
            text=text.to_numpy(dtype=object),
            hovertemplate="%{text}<br>%{customdata}<extra></extra>",
            row=i // cols + 1,
            col=i % cols + 1,
        )
    for label in ("correct", "wrong"):  # the legend only
        fig.add_scatter(
            x=[None], y=[None], mode="markers", name=label, marker={"color": COLORS[label], "size": 9}
        )
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False)
    return _layout(
        fig,
        _with_embedder("Questions on a UMAP of their embeddings, coloured by correctness", frame),
        height=420 * rows + 80,
        width=max(WIDTH, 380 * cols),
    )


def per_user_accuracy(predictions: pd.DataFrame) -> Any:
    """Accuracy per user for each run (dots), with the 20% chance line."""
    go = _go()
    acc = predictions.groupby(["run", "user_id"])["correct"].agg(["mean", "size"]).reset_index()
    fig = go.Figure()
    for run, sub in acc.groupby("run", sort=False):
        fig.add_scatter(
            x=sub["user_id"].astype(str),
            y=sub["mean"],
            mode="markers+lines",
            name=str(run),
            customdata=sub[["size"]],
            marker={"size": 9},
            hovertemplate="user %{x}: %{y:.1%} of %{customdata[0]}<extra></extra>",
        )
    _chance(fig)
    fig.update_xaxes(title="user", type="category")
    fig.update_yaxes(title="accuracy", tickformat=".0%", range=[0, 1.02])
    return _layout(fig, "Accuracy per user")
