"""What every figure shares: plotly, the layout, the chance line, the row limits."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)

CHANCE = 0.2
TEMPLATE = "plotly_white"
WIDTH, HEIGHT = 900, 500
COLORS = {"correct": "#1b9e77", "wrong": "#d95f02", "reference": "#1b9e77", "distractor": "#7570b3"}


def _go():
    try:
        import plotly.graph_objects as go
    except ImportError:  # pragma: no cover - a declared dependency
        raise ImportError("figures need plotly: pip install plotly") from None
    return go


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
    if "embedder" not in frame or not frame["embedder"].notna().any():
        return title
    return f"{title} (embedder {', '.join(sorted(set(frame['embedder'].dropna().astype(str))))})"


def _chance(fig: Any, value: float = CHANCE, *, axis: str = "y", label: str = "chance 20%") -> None:
    kw = {"line_dash": "dash", "line_color": "grey", "annotation_text": label}
    if axis == "y":
        fig.add_hline(y=value, annotation_position="top left", **kw)
    else:
        fig.add_vline(x=value, annotation_position="top right", **kw)


MAX_ROWS = 30  # rows of a per-group figure before it keeps the top and bottom groups and an "others" row
MAX_LABELS = 60  # points of a map before their text labels give way to hover only


def _extremes(order: Sequence[Any], *, keep: int) -> tuple[list[Any], list[Any]]:
    """``(shown, others)``: the first and last ``keep // 2`` of ``order`` (best to worst), and the rest."""
    order = list(order)
    if len(order) <= keep:
        return order, []
    head = keep - keep // 2
    tail = keep // 2
    return order[:head] + order[len(order) - tail :], order[head : len(order) - tail]
