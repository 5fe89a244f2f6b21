"""Check the tags of a ``qa/{i}.txt`` file, block by block, without changing how step 5 parses it.

In the reference parse a malformed (``<CHOICE_B`` without ``>``, lower-case, closing), missing or repeated
tag silently runs one field into the next. A well-formed block holds ``<CHOICE_A>`` .. ``<CHOICE_E>`` and
``<CORRECT_CHOICE>`` once each, in order, then at most one ``<RATIONALE...>`` (``<WORD_COUNTS>`` unchecked).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

#: tags every block needs once, in this order (``<QUESTION>`` opens the block)
REQUIRED = ("CHOICE_A", "CHOICE_B", "CHOICE_C", "CHOICE_D", "CHOICE_E", "CORRECT_CHOICE")
#: tags a block may hold once, after ``<CORRECT_CHOICE>``
OPTIONAL = ("RATIONALE", "WORD_COUNTS")
_ALL = ("QUESTION", *REQUIRED, *OPTIONAL)

# anything that looks like one of the tags, in any case and spacing, with or without its brackets
_LOOSE = re.compile(
    r"<\s*/?\s*(question|choice[ _]?[a-e]|correct[ _]?choice|rationale|word[ _]?counts)\b[^\S\n]*>?"
    r"|(?<![<\w])(QUESTION|CHOICE_[A-E]|CORRECT_CHOICE|RATIONALE|WORD_COUNTS)>",
    re.IGNORECASE,
)
_WELL_FORMED = re.compile(r"<(QUESTION|CHOICE_[A-E]|CORRECT_CHOICE|WORD_COUNTS)>|<RATIONALE[^>\n]*>")


@dataclass(frozen=True)
class TagProblem:
    """One tag problem of a ``qa/{i}.txt`` file.

    Attributes:
        block: 0-based block (as ``parse_qa_text`` counts them), ``None`` before the first ``<QUESTION>``.
        code: ``tag_malformed``, ``tag_missing``, ``tag_repeated``, ``tag_order`` or ``tag_outside``.
    """

    line: int
    block: int | None
    code: str
    message: str


def _canonical(token: str) -> str:
    name = re.sub(r"[^A-Za-z]", "", token).upper()
    return next((tag for tag in _ALL if tag.replace("_", "") == name), name)


def _field_name(tag: str) -> str:
    if tag.startswith("CHOICE_"):
        return f"choice {tag[-1]}"
    return {"QUESTION": "the question", "CORRECT_CHOICE": "the correct letter", "": "the text"}.get(
        tag, f"the {tag.lower().replace('_', ' ')}"
    )


def check_tags(text: str) -> list[TagProblem]:
    """Find every malformed, missing, repeated or misplaced tag of one ``qa/{i}.txt`` text, in file order.

    A block holding only whitespace is skipped (step 5's drop report already names it).
    """
    problems: list[TagProblem] = []
    bounds = [0, *(m.start() for m in re.finditer("<QUESTION>", text)), len(text)]

    def add(pos: int, number: int | None, code: str, message: str) -> None:
        problems.append(TagProblem(text.count("\n", 0, pos) + 1, number, code, message))

    for k, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        number, start, q = (k - 1 if k else None), lo + len("<QUESTION>") if k else lo, f"question {k}"
        if k and not text[start:hi].strip():
            continue
        well = {m.start(): m for m in _WELL_FORMED.finditer(text, start, hi)}  # the tags the parse sees
        found: dict[str, list[int]] = {}
        for pos, m in well.items():
            found.setdefault(_canonical(m.group(0).split()[0]), []).append(pos)
        malformed: set[str] = set()
        for m in _LOOSE.finditer(text, start, hi):
            pos = m.start()
            if pos in well and well[pos].end() >= m.end():
                continue
            tag = _canonical(m.group(0))
            malformed.add(tag)
            if tag == "WORD_COUNTS":  # inside the rationale, which runs to the end of the block anyway
                continue
            before = [_canonical(w.group(0).split()[0]) for at, w in well.items() if at < pos]
            field = _field_name(before[-1] if before else ("QUESTION" if k else ""))
            effect = (
                "the rationale is read from the next '>' on, or is empty"
                if tag == "RATIONALE"
                else f"{field} runs on through it"
            )
            where = f"{q}: " if k else ""
            message = (
                f"{where}{m.group(0).strip()!r} is not a well-formed tag (expected '<{tag}>'); "
                f"the parse does not see it, so {effect}"
            )
            add(pos, number, "tag_malformed", message)
        if not k:  # the text before the first <QUESTION>
            if found:
                names = ", ".join(f"<{t}>" for t in found)
                message = (
                    f"text before the first <QUESTION> tag holds {names}; "
                    "is a <QUESTION> tag malformed or missing?"
                )
                add(min(p for ps in found.values() for p in ps), None, "tag_outside", message)
            continue
        for tag in REQUIRED:
            if tag not in found and tag not in malformed:
                message = (
                    f"{q} has no <{tag}> tag; the parse leaves that field empty and the one before it runs on"
                )
                add(lo, number, "tag_missing", message)
        for tag, where in found.items():
            if tag not in ("QUESTION", "WORD_COUNTS") and len(where) > 1:
                lines = ", ".join(str(text.count("\n", 0, p) + 1) for p in where)
                message = (
                    f"{q} has <{tag}> {len(where)} times (lines {lines}); "
                    "the parse reads the first and runs the rest into that field"
                )
                add(where[1], number, "tag_repeated", message)
        order = [t for t in (*REQUIRED, "RATIONALE") if t in found]
        for before, after in zip(order, order[1:], strict=False):
            if found[after][0] < found[before][0]:
                message = (
                    f"{q} has <{after}> before <{before}>; the parse runs the fields between them together"
                )
                add(found[after][0], number, "tag_order", message)
    return sorted(problems, key=lambda p: p.line)
