"""The shapes every stage agrees on: answer letters, the question key, split names, id ranges, columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

#: the five answer letters, in choice order
LETTERS = "ABCDE"
#: the key of a question in every frame pv4kit writes or reads
QUESTION_KEY = ["user_id", "question_index"]
#: the three splits of step 6, in file order
SPLITS = ("train", "validation", "test")
#: a user's role -> the splits that get one row group per user of that role (empty ones too, as the reference)
ROLE_SPLITS = {"train": ("train", "validation"), "test": ("test",)}
#: the release's user-id ranges (inclusive): training users and test users
DEFAULT_TRAIN_USERS = (6, 125)
DEFAULT_TEST_USERS = (126, 155)
#: the columns of a user's ``qa.csv``, in the reference's order
CHOICE_COLUMNS = [f"choice_{x.lower()}" for x in LETTERS]
QA_COLUMNS = ["index", "category", "question", *CHOICE_COLUMNS, "correct_choice", "rationale"]
#: the columns of :attr:`pv4kit.dataset.load.PV4Data.questions`, in order
QUESTION_COLUMNS = ["user_id", "split", "question_index", "category", "category_name", "question", "choices"]
QUESTION_COLUMNS += ["answer", "answer_letter", "hard", "rationale"]
#: the columns of :attr:`pv4kit.dataset.load.PV4Data.users`, in order
USER_COLUMNS = ["user_id", "role", "documents", "persona", "seed", "categories", "topics"]


def user_role(user_id: int, *, train_users: tuple[int, int], test_users: tuple[int, int]) -> str | None:
    """``"train"``, ``"test"`` or ``None`` (outside both ranges) for a user id."""
    if train_users[0] <= user_id <= train_users[1]:
        return "train"
    if test_users[0] <= user_id <= test_users[1]:
        return "test"
    return None


def check_ranges(train_users: tuple[int, int], test_users: tuple[int, int]) -> None:
    """Raise ``ValueError`` when the two user-id ranges overlap."""
    if train_users[0] <= test_users[1] and test_users[0] <= train_users[1]:
        raise ValueError(
            f"train users {train_users[0]}-{train_users[1]} and test users {test_users[0]}-{test_users[1]} "
            "overlap; a user must be in one range only"
        )


def normalise_letter(letter: object) -> str:
    """A ``correct_choice`` cell as step 6 reads it: stripped and upper-cased (``" b"`` -> ``"B"``)."""
    return letter.strip().upper() if isinstance(letter, str) else ""


def answer_letter_problem(letter: object, choices: Sequence[object]) -> tuple[str, str] | None:
    """``(code, message)`` saying what is wrong with a ``qa.csv`` row's ``correct_choice``, or ``None``.

    Used by ``validate``, ``build`` and ``load``: the letter, read by :func:`normalise_letter`,
    is one of :data:`LETTERS` (else ``bad_letter``), and the choice it names is not empty (else
    ``empty_answer``; whitespace counts as text, as in the reference's ``build_dataset.py``).
    """
    text = normalise_letter(letter)
    if len(text) != 1 or text not in LETTERS:
        return "bad_letter", f"correct_choice must be one of A-E, found {letter!r}"
    chosen = choices[LETTERS.index(text)]
    if not isinstance(chosen, str) or not chosen:
        return "empty_answer", f"the correct choice {text} is empty"
    return None


def require_columns(frame: pd.DataFrame, columns: Sequence[str], *, name: str) -> None:
    """Raise ``ValueError`` naming the frame (``name``, its parameter) and the ``columns`` it lacks."""
    if missing := [c for c in columns if c not in frame.columns]:
        raise ValueError(f"{name}: missing column(s) {missing}; found {list(frame.columns)}")


def answer_indices(questions: pd.DataFrame) -> np.ndarray:
    """Index (0-4) of each row's answer among its choices, by stripped string equality (first match).

    Raises:
        ValueError: Naming every row (user, question index) whose answer is whitespace only or not among
            its choices, or whose choices are not a list of 5 strings.
    """
    import numpy as np

    require_columns(questions, [*QUESTION_KEY, "choices", "answer"], name="questions")
    out = np.full(len(questions), -1, dtype=np.int64)
    bad = []
    for pos, (choices, answer) in enumerate(zip(questions["choices"], questions["answer"], strict=True)):
        choices = list(choices) if choices is not None else []
        target = str(answer).strip() if isinstance(answer, str) else None
        stripped = [str(c).strip() if c is not None else "" for c in choices]
        if len(choices) != len(LETTERS):
            bad.append((pos, f"expected 5 choices, got {len(choices)}"))
        elif target == "" and answer:
            why = "the reference's scorer offers no blank choice, so it is never answered right"
            bad.append((pos, f"answer {answer!r} is whitespace only: {why}"))
        elif not target or target not in stripped:
            bad.append((pos, f"answer {answer!r} is not among the choices {choices!r}"))
        else:
            out[pos] = stripped.index(target)
    if bad:
        keys = questions[QUESTION_KEY].iloc[[p for p, _ in bad[:5]]].itertuples(index=False)
        where = [f"user {u} question {q}: {why}" for (u, q), (_, why) in zip(keys, bad, strict=False)]
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise ValueError(f"{len(bad)} question(s) cannot be scored: " + "; ".join(where) + more)
    return out
