"""Distractor-audit figures: answer positions, length shortcuts, solver accuracy, similarity, leakage."""

from __future__ import annotations

from typing import Any

import pandas as pd

from pv4kit.analysis.plots.common import (
    CHANCE,
    COLORS,
    HEIGHT,
    MAX_ROWS,
    _chance,
    _extremes,
    _go,
    _layout,
    _with_embedder,
)


def answer_positions(positions: pd.DataFrame) -> Any:
    """Share of each correct letter against the uniform 20% (:func:`audit.position_audit`)."""
    go = _go()
    fig = go.Figure()
    for group, sub in positions.groupby("group", sort=False):
        p = sub["pvalue"].iloc[0]
        fig.add_bar(
            x=sub["letter"],
            y=sub["share"],
            name=f"{group} (chi-square p={p:.2g})",
            text=sub["n"],
            textposition="outside",
        )
    _chance(fig, label="uniform 20%")
    fig.update_yaxes(title="share of questions", tickformat=".0%")
    fig.update_xaxes(title="correct letter")
    return _layout(fig, "Answer position: where the reference sits", showlegend=True)


def length_bias(summary: pd.DataFrame) -> Any:
    """Rates of the length shortcuts with intervals (from :func:`pv4kit.analysis.audit.length_summary`)."""
    go = _go()
    labels = {
        "ref_longest": "reference uniquely longest (words)",
        "ref_shortest": "reference uniquely shortest (words)",
        "ref_longest_chars": "reference uniquely longest (chars)",
        "ref_shortest_chars": "reference uniquely shortest (chars)",
        "within_2_words": "all five within 2 words",
        "all_share_first_word": "all five share the first word",
        "all_share_first_two": "all five share the first two words",
    }
    s = summary.assign(label=summary["metric"].map(labels).fillna(summary["metric"]))
    fig = go.Figure(
        go.Bar(
            y=s["label"],
            x=s["rate"],
            orientation="h",
            marker_color=["#d95f02" if c == CHANCE else "#7570b3" for c in s["chance"].fillna(0)],
            error_x={
                "type": "data",
                "symmetric": False,
                "array": s["ci_high"] - s["rate"],
                "arrayminus": s["rate"] - s["ci_low"],
            },
        )
    )
    _chance(fig, axis="x", label="chance 20% (orange bars)")
    fig.update_xaxes(title="share of questions (95% CI, users resampled)", tickformat=".0%", range=[0, 1])
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "Length and structure of the reference vs its distractors", margin_l=250)


def word_spread(lengths: pd.DataFrame) -> Any:
    """Histogram of the word spread (longest minus shortest choice) against the 2-word rule."""
    go = _go()
    fig = go.Figure(go.Histogram(x=lengths["word_spread"], xbins={"size": 1}, marker_color="#7570b3"))
    fig.add_vline(x=2.5, line_dash="dash", line_color="grey", annotation_text="within 2 words")
    fig.update_xaxes(title="words between the longest and the shortest choice")
    fig.update_yaxes(title="questions")
    return _layout(fig, "Length spread of the five choices")


