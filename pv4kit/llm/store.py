"""The SQLite file behind :func:`pv4kit.llm.client.complete`: response cache, usage ledger and prices.

Table ``responses`` holds the answers by :func:`~pv4kit.llm.client.cache_key`, table ``usage`` one row per
call, cached or not; :func:`usage_frame` prices it with ``pv4kit/llm/prices.json`` (editable, example prices).
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

_TOKENS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")
LEDGER_COLUMNS = ["time", "step", "user_id", "protocol", "model", *_TOKENS]
LEDGER_COLUMNS += ["cached", "latency_s", "error", "key"]
_WHAT = "LLM response cache"
#: a price table, or the JSON file that holds one
Prices = str | os.PathLike[str] | Mapping[str, Any]
_INSERT_USAGE = "INSERT INTO usage VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
#: the columns each table must hold for the file to be read (a file without them is moved aside)
_TABLES = {
    "responses": ("key", "text", "response_id", "response_model", "finish_reason", "usage"),
    "usage": tuple(LEDGER_COLUMNS),
}


class ResponseStore:
    """The SQLite file of cached responses and usage ledger at ``path`` (created when missing); thread-safe.

    A file found damaged (on open, read or write) is moved aside and a new one started; one that cannot be
    written (a full or read-only disk) raises :class:`~pv4kit._sqlite.CacheStorageError`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path, self.lock = Path(path), threading.Lock()
        with storage_errors(self.path, what=_WHAT):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._open()

    def _open(self) -> None:
        recover_corrupt(self.path, tables=_TABLES, what=_WHAT)
        self.conn = connect_sqlite(self.path, timeout=60, check_same_thread=False)
        self.inode = self.path.stat().st_ino
        self.conn.executescript(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, protocol TEXT, model TEXT, "
            "request TEXT, text TEXT, response_id TEXT, response_model TEXT, finish_reason TEXT, usage TEXT, "
            "created REAL); "
            "CREATE TABLE IF NOT EXISTS usage (time REAL, step TEXT, user_id INTEGER, protocol TEXT, "
            "model TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, reasoning_tokens INTEGER, "
            "cached INTEGER, latency_s REAL, error TEXT, key TEXT)"
        )

    def get_many(self, keys: Sequence[str]) -> dict[str, LLMResponse]:
        """The cached responses of ``keys`` by key; a row without text and finish reason is no answer."""
        unique, rows = list(dict.fromkeys(keys)), []
        sql = f"SELECT {', '.join(_TABLES['responses'])} FROM responses WHERE key IN "
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            rows += self._run(
                lambda c=chunk: self.conn.execute(sql + f"({','.join('?' * len(c))})", c).fetchall()
            )
        return {
            key: LLMResponse(text, True, json.loads(usage), rid, model, finish, key=key)
            for key, text, rid, model, finish, usage in rows
            if text or finish is not None
        }

    def put(self, config: LLMConfig, request: dict[str, Any], resp: LLMResponse, ledger_row: tuple) -> None:
        """Store ``resp`` (unless it failed) under ``resp.key`` and its ledger row, in one commit."""
        row = (resp.key, config.protocol, config.model, json.dumps(request, ensure_ascii=False), resp.text)
        row += (resp.response_id, resp.model, resp.finish_reason, json.dumps(resp.usage), time.time())

        def write() -> None:
            if resp.error is None:
                self.conn.execute("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?,?,?,?)", row)
            self.conn.execute(_INSERT_USAGE, ledger_row)

        self._run(write, write=True)

    def log(self, rows: Sequence[tuple]) -> None:
        """Append ledger rows (in :data:`LEDGER_COLUMNS` order) in one commit."""
        if rows:
            self._run(lambda: self.conn.executemany(_INSERT_USAGE, rows), write=True)

    def _run(self, work: Any, *, write: bool = False) -> Any:
        """``work()`` under the lock, in one transaction when ``write``.

        On damage the file is moved aside and a new one started: a read finds nothing, a write runs again.
        """
        with self.lock:
            for attempt in (0, 1):
                try:
                    with storage_errors(self.path, what=_WHAT):
                        if not write:
                            return work()
                        with self.conn:  # COMMIT, or ROLLBACK on an error
                            self.conn.execute("BEGIN")
                            return work()
                except (sqlite3.DatabaseError, OSError) as exc:
                    if attempt or not is_corruption(exc):
                        raise
                    self.conn.close()
                    move_aside(self.path, problem=f"corrupt ({exc})", what=_WHAT, inode=self.inode)
                    self._open()
                    if not write:
                        return []

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()


