"""The one LLM call of pv4kit: :func:`complete`, cached, retried, bounded, metered and sharded over endpoints.

It reads top to bottom: the request bodies and cache keys are built (:mod:`pv4kit.llm.protocols`), cache
hits are taken from the SQLite store (:mod:`pv4kit.llm.store`), and each miss runs in a worker thread
through :func:`~pv4kit.llm.transport.call_with_retries`, which POSTs its body with
:func:`~pv4kit.llm.transport.post`. Answers are stored as they arrive; a failure (``.error`` set) never is,
and the batch goes on. Each call, cached or not, adds a ledger row (:func:`~pv4kit.llm.store.usage_frame`).
Ctrl-C stops the workers within a fraction of a second; what was stored stays cached.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

from pv4kit._io import default_llm_cache
from pv4kit.llm.config import LLMConfig, LLMResponse, Message
from pv4kit.llm.protocols import KEY_FIELDS, build_request, cache_key
from pv4kit.llm.store import ResponseStore, _ledger_row
from pv4kit.llm.transport import RetryPause, call_with_retries, make_client, post

logger = logging.getLogger(__name__)


def complete(
    requests: Sequence[Sequence[Message]],
    *,
    llm: LLMConfig | Sequence[LLMConfig],
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
        llm: An :class:`LLMConfig`, or a list of them: request ``i`` is sent with ``llm[i % len(llm)]``.
            One per request gives each its own; a shorter list deals the requests round-robin over
            equivalent endpoints (equal on :data:`~pv4kit.llm.protocols.KEY_FIELDS`, e.g. two vLLM servers
            of one model), whose answers are cached alike. Each base URL gets its own worker pool (as wide
            as its largest ``max_concurrency``) and its own ``Retry-After`` pause.
        cache: SQLite file of responses and usage ledger; ``True`` for the shared default
            (``$PV4KIT_CACHE/llm.sqlite``, else ``.cache/pv4kit/llm.sqlite``); ``None`` disables caching.
        step: Label for the ledger and progress bars (one, or one per request).
        user_id: User id for the ledger.
        sample_index: Sample number of sampled calls (one, or one per request); ignored when greedy.
        progress: Show a ``tqdm`` bar per step.
        client: An OpenAI-SDK-like client used for every endpoint (default: an ``openai`` client each).
        ledger: SQLite file for the usage rows when it differs from ``cache``.
        on_result: Called as ``on_result(i, response)`` as each response arrives, from worker threads.

    Returns:
        One :class:`LLMResponse` per request, in input order.

    Raises:
        LLMConfigError: On 401/403/404 (bad key, no access, unknown model) or a missing key.
        TypeError: An ``llm`` that is not an :class:`LLMConfig` or a list of them.
        ValueError: A per-request list of the wrong length, or endpoints to shard over that are not
            equivalent.
    """
    n, where = len(requests), f"user {user_id} " if user_id is not None else ""
    configs = _configs(llm, n)
    steps, samples = _per_item(step, n, "step"), _per_item(sample_index, n, "sample_index")
    bodies = [build_request(m, c) for m, c in zip(requests, configs, strict=True)]
    keys = [cache_key(m, c, sample_index=s) for m, c, s in zip(requests, configs, samples, strict=True)]
    with contextlib.ExitStack() as stack:
        cache = default_llm_cache() if cache is True else (cache or None)
        store = book = stack.enter_context(contextlib.closing(ResponseStore(cache))) if cache else None
        if ledger is not None and (store is None or Path(ledger) != Path(cache)):
            book = stack.enter_context(contextlib.closing(ResponseStore(ledger)))
        hits = store.get_many(keys) if store else {}
        results: list[Any] = [
            replace(hits[k], usage=dict(hits[k].usage)) if k in hits else None for k in keys
        ]
        replays = [i for i in range(n) if results[i]]
        todo = [i for i in range(n) if not results[i]]
        label, urls = ", ".join(sorted({str(s) for s in steps if s})) or "llm", {c.base_url for c in configs}
        over = f" over {len(urls)} endpoints" if len(urls) > 1 else ""
        logger.info(
            "%s%s: %d requests, %d cached, %d to call%s", where, label, n, len(replays), len(todo), over
        )
        if book:
            book.log([_ledger_row(results[i], configs[i], steps[i], user_id, 0.0) for i in replays])
        bars = _bars(steps, progress, user_id)
        for bar in bars.values():
            stack.callback(bar.close)
        clients: dict[tuple, Any] = {}
        for c in (configs[i] for i in todo):  # one client per endpoint
            if (c.base_url, c.api_key_env, c.timeout) not in clients:
                clients[c.base_url, c.api_key_env, c.timeout] = client or make_client(c)
        rng = random.Random()

        def call(i: int, pause: RetryPause) -> None:
            c, start = configs[i], time.monotonic()
            send = functools.partial(post, clients[c.base_url, c.api_key_env, c.timeout], c.protocol)
            resp = call_with_retries(send, c, bodies[i], pause=pause, rng=rng)
            resp.key = keys[i]
            row = _ledger_row(resp, c, steps[i], user_id, time.monotonic() - start)
            if store is not None and resp.error is None:
                store.put(c, bodies[i], resp, row)  # the response and its ledger row, in one commit
            if book is not None and (book is not store or resp.error is not None):
                book.log([row])
            results[i] = resp
            if on_result:
                on_result(i, resp)

        def tick(i: int) -> None:
            if steps[i] in bars:
                bars[steps[i]].update(1)

        if not on_result:  # cached answers are done; else their callbacks run in the pools, first
            for i in replays:
                tick(i)
            replays = []
        futures, pauses = {}, []
        for url in dict.fromkeys(configs[i].base_url for i in replays + todo):  # one pool per endpoint
            again, calls = ([i for i in ids if configs[i].base_url == url] for ids in (replays, todo))
            width = min(len(again) + len(calls), max(c.max_concurrency for c in configs if c.base_url == url))
            pool = stack.enter_context(
                ThreadPoolExecutor(width, thread_name_prefix=f"pv4kit-llm-{len(pauses)}")
            )
            pauses.append(RetryPause())
            futures.update({pool.submit(on_result, i, results[i]): i for i in again})
            futures.update({pool.submit(call, i, pauses[-1]): i for i in calls})
        try:
            for future in as_completed(futures):
                future.result()
                tick(futures[future])
        except BaseException:
            for future in futures:
                future.cancel()
            for pause in pauses:
                pause.stop()
            raise
    failed = sum(r.error is not None for r in results)
    if failed:
        logger.warning("%s%d of %d requests failed after retries", where and where[:-1] + ": ", failed, n)
    return results


