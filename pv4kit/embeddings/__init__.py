"""Embedders and their cache: sentence-transformers models, an ``/v1/embeddings`` endpoint, CPU runtimes.

Modules: :mod:`~pv4kit.embeddings.models` (``get_embedder``, ``embed_texts``),
:mod:`~pv4kit.embeddings.cache`, :mod:`~pv4kit.embeddings.endpoint`, :mod:`~pv4kit.embeddings.backends`.
"""
