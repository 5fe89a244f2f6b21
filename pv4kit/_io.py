"""Files: atomic writes and folder swaps, reading that names file and line, hashes, provenance, SQLite."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically, else it goes.

    The caller creates a regular file at exactly the yielded path (not a folder, no added suffix); if it
    writes nothing, the replace fails naming ``path`` and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"  # the caller's open() creates it
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from exc
        raise


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` of a write to ``path`` that names no file, as one that names ``path`` and says what is left."""
    # full disk or quota, read-only or failing file system, too large: reported without the file
    unnamed = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG)
    if exc.errno not in unnamed or str(path) in str(exc):
        return exc
    reason = f"{os.strerror(exc.errno)} while writing it; it was left as it was ({exc})"
    return OSError(exc.errno, f"{path}: {reason}")


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically as UTF-8 (``\\n`` line endings are kept as given)."""
    with atomic_path(path) as tmp, open(tmp, "x", encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    return Path(path)


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, default=str) + "\n")


class FileFormatError(ValueError):
    """A file that cannot be read as what it should be; the message starts with ``file:line:``.

    ``code`` is ``not_utf8``, ``binary``, ``not_a_file`` or ``unreadable``; ``line`` is 1-based or ``None``.
    """

    def __init__(self, path: str | os.PathLike[str], line: int | None, code: str, reason: str) -> None:
        self.path, self.line, self.code, self.reason = Path(path), line, code, reason
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")


def not_utf8_error(path: str | os.PathLike[str]) -> FileFormatError:
    """The :class:`FileFormatError` of a file that is not UTF-8, with the line of its first bad byte."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        byte = f"byte 0x{data[exc.start]:02x} at column {column}"
        reason = f"not UTF-8 text ({byte}); pv4kit reads text files as UTF-8: re-save the file as UTF-8"
        return FileFormatError(path, line, "not_utf8", reason)
    return FileFormatError(path, None, "not_utf8", "not UTF-8 text")


def not_a_file_error(path: str | os.PathLike[str], *, expected: str = "a file") -> FileFormatError:
    """The :class:`FileFormatError` of a directory found where a file should be."""
    return FileFormatError(path, None, "not_a_file", f"is a directory, expected {expected}")


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 text file as :meth:`pathlib.Path.read_text` does (universal newlines).

    Raises:
        FileFormatError: Not UTF-8, a NUL byte (a binary file) or a directory, naming file and line.
    """
    path = Path(path)
    if path.is_dir():
        raise not_a_file_error(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise not_utf8_error(path) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise FileFormatError(path, line, "binary", "holds a NUL byte: a binary file, not UTF-8 text")
    return text


def read_csv(path: str | os.PathLike[str], *, expected: str = "a CSV file", **kwargs: Any):  # noqa: ANN201
    """``pandas.read_csv(path, **kwargs)`` whose errors name the file (and line where pandas gives one).

    Raises:
        FileFormatError: When the file is not UTF-8, is a directory, is empty or does not parse as CSV.
    """
    import pandas as pd

    path = Path(path)
    if path.is_dir():
        raise not_a_file_error(path, expected=expected)
    try:
        return pd.read_csv(path, **kwargs)
    except UnicodeDecodeError:
        raise not_utf8_error(path) from None
    except pd.errors.EmptyDataError:
        reason = f"is empty, expected {expected} with a header"
        raise FileFormatError(path, None, "unreadable", reason) from None
    except pd.errors.ParserError as exc:
        detail = re.sub(r"^Error tokenizing data\. C error: ", "", str(exc)).strip()
        m = re.search(r"\bline (\d+)\b", detail)
        row = re.search(r"\bstarting at row (\d+)\b", detail)  # 0-based over the file's lines
        line = int(m.group(1)) if m else (int(row.group(1)) + 1 if row else None)
        raise FileFormatError(path, line, "unreadable", f"not a readable CSV ({detail})") from None


def libc_function(name: str) -> Any:
    """The C library's function ``name`` on Linux (``use_errno``), or ``None`` where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); ``False`` where it cannot."""
    if (renameat2 := libc_function("renameat2")) is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _swap_names(path: Path) -> tuple[Path, Path]:
    """``(ready, aside)``: where a complete new output waits, and where the old one is set aside."""
    return path.parent / f".{path.name}.ready", path.parent / f".{path.name}.old"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True  # PermissionError too: alive, another user's


def recover_directory(path: str | os.PathLike[str]) -> None:
    """Finish or undo a :func:`replace_directory` swap that was killed, and remove its leftovers.

    A complete new output or an old copy set aside is moved back in when ``path`` is missing, and removed
    otherwise; temporary folders of processes no longer running are removed.
    """
    path = Path(path)
    ready, aside = _swap_names(path)
    for leftover, done in (
        (ready, "finished the swap of a build that was killed (the new output is in)"),
        (aside, "put the previous output back (a build was killed while swapping)"),
    ):
        if leftover.is_dir() and path.exists():
            shutil.rmtree(leftover)
        elif leftover.is_dir():
            os.rename(leftover, path)
            logger.warning("%s: %s", path, done)
    for tmp in path.parent.glob(f".{path.name}.new-*"):
        pid = tmp.name[len(f".{path.name}.new-") :].split("-")[0]
        if tmp.is_dir() and not (pid.isdigit() and _pid_alive(int(pid)) and int(pid) != os.getpid()):
            shutil.rmtree(tmp, ignore_errors=True)


