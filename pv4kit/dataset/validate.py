"""Validation of a raw tree: every problem of every file, with its file and line, nothing raised.

:func:`validate_raw` checks each user folder (list files, chat names, numbering and turns, question files
and their tags, what step 5 drops, ``qa.csv`` and whether it is what step 5 builds today), then the
personas, the seeds and the hard subset. Each problem is one row ``file, line, severity, code, message``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit._io import FileFormatError, read_csv, read_text
from pv4kit.dataset.formats import answer_problems, check_chat, format_qa_csv, problem, read_list
from pv4kit.dataset.qatags import check_tags
from pv4kit.dataset.questions import KEPT_UNTAGGED, build_question_table, missing_question_files
from pv4kit.dataset.tree import (
    check_chat_files,
    check_user_folders,
    hard_problems,
    list_personas,
    read_persona_seeds,
    users_dir_of,
)
from pv4kit.schema import DEFAULT_TEST_USERS, DEFAULT_TRAIN_USERS, QA_COLUMNS, user_role

#: columns of :func:`validate_raw`'s report
REPORT_COLUMNS = ["file", "line", "severity", "code", "message"]
_DIGITS = re.compile("[0-9]+")  # ASCII digits, as read_qa_csv reads an index or category
_DROP_NOTES = {
    KEPT_UNTAGGED: "the first question has no <QUESTION> tag; step 5 keeps it, as the reference does",
    "preamble": "text before the first <QUESTION> is parsed as a block and dropped without a draw",
}


class _Report(list):
    """The report's rows as they are found."""

    def add(self, path: Path, line: int | None, code: str, message: str, severity: str = "error") -> None:
        self.append(problem(path, line, code, message, severity))

    def read(self, read: Callable[..., Any], path: Path, **kwargs: Any) -> Any:
        """``read(path, **kwargs)``, or ``None`` with the file's problem reported."""
        try:
            return read(path, **kwargs)
        except FileFormatError as exc:
            code = "qa_unreadable" if exc.code == "unreadable" and exc.path.name == "qa.csv" else exc.code
            self.add(exc.path, exc.line, code, exc.reason)
            return None


def _check_lists(user_dir: Path, r: _Report) -> tuple[list[str], list[str] | None]:
    """``categories.txt`` (an error when missing or empty), ``chat_topics.txt`` (a warning); their items."""
    lists = []
    for name, what in (("categories.txt", "category"), ("chat_topics.txt", "topic")):
        path, items = user_dir / name, None
        if not path.exists():
            severity = "error" if what == "category" else "warning"
            r.add(path, None, "missing_file", f"{name} is missing", severity)
        elif (items := r.read(read_list, path)) == [""] and what == "category":
            r.add(path, None, "empty_file", "categories.txt lists no category")
            items = None
        # the reference reads a blank line as an item
        for i in [i for i, item in enumerate(items or []) if not item.strip()]:
            if i == len(items) - 1 and len(items) > 1:
                why = f"the file ends with a newline: the reference reads a blank {what} {i} after it"
                r.add(path, i + 1, "trailing_newline", why, "warning")
            else:
                why = f"line {i + 1} is blank: the reference reads it as {what} {i}"
                r.add(path, i + 1, "blank_item", why, "warning")
        lists.append(items)
    return lists[0] or [], lists[1]


def _check_chats(user_dir: Path, r: _Report, topics: list[str] | None) -> None:
    """Chat names, numbering ``0..n-1`` (as many as the topics) and each chat's two turns."""
    chats_dir, (files, problems) = user_dir / "chats", check_chat_files(user_dir)
    r += problems
    stems = [int(p.stem) for p in files]
    missing = sorted(set(range(max(stems) + 1)) - set(stems)) if stems else []
    if not files:
        r.add(chats_dir, None, "no_chats", "no chats/{i}.txt files")
    elif missing:
        names = ", ".join(f"{i}.txt" for i in missing[:10]) + (" ..." if len(missing) > 10 else "")
        r.add(chats_dir, None, "chat_gap", f"chat numbering has gaps: missing {names}")
    if topics is not None and files and len(topics) != len(files):
        message = f"chat_topics.txt lists {len(topics)} topics but chats/ holds {len(files)} chats"
        r.add(user_dir / "chat_topics.txt", None, "count_mismatch", message)
    for p in files:
        text = r.read(read_text, p)
        for line, code, message in check_chat(text) if text is not None else []:
            r.add(p, line, code, message)


def _check_questions(user_dir: Path, r: _Report, categories: list[str]) -> pd.DataFrame | None:
    """One readable, well-tagged question file per category, and none beyond; step 5's drops as warnings.

    Returns the table step 5 builds, or ``None`` when it cannot build one.
    """
    qa_dir, qa_files = user_dir / "qa", {}
    for p in qa_dir.iterdir() if qa_dir.is_dir() else []:
        if p.suffix == ".txt" and p.stem.isdigit():
            qa_files[int(p.stem)] = p
        elif not p.name.startswith("."):
            r.add(p, None, "qa_name", f"unexpected file in qa/: {p.name!r}", "warning")
    r += missing_question_files(user_dir, categories)
    extra = sorted(set(qa_files) - set(range(len(categories))))
    if categories and extra:
        also = ", ".join(f"{i}.txt" for i in extra)
        message = f"categories.txt lists {len(categories)} categories but qa/ also has {also}"
        r.add(qa_dir, None, "count_mismatch", message)
    texts = {}
    for c, path in sorted(qa_files.items()):
        text = texts[c] = r.read(read_text, path)
        for tag in check_tags(text) if text is not None else []:
            r.add(path, tag.line, tag.code, tag.message)
        if text is not None and "<QUESTION>" not in text:
            empty = not text.strip()
            what = "is empty" if empty else "holds no <QUESTION> block"
            message = f"{what}: step 5 gives category {c} no questions"
            r.add(path, None, "empty_file" if empty else "no_questions", message)
    if not categories or any(texts.get(c) is None for c in range(len(categories))):
        return None
    table, drops = build_question_table(user_dir)
    for d in drops.itertuples():
        message = _DROP_NOTES.get(
            d.reason, f"block {d.block + 1} of this file is dropped by step 5: {d.reason.replace('_', ' ')}"
        )
        r.add(Path(d.file), int(d.line), d.reason if d.kept else f"dropped_{d.reason}", message, "warning")
    return table