def accuracy_dots(
    accuracy: pd.DataFrame,
    *,
    title: str,
    chance: float = CHANCE,
    label: str = "solver",
    max_groups: int = MAX_ROWS,
) -> Any:
    """Accuracy with intervals per ``solver`` (a solver or a run) and ``group``, with the chance line.

    Takes the frame of :func:`pv4kit.analysis.audit.solver_accuracy` (``solver, group, accuracy, ci_low,
    ci_high, n``, and ``n_correct`` for the pooled row); groups go on the y axis when there is more than
    one. With more than ``max_groups`` groups only the best and worst (by mean accuracy over solvers) are
    drawn, with one pooled "others" row between them (no interval).
    """
    go = _go()
    acc = accuracy.copy()
    many = acc["group"].nunique() > 1
    n_others = 0
    if many and acc["group"].nunique() > max_groups:
        mean = acc.groupby("group", sort=False)["accuracy"].mean().sort_values(ascending=False)
        shown, others = _extremes(mean.index, keep=max_groups)
        n_others = len(others)
        rest = acc[acc["group"].isin(others)]
        pooled = rest.groupby("solver", sort=False)[["n", "n_correct"]].sum().reset_index()
        label = f"others ({n_others} groups, pooled)"
        pooled = pooled.assign(group=label, accuracy=pooled["n_correct"] / pooled["n"])
        pooled = pooled.assign(ci_low=pooled["accuracy"], ci_high=pooled["accuracy"])
        order = {
            g: i
            for i, g in enumerate(
                [*shown[: len(shown) - max_groups // 2], label, *shown[len(shown) - max_groups // 2 :]]
            )
        }
        acc = pd.concat([acc[acc["group"].isin(shown)], pooled], ignore_index=True)
        acc = acc.assign(_o=acc["group"].map(order)).sort_values(["_o"], kind="stable").drop(columns="_o")
    fig = go.Figure()
    for solver, sub in acc.groupby("solver", sort=False):
        fig.add_scatter(
            x=sub["accuracy"],
            y=sub["group"] if many else [solver] * len(sub),
            mode="markers",
            name=str(solver),
            marker={"size": 10},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": sub["ci_high"] - sub["accuracy"],
                "arrayminus": sub["accuracy"] - sub["ci_low"],
            },
            customdata=sub[["n"]],
            hovertemplate=f"{solver}<br>%{{y}}<br>accuracy %{{x:.1%}} (n=%{{customdata[0]}})<extra></extra>",
        )
    _chance(fig, chance, axis="x", label=f"chance {chance:.0%}")
    fig.update_xaxes(title="accuracy (95% CI, users resampled)", tickformat=".0%", range=[0, 1.02])
    fig.update_yaxes(title="" if many else label, autorange="reversed")
    if n_others:
        title = f"{title} (best and worst {max_groups} of {max_groups + n_others} groups)"
    height = max(HEIGHT, 22 * acc["group"].nunique() + 160) if many else HEIGHT
    return _layout(fig, _with_embedder(title, accuracy), height=height, margin_l=260 if many else 170)


def distractor_similarity(similarity: pd.DataFrame, *, near_duplicate: float | None = None) -> Any:
    """Histograms of reference-to-nearest-distractor and closest-pair cosine.

    Takes the frame of :func:`pv4kit.analysis.audit.similarity_audit`; the near-duplicate line defaults
    to the cut-off of the embedder it names (:func:`pv4kit.analysis.audit.common.cutoffs`).
    """
    from pv4kit.analysis.audit.common import cutoffs

    if near_duplicate is None:
        names = similarity["embedder"].dropna() if "embedder" in similarity else []
        near_duplicate = cutoffs(str(names.iloc[0]) if len(names) else "")["near_duplicate"]
    go = _go()
    fig = go.Figure()
    fig.add_histogram(
        x=similarity["ref_nearest_distractor"],
        name="reference vs nearest distractor",
        opacity=0.7,
        xbins={"size": 0.025},
    )
    fig.add_histogram(
        x=similarity["max_pair"], name="closest pair of any two choices", opacity=0.6, xbins={"size": 0.025}
    )
    fig.add_vline(
        x=near_duplicate,
        line_dash="dash",
        line_color="grey",
        annotation_text=f"near-duplicate {near_duplicate:.3g}",
        annotation_position="top left",
    )
    fig.update_layout(barmode="overlay", legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0})
    fig.update_xaxes(title="cosine similarity", range=[min(0.0, float(similarity["max_pair"].min())), 1])
    fig.update_yaxes(title="questions")
    return _layout(
        fig, _with_embedder("How close the distractors sit to the reference and to each other", similarity)
    )


def leakage(leak: pd.DataFrame) -> Any:
    """Chat overlap of references vs distractors per user (:func:`audit.leakage_audit`)."""
    go = _go()
    fig = go.Figure()
    for role, flag in (("reference", True), ("distractor", False)):
        sub = leak[leak["is_reference"] == flag]
        fig.add_box(
            x=sub["user_id"].astype(str), y=sub["overlap"], name=role, marker_color=COLORS[role], boxmean=True
        )
    fig.update_layout(boxmode="group")
    fig.update_xaxes(title="user", type="category")
    fig.update_yaxes(title="share of the choice's content words found in the chats", tickformat=".0%")
    return _layout(fig, "Lexical leakage: do the reference's words appear in the user's chats more often?")
