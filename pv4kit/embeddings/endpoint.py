"""An :class:`~.models.Embedder` that calls any OpenAI-compatible ``/v1/embeddings`` endpoint.

vLLM (``vllm serve Qwen/Qwen3-Embedding-4B`` with the embed task, as the reference scores), Hugging Face's
text-embeddings-inference, llama.cpp's server with ``--embedding`` and the OpenAI API all speak this
protocol. Build one with ``pv4kit.embeddings.models.get_embedder("openai:MODEL", base_url=URL)`` (or
``pv4kit score RUN --embedder openai:MODEL --embed-base-url URL``); every pv4kit module that embeds goes
through :func:`pv4kit.embeddings.models.embed_texts`, so scoring, retrieval and the audits all take it.

- **Batched**: ``batch_size`` texts per request; a request the server refuses as too large (HTTP 413, or a
  context-length / batch-size error) is split in halves until it fits. A single text the server refuses
  is an error naming it (nothing is truncated behind the user's back).
- **Concurrent and sharded**: ``max_concurrency`` requests in flight per server; a comma-separated
  ``base_url`` (several servers of the same model) deals the batches round-robin, as ``answer`` shards
  its requests.
- **Retried with the LLM client's policy**: every request goes through
  :func:`pv4kit.llm.client.call_with_retries` (the one retry loop of pv4kit: backoff with jitter,
  408/409/425/429 and 5xx retried, ``Retry-After`` honoured, capped, and shared by the workers of a
  server; 401/403/404 raise
  :class:`~pv4kit.llm.client.LLMConfigError`). A batch that still fails raises
  :class:`EmbeddingEndpointError`; no vector is ever made up. A batch holding NaN or infinite values,
  or only zero vectors, is an error naming the server, the model and the batch, and nothing of it is cached.
- **Cached by what the server serves**: the cache key names the model and revision that ``/v1/models``
  reports (vLLM's ``root``, a ``revision``/``model_sha`` field where a server has one), the width, the
  ``dimensions`` request and the instruction, never the URL, so the same model on another host shares
  the cache. Servers of one embedder must report the same model.
- The API key is read from the environment variable ``api_key_env`` and is never stored, logged or
  put in a message; URLs are recorded without user info or query string.

The vectors come back as float32 (``base64`` or ``float`` encoding, exact either way) and take the same
path as the in-process backend's from there (:func:`pv4kit.embeddings.models.embed_texts`, then the scorer's
numerics).
"""

from __future__ import annotations

import base64
import logging
import os
import random
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from pv4kit._options import merge_options
from pv4kit.embeddings.cache import model_key
from pv4kit.llm.client import RetryPause, call_with_retries, make_client
from pv4kit.llm.config import LLMConfig, LLMConfigError, LLMResponse
from pv4kit.vectors import check_vectors

logger = logging.getLogger(__name__)

#: the prefix that selects this backend in :func:`pv4kit.embeddings.models.get_embedder`
PREFIX = "openai:"
#: the environment variable :func:`pv4kit.embeddings.models.get_embedder` reads when no ``base_url`` is given
BASE_URL_ENV = "PV4KIT_EMBED_BASE_URL"
ENCODINGS = ("base64", "float")
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
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def split_base_urls(base_url: str | Sequence[str] | None) -> list[str | None]:
    """One entry per server: a comma-separated string or a list; ``None`` is the OpenAI API."""
    if base_url is None:
        return [None]
    urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = [u.strip().rstrip("/") for u in urls if u and u.strip()]
    if not urls:
        raise ValueError(f"base_url: expected a URL or comma-separated URLs, got {base_url!r}")
    return urls