def _check_qa_csv(
    user_dir: Path, r: _Report, categories: list[str], table: pd.DataFrame | None
) -> set[int] | None:
    """``qa.csv`` is there, readable, has the columns and good rows, and is what step 5 builds now.

    Returns the question indices of a readable ``qa.csv`` (``None`` without one).
    """
    qa_csv = user_dir / "qa.csv"
    if not qa_csv.exists():
        r.add(qa_csv, None, "missing_file", "qa.csv is missing (run `pv4kit qa-table`)", "warning")
        return None
    frame = r.read(read_csv, qa_csv, expected="a qa.csv file", dtype=str, keep_default_na=False)
    qa_text = r.read(read_text, qa_csv) if frame is not None else None
    if qa_text is None:
        return None
    if list(frame.columns) != QA_COLUMNS:
        r.add(qa_csv, 1, "qa_columns", f"expected columns {QA_COLUMNS}, found {list(frame.columns)}")
        return None
    rows = _Report(answer_problems(frame, qa_csv))
    for line, (index, category) in enumerate(zip(frame["index"], frame["category"], strict=True), start=2):
        if index != str(line - 2):
            rows.add(qa_csv, line, "qa_index", f"index should be {line - 2}, found {index!r}")
        if not _DIGITS.fullmatch(category) or (categories and int(category) >= len(categories)):
            message = f"category must be 0..{len(categories) - 1}, found {category!r}"
            rows.add(qa_csv, line, "qa_category", message)
    r += sorted(rows, key=lambda row: row["line"])  # in the file's line order
    if table is not None and qa_text != format_qa_csv(table):
        message = (
            "qa.csv differs from what step 5 builds from qa/ (stale? rerun `pv4kit qa-table --overwrite`)"
        )
        r.add(qa_csv, None, "qa_stale", message, "warning")
    return {int(i) for i in frame["index"] if _DIGITS.fullmatch(i)}


def validate_raw(
    raw_dir: str | Path,
    *,
    train_users: tuple[int, int] = DEFAULT_TRAIN_USERS,
    test_users: tuple[int, int] = DEFAULT_TEST_USERS,
) -> pd.DataFrame:
    """Validate a raw tree and report every problem found.

    ``raw_dir`` is the raw tree (holding ``users/``) or a ``users`` folder; the id ranges are ``build``'s.
    One row per problem: ``file, line, severity ("error" | "warning"), code, message``; empty when the tree
    is clean. Nothing is raised for bad content; a missing tree is one error row.
    """
    raw_dir, r = Path(raw_dir), _Report()
    try:
        users_dir = users_dir_of(raw_dir)
    except FileNotFoundError as exc:
        r.add(raw_dir, None, "no_tree", str(exc))
        return pd.DataFrame(r, columns=REPORT_COLUMNS)
    root = users_dir.parent if users_dir.name == "users" else users_dir
    ids, problems = check_user_folders(users_dir)
    r += problems
    if not ids:
        r.add(users_dir, None, "no_users", "no user_N folders found")
    words = f"train users {train_users[0]}-{train_users[1]}, test users {test_users[0]}-{test_users[1]}"
    ranges, questions = {"train_users": train_users, "test_users": test_users}, {}
    for uid in ids:
        user_dir = users_dir / f"user_{uid}"
        if user_role(uid, **ranges) is None:
            message = f"user {uid} is outside both ranges ({words}); build and load leave it out"
            r.add(user_dir, None, "user_outside", message, "warning")
        categories, topics = _check_lists(user_dir, r)
        _check_chats(user_dir, r, topics)
        table = _check_questions(user_dir, r, categories)
        questions[uid] = _check_qa_csv(user_dir, r, categories, table)
    if (root / "personas").is_dir():
        for uid in sorted(set(ids) - set(list_personas(root / "personas"))):
            path = root / "personas" / f"user_{uid}.txt"
            r.add(path, None, "missing_persona", f"no persona profile for user {uid}", "warning")
    try:
        read_persona_seeds(root)  # {} without the file
    except (ValueError, KeyError) as exc:
        r.add(root / "persona_seeds.csv", 1, "seeds_format", str(exc))
    hard = root / "hard_subset.csv"
    try:
        r += hard_problems(hard if hard.is_file() else None, ids, questions.get, **ranges)
    except ValueError as exc:
        r.add(hard, 1, "hard_format", str(exc))
    return pd.DataFrame(r, columns=REPORT_COLUMNS)


def format_report(report: pd.DataFrame) -> str:
    """Render a validation report as ``file:line: severity [code] message`` lines plus a count line."""
    out = []
    for r in report.itertuples(index=False):
        loc = f"{r.file}:{int(r.line)}" if pd.notna(r.line) else r.file
        out.append(f"{loc}: {r.severity} [{r.code}] {r.message}")
    n_err = int((report["severity"] == "error").sum())
    out.append(f"{n_err} error(s), {len(report) - n_err} warning(s)")
    return "\n".join(out)
