"""Re-Centering Humans in LLM Personalization (leczhang/recenter-personalization): loaders and metrics.

The record shapes are those of the data card and of the authors' public annotation tool (GitHub
``orange0629/personalize-annotation``: ``app.py``, ``convert_task2_to_task3.py``,
``analyze_relevance_agreement.py``); ``docs/related.md`` lists what was read where. Every (item,
attribute) pair of the items stays in the frames; the ``coverage`` tables count what each rater left
unrated (the tool shows an attribute text once per prompt, so a pair whose text another user of the same
prompt also has is judged under that user's item only) and judgments that match no pair.

One module per job, gathered here (``from pv4kit.related import recenter as rc``; pv4kit's own modules
import from the defining module):

* :mod:`~pv4kit.related.recenter.records` -- stage folders, record checks, coverage tables.
* :mod:`~pv4kit.related.recenter.stage1_io`, :mod:`~pv4kit.related.recenter.stage1` -- attribute
  extraction: loader; majority acceptance and annotator agreement.
* :mod:`~pv4kit.related.recenter.stage2_io`, :mod:`~pv4kit.related.recenter.stage2` -- relevance:
  loader and the binary label rule; majority labels, predictions of LLMs/embedding/BM25, agreement.
* :mod:`~pv4kit.related.recenter.stage3_io`, :mod:`~pv4kit.related.recenter.stage3` -- generic vs
  personalised responses: loader with display sides and generations; distributions and correlations.
"""

from __future__ import annotations

from pv4kit.related._face import face
from pv4kit.related.recenter import records, stage1, stage1_io, stage2, stage2_io, stage3, stage3_io

__all__, __getattr__, __dir__ = face(
    __name__, (records, stage1_io, stage1, stage2_io, stage2, stage3_io, stage3)
)
