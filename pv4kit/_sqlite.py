"""Corrupt SQLite caches: found when a store is opened, moved aside with a warning, rebuilt.

pv4kit's caches (the embedding store of :mod:`pv4kit.embeddings.cache`, the LLM response cache and ledger of
:mod:`pv4kit.llm.store`) are SQLite files that can be rebuilt from their inputs. A damaged one (a disk
error, a file cut short by a copy, garbage written over it, or another program's database at that path)
must not stop a run with a ``sqlite3.DatabaseError`` traceback. :func:`recover_corrupt` runs before a
store opens its file and checks, cheaply:

* the 16-byte SQLite header and the page size (garbage, a file shorter than one header);
* the file size against the page count the header records (a truncated file; skipped while a WAL file
  holds pages not yet written back, when the main file may legitimately be shorter);
* the schema: each table the store uses has at least the columns it reads, and a file holding tables but
  none of the store's is another program's database; SQLite's own "malformed"/"not a database" errors
  while reading the schema and the first row count as corruption too.

A damaged file is renamed ``<name>.corrupt-<UTC time>-<pid>`` (with its ``-wal``/``-shm`` files) beside
the original, never deleted, under a lock so that two processes do not both move it; the warning names
both paths. Corruption deep inside a large file that these checks do not touch is reported by SQLite when
the page is read (a full ``PRAGMA quick_check`` reads the whole file and is too slow to run on every open);
a store can then call :func:`is_corruption` on the error and :func:`move_aside` (the LLM cache does, on
every read and write).

A store that cannot be written (a full disk, a read-only one, a path that cannot be opened) is not damaged:
:func:`storage_errors` turns SQLite's "database or disk is full", "attempt to write a readonly database",
"unable to open database file" (and the same from the file system) into one :class:`CacheStorageError`
naming the file and the fix, which the command line prints as one line.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

_MAGIC = b"SQLite format 3\x00"
_CORRUPT_CODES = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
_STORAGE_CODES = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_IOERR")
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR}


class CacheStorageError(OSError):
    """A cache file that cannot be written or opened: a full or read-only disk, a path that is not usable."""


@contextlib.contextmanager
def storage_errors(path: str | os.PathLike[str], *, what: str) -> Iterator[None]:
    """Raise a :class:`CacheStorageError` naming ``path`` and the fix for a full or read-only disk."""
    try:
        yield
    except (sqlite3.OperationalError, OSError) as exc:
        if isinstance(exc, CacheStorageError):
            raise
        if isinstance(exc, sqlite3.Error):
            if not (getattr(exc, "sqlite_errorname", "") or "").startswith(_STORAGE_CODES):
                raise
        elif exc.errno not in _STORAGE_ERRNOS:
            raise
        raise CacheStorageError(
            f"{what} {path} cannot be written ({exc}): free space on its disk, or set PV4KIT_CACHE (or the "
            "cache parameter) to a writable folder with room"
        ) from exc


def _is_corruption(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file is damaged (not merely locked or busy)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(tuple(_CORRUPT_CODES)):
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _header_problem(path: Path, size: int) -> str | None:
    with open(path, "rb") as fh:
        head = fh.read(100)
    if len(head) < 100 or not head.startswith(_MAGIC):
        return "not a SQLite database (no SQLite header)"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return f"not a SQLite database (page size {page_size} in the header)"
    change, valid_for = head[24:28], head[92:96]
    pages = int.from_bytes(head[28:32], "big")
    wal = path.with_name(path.name + "-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0
    if change == valid_for and pages and not wal_pending and size < pages * page_size:
        return f"truncated ({size} bytes; its header records {pages} pages of {page_size} bytes)"
    return None


def _schema_problem(path: Path, tables: Mapping[str, Sequence[str]], timeout: float) -> str | None:
    con = sqlite3.connect(path, timeout=timeout)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        own = [t for t in tables if t in names]
        others = [n for n in names if not n.startswith("sqlite_")]
        if not own and others:
            return f"wrong schema (tables {sorted(others)}, none of {sorted(tables)})"
        for table in own:
            columns = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
            missing = [c for c in tables[table] if c not in columns]
            if missing:
                return f"wrong schema (table {table!r} lacks columns {missing}; has {sorted(columns)})"
            con.execute(f'SELECT * FROM "{table}" LIMIT 1').fetchall()
    except sqlite3.DatabaseError as exc:
        if _is_corruption(exc):
            return f"corrupt ({exc})"
        if isinstance(exc, sqlite3.OperationalError):  # locked or busy: another writer, not damage
            return None
        raise
    finally:
        con.close()
    return None


def sqlite_problem(
    path: str | os.PathLike[str], *, tables: Mapping[str, Sequence[str]], timeout: float = 60.0
) -> str | None:
    """What is wrong with the SQLite file at ``path`` for a store using ``tables``, or ``None``.

    Args:
        path: The database file (a missing or empty file is fine: the store creates it).
        tables: The store's tables and, for each, the columns it reads.
        timeout: Seconds to wait for another writer's lock while reading the schema.

    Returns:
        A short description (``"truncated (...)"``, ``"wrong schema (...)"``, ...) or ``None``.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size == 0:
        return None
    return _header_problem(path, size) or _schema_problem(path, tables, timeout)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_corruption(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying the file is damaged (not merely locked or busy)."""
    return isinstance(exc, sqlite3.DatabaseError) and _is_corruption(exc)


def move_aside(
    path: str | os.PathLike[str], *, problem: str, what: str, inode: int | None = None
) -> Path | None:
    """Rename the damaged store ``path`` (and its ``-wal``/``-shm``) aside and log a warning naming both.

    Args:
        path: The database file.
        problem: What is wrong, for the warning.
        what: What the store is, for the warning.
        inode: Move only if ``path`` is still this file (another process may have replaced it already).

    Returns:
        Where the file went, or ``None`` when there was nothing (left) to move.
    """
    path = Path(path)
    with _lock(path):
        try:
            if inode is not None and path.stat().st_ino != inode:
                return None
        except FileNotFoundError:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{os.getpid()}")
        os.replace(path, aside)
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            if side.exists():
                os.replace(side, aside.with_name(aside.name + suffix))
    logger.warning(
        "%s %s: %s; moved it aside to %s and starting a new one (its contents are recomputed as needed)",
        what,
        path,
        problem,
        aside,
    )
    return aside


def recover_corrupt(
    path: str | os.PathLike[str],
    *,
    tables: Mapping[str, Sequence[str]],
    what: str,
    timeout: float = 60.0,
) -> Path | None:
    """Move a damaged SQLite store aside so that it is rebuilt; call before opening ``path``.

    Args:
        path: The store's database file.
        tables: The store's tables and the columns it reads (see :func:`sqlite_problem`).
        what: What the store is, for the warning (``"embedding cache"``, ``"LLM response cache"``).
        timeout: Seconds to wait for another writer's lock.

    Returns:
        Where the damaged file went, or ``None`` when the file was fine (or absent).
    """
    path = Path(path)
    problem = sqlite_problem(path, tables=tables, timeout=timeout)
    if problem is None:
        return None
    with _lock(path):  # another process may be moving it right now: look again once it is done
        problem = sqlite_problem(path, tables=tables, timeout=timeout)
        if problem is None:
            return None
        inode = path.stat().st_ino
    return move_aside(path, problem=problem, what=what, inode=inode)
