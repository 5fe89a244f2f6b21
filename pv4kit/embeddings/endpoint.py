"""An embedder that calls OpenAI-compatible ``/v1/embeddings`` servers (vLLM, TEI, llama.cpp, the OpenAI API).

Batches go round-robin over the servers of a comma-separated ``base_url``; a request refused as too large
is split in halves. A batch that fails, or holds NaN, infinite or only zero vectors, raises
:class:`EmbeddingEndpointError` and is not cached. The cache key never names the URL or the API key.
"""

from __future__ import annotations

import base64
import logging
import random
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from pv4kit._options import check_number
from pv4kit.embeddings.cache import Texts, model_key
from pv4kit.llm.client import RetryPause, call_with_retries, make_client
from pv4kit.llm.config import LLMConfig, LLMConfigError, LLMResponse
from pv4kit.vectors import check_vectors

logger = logging.getLogger(__name__)

#: the prefix that selects this embedder in :func:`pv4kit.embeddings.models.get_embedder`
PREFIX = "openai:"
#: the environment variable :func:`~pv4kit.embeddings.models.get_embedder` reads when no ``base_url`` is given
BASE_URL_ENV = "PV4KIT_EMBED_BASE_URL"
_REVISION_FIELDS = ("revision", "model_sha", "sha", "commit")
# what servers say when a request holds too many tokens or texts: vLLM, TEI, llama.cpp, OpenAI
_TOO_LARGE = re.compile(
    r"HTTP 413|too large|too long|context length|context size|exceeds? (the )?(max|context|limit)"
    r"|max(imum)?[ _]batch|batch size|too many (tokens|inputs)|less than \d+ tokens|physical batch",
    re.IGNORECASE,
)


class EmbeddingEndpointError(RuntimeError):
    """An embeddings request that failed after its retries, or an answer that is not embeddings."""


def public_url(url: str) -> str:
    """``url`` without user info, query string or fragment (what pv4kit records or prints)."""
    parts = urlsplit(url)
    host = f"{parts.hostname or ''}:{parts.port}" if parts.port else parts.hostname or ""
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _decode(value: Any, *, where: str) -> np.ndarray:
    """One ``data[i].embedding`` as float32: a list of numbers, or base64 of little-endian float32."""
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError as exc:
            raise EmbeddingEndpointError(f"{where}: embedding is not valid base64: {exc}") from None
        if len(raw) % 4:
            raise EmbeddingEndpointError(f"{where}: base64 embedding of {len(raw)} bytes is not float32")
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if isinstance(value, list) and value and all(isinstance(x, int | float) for x in value):
        return np.asarray(value, dtype=np.float32)
    raise EmbeddingEndpointError(f"{where}: expected a list of floats or a base64 string, got {value!r:.80}")


def parse_embeddings(raw: Any, n: int, *, where: str) -> np.ndarray:
    """The ``(n, dim)`` float32 array of an embeddings response (rows ordered by ``data[i].index``)."""
    data = raw.get("data") if isinstance(raw, dict) else None
    if not isinstance(data, list):
        raise EmbeddingEndpointError(f"{where}: the answer has no 'data' list: {str(raw)[:200]!r}")
    if len(data) != n:
        raise EmbeddingEndpointError(f"{where}: asked for {n} embeddings, got {len(data)}")
    order = [item.get("index", i) if isinstance(item, dict) else i for i, item in enumerate(data)]
    if sorted(order) != list(range(n)):
        raise EmbeddingEndpointError(f"{where}: data[].index is not a permutation of 0..{n - 1}: {order}")
    rows = [np.empty(0)] * n
    for item, idx in zip(data, order, strict=True):
        rows[idx] = _decode(
            item.get("embedding") if isinstance(item, dict) else None, where=f"{where}: data[{idx}]"
        )
    if len(widths := {len(r) for r in rows}) != 1:
        raise EmbeddingEndpointError(f"{where}: embeddings of different widths {sorted(widths)}")
    return np.stack(rows)


