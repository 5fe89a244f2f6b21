"""Validation of a raw tree: every problem of every file, with its file and line, nothing raised.

:func:`validate_raw` walks the tree (:mod:`pv4kit.dataset.tree`) and runs one check per concern on each
user folder: the list files, the chat files' names and numbering, each chat's two turns, the question
files and their tags (:mod:`pv4kit.dataset.qatags`), what step 5 drops from them
(:mod:`pv4kit.dataset.questions`), and ``qa.csv`` itself (columns, letters, indices, categories, and
whether it is what step 5 builds today); then the personas, the seeds and the hard subset. Each problem is
one row ``file, line, severity, code, message``; :func:`format_report` renders them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from pv4kit._io import FileFormatError, read_csv, read_text
from pv4kit.dataset.formats import check_chat, format_qa_csv, read_list, read_qa_csv
from pv4kit.dataset.qatags import check_tags
from pv4kit.dataset.questions import build_question_table
from pv4kit.dataset.tree import (
    chat_files,
    duplicate_chats,
    duplicate_message,
    is_chat_file,
    list_personas,
    read_hard_subset,
    read_persona_seeds,
    user_folder_id,
    users_dir_of,
)
from pv4kit.schema import (
    CHOICE_COLUMNS,
    DEFAULT_TEST_USERS,
    DEFAULT_TRAIN_USERS,
    QA_COLUMNS,
    answer_letter_problem,
    user_role,
)

logger = logging.getLogger(__name__)

#: columns of :func:`validate_raw`'s report
REPORT_COLUMNS = ["file", "line", "severity", "code", "message"]


def _problem(rows: list[dict], path: Path, line: int | None, severity: str, code: str, message: str) -> None:
    rows.append({"file": str(path), "line": line, "severity": severity, "code": code, "message": message})


def _unreadable(rows: list[dict], exc: FileFormatError) -> None:
    code = "qa_unreadable" if exc.code == "unreadable" and exc.path.name == "qa.csv" else exc.code
    _problem(rows, exc.path, exc.line, "error", code, exc.reason)


# --------------------------------------------------------------------------- list files


def _check_categories(user_dir: Path, rows: list[dict]) -> list[str]:
    """``categories.txt`` is there, readable and not empty; its items ([] when it cannot be read)."""
    path = user_dir / "categories.txt"
    if not path.is_file():
        _problem(rows, path, None, "error", "missing_file", "categories.txt is missing")
        return []
    try:
        categories = read_list(path)
    except FileFormatError as exc:
        _unreadable(rows, exc)
        return []
    if categories == [""]:
        _problem(rows, path, None, "error", "empty_file", "categories.txt lists no category")
        return []
    return categories


def _check_topics(user_dir: Path, rows: list[dict]) -> list[str] | None:
    """``chat_topics.txt`` is there (a warning when not) and readable; its items, or ``None``."""
    path = user_dir / "chat_topics.txt"
    if not path.exists():
        _problem(rows, path, None, "warning", "missing_file", "chat_topics.txt is missing")
        return None
    try:
        return read_list(path)
    except FileFormatError as exc:
        _unreadable(rows, exc)
        return None


def _check_blank_items(rows: list[dict], path: Path, items: list[str], what: str) -> None:
    """Warn about blank lines of a list file: the reference reads each as a (blank) item."""
    for i, item in enumerate(items):
        if item.strip():
            continue
        last = i == len(items) - 1 and len(items) > 1
        _problem(
            rows,
            path,
            i + 1,
            "warning",
            "trailing_newline" if last else "blank_item",
            (f"the file ends with a newline: the reference reads a blank {what} {i} after it")
            if last
            else f"line {i + 1} is blank: the reference reads it as {what} {i}",
        )


# --------------------------------------------------------------------------- chats


def _chat_files(user_dir: Path, rows: list[dict]) -> list[Path]:
    """The chat files by number; a bad name or a number given twice is reported, not raised."""
    try:
        return chat_files(user_dir)
    except ValueError:
        pass
    files = []
    for p in sorted((user_dir / "chats").iterdir()):
        try:
            if is_chat_file(p):
                files.append(p)
        except ValueError as exc:
            _problem(rows, p, None, "error", "chat_name", str(exc).removeprefix(f"{p}: "))
    files.sort(key=lambda p: int(p.stem))
    for number, same in duplicate_chats(files).items():
        _problem(rows, user_dir / "chats", None, "error", "chat_duplicate", duplicate_message(number, same))
    return files


def _check_chat_numbering(
    user_dir: Path, rows: list[dict], files: list[Path], topics: list[str] | None
) -> None:
    """Chats exist, are numbered ``0..n-1`` without a gap and are as many as the topics."""
    chats_dir = user_dir / "chats"
    if not files:
        _problem(rows, chats_dir, None, "error", "no_chats", "no chats/{i}.txt files")
    stems = [int(p.stem) for p in files]
    missing = sorted(set(range(max(stems) + 1)) - set(stems)) if stems else []
    if missing:
        _problem(
            rows,
            chats_dir,
            None,
            "error",
            "chat_gap",
            f"chat numbering has gaps: missing {', '.join(f'{i}.txt' for i in missing[:10])}"
            + (" ..." if len(missing) > 10 else ""),
        )
    if topics is not None and stems and len(topics) != len(files):
        _problem(
            rows,
            user_dir / "chat_topics.txt",
            None,
            "error",
            "count_mismatch",
            f"chat_topics.txt lists {len(topics)} topics but chats/ holds {len(files)} chats",
        )


def _check_chat_texts(rows: list[dict], files: list[Path]) -> None:
    """Each chat is UTF-8 text of two turns, ``Leo:`` then ``Assistant:`` (:func:`check_chat`)."""
    for p in files:
        try:
            text = read_text(p)
        except FileFormatError as exc:
            _unreadable(rows, exc)
            continue
        for line, code, message in check_chat(text):
            _problem(rows, p, line, "error", code, message)


# --------------------------------------------------------------------------- question files


def _question_files(user_dir: Path, rows: list[dict]) -> dict[int, Path]:
    """``{category: qa/{category}.txt}``; any other file in ``qa/`` is a warning."""
    qa_files = {}
    qa_dir = user_dir / "qa"
    if qa_dir.is_dir():
        for p in qa_dir.iterdir():
            if p.suffix == ".txt" and p.stem.isdigit():
                qa_files[int(p.stem)] = p
            elif not p.name.startswith("."):
                _problem(rows, p, None, "warning", "qa_name", f"unexpected file in qa/: {p.name!r}")
    return qa_files


def _check_question_count(
    user_dir: Path, rows: list[dict], categories: list[str], qa_files: dict[int, Path]
) -> None:
    """One question file per category, and none beyond them."""
    qa_dir = user_dir / "qa"
    for c, name in enumerate(categories):
        if c in qa_files:
            continue
        trailing = not name and c == len(categories) - 1
        _problem(
            rows,
            qa_dir / f"{c}.txt",
            None,
            "error",
            "trailing_newline" if trailing else "missing_file",
            (
                f"categories.txt ends with a newline, so the reference counts a blank category {c} "
                f"and reads qa/{c}.txt, which does not exist (remove the trailing newline)"
            )
            if trailing
            else f"question file for category {c} ({name!r}) is missing",
        )
    extra = sorted(set(qa_files) - set(range(len(categories))))
    if categories and extra:
        _problem(
            rows,
            qa_dir,
            None,
            "error",
            "count_mismatch",
            f"categories.txt lists {len(categories)} categories but qa/ also has "
            f"{', '.join(f'{i}.txt' for i in extra)}",
        )


def _check_question_texts(rows: list[dict], qa_files: dict[int, Path]) -> dict[int, str]:
    """Each question file is readable, its tags well formed and it holds a question; the texts read."""
    qa_texts: dict[int, str] = {}
    for c in sorted(qa_files):
        try:
            qa_texts[c] = read_text(qa_files[c])
        except FileFormatError as exc:
            _unreadable(rows, exc)
            continue
        for problem in check_tags(qa_texts[c]):
            _problem(rows, qa_files[c], problem.line, "error", problem.code, problem.message)
        if "<QUESTION>" not in qa_texts[c]:
            empty = not qa_texts[c].strip()
            _problem(
                rows,
                qa_files[c],
                None,
                "error",
                "empty_file" if empty else "no_questions",
                f"{'is empty' if empty else 'holds no <QUESTION> block'}: step 5 gives category {c} "
                "no questions",
            )
    return qa_texts


def _check_step5(
    user_dir: Path, rows: list[dict], categories: list[str], qa_texts: dict[int, str]
) -> pd.DataFrame | None:
    """Warn about each block step 5 drops (or keeps untagged); the table it builds, when it can."""
    if not categories or not all(c in qa_texts for c in range(len(categories))):
        return None
    table, drops = build_question_table(user_dir)
    for d in drops.itertuples():
        if d.kept:
            code = d.reason
            message = "the first question has no <QUESTION> tag; step 5 keeps it, as the reference does"
        elif d.reason == "preamble":
            code = f"dropped_{d.reason}"
            message = "text before the first <QUESTION> is parsed as a block and dropped without a draw"
        else:
            code = f"dropped_{d.reason}"
            why = d.reason.replace("_", " ")
            message = f"block {d.block + 1} of this file is dropped by step 5: {why}"
        _problem(rows, Path(d.file), int(d.line), "warning", code, message)
    return table


# --------------------------------------------------------------------------- qa.csv


def _check_qa_rows(rows: list[dict], qa_csv: Path, frame: pd.DataFrame, categories: list[str]) -> None:
    """Each row of ``qa.csv``: its answer letter, its ``index`` and its ``category``."""
    for i, row in enumerate(frame.itertuples(index=False)):
        line = i + 2
        problem = answer_letter_problem(row.correct_choice, [getattr(row, c) for c in CHOICE_COLUMNS])
        if problem:
            _problem(rows, qa_csv, line, "error", *problem)
        if row.index != str(i):
            _problem(rows, qa_csv, line, "error", "qa_index", f"index should be {i}, found {row.index!r}")
        if not row.category.isdigit() or (categories and int(row.category) >= len(categories)):
            _problem(
                rows,
                qa_csv,
                line,
                "error",
                "qa_category",
                f"category must be 0..{len(categories) - 1}, found {row.category!r}",
            )


def _check_qa_csv(
    user_dir: Path, rows: list[dict], categories: list[str], table: pd.DataFrame | None
) -> None:
    """``qa.csv`` is there, readable, has the columns, good rows, and is what step 5 builds now."""
    qa_csv = user_dir / "qa.csv"
    if not qa_csv.exists():
        _problem(rows, qa_csv, None, "warning", "missing_file", "qa.csv is missing (run `pv4kit qa-table`)")
        return
    try:
        frame = read_csv(qa_csv, expected="a qa.csv file", dtype=str, keep_default_na=False)
        qa_text = read_text(qa_csv)
    except FileFormatError as exc:
        _unreadable(rows, exc)
        return
    if list(frame.columns) != QA_COLUMNS:
        message = f"expected columns {QA_COLUMNS}, found {list(frame.columns)}"
        _problem(rows, qa_csv, 1, "error", "qa_columns", message)
        return
    _check_qa_rows(rows, qa_csv, frame, categories)
    if table is not None and qa_text != format_qa_csv(table):
        _problem(
            rows,
            qa_csv,
            None,
            "warning",
            "qa_stale",
            "qa.csv differs from what step 5 builds from qa/ (stale? rerun `pv4kit qa-table --overwrite`)",
        )


def _validate_user(user_dir: Path, rows: list[dict]) -> None:
    """Every check of one ``users/user_N`` folder, in file order, appended to ``rows``."""
    categories = _check_categories(user_dir, rows)
    topics = _check_topics(user_dir, rows)
    _check_blank_items(rows, user_dir / "categories.txt", categories, "category")
    _check_blank_items(rows, user_dir / "chat_topics.txt", topics or [], "topic")
    files = _chat_files(user_dir, rows)
    _check_chat_numbering(user_dir, rows, files, topics)
    _check_chat_texts(rows, files)
    qa_files = _question_files(user_dir, rows)
    _check_question_count(user_dir, rows, categories, qa_files)
    qa_texts = _check_question_texts(rows, qa_files)
    table = _check_step5(user_dir, rows, categories, qa_texts)
    _check_qa_csv(user_dir, rows, categories, table)


# --------------------------------------------------------------------------- the tree


def _check_personas(root: Path, rows: list[dict], ids: list[int]) -> None:
    """Every user has a persona profile (when ``personas/`` exists); ``persona_seeds.csv`` reads."""
    persona_dir = root / "personas"
    if persona_dir.is_dir():
        have = set(list_personas(persona_dir))
        for uid in sorted(set(ids) - have):
            path = persona_dir / f"user_{uid}.txt"
            _problem(rows, path, None, "warning", "missing_persona", f"no persona profile for user {uid}")
    seeds = root / "persona_seeds.csv"
    if seeds.is_file():
        try:
            read_persona_seeds(root)
        except (ValueError, KeyError) as exc:
            _problem(rows, seeds, 1, "error", "seeds_format", str(exc))


def _check_hard_subset(
    root: Path,
    users_dir: Path,
    rows: list[dict],
    ids: list[int],
    *,
    train_users: tuple[int, int] | None,
    test_users: tuple[int, int] | None,
) -> None:
    """Each ``hard_subset.csv`` entry names a test user of the tree and one of its questions."""
    hard = root / "hard_subset.csv"
    if not hard.is_file():
        return
    try:
        entries = read_hard_subset(hard)
    except ValueError as exc:
        _problem(rows, hard, 1, "error", "hard_format", str(exc))
        return
    sizes: dict[int, int] = {}
    for i, e in enumerate(entries.itertuples(index=False)):
        qa_csv = users_dir / f"user_{e.user_id}" / "qa.csv"
        if e.user_id not in sizes and qa_csv.is_file():
            try:
                sizes[e.user_id] = len(read_qa_csv(qa_csv))
            except ValueError:
                pass  # reported with the user's files
        if e.user_id not in ids:
            _problem(rows, hard, i + 2, "error", "hard_unknown", f"user {e.user_id} is not in the tree")
            continue
        problem = _hard_role_problem(int(e.user_id), train_users=train_users, test_users=test_users)
        if problem:
            _problem(rows, hard, i + 2, "error", *problem)
        elif e.user_id in sizes and not 0 <= e.question_index < sizes[e.user_id]:
            message = f"user {e.user_id} has no question {e.question_index}"
            _problem(rows, hard, i + 2, "error", "hard_unknown", message)


def _role(
    user_id: int, *, train_users: tuple[int, int] | None, test_users: tuple[int, int] | None
) -> tuple[str | None, str]:
    """``(role, the ranges in words)`` of ``user_id`` under the ranges ``build`` would use."""
    train = train_users or DEFAULT_TRAIN_USERS
    test = test_users or DEFAULT_TEST_USERS
    ranges = f"train users {train[0]}-{train[1]}, test users {test[0]}-{test[1]}"
    return user_role(user_id, train_users=train, test_users=test), ranges


def _hard_role_problem(
    user_id: int, *, train_users: tuple[int, int] | None, test_users: tuple[int, int] | None
) -> tuple[str, str] | None:
    """``(code, message)`` when ``build`` would refuse a hard entry of ``user_id`` for its role."""
    role, ranges = _role(user_id, train_users=train_users, test_users=test_users)
    if role == "train":
        return (
            "hard_training",
            f"hard entry for user {user_id}, a training user ({ranges}); hard questions must be test "
            "questions, so `pv4kit build` would refuse it",
        )
    if role is None:
        return (
            "hard_unbuilt",
            f"hard entry for user {user_id}, who is outside both ranges ({ranges}) and is not built",
        )
    return None


def validate_raw(
    raw_dir: str | Path,
    *,
    train_users: tuple[int, int] | None = None,
    test_users: tuple[int, int] | None = None,
) -> pd.DataFrame:
    """Validate a raw tree and report every problem found.

    Args:
        raw_dir: The raw tree (holding ``users/``) or a ``users`` folder.
        train_users: Inclusive id range of training users, as ``build`` takes it (default 6-125); a
            hard-subset entry must name an evaluation user.
        test_users: Inclusive id range of evaluation users (default 126-155).

    Returns:
        One row per problem: ``file, line, severity ("error" | "warning"), code, message``; empty when
        the tree is clean. Nothing is raised for bad content; a missing tree is one error row.
    """
    raw_dir = Path(raw_dir)
    rows: list[dict] = []
    try:
        users_dir = users_dir_of(raw_dir)
    except FileNotFoundError as exc:
        _problem(rows, raw_dir, None, "error", "no_tree", str(exc))
        return pd.DataFrame(rows, columns=REPORT_COLUMNS)
    root = users_dir.parent if users_dir.name == "users" else users_dir
    ids = []
    for p in sorted(users_dir.iterdir()):
        if not p.is_dir() or p.name.startswith("."):
            continue
        try:
            uid = user_folder_id(p)
        except ValueError as exc:
            _problem(rows, p, None, "error", "user_name", str(exc).removeprefix(f"{p}: "))
            continue
        if uid is None:
            _problem(rows, p, None, "warning", "user_name", f"folder {p.name!r} is not named user_N; ignored")
        else:
            ids.append(uid)
    if not ids:
        _problem(rows, users_dir, None, "error", "no_users", "no user_N folders found")
    for uid in sorted(ids):
        role, ranges = _role(uid, train_users=train_users, test_users=test_users)
        if role is None:
            message = f"user {uid} is outside both ranges ({ranges}); build and load leave it out"
            _problem(rows, users_dir / f"user_{uid}", None, "warning", "user_outside", message)
        _validate_user(users_dir / f"user_{uid}", rows)
    _check_personas(root, rows, ids)
    _check_hard_subset(root, users_dir, rows, ids, train_users=train_users, test_users=test_users)
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def format_report(report: pd.DataFrame) -> str:
    """Render a validation report as ``file:line: severity [code] message`` lines plus a count line."""
    out = []
    for r in report.itertuples(index=False):
        loc = f"{r.file}:{int(r.line)}" if pd.notna(r.line) else r.file
        out.append(f"{loc}: {r.severity} [{r.code}] {r.message}")
    n_err = int((report["severity"] == "error").sum())
    n_warn = int((report["severity"] == "warning").sum())
    out.append(f"{n_err} error(s), {n_warn} warning(s)")
    return "\n".join(out)
