"""Step 5: parse the tagged model output in ``qa/{i}.txt`` into the question table ``qa.csv``.

The rule is the reference's (the released ``qa.csv`` files come out byte for byte): :func:`parse_qa_text`
and :func:`shuffle_records`. Beyond the reference, :func:`build_question_table` reports every dropped block.
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pv4kit._io import atomic_write_text, not_a_file_error, read_text
from pv4kit.dataset.formats import format_qa_csv, problem, read_list, read_qa_csv
from pv4kit.dataset.qatags import check_tags
from pv4kit.dataset.tree import list_users
from pv4kit.schema import LETTERS, QA_COLUMNS

logger = logging.getLogger(__name__)

_SEQUENCE = ["QUESTION", "CHOICE_A", "CHOICE_B", "CHOICE_C", "CHOICE_D", "CHOICE_E", "CORRECT_CHOICE"]
_LETTER_RE = re.compile(r"<CORRECT_CHOICE>\s*([A-E])\b")
_LOOSE_LETTER_RE = re.compile(r"<CORRECT_CHOICE>\s*([A-Ea-e])\b")
_RATIONALE_RE = re.compile(r"<RATIONALE[^>]*>(.*)", re.DOTALL)

#: report reason of an untagged first chunk that the reference keeps as a question (a note, not a drop)
KEPT_UNTAGGED = "untagged_first_kept"


@dataclass(frozen=True)
class QABlock:
    """One ``<QUESTION>`` block of a ``qa/{i}.txt`` file, parsed with the reference rule.

    Attributes:
        letter: The correct letter A-E, or "" when none was found.
        block: 0-based position of the block in its file (``line``: 1-based line of its tag).
        raw_letter: What follows ``<CORRECT_CHOICE>`` when it looks like a letter in any case ("" if not).
        leading: True for the text before the file's first ``<QUESTION>`` tag.
    """

    question: str
    choices: tuple[str, str, str, str, str]
    letter: str
    rationale: str
    block: int
    line: int
    raw_letter: str = ""
    leading: bool = False


def _field(tag: str, block: str) -> str:
    """The stripped text from ``<tag>`` (a block starts after ``<QUESTION>``) to the next tag in order."""
    start, end = "^" if tag == "QUESTION" else f"<{tag}>", _SEQUENCE[_SEQUENCE.index(tag) + 1]
    match = re.search(rf"{start}(.*?)(?=<{end}>|$)", block, re.DOTALL)
    return match.group(1).strip() if match else ""


def parse_qa_text(text: str) -> list[QABlock]:
    """Parse one ``qa/{i}.txt`` file into its blocks (empty questions included), as the reference does.

    The text is split on ``<QUESTION>`` and every non-blank chunk is a block, the text before the first
    tag included (``leading=True``: an untagged first question, or a prose preamble). In a block, each
    field of ``<QUESTION>``, ``<CHOICE_A>`` .. ``<CHOICE_E>``, ``<CORRECT_CHOICE>`` runs from its tag to
    the next tag of that sequence, or to the block's end when that tag is absent, stripped; the letter is
    ``<CORRECT_CHOICE>\\s*([A-E])\\b`` (upper case only); the rationale runs from ``<RATIONALE...>`` to the
    end of the block, ``<WORD_COUNTS>`` included.
    """
    parts = text.split("<QUESTION>")
    blocks: list[QABlock] = []
    chunks = [(parts[0], True)] if parts[0].strip() else []
    chunks += [(part, False) for part in parts[1:]]
    lead = parts[0]
    # the line of the leading chunk's first visible character; a tag's line otherwise
    line = 1 + lead[: len(lead) - len(lead.lstrip())].count("\n")
    for i, (block, leading) in enumerate(chunks):
        letter, loose, rationale = (r.search(block) for r in (_LETTER_RE, _LOOSE_LETTER_RE, _RATIONALE_RE))
        blocks.append(
            QABlock(
                question=_field("QUESTION", block),
                choices=tuple(_field(f"CHOICE_{x}", block) for x in LETTERS),  # type: ignore[arg-type]
                letter=letter.group(1) if letter else "",
                rationale=rationale.group(1).strip() if rationale else "",
                block=i,
                line=line,
                raw_letter=loose.group(1) if loose else "",
                leading=leading,
            )
        )
        line = 1 + lead.count("\n") if leading else line + block.count("\n")
    return blocks


def shuffle_records(
    records: list[tuple[int, QABlock]], *, seed: int = 42
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Apply the reference answer shuffle to one user's ``(category, block)`` records (non-empty questions).

    One ``random.Random(seed)`` serves the whole user: a record without a letter or with an empty correct
    choice is dropped without drawing; otherwise ``rng.choice("ABCDE")`` picks the new letter, the correct
    text is removed from the five choices (first equal one), the four left are shuffled and the correct
    text is inserted at the new letter. Returns ``(rows, drops)``: the ``qa.csv`` rows (dicts keyed by
    :data:`QA_COLUMNS`) and one dict per dropped record (``category, block, line, reason``), plus one with
    reason :data:`KEPT_UNTAGGED` for a kept untagged first block (a note: that row is in ``rows``).
    """
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    drops: list[dict[str, object]] = []
    for category, blk in records:
        where = {"category": category, "block": blk.block, "line": blk.line}
        correct = blk.choices[LETTERS.index(blk.letter)] if blk.letter else ""
        if not correct:
            unread = "lowercase_letter" if blk.raw_letter else "no_letter"
            reason = "empty_correct_choice" if blk.letter else unread
            if blk.leading:
                reason = "preamble" if reason == "no_letter" else f"untagged_first_{reason}"
            drops.append({**where, "reason": reason})
            continue
        new_letter = rng.choice(LETTERS)
        others = list(blk.choices)
        others.remove(correct)
        rng.shuffle(others)
        others.insert(LETTERS.index(new_letter), correct)
        values = [len(rows), category, blk.question, *others, new_letter, blk.rationale]
        rows.append(dict(zip(QA_COLUMNS, values, strict=True)))
        if blk.leading:
            drops.append({**where, "reason": KEPT_UNTAGGED})
    return rows, drops


