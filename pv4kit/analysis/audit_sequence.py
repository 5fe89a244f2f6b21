"""Letter-sequence audit: do users share the correct letter at the same row index?

Step 5 (:func:`pv4kit.dataset.questions.shuffle_records`) seeds one ``random.Random(42)`` per user, the same
seed for every user, and draws once per kept record in order (a dropped record takes no draw and no row).
So the correct letter of row k (the ``question_index``, the row in the user's ``qa.csv``) is the same for
every user, and a model can learn the row-to-letter map from training users and answer test users without
reading anything. Data built with per-user seeds would show chance-level agreement here.

* :func:`letter_sequence_audit`: one row per row index with its modal letter and how many users share it;
* :func:`row_letter_predictions`: a solver that answers with the other users' modal letter at the row;
* :func:`letter_sequence_summary`: both as rates, against a within-user permutation baseline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pv4kit.analysis.audit.common import BASE_COLUMNS
from pv4kit.schema import LETTERS, answer_indices

__all__ = ["letter_sequence_audit", "letter_sequence_summary", "row_letter_predictions"]


def _row_codes(questions: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Correct-letter codes (0-4), row codes, and the sorted distinct ``question_index`` values."""
    rows, values = pd.factorize(questions["question_index"].to_numpy(), sort=True)
    return answer_indices(questions), rows, np.asarray(values)


def _letter_counts(letters: np.ndarray, rows: np.ndarray, n_rows: int) -> np.ndarray:
    """Questions per row index and letter, shape ``(n_rows, 5)``."""
    return np.bincount(rows * 5 + letters, minlength=n_rows * 5).reshape(n_rows, 5)


def _sequence_stats(letters: np.ndarray, rows: np.ndarray, n_rows: int) -> tuple[float, float, np.ndarray]:
    """Modal-letter share over rows with two or more users; accuracy and picks of the row-letter solver.

    The solver's pick is ``-1`` where no other user has that row; ties go to the earliest letter.
    """
    counts = _letter_counts(letters, rows, n_rows)
    n = counts.sum(axis=1)
    shared = n >= 2
    modal = float(counts.max(axis=1)[shared].sum() / n[shared].sum()) if shared.any() else np.nan
    others = counts[rows]
    others[np.arange(len(letters)), letters] -= 1  # leave the question's own user out
    has = others.sum(axis=1) > 0
    pick = np.where(has, others.argmax(axis=1), -1)
    accuracy = float((pick == letters)[has].mean()) if has.any() else np.nan
    return modal, accuracy, pick


def letter_sequence_audit(questions: pd.DataFrame) -> pd.DataFrame:
    """The correct letter at each row index (``question_index``) across users.

    Args:
        questions: The questions frame (``user_id, question_index, choices, answer``).

    Returns:
        One row per row index: ``question_index, n_users`` (questions at that row, one per user),
        ``modal_letter`` (ties go to the earliest letter), ``modal_share`` (share of those users whose
        letter is the modal one; 1.0 when all agree) and ``n_letters`` (distinct letters at that row).
    """
    letters, rows, values = _row_codes(questions)
    counts = _letter_counts(letters, rows, len(values))
    n = counts.sum(axis=1)
    return pd.DataFrame(
        {
            "question_index": values,
            "n_users": n,
            "modal_letter": [LETTERS[i] for i in counts.argmax(axis=1)],
            "modal_share": counts.max(axis=1) / np.maximum(n, 1),
            "n_letters": (counts > 0).sum(axis=1),
        }
    )


def row_letter_predictions(questions: pd.DataFrame) -> pd.DataFrame:
    """A solver that answers with the letter most *other* users have at the same row index.

    It sees neither the user, the question nor the choices; chance is about 20%.

    Args:
        questions: The questions frame.

    Returns:
        Key columns plus ``solver`` (``"row_letter"``), ``predicted_letter`` (missing when no other user
        has a question at that row; ties go to the earliest letter) and ``correct``.
    """
    letters, rows, values = _row_codes(questions)
    _, _, pick = _sequence_stats(letters, rows, len(values))
    base = questions[[c for c in BASE_COLUMNS if c in questions]].reset_index(drop=True)
    return base.assign(
        solver="row_letter",
        predicted_letter=[LETTERS[p] if p >= 0 else None for p in pick],
        correct=pick == letters,
    )


def letter_sequence_summary(questions: pd.DataFrame, *, n_perm: int = 200, seed: int = 0) -> pd.DataFrame:
    """How far users share one letter sequence, against a within-user permutation baseline.

    The baseline shuffles each user's letters over that user's rows (``n_perm`` times, seeded): it keeps
    every user's letter counts and breaks only the alignment of rows across users, so ``chance`` accounts
    for the number of users per row (the modal share of independent sequences is well above 20% when few
    users share a row) and for any letter imbalance.

    Args:
        questions: The questions frame.
        n_perm: Permutations of the baseline.
        seed: Seed of the permutations.

    Returns:
        Two rows ``metric, rate, n, chance, pvalue``: ``modal_letter_of_row`` (share of the ``n``
        questions in rows with two or more users whose letter is their row's modal letter) and
        ``row_letter`` (accuracy of :func:`row_letter_predictions` over the ``n`` questions another user
        shares a row with). ``chance`` is the permutation mean, ``pvalue`` the one-sided permutation
        p-value ``(1 + k) / (1 + n_perm)`` (NaN for both when ``n`` is 0).
    """
    letters, rows, values = _row_codes(questions)
    modal, accuracy, pick = _sequence_stats(letters, rows, len(values))
    users = pd.factorize(questions["user_id"].to_numpy())[0]
    by_user = np.argsort(users, kind="stable")
    rng = np.random.default_rng(seed)
    perm = np.empty((n_perm, 2))
    shuffled = np.empty_like(letters)
    for i in range(n_perm):
        # both orders list each user's questions as one block of the same size: a within-user shuffle
        shuffled[by_user] = letters[np.lexsort((rng.random(len(letters)), users))]
        perm[i] = _sequence_stats(shuffled, rows, len(values))[:2]
    n_shared = int((np.bincount(rows, minlength=len(values))[rows] >= 2).sum())
    out = []
    for j, (metric, rate, n) in enumerate(
        [("modal_letter_of_row", modal, n_shared), ("row_letter", accuracy, int((pick >= 0).sum()))]
    ):
        valid = n > 0 and n_perm > 0
        k = int((perm[:, j] >= rate - 1e-12).sum()) if valid else 0
        out.append(
            {
                "metric": metric,
                "rate": rate,
                "n": n,
                "chance": float(perm[:, j].mean()) if valid else np.nan,
                "pvalue": (1 + k) / (1 + n_perm) if valid else np.nan,
            }
        )
    return pd.DataFrame(out)
