"""Figure builders: one function per figure, a tidy frame in and a plotly ``Figure`` out.

Frames come from :mod:`pv4kit.analysis.audit`, :func:`pv4kit.scoring.stats.compare`, scorer validity and
scored runs' predictions (stacked with a ``run`` column); the maps take ``x, y`` from ``projection``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.analysis.audit import CHANCE, cutoffs, embedder_names
from pv4kit.analysis.projection import umap_2d  # noqa: F401  (plots.umap_2d)
from pv4kit.schema import LETTERS

TEMPLATE = "plotly_white"
WIDTH, HEIGHT = 900, 500
_DASHED = {"line_dash": "dash", "line_color": "grey"}  # reference lines: chance, cut-offs
COLORS = {"correct": "#1b9e77", "wrong": "#d95f02", "reference": "#1b9e77", "distractor": "#7570b3"}


def _figure() -> Any:
    import plotly.graph_objects as go

    return go.Figure()


def _layout(
    fig: Any, title: str, *, width: int = WIDTH, height: int = HEIGHT, margin_l: int = 70, **kwargs: Any
) -> Any:
    fig.update_layout(
        template=TEMPLATE,
        title={"text": title, "x": 0.01, "xanchor": "left"},
        width=width,
        height=height,
        margin={"l": margin_l, "r": 30, "t": 70, "b": 60},
        font={"size": 13},
        legend={"title": {"text": ""}},
        **kwargs,
    )
    return fig


def _with_embedder(title: str, frame: Any) -> str:
    """``title`` plus the embedder(s) ``frame`` names in its ``embedder`` column, when it has one."""
    names = embedder_names(frame)
    return f"{title} (embedder {names})" if names else title


def _chance(fig: Any, value: float = CHANCE, *, axis: str = "y", label: str = "chance 20%") -> None:
    if axis == "y":
        fig.add_hline(y=value, annotation_position="top left", annotation_text=label, **_DASHED)
    else:
        fig.add_vline(x=value, annotation_position="top right", annotation_text=label, **_DASHED)


MAX_ROWS = 30  # rows of a per-group figure before it keeps the top and bottom groups and an "others" row
MAX_LABELS = 60  # points of a map before their text labels give way to hover only


def _extremes(order: Sequence[Any], *, keep: int) -> tuple[list[Any], list[Any], list[Any]]:
    """``(head, others, tail)``: ``order``'s first ``keep - keep // 2``, the rest, its last ``keep // 2``."""
    order = list(order)
    if len(order) <= keep:
        return order, [], []
    head, tail = keep - keep // 2, len(order) - keep // 2
    return order[:head], order[head:tail], order[tail:]


def category_balance(questions: pd.DataFrame) -> Any:
    """Questions per category for each user (stacked bars; categories are the user's own)."""
    q = questions.assign(category_name=questions["category_name"].fillna("(unknown)"))
    counts = q.groupby(["user_id", "category", "category_name"], dropna=False).size().reset_index(name="n")
    users = [str(u) for u in sorted(counts["user_id"].unique())]
    fig = _figure()
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
    per = categories.groupby(["group_label", "user_id"]).agg(n=("n_questions", "sum")).reset_index()
    totals = per.groupby("group_label")["n"].sum().sort_values(ascending=False)
    keep = totals.index[:top].tolist()
    fig = _figure()
    for uid, sub in per[per["group_label"].isin(keep)].groupby("user_id", sort=True):
        fig.add_bar(y=sub["group_label"], x=sub["n"], name=f"user {uid}", orientation="h")
    fig.update_layout(barmode="stack")
    fig.update_yaxes(categoryorder="array", categoryarray=keep[::-1], title="")
    fig.update_xaxes(title="questions")
    n_users = categories["user_id"].nunique()
    title = f"Category names grouped by embedding across {n_users} users (top {min(top, len(totals))} groups)"
    return _layout(fig, _with_embedder(title, categories), height=max(HEIGHT, 24 * len(keep) + 140))


