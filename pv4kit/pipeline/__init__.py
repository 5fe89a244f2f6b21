"""The whole pipeline end to end: :mod:`~pv4kit.pipeline.demo` (``make demo``).

Imports every stage below it; only ``cli`` imports it.
"""
