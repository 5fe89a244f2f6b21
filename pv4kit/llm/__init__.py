"""The LLM stage: one cached, retried, metered call to any OpenAI-compatible endpoint.

Modules, bottom to top: :mod:`~pv4kit.llm.config` (``LLMConfig``, ``LLMResponse``, the errors,
``endpoint_config``), :mod:`~pv4kit.llm.protocols` (request bodies, cache key, response parsing; pure),
:mod:`~pv4kit.llm.transport` (the OpenAI client and the one retry loop), :mod:`~pv4kit.llm.store` (the
response cache and usage ledger in SQLite), :mod:`~pv4kit.llm.client` (``complete``: the batch, sharded
over endpoints), :mod:`~pv4kit.llm.local` (the vLLM server of ``--model local`` and its settings).
Imports only pv4kit's base modules.
"""
