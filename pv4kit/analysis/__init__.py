"""Analysis: dataset and distractor audits, plots, figures, the browser widget, executing the notebooks.

Modules: :mod:`~pv4kit.analysis.audit`, :mod:`~pv4kit.analysis.audit_sequence`,
:mod:`~pv4kit.analysis.audit_report`, :mod:`~pv4kit.analysis.plots`, :mod:`~pv4kit.analysis.figures`,
:mod:`~pv4kit.analysis.widgets`, :mod:`~pv4kit.analysis.notebooks`.
Imports ``answer``, ``scoring``, ``embeddings``, ``dataset``, ``llm`` and the base modules.
"""
