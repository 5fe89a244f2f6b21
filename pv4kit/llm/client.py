"""The one LLM call of pv4kit: cached, retried, bounded, metered and sharded over endpoints.

Every model call in pv4kit goes through :func:`complete`. The pieces it puts together live in modules of
their own:

* :mod:`pv4kit.llm.config`: :class:`LLMConfig`, :class:`LLMResponse`, :class:`LLMConfigError` and
  :func:`endpoint_config` (the protocol and temperature an endpoint gets unless told otherwise);
* :mod:`pv4kit.llm.protocols`: the request body of each protocol (``"responses"``, ``"chat"``,
  ``"completions"``), :func:`cache_key` and :func:`parse_response`, all pure;
* :mod:`pv4kit.llm.transport`: the OpenAI client and :func:`call_with_retries`, the one retry loop;
* :mod:`pv4kit.llm.store`: the SQLite response cache and usage ledger (:class:`ResponseStore`,
  :func:`usage_frame`, prices).

**Cache.** Responses are stored in SQLite as they arrive, keyed by :func:`cache_key` over what changes
the output (protocol, model, messages, sampling options and, for a sampled call, the sample index), never
the base URL, key, timeouts, retries or concurrency. Asking again with a new ``sample_index`` gets a
sampled call a fresh response (that is how :mod:`pv4kit.generation.steps` re-asks after a malformed
output); a greedy call ignores it.

**Retries.** Connection errors, timeouts (``timeout`` bounds each attempt, start to last byte), an HTTP 200
without an answer (an error object, an HTML page: :mod:`pv4kit.llm.protocols`), 408/409/425/429 and 5xx
are retried with backoff, honouring ``Retry-After`` (capped at ``retry_after_max``); 401/403/404 raise
:class:`LLMConfigError` naming the model and base URL (:mod:`pv4kit.llm.transport`). Other errors, and
failures left after ``max_retries``, give an :class:`LLMResponse` with ``.error`` set (never cached) and the
batch goes on. Ctrl-C stops the workers within a fraction of a second; what was stored stays cached.

**Sharding.** ``complete(requests, llm=[a, b])`` deals the requests round-robin over equivalent endpoints
(configs equal on :data:`~pv4kit.llm.protocols.KEY_FIELDS`, e.g. two vLLM servers of one model).
Each endpoint gets its own worker pool (its own ``max_concurrency``) and its own ``Retry-After`` pause, so
two single-request servers are both kept busy; since the key ignores the base URL, an answer is cached
the same whichever endpoint gave it.

**Ledger.** Each call (cached or not) adds a row to a ``usage`` table in the cache file; read it with
:func:`usage_frame`, which prices tokens with ``pv4kit/llm/prices.json`` (editable, example prices).

The API key is read from the environment variable named in the config and is never stored, logged or
put in an exception message.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pv4kit._io import default_llm_cache
from pv4kit.llm.config import LLMConfig, LLMResponse, Message
from pv4kit.llm.protocols import KEY_FIELDS, build_request, cache_key
from pv4kit.llm.store import ResponseStore, _ledger_row
from pv4kit.llm.transport import RetryPause, call_with_retries, make_client, make_sender

logger = logging.getLogger(__name__)

Sender = Callable[[dict[str, Any]], Any]


# --------------------------------------------------------------------------- the public call


def complete(
    requests: Sequence[Sequence[Message]],
    *,
    config: LLMConfig | Sequence[LLMConfig] | None = None,
    llm: LLMConfig | Sequence[LLMConfig] | None = None,
    cache: str | os.PathLike[str] | bool | None = None,
    step: str | Sequence[str] | None = None,
    user_id: int | None = None,
    sample_index: int | Sequence[int] = 0,
    progress: bool = True,
    client: Any = None,
    ledger: str | os.PathLike[str] | None = None,
    on_result: Callable[[int, LLMResponse], None] | None = None,
) -> list[LLMResponse]:
    """Run a batch of chat requests through the cache, with retries, bounded concurrency and sharding.

    Args:
        requests: One message list per request (``[{"role": ..., "content": ...}, ...]``).
        config: One :class:`LLMConfig` for all requests, or one per request (the pool size is the
            largest ``max_concurrency`` among them). Give ``config`` or ``llm``.
        llm: Equivalent endpoints to shard the requests over, round-robin: one config or a list of configs
            that differ only in endpoint and transport settings (see the module docstring).
        cache: SQLite file for responses and the usage ledger; ``True`` for the shared default
            (``$PV4KIT_CACHE/llm.sqlite``, else ``.cache/pv4kit/llm.sqlite``); ``None`` disables caching.
        step: Label for the ledger and progress bars (one, or one per request).
        user_id: User id for the ledger.
        sample_index: Sample number for sampled calls (one, or one per request); ignored when greedy.
        progress: Show a ``tqdm`` bar per step.
        client: An OpenAI-SDK-like client (``.responses.create`` / ``.chat.completions.create``), used for
            every endpoint; default: built lazily from ``openai`` for each distinct endpoint.
        ledger: SQLite file for the usage rows when it differs from ``cache``.
        on_result: Called as ``on_result(i, response)`` as each response arrives, from worker threads
            (cached ones are submitted first).

    Returns:
        One :class:`LLMResponse` per request, in input order.

    Raises:
        LLMConfigError: On 401/403/404 (bad key, no access, unknown model) or a missing key.
        TypeError: Neither or both of ``config`` and ``llm``.
        ValueError: A per-request list of the wrong length, or ``llm`` configs that are not equivalent.
    """
    configs, shards = _configs_and_shards(len(requests), config=config, llm=llm)
    batch = _Batch.build(requests, configs, shards, step=step, sample_index=sample_index, user_id=user_id)
    with _open_stores(default_llm_cache() if cache is True else cache, ledger) as (store, ledger_store):
        bars = _bars(batch.steps, progress, user_id)
        try:
            sinks = _Sinks(store=store, ledger=ledger_store, on_result=on_result, bars=bars)
            _answer(batch, sinks, client=client)
        finally:
            for bar in bars.values():
                bar.close()
    failed = sum(r.error is not None for r in batch.results if r)
    if failed:
        where = f"user {user_id}: " if user_id is not None else ""
        logger.warning("%s%d of %d requests failed after retries", where, failed, len(requests))
    return batch.results  # type: ignore[return-value]


# --------------------------------------------------------------------------- one batch, prepared


def _per_item(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name}: expected one value per request ({n}), got {len(value)}")
        return list(value)
    return [value] * n


def _key_value(config: LLMConfig, name: str) -> Any:
    value = getattr(config, name)
    if name == "chat_template_kwargs":
        return dict(value) if value else None  # {} and None give the same key
    return value


def _configs_and_shards(n: int, *, config: Any, llm: Any) -> tuple[list[LLMConfig], list[int]]:
    """The config of each request and its endpoint pool: 0 for all, or round-robin over ``llm``."""
    if (config is None) == (llm is None):
        raise TypeError(
            "complete: pass config= (one LLMConfig, or one per request) or llm= (endpoints to shard over), "
            f"not {'both' if config is not None else 'neither'}"
        )
    if config is not None:
        return _per_item(config, n, "config"), [0] * n
    endpoints = [llm] if isinstance(llm, LLMConfig) else list(llm)
    if not endpoints:
        raise ValueError("llm: expected an LLMConfig or a non-empty list of them, got an empty list")
    for j, c in enumerate(endpoints):
        if not isinstance(c, LLMConfig):
            raise TypeError(f"llm[{j}]: expected an LLMConfig, got {type(c).__name__}")
        diff = next((f for f in KEY_FIELDS if _key_value(c, f) != _key_value(endpoints[0], f)), None)
        if diff is not None:
            raise ValueError(
                "llm: the endpoints to shard over must give the same cache key (equal "
                f"{', '.join(KEY_FIELDS)}); "
                f"llm[{j}] has {diff}={getattr(c, diff)!r}, llm[0] has {getattr(endpoints[0], diff)!r}"
            )
    k = len(endpoints)
    return [endpoints[i % k] for i in range(n)], [i % k for i in range(n)]


@dataclass(frozen=True, kw_only=True)
class _Batch:
    """One call of :func:`complete`, prepared: the settings of each request and the results so far."""

    configs: list[LLMConfig]
    shards: list[int]  # the endpoint pool of each request
    bodies: list[dict[str, Any]]
    keys: list[str]
    steps: list[Any]
    user_id: int | None
    results: list[LLMResponse | None]

    @classmethod
    def build(
        cls,
        requests: Sequence[Sequence[Message]],
        configs: list[LLMConfig],
        shards: list[int],
        *,
        step: Any,
        sample_index: Any,
        user_id: int | None,
    ) -> _Batch:
        """Check the per-request lists and build every request body and cache key (pure)."""
        n = len(requests)
        steps = _per_item(step, n, "step")
        samples = _per_item(sample_index, n, "sample_index")
        return cls(
            configs=configs,
            shards=shards,
            bodies=[build_request(m, c) for m, c in zip(requests, configs, strict=True)],
            keys=[
                cache_key(m, c, sample_index=s) for m, c, s in zip(requests, configs, samples, strict=True)
            ],
            steps=steps,
            user_id=user_id,
            results=[None] * n,
        )


@contextlib.contextmanager
def _open_stores(
    cache: str | os.PathLike[str] | bool | None, ledger: str | os.PathLike[str] | None
) -> Iterator[tuple[ResponseStore | None, ResponseStore | None]]:
    """``(cache store, ledger store)``: ``None`` when off; the same store when the ledger is the cache."""
    with contextlib.ExitStack() as stack:
        store = None
        if cache not in (None, False):
            store = ResponseStore(cache)
            stack.callback(store.close)
        ledger_store = store
        if ledger is not None and (store is None or Path(ledger) != Path(cache)):
            ledger_store = ResponseStore(ledger)
            stack.callback(ledger_store.close)
        yield store, ledger_store


@dataclass(frozen=True, kw_only=True)
class _Sinks:
    """Where each answer goes as it arrives: the cache, the ledger, the caller's callback, the bars."""

    store: ResponseStore | None
    ledger: ResponseStore | None
    on_result: Callable[[int, LLMResponse], None] | None
    bars: dict[Any, Any]

    def record(self, batch: _Batch, i: int, resp: LLMResponse, latency: float) -> LLMResponse:
        """Store a fresh answer (errors are not cached), log its ledger row, keep it, call back."""
        config = batch.configs[i]
        row = _ledger_row(resp, config, batch.steps[i], batch.user_id, latency)
        if self.store is not None and resp.error is None:
            self.store.put(config, batch.bodies[i], resp, row)
            if self.ledger is not self.store and self.ledger is not None:
                self.ledger.log([row])
        elif self.ledger is not None:
            self.ledger.log([row])
        batch.results[i] = resp
        if self.on_result:
            self.on_result(i, resp)
        return resp

    def replay(self, batch: _Batch, i: int) -> LLMResponse | None:
        """Hand a cached answer to the callback."""
        resp = batch.results[i]
        if self.on_result is not None and resp is not None:
            self.on_result(i, resp)
        return resp

    def tick(self, step: Any) -> None:
        """Advance the progress bar of ``step``."""
        if step in self.bars:
            self.bars[step].update(1)


