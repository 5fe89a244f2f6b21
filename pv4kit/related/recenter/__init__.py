"""Re-Centering Humans in LLM Personalization (leczhang/recenter-personalization): loaders and metrics.

The record shapes are those of the data card and of the authors' public annotation tool (GitHub
``orange0629/personalize-annotation``: ``app.py``, ``convert_task2_to_task3.py``,
``analyze_relevance_agreement.py``); ``docs/related.md`` lists what was read where. Every (item,
attribute) pair of the items stays in the frames; the ``coverage`` tables count what each rater left
unrated (the tool shows an attribute text once per prompt, so a pair whose text another user of the same
prompt also has is judged under that user's item only) and judgments that match no pair.

One module per job, its public names imported here (``from pv4kit.related import recenter as rc``;
pv4kit's own modules import from the defining module):

* :mod:`~pv4kit.related.recenter.records` -- stage folders, record checks, coverage tables.
* :mod:`~pv4kit.related.recenter.stage1_io`, :mod:`~pv4kit.related.recenter.stage1` -- attribute
  extraction: loader; majority acceptance and annotator agreement.
* :mod:`~pv4kit.related.recenter.stage2_io`, :mod:`~pv4kit.related.recenter.stage2` -- relevance:
  loader and the binary label rule; majority labels, predictions of LLMs/embedding/BM25, agreement.
* :mod:`~pv4kit.related.recenter.stage3_io`, :mod:`~pv4kit.related.recenter.stage3` -- generic vs
  personalised responses: loader with display sides and generations; distributions and correlations.
"""

from __future__ import annotations

from pv4kit.related.recenter.records import HUB_ID
from pv4kit.related.recenter.stage1 import acceptance_by_source, stage1_acceptance, stage1_agreement
from pv4kit.related.recenter.stage1_io import STAGE1_LABELS, Stage1Data, load_stage1
from pv4kit.related.recenter.stage2 import (
    agreement_summary,
    choose_threshold,
    stage2_agreement,
    stage2_labels,
    stage2_metrics,
    stage2_predictions,
    stage2_yes_rates,
)
from pv4kit.related.recenter.stage2_io import (
    MISSING_LABELS,
    RELEVANCE_LABELS,
    Stage2Data,
    load_stage2,
    relevance_label,
)
from pv4kit.related.recenter.stage3 import (
    stage3_correlation,
    stage3_distribution,
    stage3_orientation,
    stage3_pairs,
    stage3_ratings,
    stage3_summary,
)
from pv4kit.related.recenter.stage3_io import (
    CONDITIONS,
    Stage3Data,
    load_stage3,
    personalised_side,
    same_model,
)

__all__ = [
    "CONDITIONS",
    "HUB_ID",
    "MISSING_LABELS",
    "RELEVANCE_LABELS",
    "STAGE1_LABELS",
    "Stage1Data",
    "Stage2Data",
    "Stage3Data",
    "acceptance_by_source",
    "agreement_summary",
    "choose_threshold",
    "load_stage1",
    "load_stage2",
    "load_stage3",
    "personalised_side",
    "relevance_label",
    "same_model",
    "stage1_acceptance",
    "stage1_agreement",
    "stage2_agreement",
    "stage2_labels",
    "stage2_metrics",
    "stage2_predictions",
    "stage2_yes_rates",
    "stage3_correlation",
    "stage3_distribution",
    "stage3_orientation",
    "stage3_pairs",
    "stage3_ratings",
    "stage3_summary",
]
