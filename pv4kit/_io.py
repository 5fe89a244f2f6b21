"""Small shared helpers: atomic writes, hashing and provenance records.

Every file pv4kit writes goes through these, so an interrupted or failing step never leaves a
half-written file behind (write to a temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():  # mkstemp makes the file 0600; give it the mode a plain open() would
            os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


@functools.cache
def _umask() -> int:
    """The process umask, read once (reading it means setting it, which is not thread-safe)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (``\\n`` line endings are kept as given)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding=encoding, newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    return Path(path)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int = 2) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=str) + "\n")


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory; on success its files are moved into ``path``.

    Files already in ``path`` that the new output also writes are replaced one by one with
    ``os.replace``; other files in ``path`` are kept. On failure nothing in ``path`` changes.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path))
    try:
        yield tmp
        for item in sorted(tmp.rglob("*")):
            if item.is_file():
                dest = path / item.relative_to(tmp)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(item, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class FileFormatError(ValueError):
    """A file that cannot be read as what it should be; the message starts with ``file:line:``.

    Attributes:
        path: The file.
        line: 1-based line of the problem, or ``None`` when there is none.
        code: A short code for reports: ``not_utf8``, ``binary``, ``not_a_file``, ``unreadable``.
        reason: What was expected and what was found (the message without the location).
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
        return FileFormatError(
            path,
            line,
            "not_utf8",
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column}); pv4kit reads text files "
            "as UTF-8: re-save the file as UTF-8",
        )
    return FileFormatError(path, None, "not_utf8", "not UTF-8 text")


def not_a_file_error(path: str | os.PathLike[str], *, expected: str = "a file") -> FileFormatError:
    """The :class:`FileFormatError` of a directory found where a file should be."""
    return FileFormatError(path, None, "not_a_file", f"is a directory, expected {expected}")


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 text file as :meth:`pathlib.Path.read_text` does (universal newlines).

    Raises:
        FileFormatError: Naming the file and line when it is not UTF-8, holds a NUL byte (a binary
            file) or is a directory.
        FileNotFoundError: When it does not exist.
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
    import re

    import pandas as pd

    path = Path(path)
    if path.is_dir():
        raise not_a_file_error(path, expected=expected)
    try:
        return pd.read_csv(path, **kwargs)
    except UnicodeDecodeError:
        raise not_utf8_error(path) from None
    except pd.errors.EmptyDataError:
        raise FileFormatError(
            path, None, "unreadable", f"is empty, expected {expected} with a header"
        ) from None
    except pd.errors.ParserError as exc:
        detail = re.sub(r"^Error tokenizing data\. C error: ", "", str(exc)).strip()
        m = re.search(r"\bline (\d+)\b", detail)
        row = re.search(r"\bstarting at row (\d+)\b", detail)  # 0-based over the file's lines
        line = int(m.group(1)) if m else (int(row.group(1)) + 1 if row else None)
        raise FileFormatError(path, line, "unreadable", f"not a readable CSV ({detail})") from None


def sha256_text(text: str) -> str:
    """Hex SHA-256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike[str], *, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def fingerprint_files(paths: list[Path], *, root: Path | None = None) -> str:
    """One SHA-256 over the names and contents of ``paths`` (sorted), for provenance records."""
    digest = hashlib.sha256()
    for p in sorted(paths):
        name = str(p.relative_to(root)) if root else str(p)
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(sha256_file(p).encode())
    return digest.hexdigest()


def git_commit(path: str | os.PathLike[str] | None = None) -> str | None:
    """The current git commit of the pv4kit checkout (or of ``path``), or ``None`` outside git."""
    cwd = Path(path) if path else Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def provenance(**extra: Any) -> dict[str, Any]:
    """A provenance record: pv4kit version, git commit, UTC time, plus ``extra`` fields."""
    from pv4kit import __version__

    record: dict[str, Any] = {
        "pv4kit_version": __version__,
        "git_commit": git_commit(),
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    record.update(extra)
    return record


def parse_id_range(text: str, *, name: str) -> tuple[int, int]:
    """Parse ``"6-125"`` into ``(6, 125)``; the error names the option ``name``."""
    parts = str(text).split("-")
    try:
        lo, hi = (int(parts[0]), int(parts[1])) if len(parts) == 2 else (int(parts[0]), int(parts[0]))
    except ValueError:
        raise ValueError(f"{name}: expected a user-id range like '6-125', got {text!r}") from None
    if lo > hi:
        raise ValueError(f"{name}: range start {lo} is above its end {hi} in {text!r}")
    return lo, hi


def connect_sqlite(path: str | os.PathLike[str], *, timeout: float = 60.0, check_same_thread: bool = True):  # noqa: ANN201
    """Open a SQLite database in WAL mode (autocommit), safe when threads or processes open it at once.

    Switching a new file to WAL needs a moment of exclusive access, and SQLite answers "database is locked"
    at once (without its busy handler) when another connection holds the file; the switch is retried until
    ``timeout``.
    """
    import sqlite3
    import time

    con = sqlite3.connect(path, timeout=timeout, check_same_thread=check_same_thread, isolation_level=None)
    deadline = time.monotonic() + timeout
    delay = 0.01
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
    with open(path, encoding="utf-8") as fh:
        lines = enumerate(fh, start=1)
        while True:
            try:
                number, line = next(lines)
            except StopIteration:
                return
            except UnicodeDecodeError:
                raise not_utf8_error(path) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
            yield number, record


def cache_root() -> Path:
    """Where pv4kit keeps its caches: ``$PV4KIT_CACHE``, else ``./.cache/pv4kit``."""
    base = os.environ.get("PV4KIT_CACHE")
    return Path(base) if base else Path.cwd() / ".cache" / "pv4kit"


def default_llm_cache() -> Path:
    """The LLM response cache and usage ledger shared by every command: ``cache_root() / "llm.sqlite"``."""
    return cache_root() / "llm.sqlite"


def llm_cache_arg(value: str | os.PathLike[str] | None) -> Path | None:
    """Resolve a ``--cache`` option: ``None`` gives :func:`default_llm_cache`, ``"none"`` disables it."""
    if value is None:
        return default_llm_cache()
    return None if str(value).lower() == "none" else Path(value)