# --------------------------------------------------------------------------- calling


def _answer(batch: _Batch, sinks: _Sinks, *, client: Any) -> None:
    """Fill ``batch.results``: cache hits first (with their ledger rows), then the calls."""
    n = len(batch.keys)
    hits = sinks.store.get_many(batch.keys) if sinks.store else {}
    todo = [i for i in range(n) if batch.keys[i] not in hits]
    label = ", ".join(sorted({str(s) for s in batch.steps if s})) or "llm"
    user_txt = f"user {batch.user_id} " if batch.user_id is not None else ""
    over = f" over {len(set(batch.shards))} endpoints" if len(set(batch.shards)) > 1 else ""
    logger.info(
        "%s%s: %d requests, %d cached, %d to call%s", user_txt, label, n, n - len(todo), len(todo), over
    )
    cached_rows = []
    for i in range(n):
        if batch.keys[i] in hits:
            hit = hits[batch.keys[i]]
            batch.results[i] = LLMResponse(**{**hit.__dict__, "usage": dict(hit.usage)})
            cached_rows.append(
                _ledger_row(batch.results[i], batch.configs[i], batch.steps[i], batch.user_id, 0.0)
            )
    if sinks.ledger:
        sinks.ledger.log(cached_rows)
    hit_idx = [i for i in range(n) if batch.results[i] is not None]
    if sinks.on_result is None:
        for i in hit_idx:
            sinks.tick(batch.steps[i])
        hit_idx = []
    if todo or hit_idx:
        _run_calls(batch, sinks, todo, hit_idx, client=client)


