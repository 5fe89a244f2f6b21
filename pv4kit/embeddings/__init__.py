"""Embedders and their cache: sentence-transformers models, an ``/v1/embeddings`` endpoint, CPU runtimes."""