def _carry_over(old: Path, new: Path, *, drop: tuple[str, ...] = ()) -> None:
    """Hard-link (or copy) into ``new`` each entry of ``old`` it lacks (but ``drop``), and ``old``'s mode."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    for entry in old.iterdir():  # one at a time: the first error stops it and is named by the caller
        leftover = entry.name.startswith(f".{old.name}.") and entry.name.endswith(".tmp")  # an older build's
        if leftover or entry.name in drop or os.path.lexists(new / entry.name):
            continue
        if entry.is_symlink():
            os.symlink(os.readlink(entry), new / entry.name)
        elif entry.is_dir():
            shutil.copytree(entry, new / entry.name, symlinks=True, copy_function=link)
        else:
            link(str(entry), str(new / entry.name))
    os.chmod(new, stat.S_IMODE(old.stat().st_mode))


@contextlib.contextmanager
def replace_directory(path: str | os.PathLike[str], *, drop: tuple[str, ...] = ()) -> Iterator[Path]:
    """Yield an empty temporary directory; on success it replaces ``path`` as a whole.

    The new folder is built beside ``path``, gets the old one's entries it does not write (hard links; not
    those in ``drop``), and the two are exchanged atomically (Linux ``RENAME_EXCHANGE``; elsewhere two
    renames, so a kill between them leaves ``path`` missing until the next call). A killed swap is finished
    or undone by the next call; on an exception in the ``with`` body nothing in ``path`` changes.

    Raises:
        NotADirectoryError: When ``path`` is an existing file.
        ValueError: When ``path`` is or holds the current directory.
    """
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{path}: is a file, not a directory; name a folder for the output")
    cwd = Path.cwd().resolve()
    if path.exists() and (cwd == path.resolve() or path.resolve() in cwd.parents):
        raise ValueError(
            f"{path}: the output folder is or holds the current directory; name a folder of its own"
        )
    recover_directory(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = path.parent / f".{path.name}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    new.mkdir()
    ready, aside = _swap_names(path)
    try:
        yield new
        if path.is_dir():
            _carry_over(path, new, drop=drop)
        os.rename(new, ready)
    except BaseException as exc:
        shutil.rmtree(new, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from exc
        raise
    try:
        if not path.exists():
            os.rename(ready, path)
            return
        if _exchange(ready, path):
            os.rename(ready, aside)  # ready holds the old output now
        else:
            os.rename(path, aside)
            os.rename(ready, path)
        shutil.rmtree(aside)
    except BaseException:
        recover_directory(path)
        raise


def sha256_text(text: str) -> str:
    """Hex SHA-256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def git_commit() -> str | None:
    """The current git commit of the pv4kit checkout, or ``None`` outside git."""
    command, here = ["git", "rev-parse", "HEAD"], Path(__file__).resolve().parent
    try:
        out = subprocess.run(command, cwd=here, capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def provenance(**extra: Any) -> dict[str, Any]:
    """A provenance record: pv4kit version, git commit, UTC time, plus ``extra`` fields."""
    from pv4kit import __version__

    now = datetime.now(UTC).isoformat(timespec="seconds")
    return {"pv4kit_version": __version__, "git_commit": git_commit(), "created_utc": now, **extra}


def connect_sqlite(path: str | os.PathLike[str], *, timeout: float = 60.0, check_same_thread: bool = True):  # noqa: ANN201
    """Open a SQLite database in WAL mode (autocommit), safe when threads or processes open it at once.

    Switching a new file to WAL needs exclusive access ("database is locked"): retried until ``timeout``.
    """
    con = sqlite3.connect(path, timeout=timeout, check_same_thread=check_same_thread, isolation_level=None)
    deadline, delay = time.monotonic() + timeout, 0.01
    while True:
        try:
            con.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                con.close()
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    con.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable against process kills
    return con


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` for each non-blank line (1-based); bad JSON names file and line."""
    if Path(path).is_dir():
        raise not_a_file_error(path, expected="a JSONL file")
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
                if not isinstance(record, dict):
                    raise ValueError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
                yield number, record
    except UnicodeDecodeError:
        raise not_utf8_error(path) from None


def cache_root() -> Path:
    """Where pv4kit keeps its caches: ``$PV4KIT_CACHE``, else ``./.cache/pv4kit``."""
    base = os.environ.get("PV4KIT_CACHE")
    return Path(base) if base else Path.cwd() / ".cache" / "pv4kit"


def default_llm_cache() -> Path:
    """The LLM response cache and usage ledger shared by every command: ``cache_root() / "llm.sqlite"``."""
    return cache_root() / "llm.sqlite"
