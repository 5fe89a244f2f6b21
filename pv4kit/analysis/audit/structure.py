"""Length, structure and answer position of the reference against its distractors (no embedder)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pv4kit.analysis.audit.common import CHANCE, _base, _words
from pv4kit.schema import LETTERS, answer_indices
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
    idx = answer_indices(questions)
    rows = []
    for choices, a in zip(questions["choices"], idx, strict=True):
        choices = [c if isinstance(c, str) else "" for c in choices]
        words = np.array([len(_words(c)) for c in choices])
        chars = np.array([len(c.strip()) for c in choices])
        others = [j for j in range(5) if j != a]
        key = words * 10_000 + chars  # words first, characters break ties
        first = [tuple(w.lower().strip(",.;:") for w in _words(c)[:2]) for c in choices]
        rows.append(
            {
                "answer_letter": LETTERS[a],
                "ref_words": int(words[a]),
                "ref_chars": int(chars[a]),
                "distractor_words_mean": float(words[others].mean()),
                "distractor_words_min": int(words[others].min()),
                "distractor_words_max": int(words[others].max()),
                "distractor_chars_mean": float(chars[others].mean()),
                "word_spread": int(words.max() - words.min()),
                "within_2_words": bool(words.max() - words.min() <= 2),
                "ref_word_rank": int(1 + (words[others] > words[a]).sum()),
                "ref_longest": bool((key[others] < key[a]).all()),
                "ref_shortest": bool((key[others] > key[a]).all()),
                "ref_longest_chars": bool((chars[others] < chars[a]).all()),
                "ref_shortest_chars": bool((chars[others] > chars[a]).all()),
                "shared_first_word": int(
                    sum(bool(first[a]) and first[j][:1] == first[a][:1] for j in others)
                ),
                "shared_first_two": int(sum(first[j] == first[a] and len(first[a]) == 2 for j in others)),
            }
        )
    return pd.concat([_base(questions), pd.DataFrame(rows)], axis=1)


def length_summary(lengths: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Rates of the length flags with user-bootstrap intervals and the chance rate where one exists.

    Returns:
        One row per metric: ``metric, rate, ci_low, ci_high, n, chance``.
    """
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