class EndpointEmbedder:
    """Embeddings from one or more OpenAI-compatible servers of the same model.

    Construction asks each server's ``/v1/models`` for the model and embeds one probe text for the width
    (:class:`~pv4kit.llm.config.LLMConfigError` for a bad key or a model the server does not list).

    Args:
        model: The model id sent as ``model`` (as ``/v1/models`` lists it).
        base_url: A base URL (``http://host:8000/v1``), comma-separated URLs or a list (texts are sharded
            across them); ``None``: the OpenAI API.
        api_key_env: Environment variable with the API key.
        instruction: Prefix for every text; part of the cache key.
        dimensions: Sent as ``dimensions`` (Matryoshka truncation where the server supports it).
        revision: Recorded when the server reports none (it must agree when it does).
        batch_size: Texts per request.
        max_concurrency: Requests in flight per server.
        max_retries: Retries of a failed request; with ``timeout``, ``backoff_base`` and ``backoff_max``
            the retry policy of :class:`~pv4kit.llm.config.LLMConfig`.
        encoding_format: ``"base64"`` (as the openai SDK asks) or ``"float"``.
        client: An OpenAI-SDK client for every server (tests); default one per server.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | Sequence[str] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        instruction: str | None = None,
        dimensions: int | None = None,
        revision: str | None = None,
        batch_size: int = 64,
        max_concurrency: int = 4,
        max_retries: int = 6,
        timeout: float = 120.0,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        encoding_format: str = "base64",
        client: Any = None,
    ) -> None:
        check_number(batch_size, "batch_size", integer=True, ge=1)
        self.model, self.instruction, self.dimensions = model, instruction, dimensions
        self.batch_size, self.encoding_format = batch_size, encoding_format
        urls = base_url.split(",") if isinstance(base_url, str) else list(base_url or [])
        self.urls: list[str | None] = [u.strip().rstrip("/") for u in urls if u and u.strip()]
        if base_url is None:
            self.urls = [None]
        elif not self.urls:
            raise ValueError(f"base_url: expected a URL or comma-separated URLs, got {base_url!r}")
        policy = dict(max_concurrency=max_concurrency, max_retries=max_retries, timeout=timeout)
        policy.update(backoff_base=backoff_base, backoff_max=backoff_max, api_key_env=api_key_env)
        self.configs = [LLMConfig(model=model, base_url=u, protocol="chat", **policy) for u in self.urls]
        self._clients = [client if client is not None else make_client(c) for c in self.configs]
        self._pauses, self._rng = [RetryPause() for _ in self.urls], random.Random()
        self._where = [public_url(u) if u else "the OpenAI API" for u in self.urls]  # for messages
        served = [self._served_model(i) for i in range(len(self.urls))]
        if len(set(served)) > 1:
            listing = ", ".join(f"{self._where[i]}: {s[0]} rev {s[1]}" for i, s in enumerate(served))
            raise ValueError(f"base_url: the servers do not serve the same model ({listing})")
        self.served_name, served_revision = served[0]
        if revision and served_revision and revision != served_revision:
            raise ValueError(
                f"revision: {revision!r} was asked for; {self._where[0]} serves revision {served_revision!r}"
            )
        self.revision = served_revision or revision
        self.dim = int(self._embed_batch(["dimension probe"], 0).shape[1])
        self.name = f"{PREFIX}{model}"
        key = {"dtype": "float32", "dimensions": dimensions, "instruction": instruction}
        self.cache_key = model_key(
            f"openai:{self.served_name}", revision=self.revision or "unreported", dim=self.dim, **key
        )
        served_as = f"{self.served_name} (revision {self.revision or 'unreported'}), {self.dim}-d"
        logger.info("embedding endpoint %s: %s, %d server(s)", self.name, served_as, len(self.urls))

    def __repr__(self) -> str:
        return f"EndpointEmbedder(name={self.name!r}, dim={self.dim}, servers={len(self.urls)})"

    def _send(self, server: int, request: dict[str, Any], send: Any) -> tuple[Any, str | None]:
        """``send`` through the LLM client's retry loop: ``(raw answer, None)`` or ``(None, error)``."""
        answers: list[Any] = [None]

        def keep(raw: Any) -> LLMResponse:  # the answer is read by the caller, not parsed as a chat
            answers.append(raw)
            return LLMResponse()

        config, pause = self.configs[server], self._pauses[server]
        resp = call_with_retries(send, config, request, pause=pause, rng=self._rng, parse=keep)
        return answers[-1] if resp.error is None else None, resp.error

    def _served_model(self, server: int) -> tuple[str, str | None]:
        """``(name, revision)`` of ``self.model`` as ``/v1/models`` of ``server`` reports it."""
        client, where = self._clients[server], self._where[server]
        try:
            listing, error = self._send(server, {}, lambda _: client.get("/models", cast_to=object))
        except LLMConfigError as exc:
            if "HTTP 404" not in str(exc):
                raise
            unlisted = "%s has no /v1/models: the cache key names %r as requested, revision unreported"
            logger.warning(unlisted, where, self.model)
            return self.model, None
        if error is not None:
            raise EmbeddingEndpointError(f"{where}: GET /models failed: {error}")
        entries = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(entries, list):
            raise EmbeddingEndpointError(
                f"{where}: GET /models answered without a 'data' list: {str(listing)[:200]!r}"
            )
        entries = [e for e in entries if isinstance(e, dict)]
        if (entry := next((e for e in entries if e.get("id") == self.model), None)) is None:
            ids = [str(e.get("id")) for e in entries]
            raise LLMConfigError(f"model {self.model!r} is not served at {where}; it lists {ids[:20]}")
        revision = next((str(entry[f]) for f in _REVISION_FIELDS if entry.get(f)), None)
        return str(entry.get("root") or entry["id"]), revision

    def _embed_batch(self, texts: list[str], server: int) -> np.ndarray:
        """Embed ``texts`` on ``server`` in one request, split in halves while the server says too large."""
        client, where = self._clients[server], self._where[server]
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": self.encoding_format}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        raw, message = self._send(server, body, lambda b: client.post("/embeddings", body=b, cast_to=object))
        if message is None:
            return parse_embeddings(raw, len(texts), where=f"{where} /embeddings")
        if _TOO_LARGE.search(message) and len(texts) == 1:
            raise EmbeddingEndpointError(
                f"{where} refused one text of {len(texts[0])} characters as too long ({message}); text "
                f"starts {texts[0][:80]!r}. Raise the server's context length or enable its truncation."
            )
        if _TOO_LARGE.search(message):
            logger.info(
                "%s refused %d texts in one request (%s); splitting", where, len(texts), message[:120]
            )
            half = len(texts) // 2
            return np.concatenate([self._embed_batch(part, server) for part in (texts[:half], texts[half:])])
        empty = sum(not t for t in texts)
        hint = f" (the batch holds {empty} empty texts, which some servers refuse)" if empty else ""
        raise EmbeddingEndpointError(
            f"embedding {len(texts)} texts with {self.model!r} at {where} failed: {message}{hint}"
        )

    def encode(self, texts: Texts, *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` (float32, one row per text, in order) across the servers."""
        from tqdm.auto import tqdm

        texts = [(self.instruction or "") + t for t in texts]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        size = batch_size or self.batch_size
        starts = range(0, len(texts), size)

        def work(k: int) -> int:
            start, server = starts[k], k % len(self.urls)
            part = texts[start : start + size]
            vectors = self._embed_batch(part, server)
            where = f"{self._where[server]}, model {self.model!r}, batch {k + 1} of {len(starts)}"
            if vectors.shape[1] != self.dim:
                raise EmbeddingEndpointError(f"{where}: {vectors.shape[1]}-d vectors, expected {self.dim}")
            where += f" (texts {start}..{start + len(part) - 1})"
            check_vectors(vectors, where=where, error=EmbeddingEndpointError)
            out[start : start + len(part)] = vectors
            return len(part)

        workers = max(1, min(len(starts), sum(c.max_concurrency for c in self.configs)))
        bar = tqdm(
            total=len(texts), desc=f"embedding ({self.name})", unit="text", leave=False, disable=not progress
        )
        with bar, ThreadPoolExecutor(workers, thread_name_prefix="pv4kit-embed") as pool:
            for done in pool.map(work, range(len(starts))):  # a failure, met in batch order, cancels the rest
                bar.update(done)
        return out

    def describe(self) -> dict[str, Any]:
        """A provenance record for this embedder (no key; URLs without user info or query)."""
        record = {"name": self.name, "backend": "openai-embeddings", "served_model": self.served_name}
        record |= {f: getattr(self, f) for f in ("revision", "dim", "dimensions", "instruction")}
        return record | {"base_urls": list(self._where), "cache_key": self.cache_key}
