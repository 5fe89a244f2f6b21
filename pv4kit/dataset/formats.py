"""The text formats of a user folder's files: list files, chats and ``qa.csv``.

The lowest module of the dataset stage: it knows how each file of ``users/user_N/`` is read, written and
checked on its own, not where the files sit in the tree (:mod:`pv4kit.dataset.tree`) nor how ``qa.csv``
is made (:mod:`pv4kit.dataset.questions`).

* ``categories.txt`` and ``chat_topics.txt``: one item a line, read with ``split("\\n")`` and nothing else,
  written joined with ``\\n`` and no trailing newline (as the reference reads and writes them);
* ``chats/{i}.txt``: two turns, ``Leo: ...`` then ``Assistant: ...`` (:func:`check_chat`);
* ``qa.csv``: the columns :data:`pv4kit.schema.QA_COLUMNS`, minimal quoting, ``\\n`` line ends.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

from pv4kit._io import FileFormatError, read_csv, read_text
from pv4kit.schema import CHOICE_COLUMNS, QA_COLUMNS, answer_letter_problem

USER_TAG = "Leo:"
ASSISTANT_TAG = "Assistant:"


def read_list(path: str | Path) -> list[str]:
    """Read ``categories.txt`` or ``chat_topics.txt`` exactly as the reference does.

    The file is read as text (``\\r\\n`` reads as ``\\n``) and split on ``\\n``, nothing else: items
    are kept as stored (a ``2.5-hour commutes`` item stays whole, no numbering is removed again) and a
    blank line, a trailing newline included, is an item of its own, as the reference counts it.

    Raises:
        FileFormatError: Naming the file and line when it is not UTF-8 text.
    """
    return read_text(path).split("\n")


def format_list(items: list[str]) -> str:
    """The text of a list file: ``items`` joined with ``\\n`` and no trailing newline.

    A trailing newline would read back (:func:`read_list`) as one more, blank, item.
    """
    return "\n".join(items)


def read_categories(user_dir: str | Path) -> list[str]:
    """Read ``categories.txt`` as the reference does: ``split("\\n")``, every line kept as stored."""
    return read_list(Path(user_dir) / "categories.txt")


def check_chat(text: str) -> list[tuple[int, str, str]]:
    """Check one chat's format; returns ``(line, code, message)`` for each problem found."""
    lines = text.strip().splitlines()
    problems: list[tuple[int, str, str]] = []
    if not lines:
        return [(1, "chat_empty", "chat is empty; expected a 'Leo:' line then an 'Assistant:' line")]
    if not lines[0].startswith(USER_TAG):
        problems.append(
            (1, "chat_format", f"expected the chat to start with {USER_TAG!r}, found {lines[0][:40]!r}")
        )
    asst = [i for i, line in enumerate(lines) if line.startswith(ASSISTANT_TAG)]
    leo = [i for i, line in enumerate(lines) if line.startswith(USER_TAG)]
    if not asst:
        problems.append((len(lines), "chat_format", f"no {ASSISTANT_TAG!r} turn after the {USER_TAG!r} turn"))
    elif len(asst) > 1 or len(leo) > 1:
        problems.append(
            (
                asst[-1] + 1,
                "chat_turns",
                f"expected two turns, found {len(leo)} Leo and {len(asst)} Assistant",
            )
        )
    elif leo and asst[0] < leo[0]:
        problems.append((asst[0] + 1, "chat_format", "the 'Assistant:' turn comes before the 'Leo:' turn"))
    return problems


def format_qa_csv(table: pd.DataFrame) -> str:
    """Render a question table as ``qa.csv`` text (minimal quoting, ``\\n`` line endings)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(QA_COLUMNS)
    for row in table[QA_COLUMNS].itertuples(index=False):
        writer.writerow(row)
    return buf.getvalue()


_INTEGER = re.compile(r"[0-9]+")  # a non-negative integer: ASCII digits only, as int64 reads them
_INTEGER_COLUMNS = ("index", "category")


def read_qa_csv(path: str | Path) -> pd.DataFrame:
    """Read a ``qa.csv`` keeping empty choices as "" (never NaN) and text exactly as written.

    A plain file (UTF-8 without a BOM, a header of distinct names holding every column, every row as
    wide as the header, no blank line, quotes only where CSV puts them, integers of at most 18 digits)
    is parsed with the standard library's ``csv`` module: 0.51 s instead of 1.30 s for the grown
    release's 149 tables and the sample's 6. Anything else is read by pandas, which defines the result
    and words every error; both give equal frames on plain files (``tests/test_qa_csv_reader.py``).
    """
    frame = _read_plain_qa_csv(Path(path))
    return frame if frame is not None else _read_qa_csv_pandas(path)


def _read_qa_csv_pandas(path: str | Path) -> pd.DataFrame:
    """:func:`read_qa_csv` through ``pandas.read_csv``: the definition, and the errors that name the line."""
    frame = read_csv(path, expected="a qa.csv file", dtype=str, keep_default_na=False, na_filter=False)
    if not isinstance(frame.index, pd.RangeIndex):  # pandas made a long first row's leading fields an index
        width = len(frame.columns)
        raise FileFormatError(
            path,
            2,
            "unreadable",
            f"not a readable CSV (Expected {width} fields in line 2, saw {width + frame.index.nlevels})",
        )
    missing = [c for c in QA_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: qa.csv lacks columns {missing}; expected {QA_COLUMNS}")
    for col in _INTEGER_COLUMNS:
        bad = ~frame[col].str.fullmatch(_INTEGER.pattern)
        if bad.any():
            line = int(bad.to_numpy().argmax()) + 2
            raise ValueError(
                f"{path}:{line}: {col} must be a non-negative integer, found {frame[col][bad].iloc[0]!r}"
            )
        frame[col] = frame[col].astype("int64")
    return frame[QA_COLUMNS]


def _read_plain_qa_csv(path: Path) -> pd.DataFrame | None:
    """:func:`read_qa_csv`'s frame for a plain file, or ``None`` to leave the file to pandas."""
    import numpy as np

    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):  # a folder, a missing or non-UTF-8 file: pandas words it
        return None
    if text.startswith("\ufeff") or "\x00" in text:
        return None
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error:
        return None
    if len(rows) < 2:
        return None
    header = rows[0]
    width = len(header)
    if "" in header or len(set(header)) != width or any(c not in header for c in QA_COLUMNS):
        return None
    if any(len(row) != width for row in rows):  # a blank line ([]), a short or a long row
        return None
    columns = dict(zip(header, zip(*rows[1:], strict=True), strict=True))
    data: dict[str, object] = {}
    for name in QA_COLUMNS:
        values = columns[name]
        if name in _INTEGER_COLUMNS:
            if not all(len(v) <= 18 and _INTEGER.fullmatch(v) for v in values):
                return None  # pandas names the bad line
            data[name] = np.array([int(v) for v in values], dtype=np.int64)
        else:
            data[name] = list(values)
    return pd.DataFrame(data, columns=list(QA_COLUMNS))


def check_answer_letters(qa: pd.DataFrame, path: str | Path) -> None:
    """Raise on the first row of a read ``qa.csv`` whose correct letter or correct choice is bad.

    Raises:
        ValueError: ``path:line: message`` (:func:`pv4kit.schema.answer_letter_problem`'s rule).
    """
    for i, (letter, *choices) in enumerate(qa[["correct_choice", *CHOICE_COLUMNS]].itertuples(index=False)):
        problem = answer_letter_problem(letter, choices)
        if problem:
            raise ValueError(f"{path}:{i + 2}: {problem[1]}")
