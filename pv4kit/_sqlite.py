"""Damaged SQLite caches (the embedding store, the LLM response cache): found, moved aside, rebuilt.

A damaged store is renamed ``<name>.corrupt-<UTC time>-<pid>`` (never deleted) and rebuilt;
:func:`storage_errors` names the file on a full or read-only disk.
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
        if isinstance(exc, sqlite3.Error):
            storage = (getattr(exc, "sqlite_errorname", None) or "").startswith(_STORAGE_CODES)
        else:
            storage = exc.errno in _STORAGE_ERRNOS and not isinstance(exc, CacheStorageError)
        if not storage:
            raise
        raise CacheStorageError(
            f"{what} {path} cannot be written ({exc}): free space on its disk, or set PV4KIT_CACHE (or the "
            "cache parameter) to a writable folder with room"
        ) from exc


def is_corruption(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying the file is damaged (not merely locked or busy)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name, text = getattr(exc, "sqlite_errorname", "") or "", str(exc).lower()
    return (
        name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))
        or "malformed" in text
        or "not a database" in text
    )


def sqlite_problem(
    path: str | os.PathLike[str], *, tables: Mapping[str, Sequence[str]], timeout: float = 60.0
) -> str | None:
    """What is wrong with the SQLite file at ``path`` for a store reading ``tables`` (``{table: columns}``).

    A short description (``"truncated (...)"``, ``"wrong schema (...)"``, ...), or ``None`` when the file
    is fine, missing or empty (the store creates it).
    """
    path = Path(path)
    if not path.exists() or (size := path.stat().st_size) == 0:
        return None
    with open(path, "rb") as fh:
        head = fh.read(100)
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        return "not a SQLite database (no SQLite header)"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return f"not a SQLite database (page size {page_size} in the header)"
    pages = int.from_bytes(head[28:32], "big")
    wal = path.with_name(path.name + "-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0  # the main file may then be shorter
    if head[24:28] == head[92:96] and pages and not wal_pending and size < pages * page_size:
        return f"truncated ({size} bytes; its header records {pages} pages of {page_size} bytes)"
    con = sqlite3.connect(path, timeout=timeout)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        own, others = [t for t in tables if t in names], [n for n in names if not n.startswith("sqlite_")]
        if not own and others:
            return f"wrong schema (tables {sorted(others)}, none of {sorted(tables)})"
        for table in own:
            columns = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
            missing = [c for c in tables[table] if c not in columns]
            if missing:
                return f"wrong schema (table {table!r} lacks columns {missing}; has {sorted(columns)})"
            con.execute(f'SELECT * FROM "{table}" LIMIT 1').fetchall()
    except sqlite3.DatabaseError as exc:
        if is_corruption(exc):
            return f"corrupt ({exc})"
        if not isinstance(exc, sqlite3.OperationalError):  # locked or busy: another writer, not damage
            raise
    finally:
        con.close()
    return None


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes
        yield


def move_aside(
    path: str | os.PathLike[str], *, problem: str, what: str, inode: int | None = None
) -> Path | None:
    """Rename the damaged store ``path`` (and its ``-wal``/``-shm``) aside and log a warning naming both.

    ``problem`` and ``what`` are for the warning; with ``inode``, move only if ``path`` is still that file
    (another process may have replaced it). Returns where the file went, or ``None`` (nothing left to move).
    """
    path = Path(path)
    with _lock(path):
        if not path.exists() or (inode is not None and path.stat().st_ino != inode):
            return None
        aside = path.with_name(
            f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
        )
        os.replace(path, aside)
        for suffix in ("-wal", "-shm"):
            if path.with_name(path.name + suffix).exists():
                os.replace(path.with_name(path.name + suffix), aside.with_name(aside.name + suffix))
    message = "%s %s: %s; moved it aside to %s and starting a new one (its contents are recomputed as needed)"
    logger.warning(message, what, path, problem, aside)
    return aside


def recover_corrupt(
    path: str | os.PathLike[str], *, tables: Mapping[str, Sequence[str]], what: str, timeout: float = 60.0
) -> Path | None:
    """Move a damaged SQLite store aside so that it is rebuilt; call before opening ``path``.

    ``tables`` and ``timeout`` are as in :func:`sqlite_problem`, ``what`` names the store in the warning.
    Returns where the damaged file went, or ``None`` when it was fine (or absent).
    """
    path = Path(path)
    if sqlite_problem(path, tables=tables, timeout=timeout) is None:
        return None
    with _lock(path):  # another process may be moving it right now: look again once it is done
        problem = sqlite_problem(path, tables=tables, timeout=timeout)
        if problem is None:
            return None
        inode = path.stat().st_ino
    return move_aside(path, problem=problem, what=what, inode=inode)
