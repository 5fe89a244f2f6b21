"""The whole pipeline end to end: :mod:`~pv4kit.pipeline.demo` (``make demo``)."""
