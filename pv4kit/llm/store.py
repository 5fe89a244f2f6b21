"""The SQLite file behind :func:`pv4kit.llm.client.complete`: response cache, usage ledger and prices.

One file holds two tables: ``responses`` (the cached answers, keyed by :func:`pv4kit.llm.protocols.cache_key`)
and ``usage`` (one row per call, cached or not). :class:`ResponseStore` reads and writes it (other stages
use it to look answers up without calling, as :mod:`pv4kit.generation.steps` does to adopt files);
:func:`usage_frame` reads the ledger as a tidy frame priced with ``pv4kit/llm/prices.json`` (editable,
example prices); :func:`usage_summary` sums it.

These names are also importable from :mod:`pv4kit.llm.client`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit._io import connect_sqlite
from pv4kit._sqlite import is_corruption, move_aside, recover_corrupt, sqlite_problem, storage_errors
from pv4kit.llm.config import LLMConfig, LLMResponse

LEDGER_COLUMNS = [
    "time",
    "step",
    "user_id",
    "protocol",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cached",
    "latency_s",
    "error",
    "key",
]

_WHAT = "LLM response cache"

#: the columns each table must hold for the file to be read (a file without them is moved aside)
_TABLES = {
    "responses": ("key", "text", "response_id", "response_model", "finish_reason", "usage"),
    "usage": tuple(LEDGER_COLUMNS),
}

# --------------------------------------------------------------------------- cache and ledger


class ResponseStore:
    """The SQLite file holding cached responses and the usage ledger (one connection, one lock).

    Thread-safe; a file found damaged (on open, read or write) is moved aside and a new one started
    (:mod:`pv4kit._sqlite`); one that cannot be written (a full or read-only disk) raises
    :class:`~pv4kit._sqlite.CacheStorageError`. Close it with :meth:`close`.

    Args:
        path: The SQLite file (created with its folder when missing).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lock = threading.Lock()
        with storage_errors(self.path, what=_WHAT):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._open()

    def _open(self) -> None:
        recover_corrupt(self.path, tables=_TABLES, what=_WHAT)
        self.conn = connect_sqlite(self.path, timeout=60, check_same_thread=False)
        self.inode = self.path.stat().st_ino
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, protocol TEXT, model TEXT, "
            "request TEXT, text TEXT, response_id TEXT, response_model TEXT, finish_reason TEXT, usage TEXT, "
            "created REAL)"
        )
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS usage (time REAL, step TEXT, user_id INTEGER, protocol TEXT, "
            "model TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, reasoning_tokens INTEGER, "
            "cached INTEGER, latency_s REAL, error TEXT, key TEXT)"
        )

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """Damage found while reading or writing (the open checks do not read every page): start anew."""
        self.conn.close()
        move_aside(self.path, problem=f"corrupt ({exc})", what=_WHAT, inode=self.inode)
        self._open()

    def get_many(self, keys: Sequence[str]) -> dict[str, LLMResponse]:
        """The cached responses of ``keys`` that the file holds, by key (``cached=True``).

        A row with no text and no finish reason is not an answer (an older pv4kit cached what an HTTP 200
        without one gave, see :class:`~pv4kit.llm.protocols.NoAnswerError`): it is left out, so the
        request is asked again and its row replaced.
        """
        try:
            with storage_errors(self.path, what=_WHAT):
                return self._get_many(keys)
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            with self.lock:
                self._recover(exc)
            return {}

    def _get_many(self, keys: Sequence[str]) -> dict[str, LLMResponse]:
        found: dict[str, LLMResponse] = {}
        unique = list(dict.fromkeys(keys))
        with self.lock:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                rows = self.conn.execute(
                    "SELECT key, text, response_id, response_model, finish_reason, usage FROM responses "
                    f"WHERE key IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
                for key, text, rid, model, finish, usage in rows:
                    if not text and finish is None:
                        continue
                    found[key] = LLMResponse(
                        text=text,
                        cached=True,
                        usage=json.loads(usage),
                        response_id=rid,
                        model=model,
                        finish_reason=finish,
                        key=key,
                    )
        return found

    def put(self, config: LLMConfig, request: dict[str, Any], resp: LLMResponse, ledger_row: tuple) -> None:
        """Store ``resp`` (the answer to ``request`` under ``resp.key``) and its ledger row, in one commit."""
        row = (  # built before taking the lock, which other workers are waiting for
            resp.key,
            config.protocol,
            config.model,
            json.dumps(request, ensure_ascii=False),
            resp.text,
            resp.response_id,
            resp.model,
            resp.finish_reason,
            json.dumps(resp.usage),
            time.time(),
        )
        with self.lock:
            self._write(
                lambda: (
                    self.conn.execute("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?,?,?,?)", row),
                    self.conn.execute("INSERT INTO usage VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", ledger_row),
                )
            )

    def log(self, rows: Sequence[tuple]) -> None:
        """Append ledger rows (in :data:`LEDGER_COLUMNS` order) in one commit."""
        if not rows:
            return
        with self.lock:
            self._write(
                lambda: self.conn.executemany("INSERT INTO usage VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            )

    def _write(self, statements: Any) -> None:
        """Run ``statements`` in one transaction (lock held); on damage, start a new file and rerun them."""
        for attempt in (0, 1):
            try:
                with storage_errors(self.path, what=_WHAT):
                    self.conn.execute("BEGIN")
                    statements()
                    self.conn.execute("COMMIT")
                return
            except (sqlite3.DatabaseError, OSError) as exc:
                if self.conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")
                if attempt or not is_corruption(exc):
                    raise
                self._recover(exc)

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()


def _ledger_row(resp: LLMResponse, config: LLMConfig, step: str | None, user_id: int | None, latency: float):
    """One ``usage`` row (:data:`LEDGER_COLUMNS`) for ``resp``."""
    u = resp.usage or {}
    return (
        time.time(),
        step,
        user_id,
        config.protocol,
        config.model,
        u.get("prompt_tokens", 0),
        u.get("completion_tokens", 0),
        u.get("reasoning_tokens", 0),
        int(resp.cached),
        latency,
        resp.error,
        resp.key,
    )


# --------------------------------------------------------------------------- usage and prices


def load_prices(
    prices: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> dict[str, dict[str, float]]:
    """The price table (USD per 1M tokens): ``{model: {"input": x, "output": y}}``.

    Args:
        prices: A mapping, a JSON file path, or ``None`` for the shipped ``pv4kit/llm/prices.json``.
    """
    if prices is None:
        prices = Path(__file__).with_name("prices.json")
    if not isinstance(prices, Mapping):
        path = Path(prices)
        try:
            prices = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"prices: {path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                'expected {"models": {MODEL: {"input": USD per 1M tokens, "output": ...}}}, as '
                "pv4kit/llm/prices.json"
            ) from None
    table = prices.get("models", prices)
    return {k: dict(v) for k, v in table.items() if not k.startswith("_") and isinstance(v, Mapping)}


def _price_for(model: str, table: dict[str, dict[str, float]]) -> dict[str, float] | None:
    if model in table:
        return table[model]
    prefixes = [k for k in table if model.startswith(k + "-")]  # dated snapshots: gpt-5.1-2025-11-13
    return table[max(prefixes, key=len)] if prefixes else None


def usage_frame(
    cache_path: str | os.PathLike[str],
    *,
    prices: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """The usage ledger as a tidy frame, one row per call, with the estimated cost.

    Args:
        cache_path: The SQLite file given as ``cache`` (or ``ledger``) to :func:`complete`.
        prices: Price table (see :func:`load_prices`).

    Returns:
        Columns ``time`` (UTC timestamp), ``step``, ``user_id`` (Int64), ``protocol``, ``model``,
        ``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``, ``cached`` (bool), ``latency_s``,
        ``error``, ``key``, ``cost_usd``: the billed estimate, 0 for cached rows and NaN for a model
        missing from the price table. Reasoning tokens are part of ``completion_tokens`` and priced as
        output.
    """
    path = Path(cache_path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no LLM cache/ledger file here")
    problem = sqlite_problem(path, tables=_TABLES)
    if problem is not None:
        raise ValueError(
            f"{path}: LLM cache/ledger file {problem}; its usage rows cannot be read (the next LLM call "
            "with this cache moves it aside and starts a new one)"
        )
    conn = sqlite3.connect(path)
    try:
        frame = pd.read_sql_query(f"SELECT {', '.join(LEDGER_COLUMNS)} FROM usage ORDER BY rowid", conn)
    finally:
        conn.close()
    table = load_prices(prices)
    frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
    frame["user_id"] = frame["user_id"].astype("Int64")
    frame["cached"] = frame["cached"].astype(bool)
    costs = []
    for model, p_tok, c_tok, cached in frame[
        ["model", "prompt_tokens", "completion_tokens", "cached"]
    ].itertuples(index=False):
        price = _price_for(model, table)
        if cached:
            costs.append(0.0)
        elif price is None:
            costs.append(float("nan"))
        else:
            costs.append(
                (p_tok * price.get("input", float("nan")) + c_tok * price.get("output", float("nan"))) / 1e6
            )
    frame["cost_usd"] = pd.Series(costs, index=frame.index, dtype="float64")
    return frame


def usage_summary(frame: pd.DataFrame, *, by: Sequence[str] = ("step",)) -> pd.DataFrame:
    """Sum calls, cached calls, tokens and cost of a :func:`usage_frame` by the given columns.

    A ``by`` column that is also a sum (``cached``) is kept as the group key, not summed.

    Raises:
        ValueError: A ``by`` column that the frame does not have.
    """
    unknown = [c for c in by if c not in frame.columns]
    if unknown:
        raise ValueError(f"by: unknown column(s) {unknown}; choose from {list(frame.columns)}")
    sums = {
        "calls": ("calls", "sum"),
        "cached": ("cached", "sum"),
        "errors": ("error", lambda s: int(s.notna().sum())),
        "prompt_tokens": ("prompt_tokens", "sum"),
        "completion_tokens": ("completion_tokens", "sum"),
        "reasoning_tokens": ("reasoning_tokens", "sum"),
        "cost_usd": ("cost_usd", lambda s: s.sum(min_count=1) if s.notna().all() else float("nan")),
    }
    grouped = frame.assign(calls=1).groupby(list(by), dropna=False)
    return grouped.agg(**{k: v for k, v in sums.items() if k not in by}).reset_index()
