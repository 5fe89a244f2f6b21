"""Length, structure and answer position of the reference against its distractors (no embedder)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pv4kit.analysis.audit.common import CHANCE, _base
from pv4kit.schema import LETTERS, answer_indices, require_columns
from pv4kit.scoring.stats import bootstrap_ci

# --------------------------------------------------------------------------- length and structure


def length_audit(questions: pd.DataFrame) -> pd.DataFrame:
    """Length and structure of the reference against its distractors, one row per question.

    Returns:
        The key columns plus ``answer_letter, ref_words, ref_chars, distractor_words_mean,
        distractor_words_min, distractor_words_max, distractor_chars_mean, word_spread`` (max minus min
        words over the five), ``within_2_words``, ``ref_word_rank`` (1 = longest, ties share the best
        rank), ``ref_longest`` / ``ref_shortest`` (uniquely, by words then characters),
        ``ref_longest_chars`` / ``ref_shortest_chars`` (uniquely, by characters), ``shared_first_word``
        and ``shared_first_two`` (how many of the four distractors start like the reference).
    """
    a = answer_indices(questions)
    n = len(a)
    choices = [[c if isinstance(c, str) else "" for c in cs] for cs in questions["choices"]]
    tokens = [[c.split() for c in cs] for cs in choices]
    words = np.array([[len(t) for t in ts] for ts in tokens], dtype=np.int64).reshape(n, 5)
    chars = np.array([[len(c.strip()) for c in cs] for cs in choices], dtype=np.int64).reshape(n, 5)
    # the first one and two words, lower-cased and stripped of ",.;:", as codes (-1: none)
    heads = [[[w.lower().strip(",.;:") for w in t[:2]] for t in ts] for ts in tokens]
    one = _codes([h[0] if h else None for hs in heads for h in hs]).reshape(n, 5)
    two = _codes(["\x1f".join(h) if len(h) == 2 else None for hs in heads for h in hs]).reshape(n, 5)
    rows = np.arange(n)
    others = np.ones((n, 5), dtype=bool)
    others[rows, a] = False
    ref = {
        name: arr[rows, a] for name, arr in (("words", words), ("chars", chars), ("one", one), ("two", two))
    }
    key = words * 10_000 + chars  # words first, characters break ties
    big = np.iinfo(np.int64).max
    d_min = np.where(others, words, big).min(axis=1)
    d_max = np.where(others, words, -1).max(axis=1)
    spread = words.max(axis=1) - words.min(axis=1)

    def beats(arr: np.ndarray, ref_arr: np.ndarray) -> np.ndarray:  # every distractor below the reference
        return ((arr < ref_arr[:, None]) | ~others).all(axis=1)

    def loses(arr: np.ndarray, ref_arr: np.ndarray) -> np.ndarray:
        return ((arr > ref_arr[:, None]) | ~others).all(axis=1)

    frame = pd.DataFrame(
        {
            "answer_letter": np.array(list(LETTERS))[a] if n else np.array([], dtype=object),
            "ref_words": ref["words"],
            "ref_chars": ref["chars"],
            "distractor_words_mean": (words * others).sum(axis=1) / 4.0,
            "distractor_words_min": d_min,
            "distractor_words_max": d_max,
            "distractor_chars_mean": (chars * others).sum(axis=1) / 4.0,
            "word_spread": spread,
            "within_2_words": spread <= 2,
            "ref_word_rank": 1 + ((words > ref["words"][:, None]) & others).sum(axis=1),
            "ref_longest": beats(key, key[rows, a]),
            "ref_shortest": loses(key, key[rows, a]),
            "ref_longest_chars": beats(chars, ref["chars"]),
            "ref_shortest_chars": loses(chars, ref["chars"]),
            "shared_first_word": ((one == ref["one"][:, None]) & others & (ref["one"] >= 0)[:, None]).sum(
                axis=1
            ),
            "shared_first_two": ((two == ref["two"][:, None]) & others & (ref["two"] >= 0)[:, None]).sum(
                axis=1
            ),
        }
    )
    return pd.concat([_base(questions), frame], axis=1)


def _codes(values: list[str | None]) -> np.ndarray:
    """Integer codes of ``values``, equal strings equal codes, ``None`` as -1."""
    codes, _ = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64)


def length_summary(lengths: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Rates of the length flags with user-bootstrap intervals and the chance rate where one exists.

    Returns:
        One row per metric: ``metric, rate, ci_low, ci_high, n, chance``.
    """
    need = ["ref_longest", "ref_shortest", "ref_longest_chars", "ref_shortest_chars", "within_2_words"]
    require_columns(lengths, ["user_id", *need, "shared_first_word", "shared_first_two"], name="lengths")
    metrics = {
        "ref_longest": CHANCE,
        "ref_shortest": CHANCE,
        "ref_longest_chars": CHANCE,
        "ref_shortest_chars": CHANCE,
        "within_2_words": None,
    }
    frame = lengths.assign(
        all_share_first_word=lengths["shared_first_word"] == 4,
        all_share_first_two=lengths["shared_first_two"] == 4,
    )
    metrics.update({"all_share_first_word": None, "all_share_first_two": None})
    rows = []
    for metric, chance in metrics.items():
        ci = bootstrap_ci(frame.assign(v=frame[metric].astype(float)), value="v", n_boot=n_boot, seed=seed)
        rows.append(
            {
                "metric": metric,
                "rate": ci["estimate"],
                "ci_low": ci["low"],
                "ci_high": ci["high"],
                "n": ci["n"],
                "chance": chance,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- answer position


def position_audit(questions: pd.DataFrame, *, by: str | None = None) -> pd.DataFrame:
    """Counts of the correct letter with a chi-square test against a uniform A-E.

    Args:
        questions: The questions frame.
        by: Optional column to test within each group (e.g. ``"split"`` or ``"user_id"``).

    Returns:
        One row per group and letter: ``group, letter, n, share, expected_share, chi2, pvalue``
        (``chi2``/``pvalue`` repeat within a group; ``group`` is ``"all"`` without ``by``).
    """
    from scipy.stats import chisquare

    require_columns(questions, [by] if by else [], name="questions")
    letters = pd.Series(LETTERS[i] for i in answer_indices(questions))
    groups = questions[by].astype(str).to_numpy() if by else np.full(len(questions), "all")
    rows = []
    for g in dict.fromkeys(groups):
        sub = letters[groups == g]
        counts = np.array([(sub == x).sum() for x in LETTERS])
        test = chisquare(counts) if counts.sum() else None
        for x, n in zip(LETTERS, counts, strict=True):
            rows.append(
                {
                    "group": g,
                    "letter": x,
                    "n": int(n),
                    "share": float(n / counts.sum()) if counts.sum() else np.nan,
                    "expected_share": CHANCE,
                    "chi2": float(test.statistic) if test is not None else np.nan,
                    "pvalue": float(test.pvalue) if test is not None else np.nan,
                }
            )
    return pd.DataFrame(rows)
