"""The LLM stage: one cached, retried, metered call to any OpenAI-compatible endpoint.

Modules, bottom to top: :mod:`~pv4kit.llm.config` (``LLMConfig``, ``LLMResponse``, the errors,
``endpoint_config``), :mod:`~pv4kit.llm.protocols` (request bodies, cache key, response parsing; pure),
:mod:`~pv4kit.llm.transport` (the OpenAI client and the one retry loop), :mod:`~pv4kit.llm.store` (the
response cache and usage ledger in SQLite), :mod:`~pv4kit.llm.client` (``complete``: the batch, sharded
over endpoints), :mod:`~pv4kit.llm.local` (the vLLM server of ``--model local`` and its settings).
Imports only pv4kit's base modules.

``pv4kit.llm.complete`` and the other public names of :mod:`~pv4kit.llm.client` resolve lazily here too, so
code written for pv4kit 0.1's flat ``pv4kit.llm`` module keeps working; pv4kit's own modules import from
the defining module.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """``pv4kit.llm.<name>`` for the public names of :mod:`pv4kit.llm.client`."""
    client = importlib.import_module("pv4kit.llm.client")
    if name.startswith("_") or not hasattr(client, name):
        raise AttributeError(f"module 'pv4kit.llm' has no attribute {name!r}")
    return getattr(client, name)
