"""Failed requests in a run: recorded as failures, resumed by ``answer``, never scored as answers.

A row of ``generations.parquet`` whose request failed after its retries has ``status == "failed"``, its
``error`` and no generation; ``pv4kit answer`` run again resumes those rows. ``score_run`` refuses them
unless told how to count them (:data:`FAILED_POLICIES`): ``"wrong"`` (in the denominator, no
prediction) or ``"exclude"`` (left out). An empty answer the server did return is no failure: it is scored
as the reference scores it, counted (``n_empty_generations``) and flagged (``empty_generation``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.schema import QUESTION_KEY

logger = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_FAILED = "failed"
FAILED_POLICIES = ("wrong", "exclude")


class FailedRowsError(ValueError):
    """A run with failed requests was scored without saying how to count them."""


def rows_to_score(
    generations: pd.DataFrame, *, failed: str | None, where: str
) -> tuple[pd.DataFrame, pd.Series]:
    """``(rows handed to the scorer, mask of the failed rows)``, refusing failed rows unless ``failed`` says.

    Raises:
        ValueError: On an unknown policy.
        FailedRowsError: Rows failed and ``failed`` is ``None``, or every row failed under ``"exclude"``.
    """
    if failed is not None and failed not in FAILED_POLICIES:
        raise ValueError(f"failed must be one of {FAILED_POLICIES} or None, got {failed!r}")
    status = generations["status"] if "status" in generations else pd.Series("", index=generations.index)
    mask = status.astype("string").fillna("").eq(STATUS_FAILED).astype(bool)
    n = int(mask.sum())
    if n and failed is None:
        first = generations.loc[mask].iloc[0]
        raise FailedRowsError(
            f"{where}: {n} of {len(generations)} requests failed (status 'failed' in generations.parquet; "
            f"e.g. user {int(first['user_id'])} question {int(first['question_index'])}: "
            f"{first.get('error')}); "
            "rerun `pv4kit answer` with the same options to resume them, or score with failed='wrong' (count "
            "them as wrong answers) or failed='exclude' (leave them out)"
        )
    if n:
        logger.warning("%s: %d failed requests, scored with failed=%r", where, n, failed)
    if failed != "exclude" or not n:
        return generations, mask
    if mask.all():
        raise FailedRowsError(f"{where}: every request failed; nothing to score (rerun `pv4kit answer`)")
    return generations.loc[~mask].reset_index(drop=True), mask


def mark_failed(predictions: pd.DataFrame, failed_keys: pd.DataFrame) -> pd.DataFrame:
    """Add ``failed`` and ``empty_generation``; rows of ``failed_keys`` become wrong, with no prediction."""
    out = predictions.copy()
    keys = pd.MultiIndex.from_frame(failed_keys[list(QUESTION_KEY)].astype("int64"))
    mask = pd.MultiIndex.from_frame(out[list(QUESTION_KEY)].astype("int64")).isin(keys)
    out["failed"] = mask
    if mask.any():
        out["generation"] = out["generation"].astype(object)
        out.loc[mask, ["generation", "predicted_letter"]] = None
        out.loc[mask, "correct"] = False
        out.loc[mask, [c for c in out.columns if c.startswith("sim_") or c == "margin"]] = np.nan
        if "tie" in out.columns:
            out.loc[mask, "tie"] = False
    out["empty_generation"] = ~mask & out["generation"].fillna("").astype(str).eq("")
    return out


def previous_answers(run_dir: Any) -> dict[str, tuple[str, Any]]:
    """``request_key -> (generation, finish_reason)`` of the answered rows of a run (for resuming)."""
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
