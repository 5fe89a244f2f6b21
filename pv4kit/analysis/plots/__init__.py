"""Figure builders: one function per figure, a tidy frame in and a plotly ``Figure`` out.

Frames come from :mod:`pv4kit.analysis.audit`, :func:`pv4kit.scoring.stats.compare` and scored runs'
predictions (stacked with a ``run`` column, see :func:`pv4kit.analysis.notebooks.stack_runs`). Save with
:func:`pv4kit.analysis.figures.save_figure`. Titles are plain text (no LaTeX), so static export needs no
MathJax. One module per kind of figure:

* :mod:`~pv4kit.analysis.plots.dataset` - questions per category, category groups, the category map;
* :mod:`~pv4kit.analysis.plots.distractors` - the distractor audit (positions, lengths, solver accuracy,
  similarity, leakage);
* :mod:`~pv4kit.analysis.plots.hard_subset` - the hard subset's composition;
* :mod:`~pv4kit.analysis.plots.errors` - error analysis of scored runs;
* :mod:`~pv4kit.analysis.plots.related` - the related benchmarks of notebook 08;
* :mod:`~pv4kit.analysis.plots.validity` - scorer validity (margins, judge agreement, rescorings);
* :mod:`~pv4kit.analysis.plots.common` - the layout, the chance line and the row limits they share.

The maps take ``x, y`` from :mod:`pv4kit.analysis.projection` (:func:`umap_2d`, re-exported here). This
package re-exports every public name (``from pv4kit.analysis import plots; plots.accuracy_dots(...)``).
"""

from pv4kit.analysis.plots.common import CHANCE, COLORS, HEIGHT, MAX_LABELS, MAX_ROWS, TEMPLATE, WIDTH
from pv4kit.analysis.plots.dataset import category_balance, category_groups, category_map
from pv4kit.analysis.plots.distractors import (
    accuracy_dots,
    answer_positions,
    distractor_similarity,
    leakage,
    length_bias,
    word_spread,
)
from pv4kit.analysis.plots.errors import (
    margin_distribution,
    paired_comparison,
    per_user_accuracy,
    question_map,
    wrong_position,
)
from pv4kit.analysis.plots.hard_subset import hard_composition
from pv4kit.analysis.plots.related import rating_distribution, reward_model_accuracy
from pv4kit.analysis.plots.validity import margin_curve, scorer_agreement
from pv4kit.analysis.projection import umap_2d

__all__ = [
    "CHANCE",
    "COLORS",
    "HEIGHT",
    "MAX_LABELS",
    "MAX_ROWS",
    "TEMPLATE",
    "WIDTH",
    "accuracy_dots",
    "answer_positions",
    "category_balance",
    "category_groups",
    "category_map",
    "distractor_similarity",
    "hard_composition",
    "leakage",
    "length_bias",
    "margin_curve",
    "margin_distribution",
    "paired_comparison",
    "per_user_accuracy",
    "question_map",
    "rating_distribution",
    "reward_model_accuracy",
    "scorer_agreement",
    "umap_2d",
    "word_spread",
    "wrong_position",
]
