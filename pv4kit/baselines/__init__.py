"""The baselines: answer prompts and budgets, retrieval, extracted attributes, the methods, the hard subset.

Modules: :mod:`~pv4kit.baselines.prompting`, :mod:`~pv4kit.baselines.tokens`,
:mod:`~pv4kit.baselines.truncation`, :mod:`~pv4kit.baselines.retrieve`, :mod:`~pv4kit.baselines.bm25`,
:mod:`~pv4kit.baselines.attributes`, :mod:`~pv4kit.baselines.methods` (the methods as a table,
``AnswerOptions``), :mod:`~pv4kit.baselines.run` (``answer``: plans, fits, calls, frames, writes),
:mod:`~pv4kit.baselines.hard`. Imports ``scoring``, ``embeddings``, ``dataset``, ``llm`` and the base modules.

The package is named ``baselines``, not ``answer``: a subpackage ``pv4kit.answer`` would replace the public
function ``pv4kit.answer`` as an attribute of ``pv4kit`` once imported.
"""

from __future__ import annotations

import importlib
from typing import Any

#: names offered here for code written against pv4kit 0.1's flat ``pv4kit.baselines`` module
_FACE = {
    "answer": "pv4kit.baselines.run",
    "METHODS": "pv4kit.baselines.methods",
    "AnswerOptions": "pv4kit.baselines.methods",
    "register_method": "pv4kit.baselines.methods",
}


def __getattr__(name: str) -> Any:
    """``pv4kit.baselines.answer`` and the method table, resolved lazily from their modules."""
    if name not in _FACE:
        raise AttributeError(f"module 'pv4kit.baselines' has no attribute {name!r}")
    return getattr(importlib.import_module(_FACE[name]), name)
