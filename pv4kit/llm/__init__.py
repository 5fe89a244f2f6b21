"""The LLM stage: one cached, retried, metered call to any OpenAI-compatible endpoint.

:mod:`~pv4kit.llm.config` (``LLMConfig``, ``LLMResponse``, the errors, ``endpoint_config``),
:mod:`~pv4kit.llm.client` (``complete`` down to the HTTP request), :mod:`~pv4kit.llm.store` (the response
cache and usage ledger in SQLite), :mod:`~pv4kit.llm.local` (the vLLM server of ``--model local``).
"""
