"""Scoring: the run format, nearest-of-five scoring, failures, statistics, the reference's file formats.

Modules: :mod:`~pv4kit.scoring.runs` (the run folder, failed rows, same-data checks),
:mod:`~pv4kit.scoring.score` (nearest-of-five in the reference's numerics, failures counted),
:mod:`~pv4kit.scoring.stats`, :mod:`~pv4kit.scoring.accuracy` (the one accuracy table),
:mod:`~pv4kit.scoring.choices`, :mod:`~pv4kit.scoring.validity`, :mod:`~pv4kit.scoring.refformat`.
Imports ``embeddings``, ``dataset``, ``llm`` and the base modules.
"""
