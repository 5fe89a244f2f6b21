"""What generation steps 1-4 write for a model reply: the reference's rules, the checks, pv4kit's repairs.

By default the content is what the reference writes: a list reply parsed with its rule (stripped, split on
``\\n``, blank lines dropped, each line stripped, one leading ``digits.`` and its spaces removed) and
joined with ``\\n``; a chat reply stripped; a question reply as returned. An empty reply gives no content
(the reference asks again). The checks (list count, two-line chat, complete question blocks) only report.
pv4kit's repairs act only when asked for (``repair_lists``, ``repair_chats``) and say what they did.
"""

from __future__ import annotations

from pv4kit.dataset.formats import check_chat
from pv4kit.dataset.questions import parse_qa_text
from pv4kit.schema import LETTERS
from pv4kit.text import list_items


def parse_list(text: str, *, repair: bool = False) -> list[str]:
    """Items of a numbered list, by the reference's rule unless ``repair`` (:func:`pv4kit.text.list_items`).

    The reference's rule: the text is stripped and split on ``\\n``; blank lines are dropped, each line is
    stripped and a leading ``digits.`` with the spaces after it is removed (an item that was only a
    number stays, empty). ``repair=True`` reads the list loosely: ``1)``, ``1 .``, ``-``, ``*`` and bullet
    markers are removed too (a ``2.5-hour`` item stays whole) and items left empty are dropped.
    """
    return list_items(text, loose=repair)


def normalise_output(
    step: str, text: str, *, n: int, repair_lists: bool = False, repair_chats: bool = False
) -> tuple[str | None, list[str], list[str]]:
    """The file content for one model output, its problems and the pv4kit repairs that acted.

    Args:
        step: ``categories``, ``topics``, ``chats`` or ``questions``.
        text: The model's output.
        n: Expected count (list items or questions; ignored for chats).
        repair_lists: Apply pv4kit's list repair (see :func:`parse_list`).
        repair_chats: Apply pv4kit's chat repair (a literal ``\\n`` between the turns, blank lines).

    Returns:
        ``(content, problems, repairs)``: the file content as the reference writes it (``None`` when the
        reply is empty, which the reference asks again), the problems found (empty when valid) and a
        description of each repair that changed the content.
    """
    if step not in ("categories", "topics", "chats", "questions"):
        raise ValueError(f"step must be categories, topics, chats or questions, got {step!r}")
    if not text.strip():
        return None, ["empty reply"], []
    repairs: list[str] = []
    if step in ("categories", "topics"):
        items = parse_list(text)
        if repair_lists:
            repaired = parse_list(text, repair=True)
            if repaired != items:
                repairs.append("list repaired: 1) / bullet numbering removed, empty items dropped")
                items = repaired
        problems = [] if len(items) == n else [f"expected {n} items, got {len(items)}"]
        if not items:
            return None, ["no list items"], repairs
        problems += ["empty list item"] if any(not item for item in items) else []
        return "\n".join(items), problems, repairs
    if step == "chats":
        body = text.strip()
        if repair_chats:
            fixed = body.replace("\\nAssistant:", "\nAssistant:")
            lines = [line.strip() for line in fixed.splitlines() if line.strip()]
            if len(lines) == 2:
                fixed = "\n".join(lines)
            if fixed != body:
                repairs.append("chat repaired: literal \\n or blank lines between the two turns")
                body = fixed
        problems = [msg for _, _, msg in check_chat(body)]
        if len(body.splitlines()) != 2 and not problems:
            problems.append(f"expected 2 lines (Leo:, Assistant:), got {len(body.splitlines())}")
        return body, problems, repairs
    blocks = parse_qa_text(text)
    good = [
        b for b in blocks if b.question and b.letter and all(b.choices) and b.choices[LETTERS.index(b.letter)]
    ]
    problems = []
    if len(good) != n:
        problems.append(f"expected {n} complete question blocks, got {len(good)} of {len(blocks)} blocks")
    return text, problems, repairs


def check_output(
    step: str, text: str, *, n: int, repair_lists: bool = False, repair_chats: bool = False
) -> tuple[str | None, list[str]]:
    """``(content, problems)`` of :func:`normalise_output` (the repairs left out)."""
    content, problems, _ = normalise_output(
        step, text, n=n, repair_lists=repair_lists, repair_chats=repair_chats
    )
    return content, problems
