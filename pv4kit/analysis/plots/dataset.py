"""Dataset figures: questions per category, category names grouped across users, the category map."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pv4kit.analysis.plots.common import HEIGHT, MAX_LABELS, MAX_ROWS, _go, _layout, _with_embedder


def category_balance(questions: pd.DataFrame) -> Any:
    """Questions per category for each user (stacked bars; categories are the user's own)."""
    go = _go()
    q = questions.assign(category_name=questions["category_name"].fillna("(unknown)"))
    counts = (
        q.groupby(["user_id", "category", "category_name"], dropna=False).size().rename("n").reset_index()
    )
    users = [str(u) for u in sorted(counts["user_id"].unique())]
    fig = go.Figure()
    for cat, sub in counts.groupby("category", dropna=False, sort=True):
        fig.add_bar(
            x=sub["user_id"].astype(str),
            y=sub["n"],
            name=f"category {cat}",
            customdata=sub[["category_name"]],
            hovertemplate="user %{x}<br>%{customdata[0]}<br>%{y} questions<extra></extra>",
        )
    fig.update_layout(barmode="stack", showlegend=False)
    fig.update_xaxes(title="user", type="category", categoryorder="array", categoryarray=users)
    fig.update_yaxes(title="questions")
    return _layout(fig, "Questions per category, per user (each colour is one of the user's categories)")


def category_groups(categories: pd.DataFrame, *, top: int = 20) -> Any:
    """Questions per group of similar category names across users (:func:`~audit.category_groups`)."""
    go = _go()
    per = categories.groupby(["group_label", "user_id"]).agg(n=("n_questions", "sum")).reset_index()
    totals = per.groupby("group_label")["n"].sum().sort_values(ascending=False)
    keep = totals.index[:top].tolist()
    fig = go.Figure()
    for uid, sub in per[per["group_label"].isin(keep)].groupby("user_id", sort=True):
        fig.add_bar(y=sub["group_label"], x=sub["n"], name=f"user {uid}", orientation="h")
    fig.update_layout(barmode="stack")
    fig.update_yaxes(categoryorder="array", categoryarray=keep[::-1], title="")
    fig.update_xaxes(title="questions")
    n_users = categories["user_id"].nunique()
    title = f"Category names grouped by embedding across {n_users} users (top {min(top, len(totals))} groups)"
    return _layout(
        fig,
        _with_embedder(title, categories),
        height=max(HEIGHT, 24 * len(keep) + 140),
    )


def category_map(categories: pd.DataFrame, *, label_points: bool | None = None) -> Any:
    """UMAP of category-name embeddings (columns ``x, y``), each point's name shown on hover.

    Groups with two or more names (similar categories of different users) get a colour and a legend
    entry; names in a group of their own are grey.

    Args:
        categories: One row per category (:func:`pv4kit.analysis.audit.category_groups` with ``x, y``).
        label_points: Print each name beside its point; default only up to ``MAX_LABELS`` points
            (at release size, 1,490 names, labels would print over each other: hover carries them).
    """
    go = _go()
    if label_points is None:
        label_points = len(categories) <= MAX_LABELS
    fig = go.Figure()
    sizes = categories["group_label"].map(categories["group_label"].value_counts())
    for multi in (False, True):
        part = categories[(sizes >= 2) == multi]
        groups = part.groupby("group_label", sort=True) if multi else [("other (a group of one)", part)]
        for label, sub in groups:
            if sub.empty:
                continue
            fig.add_scatter(
                x=sub["x"],
                y=sub["y"],
                mode="markers+text" if label_points else "markers",
                name=str(label)[:45],
                text=sub["category_name"].str.slice(0, 32),
                textposition="top center",
                textfont={"size": 9, "color": "#555"},
                marker={"size": 10, "opacity": 0.9, **({} if multi else {"color": "#bbbbbb"})},
                customdata=np.stack([sub["category_name"], sub["user_id"].astype(str)], axis=1),
                hovertemplate="%{customdata[0]}<br>user %{customdata[1]}<extra></extra>",
            )
    from plotly.colors import qualitative

    pad = lambda v: [float(v.min() - 0.12 * np.ptp(v)), float(v.max() + 0.12 * np.ptp(v))]  # noqa: E731
    fig.update_xaxes(title="UMAP 1", showticklabels=False, zeroline=False, range=pad(categories["x"]))
    fig.update_yaxes(title="UMAP 2", showticklabels=False, zeroline=False, range=pad(categories["y"]))
    fig.update_layout(colorway=qualitative.Dark24)
    n_groups = int((categories["group_label"].value_counts() >= 2).sum())
    fig.update_layout(showlegend=n_groups <= MAX_ROWS)
    return _layout(
        fig,
        _with_embedder(
            "Category names on a UMAP of their embeddings (colour: names grouped across users)", categories
        )
        + ("" if label_points else "; hover for names"),
        width=1100,
        height=750,
    )