def category_map(categories: pd.DataFrame, *, label_points: bool | None = None) -> Any:
    """UMAP of category names (:func:`~pv4kit.analysis.projection.with_category_umap`), names on hover.

    Groups of two or more names get a colour; names in a group of their own are grey. ``label_points``
    prints each name beside its point (default: only up to ``MAX_LABELS`` points).
    """
    if label_points is None:
        label_points = len(categories) <= MAX_LABELS
    fig = _figure()
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
    n_groups = int((categories["group_label"].value_counts() >= 2).sum())
    fig.update_layout(colorway=qualitative.Dark24, showlegend=n_groups <= MAX_ROWS)
    title = "Category names on a UMAP of their embeddings (colour: names grouped across users)"
    title = _with_embedder(title, categories) + ("" if label_points else "; hover for names")
    return _layout(fig, title, width=1100, height=750)


def answer_positions(positions: pd.DataFrame) -> Any:
    """Share of each correct letter against the uniform 20% (:func:`audit.position_audit`)."""
    fig = _figure()
    for group, sub in positions.groupby("group", sort=False):
        name = f"{group} (chi-square p={sub['pvalue'].iloc[0]:.2g})"
        fig.add_bar(x=sub["letter"], y=sub["share"], name=name, text=sub["n"], textposition="outside")
    _chance(fig, label="uniform 20%")
    fig.update_yaxes(title="share of questions", tickformat=".0%")
    fig.update_xaxes(title="correct letter")
    return _layout(fig, "Answer position: where the reference sits", showlegend=True)


def length_bias(summary: pd.DataFrame) -> Any:
    """Rates of the length shortcuts with intervals (from :func:`pv4kit.analysis.audit.length_summary`)."""
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
    colors = ["#d95f02" if c == CHANCE else "#7570b3" for c in s["chance"].fillna(0)]
    fig = _figure()
    errors = _ci(s, "rate", symmetric=False)
    fig.add_bar(y=s["label"], x=s["rate"], orientation="h", marker_color=colors, error_x=errors)
    _chance(fig, axis="x", label="chance 20% (orange bars)")
    fig.update_xaxes(title="share of questions (95% CI, users resampled)", tickformat=".0%", range=[0, 1])
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "Length and structure of the reference vs its distractors", margin_l=250)


