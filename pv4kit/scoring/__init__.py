"""Scoring: the run format, nearest-of-five scoring, failures, statistics, the reference's file formats.

Modules: :mod:`~pv4kit.scoring.runs` (the run folder), :mod:`~pv4kit.scoring.score` (nearest-of-five in the
reference's numerics), :mod:`~pv4kit.scoring.stats`, :mod:`~pv4kit.scoring.accuracy`,
:mod:`~pv4kit.scoring.choices`, :mod:`~pv4kit.scoring.validity`, :mod:`~pv4kit.scoring.refformat`.
"""
