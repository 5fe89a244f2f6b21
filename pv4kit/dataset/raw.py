"""The raw release tree: paths, reading, writing and validation.

Layout (as released)::

    raw/
      personas/user_N.txt            persona profile of user N
      persona_seeds.csv              user_id, seed
      hard_subset.csv                user_id, question_index
      users/user_N/
        categories.txt               one category per line (line i <-> qa/i.txt)
        chat_topics.txt              one topic per line (line i <-> chats/i.txt)
        chats/{i}.txt                two-turn chat: "Leo: ..." then "Assistant: ..."
        qa/{i}.txt                   tagged model output for category i
        qa.csv                       step 5's question table
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pv4kit._io import FileFormatError, atomic_write_text, read_csv, read_text

logger = logging.getLogger(__name__)

_USER_DIR_RE = re.compile(r"^user_(\d+)$")
_PERSONA_RE = re.compile(r"^user_(\d+)\.txt$")
USER_TAG = "Leo:"
ASSISTANT_TAG = "Assistant:"


@dataclass
class RawUser:
    """One user's files from the raw tree.

    Attributes:
        user_id: The user's id (``N`` in ``user_N``).
        path: The ``users/user_N`` directory.
        categories: Lines of ``categories.txt`` (empty when the file is absent).
        topics: Lines of ``chat_topics.txt`` (empty when the file is absent).
        chats: Chat texts ordered by integer file stem.
        qa: The parsed ``qa.csv`` or ``None`` when it is absent.
        persona: The persona profile text, when ``personas/user_N.txt`` exists.
        seed: The seed persona from ``persona_seeds.csv``, when present.
    """

    user_id: int
    path: Path
    categories: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    chats: list[str] = field(default_factory=list)
    qa: pd.DataFrame | None = None
    persona: str | None = None
    seed: str | None = None


def users_dir_of(raw_dir: str | Path) -> Path:
    """Return the ``users`` directory of a raw tree (``raw_dir`` itself when it holds ``user_N`` dirs)."""
    raw_dir = Path(raw_dir)
    if (raw_dir / "users").is_dir():
        return raw_dir / "users"
    if raw_dir.is_dir() and any(_USER_DIR_RE.match(p.name) for p in raw_dir.iterdir() if p.is_dir()):
        return raw_dir
    raise FileNotFoundError(f"{raw_dir}: not a PV4 raw tree (expected a users/ folder with user_N folders)")


def list_users(users_dir: str | Path) -> list[int]:
    """Sorted ids of the ``user_N`` folders in ``users_dir``.

    Raises:
        FileNotFoundError: When ``users_dir`` does not exist or holds no ``user_N`` folder.
    """
    users_dir = Path(users_dir)
    if not users_dir.is_dir():
        raise FileNotFoundError(f"{users_dir}: users directory does not exist")
    ids = sorted(
        int(m.group(1)) for p in users_dir.iterdir() if p.is_dir() and (m := _USER_DIR_RE.match(p.name))
    )
    if not ids:
        raise FileNotFoundError(f"{users_dir}: no user_N folders found")
    return ids


def read_list(path: str | Path) -> list[str]:
    """Read ``categories.txt`` or ``chat_topics.txt`` exactly as the reference does.

    The file is read as text (``\\r\\n`` reads as ``\\n``) and split on ``\\n``, nothing else: items
    are kept as stored (a ``2.5-hour commutes`` item stays whole, no numbering is removed again) and a
    blank line, a trailing newline included, is an item of its own, as the reference counts it.

    Raises:
        FileFormatError: Naming the file and line when it is not UTF-8 text.
    """
    return read_text(path).split("\n")


def chat_files(user_dir: str | Path) -> list[Path]:
    """The ``chats/{i}.txt`` files ordered by integer stem (``10.txt`` after ``9.txt``).

    Raises:
        ValueError: When a file name is not ``<integer>.txt``.
    """
    chats_dir = Path(user_dir) / "chats"
    if not chats_dir.is_dir():
        return []
    files = []
    for p in chats_dir.iterdir():
        if p.name.startswith("."):
            continue
        if p.suffix != ".txt" or not p.stem.isdigit():
            raise ValueError(f"{p}: chat file names must be '<integer>.txt', found {p.name!r}")
        files.append(p)
    files.sort(key=lambda p: int(p.stem))
    for number, same in duplicate_chats(files).items():
        raise ValueError(f"{chats_dir}: {_duplicate_message(number, same)}")
    return files


def duplicate_chats(files: list[Path]) -> dict[int, list[Path]]:
    """Chat numbers given by more than one file (``08.txt`` beside ``8.txt``), with those files."""
    by_number: dict[int, list[Path]] = {}
    for p in files:
        by_number.setdefault(int(p.stem), []).append(p)
    return {n: sorted(ps, key=lambda p: p.name) for n, ps in sorted(by_number.items()) if len(ps) > 1}


def _duplicate_message(number: int, files: list[Path]) -> str:
    names = " and ".join(p.name for p in files)
    both = "both" if len(files) == 2 else "all"
    return (
        f"{names} are {both} chat {number}; each chat number must have one file "
        "(rename or remove the extra one)"
    )


def read_chats(user_dir: str | Path, *, strip: bool = False) -> list[str]:
    """Read a user's chats in topic order (integer file stem), each as stored (as the reference reads them).

    Args:
        user_dir: The ``users/user_N`` folder.
        strip: Strip each chat (pv4kit's former reading; the reference keeps the text whole).

    Raises:
        FileFormatError: Naming the file and line of a chat that is not UTF-8 text.
    """
    chats = [read_text(p) for p in chat_files(user_dir)]
    return [c.strip() for c in chats] if strip else chats


def read_persona_seeds(raw_dir: str | Path) -> dict[int, str]:
    """Read ``persona_seeds.csv`` as ``{user_id: seed}`` ({} when absent)."""
    path = Path(raw_dir) / "persona_seeds.csv"
    if not path.is_file():
        return {}
    frame = read_csv(path, dtype={"user_id": "int64", "seed": str}, keep_default_na=False)
    if list(frame.columns[:2]) != ["user_id", "seed"]:
        raise ValueError(f"{path}: expected columns user_id, seed; found {list(frame.columns)}")
    return dict(zip(frame["user_id"].astype(int), frame["seed"], strict=True))


def read_hard_subset(path: str | Path | None) -> pd.DataFrame:
    """Read ``hard_subset.csv`` (``user_id, question_index``); an absent path gives an empty frame."""
    empty = pd.DataFrame({"user_id": pd.Series(dtype="int64"), "question_index": pd.Series(dtype="int64")})
    if path is None:
        return empty
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: hard subset file does not exist")
    frame = read_csv(path)
    if list(frame.columns) != ["user_id", "question_index"]:
        raise ValueError(f"{path}: expected header 'user_id,question_index', found {list(frame.columns)}")
    if frame.empty:
        return empty
    for col in frame.columns:
        if not pd.api.types.is_integer_dtype(frame[col]):
            bad = frame.index[pd.to_numeric(frame[col], errors="coerce").isna()]
            line = int(bad[0]) + 2 if len(bad) else 2
            raise ValueError(f"{path}:{line}: {col} must be an integer")
    return frame.astype("int64").drop_duplicates().reset_index(drop=True)


def read_user(user_dir: str | Path, *, raw_dir: str | Path | None = None, chats: bool = True) -> RawUser:
    """Read one ``users/user_N`` folder (and its persona and seed when ``raw_dir`` is given).

    ``chats=False`` skips reading the chats (``chats`` stays empty), for callers that have them already.
    """
    from pv4kit.dataset.questions import read_qa_csv

    user_dir = Path(user_dir)
    m = _USER_DIR_RE.match(user_dir.name)
    if not m:
        raise ValueError(f"{user_dir}: expected a folder named user_N")
    if not user_dir.is_dir():
        raise FileNotFoundError(f"{user_dir}: user folder does not exist")
    uid = int(m.group(1))
    user = RawUser(user_id=uid, path=user_dir)
    if (user_dir / "categories.txt").is_file():
        user.categories = read_list(user_dir / "categories.txt")
    if (user_dir / "chat_topics.txt").is_file():
        user.topics = read_list(user_dir / "chat_topics.txt")
    if chats:
        user.chats = read_chats(user_dir)
    if (user_dir / "qa.csv").exists():  # a directory there is an error, not a missing table
        user.qa = read_qa_csv(user_dir / "qa.csv")
    if raw_dir is not None:
        persona = Path(raw_dir) / "personas" / f"user_{uid}.txt"
        if persona.is_file():
            user.persona = read_text(persona).strip()
        user.seed = read_persona_seeds(raw_dir).get(uid)
    return user


def list_personas(persona_dir: str | Path) -> list[int]:
    """Sorted ids of ``user_N.txt`` persona files in ``persona_dir``."""
    persona_dir = Path(persona_dir)
    if not persona_dir.is_dir():
        raise FileNotFoundError(f"{persona_dir}: persona directory does not exist")
    return sorted(int(m.group(1)) for p in persona_dir.iterdir() if (m := _PERSONA_RE.match(p.name)))


def write_user_files(
    user_dir: str | Path,
    *,
    categories: list[str] | None = None,
    topics: list[str] | None = None,
    chats: dict[int, str] | None = None,
    qa_texts: dict[int, str] | None = None,
) -> None:
    """Write parts of a user folder in the release layout (each file atomically).

    Lists are joined with ``\\n`` and no trailing newline, as the reference writes them (a trailing
    newline would read back as one more, blank, item).
    """
    user_dir = Path(user_dir)
    if categories is not None:
        atomic_write_text(user_dir / "categories.txt", "\n".join(categories))
    if topics is not None:
        atomic_write_text(user_dir / "chat_topics.txt", "\n".join(topics))
    for i, text in (chats or {}).items():
        atomic_write_text(user_dir / "chats" / f"{i}.txt", text.strip())
    for i, text in (qa_texts or {}).items():
        atomic_write_text(user_dir / "qa" / f"{i}.txt", text)


# --------------------------------------------------------------------------- validation


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


def _problem(rows: list[dict], path: Path, line: int | None, severity: str, code: str, message: str) -> None:
    rows.append({"file": str(path), "line": line, "severity": severity, "code": code, "message": message})


def _unreadable(rows: list[dict], exc: FileFormatError) -> None:
    code = "qa_unreadable" if exc.code == "unreadable" and exc.path.name == "qa.csv" else exc.code
    _problem(rows, exc.path, exc.line, "error", code, exc.reason)


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


def _validate_user(user_dir: Path, rows: list[dict]) -> None:
    from pv4kit.dataset.qatags import check_tags
    from pv4kit.dataset.questions import build_question_table, format_qa_csv
    from pv4kit.schema import CHOICE_COLUMNS, QA_COLUMNS, answer_letter_problem

    cat_path = user_dir / "categories.txt"
    categories: list[str] = []
    if not cat_path.is_file():
        _problem(rows, cat_path, None, "error", "missing_file", "categories.txt is missing")
    else:
        try:
            categories = read_list(cat_path)
        except FileFormatError as exc:
            _unreadable(rows, exc)
        else:
            if categories == [""]:
                _problem(rows, cat_path, None, "error", "empty_file", "categories.txt lists no category")
                categories = []
    topics_path = user_dir / "chat_topics.txt"
    topics = None
    if not topics_path.exists():
        _problem(rows, topics_path, None, "warning", "missing_file", "chat_topics.txt is missing")
    else:
        try:
            topics = read_list(topics_path)
        except FileFormatError as exc:
            _unreadable(rows, exc)
    for path, items, what in ((cat_path, categories, "category"), (topics_path, topics or [], "topic")):
        _check_blank_items(rows, path, items, what)

    # chats
    try:
        files = chat_files(user_dir)
    except ValueError:
        files = []
        for p in sorted((user_dir / "chats").iterdir()):
            if p.suffix == ".txt" and p.stem.isdigit():
                files.append(p)
            elif not p.name.startswith("."):
                _problem(
                    rows,
                    p,
                    None,
                    "error",
                    "chat_name",
                    f"chat file names must be '<integer>.txt', found {p.name!r}",
                )
        files.sort(key=lambda p: int(p.stem))
        for number, same in duplicate_chats(files).items():
            _problem(
                rows,
                user_dir / "chats",
                None,
                "error",
                "chat_duplicate",
                _duplicate_message(number, same),
            )
    if not files:
        _problem(rows, user_dir / "chats", None, "error", "no_chats", "no chats/{i}.txt files")
    stems = [int(p.stem) for p in files]
    missing = sorted(set(range(max(stems) + 1)) - set(stems)) if stems else []
    if missing:
        _problem(
            rows,
            user_dir / "chats",
            None,
            "error",
            "chat_gap",
            f"chat numbering has gaps: missing {', '.join(f'{i}.txt' for i in missing[:10])}"
            + (" ..." if len(missing) > 10 else ""),
        )
    if topics is not None and stems and len(topics) != len(files):
        _problem(
            rows,
            topics_path,
            None,
            "error",
            "count_mismatch",
            f"chat_topics.txt lists {len(topics)} topics but chats/ holds {len(files)} chats",
        )
    for p in files:
        try:
            text = read_text(p)
        except FileFormatError as exc:
            _unreadable(rows, exc)
            continue
        for line, code, message in check_chat(text):
            _problem(rows, p, line, "error", code, message)

    # question files
    qa_dir = user_dir / "qa"
    qa_files = {}
    if qa_dir.is_dir():
        for p in qa_dir.iterdir():
            if p.suffix == ".txt" and p.stem.isdigit():
                qa_files[int(p.stem)] = p
            elif not p.name.startswith("."):
                _problem(rows, p, None, "warning", "qa_name", f"unexpected file in qa/: {p.name!r}")
    for c, name in enumerate(categories):
        if c not in qa_files:
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
    table = None
    drops = pd.DataFrame(columns=["file", "line", "block", "reason"])
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
    if categories and all(c in qa_texts for c in range(len(categories))):
        table, drops = build_question_table(user_dir)
    if not drops.empty:
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

    # qa.csv
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
        _problem(
            rows,
            qa_csv,
            1,
            "error",
            "qa_columns",
            f"expected columns {QA_COLUMNS}, found {list(frame.columns)}",
        )
        return
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
    if table is not None and qa_text != format_qa_csv(table):
        _problem(
            rows,
            qa_csv,
            None,
            "warning",
            "qa_stale",
            "qa.csv differs from what step 5 builds from qa/ (stale? rerun `pv4kit qa-table --overwrite`)",
        )


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
        return pd.DataFrame(rows, columns=["file", "line", "severity", "code", "message"])
    root = users_dir.parent if users_dir.name == "users" else users_dir
    for p in sorted(users_dir.iterdir()):
        if p.is_dir() and not _USER_DIR_RE.match(p.name) and not p.name.startswith("."):
            _problem(rows, p, None, "warning", "user_name", f"folder {p.name!r} is not named user_N; ignored")
    ids = [int(m.group(1)) for p in users_dir.iterdir() if p.is_dir() and (m := _USER_DIR_RE.match(p.name))]
    if not ids:
        _problem(rows, users_dir, None, "error", "no_users", "no user_N folders found")
    for uid in sorted(ids):
        _validate_user(users_dir / f"user_{uid}", rows)
    persona_dir = root / "personas"
    if persona_dir.is_dir():
        have = set(list_personas(persona_dir))
        for uid in sorted(set(ids) - have):
            _problem(
                rows,
                persona_dir / f"user_{uid}.txt",
                None,
                "warning",
                "missing_persona",
                f"no persona profile for user {uid}",
            )
    seeds = root / "persona_seeds.csv"
    if seeds.is_file():
        try:
            read_persona_seeds(root)
        except (ValueError, KeyError) as exc:
            _problem(rows, seeds, 1, "error", "seeds_format", str(exc))
    hard = root / "hard_subset.csv"
    if hard.is_file():
        try:
            entries = read_hard_subset(hard)
        except ValueError as exc:
            _problem(rows, hard, 1, "error", "hard_format", str(exc))
        else:
            from pv4kit.dataset.questions import read_qa_csv

            sizes: dict[int, int] = {}
            for i, e in enumerate(entries.itertuples(index=False)):
                qa_csv = users_dir / f"user_{e.user_id}" / "qa.csv"
                if e.user_id not in sizes and qa_csv.is_file():
                    try:
                        sizes[e.user_id] = len(read_qa_csv(qa_csv))
                    except ValueError:
                        pass  # reported with the user's files
                if e.user_id not in ids:
                    _problem(
                        rows, hard, i + 2, "error", "hard_unknown", f"user {e.user_id} is not in the tree"
                    )
                    continue
                problem = _hard_role_problem(int(e.user_id), train_users=train_users, test_users=test_users)
                if problem:
                    _problem(rows, hard, i + 2, "error", *problem)
                elif e.user_id in sizes and not 0 <= e.question_index < sizes[e.user_id]:
                    _problem(
                        rows,
                        hard,
                        i + 2,
                        "error",
                        "hard_unknown",
                        f"user {e.user_id} has no question {e.question_index}",
                    )
    return pd.DataFrame(rows, columns=["file", "line", "severity", "code", "message"])


def _hard_role_problem(
    user_id: int, *, train_users: tuple[int, int] | None, test_users: tuple[int, int] | None
) -> tuple[str, str] | None:
    """``(code, message)`` when ``build`` would refuse a hard entry of ``user_id`` for its role."""
    from pv4kit.schema import DEFAULT_TEST_USERS, DEFAULT_TRAIN_USERS, user_role

    train = train_users or DEFAULT_TRAIN_USERS
    test = test_users or DEFAULT_TEST_USERS
    ranges = f"train users {train[0]}-{train[1]}, test users {test[0]}-{test[1]}"
    role = user_role(user_id, train_users=train, test_users=test)
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
