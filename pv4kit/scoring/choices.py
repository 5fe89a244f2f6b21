"""The five candidates as a lettered list: seeded order, the listing shown to a model, its reply parsed.

Shared by the multiple-choice method (``pv4kit answer --method mcq``) and the judge of
:mod:`pv4kit.scoring.validity`. A reply is read strictly, so prose is never taken for a pick: a letter
(``B``, ``(B)``, ``Answer: b``, ``The answer is B``), a letter with that candidate's text or its beginning,
or one candidate's text alone (or its first three words or more, when they begin no other). ``NONE`` only
where the listing offered it. Anything else is ``None``: unparsed, counted, never a pick.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from pv4kit.schema import LETTERS

#: version of the listing and the instructions below (recorded in the run's config and the validity summary)
CHOICE_PROMPT_VERSION = "pv4kit-choices-1"
NONE = "NONE"
#: the generations column of a multiple-choice run: shown position -> index into the question's choices
ORDER_COLUMN = "choice_order"
MCQ_INSTRUCTION = "Answer with the letter of the best option (A, B, C, D or E) and nothing else."

_LETTER = re.compile(
    r"^(?:(?:the\s+)?(?:final\s+|correct\s+|best\s+)?(?:answer|choice|option|verdict|pick)"
    r"(?:\s+is)?\s*[:\-]?\s*)?(?:option\s+)?[(\[]?([a-e])[)\]]?[.!]?$",
    re.IGNORECASE,
)
_NONE = re.compile(r"^(?:(?:the\s+)?(?:final\s+)?(?:answer|verdict)(?:\s+is)?\s*[:\-]?\s*)?none[.!]?$", re.I)
_LETTER_AND_TEXT = re.compile(r"^[(\[]?([A-E])[)\].:]\s+(.+)$", re.DOTALL)
_DECORATION = "*_`\"' \t\n"
#: a reply this many words long or more that begins exactly one candidate's text names that candidate
_MIN_PREFIX_WORDS = 3


def choice_order(user_id: int, question_index: int, *, seed: int) -> list[int]:
    """The seeded order of one question's five candidates: shown position -> index into its choices."""
    rng = np.random.default_rng([int(seed), int(user_id), int(question_index)])
    return [int(i) for i in rng.permutation(len(LETTERS))]


def choice_listing(choices: Sequence[str], order: Sequence[int], *, none: bool = False) -> str:
    """The candidates in ``order``, one ``X. text`` line each (and a ``NONE`` line when ``none``)."""
    lines = [f"{LETTERS[pos]}. {choices[idx]}" for pos, idx in enumerate(order)]
    if none:
        lines.append(f"{NONE}. None of the options")
    return "\n".join(lines)


def mcq_suffix(choices: Sequence[str], order: Sequence[int]) -> str:
    """What a multiple-choice run appends to the question: the listing and the one-letter instruction."""
    return f"\n\nOptions:\n{choice_listing(choices, order)}\n\n{MCQ_INSTRUCTION}"


def _norm(text: str) -> str:
    return " ".join(text.casefold().strip(_DECORATION + ".!").split())


def parse_choice(reply: str | None, shown: Sequence[str], *, none: bool = False) -> str | None:
    """The shown letter a reply names (``"A"``..``"E"``), ``"NONE"`` (only with ``none``), or ``None``.

    ``shown``: the candidate texts in the order shown (``shown[0]`` was labelled A).

    Example:
        >>> shown = ["tea", "coffee", "water", "milk", "juice"]
        >>> [parse_choice(r, shown) for r in ("(B)", "Answer: b", "Coffee.", "A lovely tea", "NONE")]
        ['B', 'B', 'B', None, None]
    """
    if reply is None:
        return None
    text = str(reply).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for attempt in dict.fromkeys([text, *lines[:1]]):
        if (found := _parse_one(attempt.strip(_DECORATION), shown, none=none)) is not None:
            return found
    return None


def _parse_one(text: str, shown: Sequence[str], *, none: bool) -> str | None:
    if m := _LETTER.match(text):
        return m.group(1).upper()
    if none and _NONE.match(text):
        return NONE
    texts = [_norm(s) for s in shown]
    if m := _LETTER_AND_TEXT.match(text):
        letter, rest = m.group(1), _norm(m.group(2))
        pos = LETTERS.index(letter)
        # that candidate's text, or its beginning (a reply cut by the output cap)
        return letter if pos < len(texts) and texts[pos].startswith(rest) else None
    reply = _norm(text)
    hits = [i for i, s in enumerate(texts) if s and s == reply]
    if not hits and len(reply.split()) >= _MIN_PREFIX_WORDS:  # the beginning of one candidate's text
        hits = [i for i, s in enumerate(texts) if s.startswith(reply)]
    return LETTERS[hits[0]] if len(hits) == 1 else None


def original_letter(shown_letter: str | None, order: Sequence[int]) -> str | None:
    """The question's own letter of a shown letter (``NONE`` and ``None`` pass through)."""
    return shown_letter if shown_letter in (None, NONE) else LETTERS[int(order[LETTERS.index(shown_letter)])]


def shown_letter(letter: object, order: Sequence[int]) -> str | None:
    """The shown letter of the question's own ``letter`` under ``order`` (``None`` for anything else)."""
    if not isinstance(letter, str) or letter not in LETTERS:
        return None
    return LETTERS[list(order).index(LETTERS.index(letter))]


def position_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """Accuracy by the shown letter of the correct answer, and the share of parsed replies naming each letter.

    Columns: ``position, n, n_correct, accuracy, share_picked``.
    """
    picked = predictions["shown_letter"].dropna()
    rows = []
    for letter in LETTERS:
        at = predictions.loc[predictions["answer_position"] == letter, "correct"]
        share = float((picked == letter).mean()) if len(picked) else float("nan")
        rows.append((letter, len(at), int(at.sum()), float(at.mean()) if len(at) else float("nan"), share))
    return pd.DataFrame(rows, columns=["position", "n", "n_correct", "accuracy", "share_picked"])