def decode_embedding(value: Any, *, where: str) -> np.ndarray:
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
    rows: list[np.ndarray | None] = [None] * n
    for item, idx in zip(data, order, strict=True):
        value = item.get("embedding") if isinstance(item, dict) else None
        rows[idx] = decode_embedding(value, where=f"{where}: data[{idx}]")
    widths = {len(r) for r in rows if r is not None}
    if len(widths) != 1:
        raise EmbeddingEndpointError(f"{where}: embeddings of different widths {sorted(widths)}")
    return np.stack(rows)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EndpointOptions:
    """The settings of an :class:`EndpointEmbedder` (each also a keyword of its constructor).

    Attributes:
        base_url: Base URL (``http://host:8000/v1``), comma-separated URLs or a list (texts are sharded
            across them); ``None``: the OpenAI API.
        api_key_env: Environment variable with the API key (a ``base_url`` server works without one).
        instruction: Prefix for every text (the reference embeds without one); part of the cache key.
        dimensions: Sent as ``dimensions`` (Matryoshka truncation where the server supports it).
        revision: The revision to record when the server reports none (it must agree when it does).
        batch_size: Texts per request.
        max_concurrency: Requests in flight per server.
        max_retries, timeout, backoff_base, backoff_max: The retry policy of
            :class:`pv4kit.llm.client.LLMConfig`.
        encoding_format: ``"base64"`` (what the openai SDK asks for) or ``"float"``.
    """

    base_url: str | Sequence[str] | None = None
    api_key_env: str = "OPENAI_API_KEY"
    instruction: str | None = None
    dimensions: int | None = None
    revision: str | None = None
    batch_size: int = 64
    max_concurrency: int = 4
    max_retries: int = 6
    timeout: float = 120.0
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    encoding_format: str = "base64"

    def __post_init__(self) -> None:
        if self.encoding_format not in ENCODINGS:
            raise ValueError(f"encoding_format: expected one of {ENCODINGS}, got {self.encoding_format!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: expected >= 1, got {self.batch_size}")
        if self.dimensions is not None and self.dimensions < 1:
            raise ValueError(f"dimensions: expected a positive width, got {self.dimensions}")


