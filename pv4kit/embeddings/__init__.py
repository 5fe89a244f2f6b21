"""Embedders and their cache: sentence-transformers models, an ``/v1/embeddings`` endpoint, CPU runtimes.

Modules: :mod:`~pv4kit.embeddings.models` (``get_embedder`` and its backend registry, ``embed_texts``),
:mod:`~pv4kit.embeddings.options`, :mod:`~pv4kit.embeddings.cache`,
:mod:`~pv4kit.embeddings.endpoint`, :mod:`~pv4kit.embeddings.backends`.
Imports ``llm`` (the endpoint's retry loop) and the base modules.
"""