def missing_question_files(user_dir: Path, categories: list[str]) -> list[dict]:
    """A problem for each of ``categories`` whose ``qa/{i}.txt`` is missing.

    A blank line of ``categories.txt`` is a category (the reference reads it so), a trailing newline too.
    """
    out = []
    for c, name in enumerate(categories):
        path = user_dir / "qa" / f"{c}.txt"
        if path.exists():
            continue
        n = len(categories)
        message = f"question file for category {c} ({name!r}) is missing; categories.txt lists {n} categories"
        if not name and c == len(categories) - 1:
            why = "the last one blank: the file ends with a newline, which the reference counts as a category"
            out.append(problem(path, None, "trailing_newline", f"{message}, {why} (remove it)"))
        else:
            why = f" (line {c + 1} is blank; the reference counts it as a category)" if not name else ""
            out.append(problem(path, None, "missing_file", message + why))
    return out


def build_question_table(user_dir: str | Path, *, seed: int = 42) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build one user's question table from ``categories.txt`` and ``qa/{i}.txt`` (``user_dir``).

    Returns ``(table, drops)``: the ``qa.csv`` frame (columns :data:`QA_COLUMNS`) and a report with one row
    per dropped block: ``file, line, category, block, reason, kept`` (``kept`` is True only for an untagged
    first question the reference keeps, reason :data:`KEPT_UNTAGGED`).

    Raises:
        FileNotFoundError: When ``categories.txt`` or a ``qa/{i}.txt`` file is missing (a blank line of
            ``categories.txt``, such as a trailing newline, counts as a category, as in the reference).
    """
    user_dir = Path(user_dir)
    categories = read_list(user_dir / "categories.txt")
    records: list[tuple[int, QABlock]] = []
    drops: list[dict[str, object]] = []
    if missing := missing_question_files(user_dir, categories):
        raise FileNotFoundError(f"{missing[0]['file']}: {missing[0]['message']}")
    for c in range(len(categories)):
        for blk in parse_qa_text(read_text(user_dir / "qa" / f"{c}.txt")):
            if blk.question:
                records.append((c, blk))
            else:
                reason = "untagged_first_empty_question" if blk.leading else "empty_question"
                drops.append({"category": c, "block": blk.block, "line": blk.line, "reason": reason})
    rows, shuffle_drops = shuffle_records(records, seed=seed)
    table = pd.DataFrame(rows, columns=QA_COLUMNS)
    report = pd.DataFrame(drops + shuffle_drops, columns=["category", "block", "line", "reason"])
    report.insert(0, "file", [str(user_dir / "qa" / f"{c}.txt") for c in report["category"]])
    report["kept"] = report["reason"] == KEPT_UNTAGGED
    report = report.sort_values(["category", "block"], kind="stable").reset_index(drop=True)
    return table, report


def _shrink_message(target: Path, table: pd.DataFrame) -> str | None:
    """What replacing the ``qa.csv`` at ``target`` by a smaller ``table`` would lose, or ``None``.

    Lost are the old rows whose question text the new table lacks (matched one for one), or the last old
    rows when the texts all survive; an unreadable ``target`` is replaced with a warning.
    """
    try:
        old = read_qa_csv(target) if target.is_file() else None
    except ValueError as exc:
        logger.warning("replacing %s, which is not a readable question table: %s", target, exc)
        return None
    if old is None or len(table) >= len(old):
        return None
    left, lost = Counter(table["question"]), []
    for i, q in enumerate(old["question"]):
        left[q] -= 1
        lost += [i] if left[q] < 0 else []
    gone = old.iloc[lost] if lost else old.iloc[len(table) :]
    shown = ", ".join(
        f"index {r.index} {r.question[:60] + ('...' if len(r.question) > 60 else '')!r}"
        for r in gone.head(3).itertuples(index=False)
    )
    more = f" and {len(gone) - 3} more" if len(gone) > 3 else ""
    return (
        f"{target}: the new table has {len(table)} questions, the one it replaces "
        f"{len(table) + len(gone)}; {len(gone)} would go: {shown}{more}"
    )


def write_qa_tables(
    users_dir: str | Path,
    *,
    seed: int = 42,
    overwrite: bool = False,
    user_ids: list[int] | None = None,
    force: bool = False,
) -> pd.DataFrame:
    """Write ``qa.csv`` for every user under ``users_dir`` (step 5).

    Args:
        users_dir: The ``raw/users`` directory.
        seed: Seed of the answer shuffle.
        overwrite: Rewrite ``qa.csv`` files that already exist (otherwise they are kept).
        user_ids: Only these users (default: all).
        force: Write a table with fewer questions than the ``qa.csv`` it replaces.

    Returns the drop report of all users (``user_id, file, line, category, block, reason, kept, detail``): the
    dropped blocks, the untagged first questions kept (``kept`` true) and every block with a bad tag (reason
    ``malformed_tags``: a flag, not a drop), plus per-user counts in ``attrs["summary"]`` (``user_id, kept,
    dropped, malformed, written``).

    Raises:
        ValueError: When a table would shrink and ``force`` is not set; no file is written then.
    """
    users_dir = Path(users_dir)
    reports, summary, pending = [], [], []
    for uid in list_users(users_dir) if user_ids is None else list(user_ids):
        user_dir, target = users_dir / f"user_{uid}", users_dir / f"user_{uid}" / "qa.csv"
        table, drops = build_question_table(user_dir, seed=seed)
        files = [user_dir / "qa" / f"{c}.txt" for c in range(len(read_list(user_dir / "categories.txt")))]
        flags = [  # a flag, not a drop: the parse decides that
            (str(path), c, -1 if t.block is None else t.block, t.line, "malformed_tags", False, t.message)
            for c, path in enumerate(files)
            for t in check_tags(read_text(path))
        ]
        written = overwrite or not target.exists()
        summary.append((uid, len(table), int((~drops["kept"]).sum()), len(flags), written))
        drops = drops.assign(detail="")
        if flags:
            drops = pd.concat([drops, pd.DataFrame(flags, columns=drops.columns)], ignore_index=True)
            drops = drops.sort_values(["category", "line"], kind="stable").reset_index(drop=True)
        if target.is_dir():
            raise not_a_file_error(target, expected="a qa.csv file (remove the directory)")
        reports.append(drops.assign(user_id=uid)[["user_id", *drops.columns]])
        if written:
            pending.append((target, table))
    shrinking = [message for target, table in pending if (message := _shrink_message(target, table))]
    if shrinking and not force:
        raise ValueError(
            "refusing to replace qa.csv with a smaller table; nothing was written:\n  "
            + "\n  ".join(shrinking)
            + "\ncheck categories.txt and qa/*.txt (`pv4kit validate`), or pass force=True to "
            "write the smaller tables anyway"
        )
    for message in shrinking:
        logger.warning("forced: %s", message)
    for target, table in pending:
        atomic_write_text(target, format_qa_csv(table))
    columns = ["user_id", "file", "line", "category", "block", "reason", "kept", "detail"]
    report = pd.concat(reports, ignore_index=True) if reports else pd.DataFrame(columns=columns)
    report.attrs["summary"] = pd.DataFrame(
        summary, columns=["user_id", "kept", "dropped", "malformed", "written"]
    )
    return report