class EndpointEmbedder:
    """Embeddings from one or more OpenAI-compatible servers of the same model.

    Build it with :func:`pv4kit.embeddings.models.get_embedder` (``"openai:MODEL"``) or directly. Construction
    asks each server's ``/v1/models`` for the model and embeds one short probe text to learn the width.

    Args:
        model: The model id sent as ``model`` (as the server lists it in ``/v1/models``).
        options: An :class:`EndpointOptions`.
        client: An OpenAI-SDK client to use for every server (tests); default: one per server.
        **overrides: The fields of :class:`EndpointOptions` as keywords (``base_url``, ``api_key_env``,
            ``instruction``, ``dimensions``, ``revision``, ``batch_size``, ``max_concurrency``,
            ``max_retries``, ``timeout``, ``backoff_base``, ``backoff_max``, ``encoding_format``).

    Raises:
        LLMConfigError: A bad key, or a model the server does not list.
        EmbeddingEndpointError: A server that cannot be reached or answers with no embeddings.
    """

    def __init__(
        self, model: str, *, options: EndpointOptions | None = None, client: Any = None, **overrides: Any
    ) -> None:
        opts = merge_options(EndpointOptions, options, overrides, where="EndpointEmbedder")
        self.options = opts
        self.model = model
        self.instruction = opts.instruction
        self.dimensions = opts.dimensions
        self.batch_size = opts.batch_size
        self.encoding_format = opts.encoding_format
        self._connect(opts, client)
        self.served_name, self.revision = self._served(opts.revision)
        self.dim = int(self._embed_batch(["dimension probe"], 0).shape[1])
        self.name = f"{PREFIX}{model}"
        self.cache_key = model_key(
            f"openai:{self.served_name}",
            revision=self.revision or "unreported",
            dim=self.dim,
            dtype="float32",
            dimensions=opts.dimensions,
            instruction=opts.instruction,
        )
        logger.info(
            "embedding endpoint %s: %s (revision %s), %d-d, %d server(s)",
            self.name,
            self.served_name,
            self.revision or "unreported",
            self.dim,
            len(self.urls),
        )

    def _connect(self, opts: EndpointOptions, client: Any) -> None:
        """One LLM-client config, SDK client and shared pause per server."""
        self.urls = split_base_urls(opts.base_url)
        self.configs = [
            LLMConfig(
                model=self.model,
                base_url=url,
                protocol="chat",  # unused: the request bodies are ours
                api_key_env=opts.api_key_env,
                max_concurrency=opts.max_concurrency,
                max_retries=opts.max_retries,
                timeout=opts.timeout,
                backoff_base=opts.backoff_base,
                backoff_max=opts.backoff_max,
            )
            for url in self.urls
        ]
        self._clients = [client if client is not None else make_client(c) for c in self.configs]
        self._pauses = [RetryPause() for _ in self.urls]
        self._rng = random.Random()
        self._lock = threading.Lock()
        self.requests = 0  # HTTP requests that returned embeddings (splits count each half)

    def _served(self, revision: str | None) -> tuple[str, str | None]:
        """``(served model, revision)``: the same on every server, and ``revision`` if one was asked for."""
        served = [self._served_model(i) for i in range(len(self.urls))]
        if len(set(served)) > 1:
            listing = ", ".join(f"{self._where(i)}: {s[0]} rev {s[1]}" for i, s in enumerate(served))
            raise ValueError(f"base_url: the servers do not serve the same model ({listing})")
        name, served_revision = served[0]
        if revision and served_revision and revision != served_revision:
            raise ValueError(
                f"revision: {revision!r} was asked for but {self._where(0)} serves revision "
                f"{served_revision!r}"
            )
        return name, served_revision or revision

    def __repr__(self) -> str:
        return f"EndpointEmbedder(name={self.name!r}, dim={self.dim}, servers={len(self.urls)})"

    # ------------------------------------------------------------------ one server

    def _where(self, server: int) -> str:
        url = self.urls[server]
        return public_url(url) if url else "the OpenAI API"

    def _send(self, server: int, request: dict[str, Any], send: Any) -> Any:
        """``send`` through the LLM client's retry loop; the raw answer, or raises on failure."""
        answers: list[Any] = []

        def keep(body: dict[str, Any]) -> Any:
            answers.append(send(body))
            return answers[-1]

        config = self.configs[server]
        resp = call_with_retries(  # the answer is read by the caller (parse_embeddings), not as a chat
            keep, config, request, pause=self._pauses[server], rng=self._rng, parse=lambda raw: LLMResponse()
        )
        if resp.error is not None:
            raise _RequestFailed(resp.error)
        return answers[-1]

    def _served_model(self, server: int) -> tuple[str, str | None]:
        """``(name, revision)`` of ``self.model`` as ``/v1/models`` of ``server`` reports it."""
        client = self._clients[server]
        try:
            listing = self._send(server, {}, lambda _: client.get("/models", cast_to=object))
        except LLMConfigError as exc:
            if "HTTP 404" not in str(exc):
                raise
            logger.warning(
                "%s has no /v1/models: the cache key names %r as requested, revision unreported",
                self._where(server),
                self.model,
            )
            return self.model, None
        except _RequestFailed as exc:
            raise EmbeddingEndpointError(f"{self._where(server)}: GET /models failed: {exc}") from None
        entries = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(entries, list):
            raise EmbeddingEndpointError(
                f"{self._where(server)}: GET /models answered without a 'data' list: {str(listing)[:200]!r}"
            )
        ids = [str(e.get("id")) for e in entries if isinstance(e, dict)]
        entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == self.model), None)
        if entry is None:
            raise LLMConfigError(
                f"model {self.model!r} is not served at {self._where(server)}; it lists {ids[:20]}"
            )
        name = str(entry.get("root") or entry["id"])
        revision = next((str(entry[f]) for f in _REVISION_FIELDS if entry.get(f)), None)
        return name, revision

    def _embed_batch(self, texts: list[str], server: int) -> np.ndarray:
        """Embed ``texts`` on ``server`` in one request, split in halves while the server says too large."""
        client = self._clients[server]
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": self.encoding_format}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        try:
            raw = self._send(server, body, lambda b: client.post("/embeddings", body=b, cast_to=object))
        except _RequestFailed as exc:
            message = str(exc)
            if _TOO_LARGE.search(message):
                if len(texts) > 1:
                    half = len(texts) // 2
                    logger.info(
                        "%s refused %d texts in one request (%s); splitting",
                        self._where(server),
                        len(texts),
                        message[:120],
                    )
                    return np.concatenate(
                        [self._embed_batch(texts[:half], server), self._embed_batch(texts[half:], server)]
                    )
                raise EmbeddingEndpointError(
                    f"{self._where(server)} refused one text of {len(texts[0])} characters as too long "
                    f"({message}); text starts {texts[0][:80]!r}. Raise the server's context length or "
                    "enable its truncation."
                ) from None
            empty = sum(not t for t in texts)
            hint = f" (the batch holds {empty} empty texts, which some servers refuse)" if empty else ""
            raise EmbeddingEndpointError(
                f"embedding {len(texts)} texts with {self.model!r} at {self._where(server)} failed: "
                f"{message}{hint}"
            ) from None
        vectors = parse_embeddings(raw, len(texts), where=f"{self._where(server)} /embeddings")
        with self._lock:
            self.requests += 1
        return vectors

    # ------------------------------------------------------------------ the Embedder interface

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False
    ) -> np.ndarray:
        """Embed ``texts`` (float32, one row per text, in order) across the servers.

        Raises:
            EmbeddingEndpointError: When a batch fails after its retries (no partial result).
            LLMConfigError: On 401/403/404.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.instruction:
            texts = [self.instruction + t for t in texts]
        size = batch_size or self.batch_size
        starts = list(range(0, len(texts), size))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        n_servers = len(self.urls)
        workers = min(len(starts), sum(c.max_concurrency for c in self.configs))
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc=f"embedding ({self.name})", unit="text", leave=False)

        def work(k: int) -> int:
            start = starts[k]
            part = texts[start : start + size]
            vectors = self._embed_batch(part, k % n_servers)
            where = f"{self._where(k % n_servers)}, model {self.model!r}, batch {k + 1} of {len(starts)}"
            if vectors.shape[1] != self.dim:
                raise EmbeddingEndpointError(f"{where}: {vectors.shape[1]}-d vectors, expected {self.dim}")
            check_vectors(
                vectors,
                where=f"{where} (texts {start}..{start + len(part) - 1})",
                error=EmbeddingEndpointError,
            )
            out[start : start + len(part)] = vectors
            return len(part)

        try:
            with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="pv4kit-embed") as pool:
                futures = [pool.submit(work, k) for k in range(len(starts))]
                try:
                    for fut in as_completed(futures):
                        done = fut.result()
                        if bar is not None:
                            bar.update(done)
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
        finally:
            if bar is not None:
                bar.close()
        return out

    def describe(self) -> dict[str, Any]:
        """A provenance record for this embedder (no key; URLs without user info or query)."""
        return {
            "name": self.name,
            "backend": "openai-embeddings",
            "served_model": self.served_name,
            "revision": self.revision,
            "dim": self.dim,
            "dimensions": self.dimensions,
            "instruction": self.instruction,
            "base_urls": [self._where(i) for i in range(len(self.urls))],
            "cache_key": self.cache_key,
        }


class _RequestFailed(Exception):
    """A request that :func:`pv4kit.llm.client.call_with_retries` gave up on (its error, redacted)."""


def endpoint_base_url(base_url: str | Sequence[str] | None) -> str | Sequence[str] | None:
    """``base_url``, else ``$PV4KIT_EMBED_BASE_URL``, else ``None`` (the OpenAI API)."""
    return base_url if base_url is not None else (os.environ.get(BASE_URL_ENV) or None)