def _senders(batch: _Batch, todo: list[int], client: Any) -> dict[int, Sender]:
    """The sender of each request to call: one client per endpoint, built here unless injected."""
    clients: dict[tuple, Any] = {}
    senders: dict[tuple, Sender] = {}
    out: dict[int, Sender] = {}
    for i in todo:
        c = batch.configs[i]
        ident = (c.base_url, c.api_key_env, c.timeout)
        if ident not in clients:
            clients[ident] = client if client is not None else make_client(c)
        if ident + (c.protocol,) not in senders:
            senders[ident + (c.protocol,)] = make_sender(clients[ident], c.protocol, made=client is None)
        out[i] = senders[ident + (c.protocol,)]
    return out


def _call_one(
    batch: _Batch, sinks: _Sinks, i: int, send: Sender, pause: RetryPause, rng: random.Random
) -> LLMResponse:
    """Call request ``i`` (with retries) and record the answer."""
    start = time.monotonic()
    resp = call_with_retries(send, batch.configs[i], batch.bodies[i], pause=pause, rng=rng)
    resp.key = batch.keys[i]
    return sinks.record(batch, i, resp, time.monotonic() - start)


def _run_calls(batch: _Batch, sinks: _Sinks, todo: list[int], replays: list[int], *, client: Any) -> None:
    """Call the misses in one bounded pool per endpoint; cached hits' callbacks run there too.

    A pool is as wide as the largest ``max_concurrency`` of its requests' configs (never wider than its
    requests) and has its own :class:`RetryPause`. An exception here (Ctrl-C) stops every pause, so the
    workers end within a fraction of a second instead of finishing their requests; the answers already
    stored stay in the cache.
    """
    senders = _senders(batch, todo, client)
    rng = random.Random()
    futures: dict[Future, int] = {}
    pauses: list[RetryPause] = []
    with contextlib.ExitStack() as pools:
        for shard in sorted(set(batch.shards)):
            calls = [i for i in todo if batch.shards[i] == shard]
            again = [i for i in replays if batch.shards[i] == shard]
            if not calls and not again:
                continue
            width = max(
                c.max_concurrency for c, s in zip(batch.configs, batch.shards, strict=True) if s == shard
            )
            pool = pools.enter_context(
                ThreadPoolExecutor(
                    max_workers=max(1, min(len(calls) + len(again), width)),
                    thread_name_prefix=f"pv4kit-llm-{shard}",
                )
            )
            pause = RetryPause()
            pauses.append(pause)
            futures.update({pool.submit(sinks.replay, batch, i): i for i in again})
            futures.update(
                {pool.submit(_call_one, batch, sinks, i, senders[i], pause, rng): i for i in calls}
            )
        try:
            for fut in as_completed(futures):
                fut.result()
                sinks.tick(batch.steps[futures[fut]])
        except BaseException:
            for f in futures:
                f.cancel()
            for pause in pauses:
                pause.stop()
            raise


def _bars(steps: list, progress: bool, user_id: int | None) -> dict:
    if not progress:
        return {}
    from tqdm.auto import tqdm

    counts: dict[Any, int] = {}
    for s in steps:
        counts[s] = counts.get(s, 0) + 1
    prefix = f"user {user_id} " if user_id is not None else ""
    disable = not logger.isEnabledFor(logging.INFO)
    return {
        s: tqdm(total=k, desc=f"{prefix}{s or 'llm'}", leave=False, disable=disable)
        for s, k in counts.items()
    }