def _ledger_row(resp: LLMResponse, config: LLMConfig, step: str | None, user_id: int | None, latency: float):
    """One ``usage`` row (:data:`LEDGER_COLUMNS`) for ``resp``."""
    tokens = [resp.usage.get(k, 0) for k in _TOKENS]
    head = (time.time(), step, user_id, config.protocol, config.model)
    return (*head, *tokens, int(resp.cached), latency, resp.error, resp.key)


def load_prices(prices: Prices | None = None) -> dict[str, dict[str, float]]:
    """The price table ``{model: {"input": x, "output": y}}`` (USD per 1M tokens).

    ``prices`` is a mapping, a JSON file, or ``None`` for the shipped ``pv4kit/llm/prices.json``.
    """
    if not isinstance(prices, Mapping):
        path = Path(prices) if prices is not None else Path(__file__).with_name("prices.json")
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


def usage_frame(cache_path: str | os.PathLike[str], *, prices: Prices | None = None) -> pd.DataFrame:
    """The usage ledger of the file given as ``cache`` to ``complete``, one row per call.

    :data:`LEDGER_COLUMNS` (``time`` a UTC timestamp, ``cached`` bool) and ``cost_usd``: the billed estimate
    with ``prices`` (:func:`load_prices`), 0 for cached rows, NaN for a model without a price. Reasoning
    tokens are part of ``completion_tokens`` and priced as output.
    """
    path = Path(cache_path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no LLM cache/ledger file here")
    if (problem := sqlite_problem(path, tables=_TABLES)) is not None:
        raise ValueError(
            f"{path}: LLM cache/ledger file {problem}; its usage rows cannot be read (the next LLM call "
            "with this cache moves it aside and starts a new one)"
        )
    with contextlib.closing(sqlite3.connect(path)) as conn:
        frame = pd.read_sql_query(f"SELECT {', '.join(LEDGER_COLUMNS)} FROM usage ORDER BY rowid", conn)
    table, nan = load_prices(prices), float("nan")

    def rate(model: str, side: str) -> float:
        names = [k for k in table if model == k or model.startswith(k + "-")]  # dated: gpt-5.1-2025-11-13
        return table[max(names, key=len)].get(side, nan) if names else nan

    frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
    frame = frame.astype({"user_id": "Int64", "cached": bool})
    billed = frame["prompt_tokens"] * frame["model"].map(lambda m: rate(m, "input"))
    billed += frame["completion_tokens"] * frame["model"].map(lambda m: rate(m, "output"))
    frame["cost_usd"] = (billed / 1e6).where(~frame["cached"], 0.0).astype("float64")
    return frame


def usage_summary(frame: pd.DataFrame, *, by: Sequence[str] = ("step",)) -> pd.DataFrame:
    """Sum calls, cached calls, errors, tokens and cost of a :func:`usage_frame` by the columns ``by``.

    Raises:
        ValueError: A ``by`` column that the frame does not have.
    """
    if unknown := [c for c in by if c not in frame.columns]:
        raise ValueError(f"by: unknown column(s) {unknown}; choose from {list(frame.columns)}")
    sums = {"calls": ("calls", "sum"), "cached": ("cached", "sum"), "errors": ("error", "count")}
    sums |= {t: (t, "sum") for t in _TOKENS}
    sums["cost_usd"] = ("cost_usd", lambda s: s.sum(min_count=1) if s.notna().all() else float("nan"))
    grouped = frame.assign(calls=1).groupby(list(by), dropna=False)
    return grouped.agg(**{k: v for k, v in sums.items() if k not in by}).reset_index()
