"""The hard subset's composition against the other questions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from pv4kit.analysis.plots.common import MAX_ROWS, _go, _layout


def hard_composition(
    frame: pd.DataFrame,
    *,
    by: Sequence[str] = ("user_id", "answer_letter", "ref_words", "group_label", "category_name"),
) -> Any:
    """Composition of the hard subset against the other questions, one panel per column in ``by``.

    Each panel shows, for every value of the column, its share among hard and among non-hard questions.
    ``frame`` needs ``hard`` and the ``by`` columns (e.g. :func:`pv4kit.analysis.audit.length_audit`'s
    output).
    """
    _go()
    from plotly.subplots import make_subplots

    by = [b for b in by if b in frame.columns]
    if "group_label" in by and "category_name" in by:  # the grouped names say more than 50 raw ones
        by.remove("category_name")
    titles = {
        "user_id": "user",
        "answer_letter": "correct letter",
        "ref_words": "reference length (words)",
        "category_name": "category",
        "word_spread": "word spread",
        "group_label": "category group (similar names across users)",
    }
    fig = make_subplots(
        rows=len(by),
        cols=1,
        subplot_titles=[titles.get(b, b) for b in by],
        vertical_spacing=0.12 if len(by) < 4 else 0.07,
    )
    hard = frame["hard"].fillna(False).astype(bool)
    for i, col in enumerate(by, start=1):
        values = frame[col]
        if col in ("category_name", "group_label"):
            values = values.astype(str).str.slice(0, 28)
            # the groups with the largest share among hard or among other questions; the rest pooled
            shares = [values[m].value_counts(normalize=True) for m in (hard, ~hard)]
            weight = pd.concat(shares, axis=1).max(axis=1)
            weight = weight.sort_values(ascending=False, kind="stable")
            if len(weight) > MAX_ROWS:
                rest = f"others ({len(weight) - MAX_ROWS + 1})"
                values = values.where(values.isin(weight.index[: MAX_ROWS - 1]), rest)
                weight = pd.concat([weight.iloc[: MAX_ROWS - 1], pd.Series({rest: -1.0})])
        order = sorted(values.dropna().unique(), key=lambda v: (isinstance(v, str), v))
        if col in ("category_name", "group_label"):
            order = [v for v in weight.index if v in set(order)]
        for label, mask, color in (("hard", hard, "#d95f02"), ("not hard", ~hard, "#7570b3")):
            share = values[mask].value_counts(normalize=True).reindex(order, fill_value=0)
            fig.add_bar(
                x=share.index.astype(str),
                y=share.to_numpy(),
                name=f"{label} (n={int(mask.sum())})",
                marker_color=color,
                showlegend=i == 1,
                legendgroup=label,
                row=i,
                col=1,
            )
        fig.update_yaxes(tickformat=".1~%", row=i, col=1)
        many = len(order) > 40  # e.g. 149 users: upright labels would run into each other
        angle = -60 if "category" in titles.get(col, "") else (-90 if many else 0)
        fig.update_xaxes(type="category", row=i, col=1, tickangle=angle)
    fig.update_layout(barmode="group")
    title = "Hard subset vs the other questions (share of each group)"
    if not hard.any():
        title += ": no question is marked hard in this data"
    fig = _layout(fig, title, height=300 * len(by) + 220)
    if by and "category" in titles.get(by[-1], ""):
        fig.update_layout(margin_b=190)
    return fig
