"""The embedder's options dataclass (the merge rule is :func:`pv4kit._options.merge_options`).

A function with many knobs (:func:`~pv4kit.embeddings.models.get_embedder`,
:class:`~pv4kit.embeddings.endpoint.EndpointEmbedder`, :func:`~pv4kit.scoring.score.score_run`) takes
``options=`` (a frozen dataclass) and the same fields as plain keywords, so ``get_embedder("minilm",
device="cpu")`` and ``get_embedder("minilm", options=EmbedderOptions(device="cpu"))`` are one call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from pv4kit._options import merge_options

__all__ = ["EmbedderOptions", "merge_options"]


@dataclass(frozen=True)
class EmbedderOptions:
    """Everything :func:`~pv4kit.embeddings.models.get_embedder` takes besides the name.

    Attributes:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, or a list of devices for the multi-process pool.
            ``None``: every visible GPU (one process each) for Qwen3, else the first GPU or the CPU.
        instruction: Optional prefix for every text (the reference uses none). Qwen3's query style is
            ``"Instruct: <task>\\nQuery:"``. It is part of the cache key.
        revision: Model revision (hub commit); part of the cache key.
        batch_size: Encode batch size (default 64 on CPU, 32 on GPU, 64 per request for an endpoint).
        dtype: ``"bfloat16"``, ``"float16"`` or ``"float32"``; default bf16 on CUDA, float32 on CPU.
        max_seq_length: Truncate inputs to this many tokens (default: the model's own limit).
        base_url: For ``"openai:MODEL"``: the server's base URL (``http://host:8000/v1``), or several,
            comma-separated, to shard the texts across servers; default ``$PV4KIT_EMBED_BASE_URL``, else
            the OpenAI API.
        api_key_env: For ``"openai:MODEL"``: the environment variable holding the API key.
        timeout: For ``"openai:MODEL"``: seconds per HTTP request.
        max_concurrency: For ``"openai:MODEL"``: requests in flight per server.
        backend: ``None`` (sentence-transformers on PyTorch, the default) or a registered backend (see
            :data:`pv4kit.embeddings.models.BUILDERS`): ``"onnx"``, ``"onnx-int8"`` or ``"openvino"`` for a
            local mean-pooled model such as MiniLM on the CPU (:mod:`pv4kit.embeddings.backends`).
        export_dir: Where a CPU ``backend`` keeps its exported model (default ``cache_root() / "onnx"``).
    """

    device: str | list[str] | None = None
    instruction: str | None = None
    revision: str | None = None
    batch_size: int | None = None
    dtype: str | None = None
    max_seq_length: int | None = None
    base_url: str | Sequence[str] | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 120.0
    max_concurrency: int = 4
    backend: str | None = None
    export_dir: str | os.PathLike[str] | None = None
