"""The text formats of a user folder's files, each on its own: list files, chats and ``qa.csv``.

* ``categories.txt`` and ``chat_topics.txt``: one item a line, read with ``split("\\n")`` and nothing else,
  written joined with ``\\n`` and no trailing newline (as the reference reads and writes them);
* ``chats/{i}.txt``: two turns, ``Leo: ...`` then ``Assistant: ...`` (:func:`check_chat`);
* ``qa.csv``: the columns :data:`pv4kit.schema.QA_COLUMNS`, minimal quoting, ``\\n`` line ends.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pv4kit._io import FileFormatError, read_csv, read_text
from pv4kit.schema import CHOICE_COLUMNS, QA_COLUMNS, answer_letter_problem

USER_TAG = "Leo:"
ASSISTANT_TAG = "Assistant:"


def problem(path: str | Path, line: int | None, code: str, message: str, severity: str = "error") -> dict:
    """One problem of a file, as a row of :func:`pv4kit.dataset.validate.validate_raw`'s report."""
    return {"file": str(path), "line": line, "severity": severity, "code": code, "message": message}


def raise_first(problems: list[dict]) -> None:
    """Raise the first error of ``problems`` as a ``FileFormatError`` (``file[:line]: message``)."""
    for p in problems:
        if p["severity"] == "error":
            raise FileFormatError(p["file"], p["line"], p["code"], p["message"])


def read_list(path: str | Path) -> list[str]:
    """Read ``categories.txt`` or ``chat_topics.txt`` as the reference does: the text split on ``\\n``.

    Items are kept as stored, and a blank line, a trailing newline included, is an item of its own.
    """
    return read_text(path).split("\n")


def check_chat(text: str) -> list[tuple[int, str, str]]:
    """Check one chat's format; returns ``(line, code, message)`` for each problem found."""
    lines = text.strip().splitlines()
    if not lines:
        return [(1, "chat_empty", "chat is empty; expected a 'Leo:' line then an 'Assistant:' line")]
    problems = []
    if not lines[0].startswith(USER_TAG):
        found = f"expected the chat to start with {USER_TAG!r}, found {lines[0][:40]!r}"
        problems.append((1, "chat_format", found))
    asst = [i for i, line in enumerate(lines) if line.startswith(ASSISTANT_TAG)]
    leo = [i for i, line in enumerate(lines) if line.startswith(USER_TAG)]
    if not asst:
        problems.append((len(lines), "chat_format", f"no {ASSISTANT_TAG!r} turn after the {USER_TAG!r} turn"))
    elif len(asst) > 1 or len(leo) > 1:
        found = f"expected two turns, found {len(leo)} Leo and {len(asst)} Assistant"
        problems.append((asst[-1] + 1, "chat_turns", found))
    elif leo and asst[0] < leo[0]:
        problems.append((asst[0] + 1, "chat_format", "the 'Assistant:' turn comes before the 'Leo:' turn"))
    return problems


def format_qa_csv(table: pd.DataFrame) -> str:
    """Render a question table as ``qa.csv`` text (minimal quoting, ``\\n`` line endings)."""
    return table[QA_COLUMNS].to_csv(index=False, lineterminator="\n")


def read_qa_csv(path: str | Path, *, check_answers: bool = False) -> pd.DataFrame:
    """Read a ``qa.csv`` keeping empty choices as "" (never NaN) and text exactly as written.

    Raises:
        FileNotFoundError: When there is no ``qa.csv`` (step 5 writes it).
        FileFormatError: Naming the file and line of a file that is not a readable CSV.
        ValueError: Naming the file (and line) of a missing column, an ``index``/``category`` that is not
            a non-negative integer or, with ``check_answers``, a bad ``correct_choice``.
    """
    if not Path(path).exists():
        raise FileNotFoundError(
            f"{path}: qa.csv is missing; build it with write_qa_tables (`pv4kit qa-table`)"
        )
    frame = read_csv(path, expected="a qa.csv file", dtype=str, keep_default_na=False, na_filter=False)
    if not isinstance(frame.index, pd.RangeIndex):  # pandas made a long first row's leading fields an index
        width = len(frame.columns)
        reason = f"not a readable CSV (Expected {width} fields in line 2, saw {width + frame.index.nlevels})"
        raise FileFormatError(path, 2, "unreadable", reason)
    if missing := [c for c in QA_COLUMNS if c not in frame.columns]:
        raise ValueError(f"{path}: qa.csv lacks columns {missing}; expected {QA_COLUMNS}")
    for col in ("index", "category"):
        bad = ~frame[col].str.fullmatch("[0-9]+")  # ASCII digits only, as int64 reads them
        if bad.any():
            line = int(bad.to_numpy().argmax()) + 2
            raise ValueError(
                f"{path}:{line}: {col} must be a non-negative integer, found {frame[col][bad].iloc[0]!r}"
            )
        frame[col] = frame[col].astype("int64")
    raise_first(answer_problems(frame, path) if check_answers else [])
    return frame[QA_COLUMNS]


def answer_problems(qa: pd.DataFrame, path: str | Path) -> list[dict]:
    """A problem (``bad_letter`` or ``empty_answer``) for each row whose letter or correct choice is bad."""
    rows = qa[["correct_choice", *CHOICE_COLUMNS]].itertuples(index=False)
    found = ((i + 2, answer_letter_problem(letter, choices)) for i, (letter, *choices) in enumerate(rows))
    return [problem(path, line, *p) for line, p in found if p]
