"""Answering: prompts and budgets, retrieval, extracted attributes, the baseline methods, the hard subset.

Modules: :mod:`~pv4kit.answer.prompting`, :mod:`~pv4kit.answer.tokens`, :mod:`~pv4kit.answer.truncation`,
:mod:`~pv4kit.answer.retrieve`, :mod:`~pv4kit.answer.bm25`, :mod:`~pv4kit.answer.attributes`,
:mod:`~pv4kit.answer.methods` (the methods as a table, ``AnswerOptions``), :mod:`~pv4kit.answer.baselines`
(``answer``), :mod:`~pv4kit.answer.hard`.
Imports ``scoring``, ``embeddings``, ``dataset``, ``llm`` and the base modules.
"""
