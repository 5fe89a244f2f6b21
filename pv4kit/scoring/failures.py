"""Failed requests in a run: recorded as failures, resumed by ``answer``, never scored as answers.

A row of ``generations.parquet`` whose request failed after its retries has ``status == "failed"``, its
``error``, and **no generation** (null). ``pv4kit answer`` run again with the same options resumes those
rows (and only those). :func:`pv4kit.scoring.score.score_run` refuses a run with failed rows unless told how
to count them (:data:`FAILED_POLICIES`):

* ``"wrong"``: every failed row counts as a wrong answer (in the denominator, no prediction);
* ``"exclude"``: failed rows are left out of every figure.

Either way ``metrics.json`` reports ``n_failed`` and ``failed_policy``. An empty or whitespace answer the
server *did* return is not a failure: it is scored as the reference scores it (the empty string is embedded
and the nearest candidate wins), and it is counted (``n_empty_generations``) and flagged per row
(``empty_generation``).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_FAILED = "failed"
FAILED_POLICIES = ("wrong", "exclude")


def failed_mask(generations: pd.DataFrame) -> pd.Series:
    """Rows whose request failed (``status == "failed"``); all false for runs without a ``status`` column."""
    if "status" not in generations.columns:
        return pd.Series(False, index=generations.index)
    return generations["status"].astype("string").fillna("").eq(STATUS_FAILED).astype(bool)


def empty_mask(generations: pd.DataFrame) -> pd.Series:
    """Rows that got an answer made only of whitespace (or nothing)."""
    text = generations["generation"]
    ok = text.notna() & ~failed_mask(generations)
    return ok & text.fillna("").astype(str).str.strip().eq("")


class FailedRowsError(ValueError):
    """A run with failed requests was scored without saying how to count them."""


def check_failed(generations: pd.DataFrame, *, failed: str | None, where: str) -> pd.Series:
    """The failed rows of a run, refusing them unless ``failed`` names a policy.

    Args:
        generations: The run's generations frame.
        failed: ``None`` (refuse), or one of :data:`FAILED_POLICIES`.
        where: The run directory, for the message.

    Returns:
        The boolean mask of failed rows.

    Raises:
        ValueError: On an unknown policy.
        FailedRowsError: When rows failed and ``failed`` is ``None``.
    """
    if failed is not None and failed not in FAILED_POLICIES:
        raise ValueError(f"failed must be one of {FAILED_POLICIES} or None, got {failed!r}")
    mask = failed_mask(generations)
    n = int(mask.sum())
    if n and failed is None:
        first = generations.loc[mask].iloc[0]
        error = first.get("error") if "error" in generations.columns else None
        raise FailedRowsError(
            f"{where}: {n} of {len(generations)} requests failed (status 'failed' in generations.parquet; "
            f"e.g. user {int(first['user_id'])} question {int(first['question_index'])}: {error}); rerun "
            "`pv4kit answer` with the same options to resume them, or score with failed='wrong' (count them "
            "as wrong answers) or failed='exclude' (leave them out)"
        )
    if n:
        logger.warning("%s: %d failed requests, scored with failed=%r", where, n, failed)
    return mask


def mark_failed(predictions: pd.DataFrame, failed_keys: pd.DataFrame) -> pd.DataFrame:
    """Turn the prediction rows of failed requests into wrong answers with no prediction (policy ``wrong``).

    Args:
        predictions: Scored rows (the failed ones were scored on an empty text only to keep the columns).
        failed_keys: ``user_id, question_index`` of the failed rows.

    Returns:
        ``predictions`` with ``failed`` and ``empty_generation`` columns; failed rows have no generation,
        no predicted letter, ``correct`` false and no similarities.
    """
    out = predictions.copy()
    keys = set(
        zip(failed_keys["user_id"].astype(int), failed_keys["question_index"].astype(int), strict=True)
    )
    mask = np.array(
        [(int(u), int(i)) in keys for u, i in zip(out["user_id"], out["question_index"], strict=True)],
        dtype=bool,
    )
    out["failed"] = mask
    if mask.any():
        out["generation"] = out["generation"].astype(object)
        out.loc[mask, "generation"] = None
        out.loc[mask, "predicted_letter"] = None
        out.loc[mask, "correct"] = False
        for col in [c for c in out.columns if c.startswith("sim_")] + ["margin"]:
            if col in out.columns:
                out.loc[mask, col] = np.nan
        if "tie" in out.columns:
            out.loc[mask, "tie"] = False
    out["empty_generation"] = ~mask & out["generation"].fillna("").astype(str).eq("")
    return out


def failure_metrics(n_failed: int, policy: str | None) -> dict[str, Any]:
    """The fields :func:`pv4kit.scoring.score.score_run` adds to ``metrics.json``."""
    return {"n_failed": int(n_failed), "failed_policy": policy if n_failed else None}


def rows_to_score(
    generations: pd.DataFrame, mask: pd.Series, *, failed: str | None, where: str
) -> pd.DataFrame:
    """The rows handed to the scorer.

    All of them for ``wrong`` (the failed ones are marked afterwards), the others for ``exclude``.
    """
    if failed != "exclude" or not mask.any():
        return generations
    if mask.all():
        raise FailedRowsError(f"{where}: every request failed; nothing to score (rerun `pv4kit answer`)")
    return generations.loc[~mask].reset_index(drop=True)


def previous_answers(run_dir: Any) -> dict[str, tuple[str, Any]]:
    """``request_key -> (generation, finish_reason)`` of the answered rows of an existing run (for resuming).

    Rows that failed, and runs written before ``request_key`` was recorded, give nothing (asked again).
    """
    from pathlib import Path

    path = Path(run_dir) / "generations.parquet"
    if not path.exists():
        return {}
    try:
        old = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        logger.warning("%s: unreadable (%s); every question is asked again", path, exc)
        return {}
    if "request_key" not in old.columns or "status" not in old.columns:
        return {}
    ok = old[old["status"].astype("string").fillna("").eq(STATUS_OK) & old["generation"].notna()]
    finish = ok["finish_reason"] if "finish_reason" in ok.columns else pd.Series(None, index=ok.index)
    return {
        str(k): (str(g), f)
        for k, g, f in zip(ok["request_key"], ok["generation"], finish, strict=True)
        if isinstance(k, str) and k
    }
