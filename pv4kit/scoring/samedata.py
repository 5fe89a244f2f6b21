"""Whether two scored runs were made on the same data, naming the questions that differ.

Both the ``data_fingerprint`` in ``metrics.json`` and each shared question's text, choices and answer count.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit.schema import QUESTION_KEY
from pv4kit.scoring.runs import METRICS_FILE

logger = logging.getLogger(__name__)

_SHOWN = 5


def data_fingerprint(run: str | os.PathLike[str] | pd.DataFrame) -> str | None:
    """The ``data_fingerprint`` a scored run recorded (``None`` when unknown)."""
    if isinstance(run, pd.DataFrame):
        return run.attrs.get("data_fingerprint")
    try:
        metrics = json.loads((Path(run) / METRICS_FILE).read_text(encoding="utf-8"))
        return metrics["provenance"]["data_fingerprint"]
    except (OSError, ValueError, LookupError, TypeError):  # no metrics, or none recorded
        return None


def _norm(field: str, value: Any) -> Any:
    if field == "choices":
        return None if value is None else tuple("" if c is None else str(c) for c in value)
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def question_differences(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Questions in both frames whose text, choices or answer differ: ``user_id, question_index, fields``."""
    fields = [c for c in ("question", "choices", "answer") if c in a.columns and c in b.columns]
    both = a[[*QUESTION_KEY, *fields]].merge(
        b[[*QUESTION_KEY, *fields]], on=QUESTION_KEY, suffixes=("_a", "_b")
    )
    rows = []
    for rec in both.sort_values(QUESTION_KEY, kind="stable").to_dict("records"):
        differ = [f for f in fields if _norm(f, rec[f"{f}_a"]) != _norm(f, rec[f"{f}_b"])]
        if differ:
            rows.append((rec["user_id"], rec["question_index"], ", ".join(differ)))
    return pd.DataFrame(rows, columns=[*QUESTION_KEY, "fields"])


def check_same_data(
    run_a: str | os.PathLike[str] | pd.DataFrame,
    run_b: str | os.PathLike[str] | pd.DataFrame,
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    force: bool = False,
) -> bool:
    """Refuse to pair two runs made on different data, naming the questions that differ.

    ``run_a``, ``run_b``: directories or frames; ``a``, ``b``: their predictions. The data differ when the
    recorded fingerprints differ, or a question in both has another text, choices or answer.

    Returns:
        Whether the data differ (``True`` only with ``force``, which warns instead of raising).

    Raises:
        ValueError: The data differ, naming the questions, and ``force`` is false.
    """
    fa, fb = data_fingerprint(run_a), data_fingerprint(run_b)
    diff = question_differences(a, b)
    by_fingerprint = fa is not None and fb is not None and fa != fb
    if not by_fingerprint and diff.empty:
        return False
    keys_a, keys_b = (set(map(tuple, f[QUESTION_KEY].to_numpy().tolist())) for f in (a, b))
    label_a = "A" if isinstance(run_a, pd.DataFrame) else f"A ({run_a})"
    label_b = "B" if isinstance(run_b, pd.DataFrame) else f"B ({run_b})"
    msg = f"runs {label_a} and {label_b} were scored on different data"
    if by_fingerprint:
        msg += f" (data_fingerprint {fa[:12]}... vs {fb[:12]}...)"
    if len(diff):
        shown = [
            f"user {int(r.user_id)} question {int(r.question_index)} ({r.fields})"
            for r in diff.head(_SHOWN).itertuples(index=False)
        ]
        more = f" and {len(diff) - _SHOWN} more" if len(diff) > _SHOWN else ""
        msg += (
            f": {len(diff)} of the {len(keys_a & keys_b)} questions in both differ: {'; '.join(shown)}{more}"
        )
    else:
        msg += (
            ": no question in both runs differs in its text, choices or answer, so the chats or other "
            "files of the data differ"
        )
    only_a, only_b = len(keys_a - keys_b), len(keys_b - keys_a)
    if only_a or only_b:
        msg += f"; {only_a} questions only in A, {only_b} only in B"
    if force:
        logger.warning("%s; using them together anyway (force)", msg)
        return True
    raise ValueError(f"{msg}. Pass force=True to use them together anyway.")