def word_spread(lengths: pd.DataFrame) -> Any:
    """Histogram of the word spread (longest minus shortest choice) against the 2-word rule."""
    fig = _figure()
    fig.add_histogram(x=lengths["word_spread"], xbins={"size": 1}, marker_color="#7570b3")
    fig.add_vline(x=2.5, annotation_text="within 2 words", **_DASHED)
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

    Takes :func:`pv4kit.analysis.audit.solver_accuracy`'s frame. With more than ``max_groups`` groups only
    the best and worst (by mean accuracy) are drawn, with one pooled "others" row between them.
    """
    acc = accuracy.copy()
    many = acc["group"].nunique() > 1
    if many and acc["group"].nunique() > max_groups:
        mean = acc.groupby("group", sort=False)["accuracy"].mean().sort_values(ascending=False)
        head, others, tail = _extremes(mean.index, keep=max_groups)
        pooled = acc[acc["group"].isin(others)].groupby("solver", sort=False)[["n", "n_correct"]].sum()
        other = f"others ({len(others)} groups, pooled)"
        pooled = pooled.reset_index().assign(group=other, accuracy=lambda f: f["n_correct"] / f["n"])
        pooled = pooled.assign(ci_low=pooled["accuracy"], ci_high=pooled["accuracy"])
        order = {g: i for i, g in enumerate([*head, other, *tail])}
        acc = pd.concat([acc[acc["group"].isin(head + tail)], pooled], ignore_index=True)
        acc = acc.iloc[acc["group"].map(order).argsort(kind="stable")]
        title = f"{title} (best and worst {max_groups} of {max_groups + len(others)} groups)"
    fig = _figure()
    for solver, sub in acc.groupby("solver", sort=False):
        fig.add_scatter(
            x=sub["accuracy"],
            y=sub["group"] if many else [solver] * len(sub),
            mode="markers",
            name=str(solver),
            marker={"size": 10},
            error_x=_ci(sub, "accuracy", symmetric=False),
            customdata=sub[["n"]],
            hovertemplate=f"{solver}<br>%{{y}}<br>accuracy %{{x:.1%}} (n=%{{customdata[0]}})<extra></extra>",
        )
    _chance(fig, chance, axis="x", label=f"chance {chance:.0%}")
    fig.update_xaxes(title="accuracy (95% CI, users resampled)", tickformat=".0%", range=[0, 1.02])
    fig.update_yaxes(title="" if many else label, autorange="reversed")
    height = max(HEIGHT, 22 * acc["group"].nunique() + 160) if many else HEIGHT
    return _layout(fig, _with_embedder(title, accuracy), height=height, margin_l=260 if many else 170)


def distractor_similarity(similarity: pd.DataFrame, *, near_duplicate: float | None = None) -> Any:
    """Histograms of reference-to-nearest-distractor and closest-pair cosine.

    Takes the frame of :func:`pv4kit.analysis.audit.similarity_audit`; the near-duplicate line defaults
    to the cut-off of the embedder it names (:func:`pv4kit.analysis.audit.cutoffs`).
    """
    if near_duplicate is None:
        names = similarity["embedder"].dropna() if "embedder" in similarity else []
        near_duplicate = cutoffs(str(names.iloc[0]) if len(names) else "")["near_duplicate"]
    fig = _figure()
    for column, name, opacity in (
        ("ref_nearest_distractor", "reference vs nearest distractor", 0.7),
        ("max_pair", "closest pair of any two choices", 0.6),
    ):
        fig.add_histogram(x=similarity[column], name=name, opacity=opacity, xbins={"size": 0.025})
    label = f"near-duplicate {near_duplicate:.3g}"
    fig.add_vline(x=near_duplicate, annotation_text=label, annotation_position="top left", **_DASHED)
    fig.update_layout(barmode="overlay", legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0})
    fig.update_xaxes(title="cosine similarity", range=[min(0.0, float(similarity["max_pair"].min())), 1])
    fig.update_yaxes(title="questions")
    title = _with_embedder("How close the distractors sit to the reference and to each other", similarity)
    return _layout(fig, title)


def leakage(leak: pd.DataFrame) -> Any:
    """Chat overlap of references vs distractors per user (:func:`audit.leakage_audit`)."""
    fig = _figure()
    for role, flag in (("reference", True), ("distractor", False)):
        sub = leak[leak["is_reference"] == flag]
        fig.add_box(
            x=sub["user_id"].astype(str), y=sub["overlap"], name=role, marker_color=COLORS[role], boxmean=True
        )
    fig.update_layout(boxmode="group")
    fig.update_xaxes(title="user", type="category")
    fig.update_yaxes(title="share of the choice's content words found in the chats", tickformat=".0%")
    return _layout(fig, "Lexical leakage: do the reference's words appear in the user's chats more often?")


def hard_composition(
    frame: pd.DataFrame,
    *,
    by: Sequence[str] = ("user_id", "answer_letter", "ref_words", "group_label", "category_name"),
) -> Any:
    """Composition of the hard subset against the other questions, one panel per column in ``by``.

    Each panel shows, for every value of the column, its share among hard and among non-hard questions.
    ``frame`` needs ``hard`` and the ``by`` columns (e.g. :func:`pv4kit.analysis.audit.length_audit`'s).
    """
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
    spacing = 0.12 if len(by) < 4 else 0.07
    fig = make_subplots(
        rows=len(by), cols=1, subplot_titles=[titles.get(b, b) for b in by], vertical_spacing=spacing
    )
    hard = frame["hard"].fillna(False).astype(bool)
    for i, col in enumerate(by, start=1):
        values = frame[col]
        if col in ("category_name", "group_label"):
            values = values.astype(str).str.slice(0, 28)
            # the groups with the largest share among hard or among other questions; the rest pooled
            shares = [values[m].value_counts(normalize=True) for m in (hard, ~hard)]
            weight = pd.concat(shares, axis=1).max(axis=1).sort_values(ascending=False, kind="stable")
            if len(weight) > MAX_ROWS:
                rest = f"others ({len(weight) - MAX_ROWS + 1})"
                values = values.where(values.isin(weight.index[: MAX_ROWS - 1]), rest)
                weight = pd.concat([weight.iloc[: MAX_ROWS - 1], pd.Series({rest: -1.0})])
            order = list(weight.index)
        else:
            order = sorted(values.dropna().unique(), key=lambda v: (isinstance(v, str), v))
        for label, mask, color in (("hard", hard, "#d95f02"), ("not hard", ~hard, "#7570b3")):
            share = values[mask].value_counts(normalize=True).reindex(order, fill_value=0)
            legend = {"name": f"{label} (n={int(mask.sum())})", "legendgroup": label, "showlegend": i == 1}
            fig.add_bar(
                x=share.index.astype(str), y=share.to_numpy(), marker_color=color, row=i, col=1, **legend
            )
        fig.update_yaxes(tickformat=".1~%", row=i, col=1)
        # upright labels of more than 40 values (e.g. 149 users) would run into each other
        angle = -60 if "category" in titles.get(col, "") else (-90 if len(order) > 40 else 0)
        fig.update_xaxes(type="category", row=i, col=1, tickangle=angle)
    fig.update_layout(barmode="group")
    title = "Hard subset vs the other questions (share of each group)"
    if not hard.any():
        title += ": no question is marked hard in this data"
    fig = _layout(fig, title, height=300 * len(by) + 220)
    if by and "category" in titles.get(by[-1], ""):
        fig.update_layout(margin_b=190)
    return fig


def paired_comparison(
    table: pd.DataFrame, *, name_a: str = "A", name_b: str = "B", max_categories: int = MAX_ROWS - 2
) -> Any:
    """Accuracy difference A - B with intervals per scope (from :func:`pv4kit.scoring.stats.compare`).

    With more than ``max_categories`` category rows only the largest differences either way are drawn,
    with one pooled "others" row (question-weighted mean difference) between them.
    """
    n_others = 0
    cats = table[table["scope"] == "category"]
    if len(cats) > max_categories:
        by_diff = cats.sort_values("diff", ascending=False, kind="stable").index
        head, others, tail = _extremes(by_diff, keep=max_categories)
        rest = cats.loc[others]
        n_others = len(others)
        weights = rest["n"].to_numpy(dtype=float)
        pooled = float(np.average(rest["diff"], weights=weights)) if weights.sum() else np.nan
        row = {"scope": "others", "group": f"others ({n_others} categories, pooled)", "mcnemar_p": None}
        row |= {c: int(rest[c].sum()) for c in ("n", "a_only", "b_only")}
        other_row = pd.DataFrame([row | {"diff": pooled, "diff_low": pooled, "diff_high": pooled}])
        parts = [table[table["scope"] != "category"], cats.loc[head], other_row, cats.loc[tail]]
        table = pd.concat(parts, ignore_index=True)
    scoped = zip(table["scope"], table["group"], strict=True)
    t = table.assign(label=[f"{s}: {g}" if s == "category" else str(g) for s, g in scoped])
    colors = ["#d95f02" if p is not None and p < 0.05 else "#7570b3" for p in t["mcnemar_p"]]
    fig = _figure()
    fig.add_scatter(
        x=t["diff"],
        y=t["label"],
        mode="markers",
        marker={"size": 10, "color": colors},
        error_x=_ci(t, "diff", "diff_low", "diff_high", symmetric=False),
        customdata=t[["n", "a_only", "b_only", "mcnemar_p"]],
        hovertemplate="%{y}<br>diff %{x:.1%} (n=%{customdata[0]})<br>only A %{customdata[1]}, only B "
        "%{customdata[2]}<br>McNemar p=%{customdata[3]:.3g}<extra></extra>",
    )
    fig.add_vline(x=0, line_color="grey")
    fig.update_xaxes(title=f"accuracy {name_a} minus {name_b} (95% CI, users resampled)", tickformat=".0%")
    fig.update_yaxes(autorange="reversed")
    more = f"; {max_categories} largest of {max_categories + n_others} categories" if n_others else ""
    title = f"Paired comparison: {name_a} vs {name_b} (orange: McNemar p < 0.05{more})"
    return _layout(fig, title, height=max(HEIGHT, 22 * len(t) + 160), margin_l=260)


def wrong_position(predictions: pd.DataFrame) -> Any:
    """When a run is wrong, which letter wins? Shares of predicted letters among wrong answers, per run."""
    wrong = predictions[~predictions["correct"].astype(bool)]
    fig = _figure()
    for run, sub in wrong.groupby("run", sort=False):
        share = sub["predicted_letter"].value_counts(normalize=True).reindex(list(LETTERS), fill_value=0)
        fig.add_bar(x=share.index, y=share.to_numpy(), name=f"{run} (n={len(sub)})")
    _chance(fig, label="uniform 20%")
    fig.update_xaxes(title="letter of the winning distractor")
    fig.update_yaxes(title="share of wrong answers", tickformat=".0%")
    return _layout(fig, "Which position wins when the answer is wrong")


def margin_distribution(predictions: pd.DataFrame) -> Any:
    """Margins (best minus second-best similarity) of correct vs wrong predictions, per run."""
    fig = _figure()
    violin = {"meanline_visible": True, "points": False, "spanmode": "hard"}
    for label, flag, side in (("correct", True, "positive"), ("wrong", False, "negative")):
        sub = predictions[predictions["correct"].astype(bool) == flag]
        fig.add_violin(
            x=sub["run"], y=sub["margin"], name=label, side=side, line_color=COLORS[label], **violin
        )
    fig.update_layout(violinmode="overlay", violingap=0.1)
    fig.update_xaxes(title="run")
    fig.update_yaxes(title="margin (cosine, best minus second best)")
    return _layout(fig, "Scorer margins: how decisive are correct and wrong answers?")


def question_map(frame: pd.DataFrame, *, seed: int = 0) -> Any:
    """Questions on a UMAP (columns ``x, y``) coloured by correctness, one panel per run.

    Points are drawn in a seeded random order, so where thousands overlap the mix of colours shows the
    share correct rather than whichever class was drawn last.
    """
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
    # 1/0 on a two-colour scale: plotly would validate 20k colour strings one by one
    two_colours = [[0, COLORS["wrong"]], [1, COLORS["correct"]]]
    scale = {"colorscale": two_colours, "cmin": 0, "cmax": 1, "showscale": False}
    for i, run in enumerate(runs):
        sub = frame[frame["run"] == run]
        sub = sub.iloc[rng.permutation(len(sub))]
        ok = sub["correct"].astype(bool)
        text = sub["question"].str.slice(0, 90) if "question" in sub else pd.Series("", index=sub.index)
        fig.add_scatter(
            x=sub["x"].to_numpy(),
            y=sub["y"].to_numpy(),
            mode="markers",
            name=run,
            showlegend=False,
            marker={"color": ok.to_numpy().astype(np.int8), "size": size, "opacity": opacity, **scale},
            customdata=np.where(ok, "correct", "wrong"),
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
    title = _with_embedder("Questions on a UMAP of their embeddings, coloured by correctness", frame)
    return _layout(fig, title, height=420 * rows + 80, width=max(WIDTH, 380 * cols))


def per_user_accuracy(predictions: pd.DataFrame) -> Any:
    """Accuracy per user for each run (dots), with the 20% chance line."""
    acc = predictions.groupby(["run", "user_id"])["correct"].agg(["mean", "size"]).reset_index()
    fig = _figure()
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


def _ci(frame: pd.DataFrame, value: str, low: str = "ci_low", high: str = "ci_high", **extra: Any) -> dict:
    """Plotly error bars from ``value`` to the ``low`` and ``high`` columns (as lists for ``list=True``)."""
    hi, lo = frame[high] - frame[value], frame[value] - frame[low]
    if extra.pop("list", False):
        hi, lo = hi.tolist(), lo.tolist()
    return {"type": "data", **extra, "array": hi, "arrayminus": lo}


def margin_curve(margins: pd.DataFrame, *, title: str | None = None) -> Any:
    """Accuracy (and each judge's agreement with the scorer) by bins of the scorer's margin.

    ``margins``: ``margins.csv`` (:func:`~pv4kit.scoring.validity.margin_table`), maybe with a ``run`` column.
    """
    fig = _figure()
    frame = margins.assign(run=margins["run"] if "run" in margins else "")
    for (run, metric), t in frame.groupby(["run", "metric"], sort=False):
        name = f"{run}: {metric}" if run else str(metric)
        fig.add_scatter(
            x=t["bin"],
            y=t["value"],
            error_y=_ci(t, "value", list=True),
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

    Takes ``agreement.csv`` and, optionally, ``sensitivity.csv`` (the share of predictions each
    rescoring flips) of :func:`~pv4kit.scoring.validity.validity`.
    """
    shown = {
        "agreement": "judge agrees with the scorer",
        "none_rate": "judge reads no candidate (NONE)",
        "judge_accuracy": "accuracy under the judge's picks",
        "scorer_accuracy": "accuracy under the scorer's picks",
    }
    rows = agreement[(agreement["scope"] == "all") & agreement["metric"].isin(list(shown))]
    fig = _figure()
    for judge, t in rows.groupby("judge", sort=False):
        fig.add_scatter(
            x=t["value"],
            y=t["metric"].map(shown),
            error_x=_ci(t, "value", list=True),
            mode="markers",
            name=str(judge),
            marker_size=10,
        )
    if sensitivity is not None and "flip_rate" in sensitivity:
        s = sensitivity.dropna(subset=["flip_rate"])
        labels = [f"flips: {v}" for v in s["variant"]]
        labels = [lab if len(lab) <= 40 else lab[:39] + "…" for lab in labels]
        marker = {"symbol": "diamond", "size": 10}
        fig.add_scatter(x=s["flip_rate"], y=labels, mode="markers", name="rescored", marker=marker)
    fig.update_xaxes(title="share (user-bootstrap 95% CI)", range=[0, 1.02], tickformat=".0%")
    fig.update_yaxes(title="")
    return _layout(fig, "Scorer validity: the judge's reading and the rescorings", margin_l=240)


def reward_model_accuracy(accuracy: pd.DataFrame, *, chance: float = 0.5) -> Any:
    """Held-out accuracy per tier, method and set with intervals, against the pairwise ``chance`` line.

    ``accuracy``: ``set, tier, method, accuracy, ci_low, ci_high`` (the ``"all"`` tier rows are dropped).
    """
    plot = accuracy[accuracy["tier"] != "all"].assign(
        err_hi=lambda f: f["ci_high"] - f["accuracy"], err_lo=lambda f: f["accuracy"] - f["ci_low"]
    )
    title = f"PersonaFeedback: reward-model accuracy on the held-out half (chance {chance:g})"
    errors = {"error_y": "err_hi", "error_y_minus": "err_lo"}
    fig = _grouped_bars(plot, title, x="tier", y="accuracy", color="method", facet_col="set", **errors)
    fig.add_hline(y=chance, line_dash="dot")
    return fig


def rating_distribution(distribution: pd.DataFrame) -> Any:
    """Share of each rating per rater, one panel per kind (``rating, share, rater, kind``)."""
    title = "Stage 3: rating distributions per rater"
    return _grouped_bars(distribution, title, x="rating", y="share", color="rater", facet_row="kind")


def _grouped_bars(frame: pd.DataFrame, title: str, **kwargs: Any) -> Any:
    """A plotly express bar chart of ``frame``, bars side by side, in the house template."""
    import plotly.express as px

    return px.bar(frame, barmode="group", title=title, template=TEMPLATE, **kwargs)
