"""The baselines: answer prompts and budgets, retrieval, extracted attributes, the methods, the hard subset.

Modules: :mod:`~pv4kit.baselines.prompting`, :mod:`~pv4kit.baselines.tokens`,
:mod:`~pv4kit.baselines.truncation`, :mod:`~pv4kit.baselines.retrieve`, :mod:`~pv4kit.baselines.bm25`,
:mod:`~pv4kit.baselines.attributes`, :mod:`~pv4kit.baselines.methods` (the methods as a table,
``AnswerOptions``), :mod:`~pv4kit.baselines.run` (``answer``: plans, fits, calls, frames, writes),
:mod:`~pv4kit.baselines.hard`. Imports ``scoring``, ``embeddings``, ``dataset``, ``llm`` and the base modules.

The package is named ``baselines``, not ``answer``: a subpackage ``pv4kit.answer`` would replace the public
function ``pv4kit.answer`` as an attribute of ``pv4kit`` once imported.
"""
