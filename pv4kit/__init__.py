"""pv4kit: a notebook-first toolkit for the PersonalizationV4 (PV4) personalization benchmark.

``import pv4kit`` is cheap: the public functions below are resolved lazily from their modules on first
access, so heavy dependencies (torch, sentence-transformers, plotly, umap, openai) load only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (one module, one job; see docs/architecture.md)
_EXPORTS: dict[str, str] = {
    # raw tree, step 5, step 6, loader
    "read_user": "pv4kit.raw",
    "list_users": "pv4kit.raw",
    "read_chats": "pv4kit.raw",
    "validate_raw": "pv4kit.raw",
    "parse_qa_text": "pv4kit.questions",
    "build_question_table": "pv4kit.questions",
    "write_qa_tables": "pv4kit.questions",
    "split_indices": "pv4kit.splits",
    "build_dataset": "pv4kit.splits",
    "load": "pv4kit.data",
    "PV4Data": "pv4kit.data",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    """Resolve a public name lazily from the module that defines it."""
    module = _EXPORTS.get(name)
    if module is None:
        import difflib

        close = difflib.get_close_matches(name, list(_EXPORTS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise AttributeError(f"module 'pv4kit' has no attribute {name!r}{hint}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
