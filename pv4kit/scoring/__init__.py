"""Scoring: the run format, nearest-of-five scoring, failures, statistics, the reference's file formats.

Modules: :mod:`~pv4kit.scoring.runs`, :mod:`~pv4kit.scoring.score`, :mod:`~pv4kit.scoring.numerics`,
:mod:`~pv4kit.scoring.failures`, :mod:`~pv4kit.scoring.stats`, :mod:`~pv4kit.scoring.accuracy` (the one
accuracy table), :mod:`~pv4kit.scoring.samedata`, :mod:`~pv4kit.scoring.refformat`.
Imports ``embeddings``, ``dataset``, ``llm`` and the base modules.
"""