def _per_item(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name}: expected one value per request ({n}), got {len(value)}")
        return list(value)
    return [value] * n


def _configs(llm: Any, n: int) -> list[LLMConfig]:
    """The config of each request: ``llm[i % len(llm)]``, the endpoints to shard over checked equivalent."""
    endpoints = [llm] if isinstance(llm, LLMConfig) else list(llm)
    if not endpoints:
        raise ValueError("llm: expected an LLMConfig or a non-empty list of them, got an empty list")
    for j, c in enumerate(endpoints):
        if not isinstance(c, LLMConfig):
            raise TypeError(f"llm[{j}]: expected an LLMConfig, got {type(c).__name__}")
        key = [f for f in KEY_FIELDS if _key_value(c, f) != _key_value(endpoints[0], f)]
        if key and len(endpoints) != n:
            raise ValueError(
                "llm: the endpoints to shard over must give the same cache key (equal "
                f"{', '.join(KEY_FIELDS)}); "
                f"llm[{j}] has {key[0]}={getattr(c, key[0])!r}, llm[0] has {getattr(endpoints[0], key[0])!r}"
            )
    return [endpoints[i % len(endpoints)] for i in range(n)]


def _key_value(config: LLMConfig, name: str) -> Any:
    value = getattr(config, name)
    return (dict(value) if value else None) if name == "chat_template_kwargs" else value


def _bars(steps: list, progress: bool, user_id: int | None) -> dict:
    if not progress:
        return {}
    from tqdm.auto import tqdm

    prefix = f"user {user_id} " if user_id is not None else ""
    disable = not logger.isEnabledFor(logging.INFO)
    return {
        s: tqdm(total=steps.count(s), desc=f"{prefix}{s or 'llm'}", leave=False, disable=disable)
        for s in dict.fromkeys(steps)
    }
