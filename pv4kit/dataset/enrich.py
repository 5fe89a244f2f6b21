"""The columns a parquet load takes from the raw tree beside it, and the cache that keeps them.

The released parquet files hold the questions and chats but not the category names, rationales,
personas and seeds; :func:`enrich_from_raw` adds them from ``users/user_N`` (``qa.csv``, ``categories.txt``,
``chat_topics.txt``), ``personas/`` and ``persona_seeds.csv`` when the tree is there. With a ``cache``
folder what the tree gave is kept there, keyed by the SHA-256 of every file read, the code that reads
them and the pandas version (any edit is another key), so a rerun hashes the files instead of parsing
149 ``qa.csv`` (release: a load takes 1.1 s instead of 2.0 s).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import atomic_path, cache_root, sha256_file
from pv4kit.dataset.tree import read_persona_seeds, read_user
from pv4kit.schema import QUESTION_KEY

logger = logging.getLogger(__name__)


def enrich_from_raw(
    frame: pd.DataFrame, users: pd.DataFrame, raw_root: Path, *, cache: Any = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``frame`` and ``users`` with ``category, category_name, rationale`` and the personas from the tree.

    Args:
        frame: The parquet's questions (``user_id, question_index, question`` at least).
        users: The users frame built from the parquet.
        raw_root: The raw tree (holding ``users/``).
        cache: A folder that keeps what the tree gave (``True``: ``cache_root()/loads``), or ``None``.

    Returns:
        ``(frame, users)``, copies. A question the tree holds under another text is counted in a warning.
    """
    users = users.copy()
    attrs, parts = _raw_side(raw_root, [int(u) for u in users["user_id"]], cache=cache)
    for i, uid in enumerate(users["user_id"]):
        if int(uid) not in attrs:
            continue
        persona, seed, categories, topics = attrs[int(uid)]
        users.at[i, "persona"] = persona
        users.at[i, "seed"] = seed
        users.at[i, "categories"] = categories
        users.at[i, "topics"] = topics
    raw_cols = ["_raw_question", "_category", "_category_name", "_rationale"]
    if parts is not None:
        found = parts.astype({"user_id": frame["user_id"].dtype})
        merged = frame[["user_id", "question_index", "question"]].merge(found, on=QUESTION_KEY, how="left")
    else:
        merged = frame[["user_id", "question_index", "question"]].assign(**dict.fromkeys(raw_cols))
    present = merged["_raw_question"].notna().to_numpy()
    differ = present & (merged["_raw_question"] != merged["question"]).to_numpy()
    if differ.any():
        first = merged[differ].iloc[0]
        logger.warning(
            "%d question(s) differ between the parquet and %s (first: user %s question %s, %r in the "
            "parquet, %r in qa.csv); their category names and rationales may belong to other questions",
            int(differ.sum()),
            raw_root,
            first["user_id"],
            first["question_index"],
            str(first["question"])[:60],
            str(first["_raw_question"])[:60],
        )
    frame = frame.copy()
    frame["category"] = pd.array(merged["_category"], dtype="Int64")
    frame["category_name"] = merged["_category_name"].astype(object).where(present, None).to_numpy()
    frame["rationale"] = merged["_rationale"].astype(object).where(present, None).to_numpy()
    return frame, users


def _read_raw_side(
    raw_root: Path, ids: list[int]
) -> tuple[dict[int, tuple[Any, Any, Any, Any]], pd.DataFrame | None]:
    """What a parquet load takes from the raw tree: per-user attributes and the question columns.

    Returns:
        ``({user_id: (persona, seed, categories, topics)}, frame)``, the frame holding ``user_id,
        question_index, _raw_question, _category, _category_name, _rationale`` (``None``: no ``qa.csv``).
    """
    attrs: dict[int, tuple[Any, Any, Any, Any]] = {}
    parts = []
    seeds = read_persona_seeds(raw_root)
    for uid in ids:
        udir = raw_root / "users" / f"user_{uid}"
        if not udir.is_dir():
            continue
        u = read_user(udir, raw_dir=raw_root, chats=False, seeds=seeds)  # the parquet holds the chats
        attrs[uid] = (u.persona, u.seed, u.categories or None, u.topics or None)
        if u.qa is None:
            continue
        names = u.categories or []
        cats = u.qa["category"].to_numpy()
        parts.append(
            pd.DataFrame(
                {
                    "user_id": uid,
                    "question_index": np.arange(len(u.qa), dtype="int64"),
                    "_raw_question": u.qa["question"].to_numpy(),
                    "_category": cats,
                    "_category_name": [names[c] if c < len(names) else None for c in cats],
                    "_rationale": u.qa["rationale"].to_numpy(),
                }
            )
        )
    return attrs, (pd.concat(parts, ignore_index=True) if parts else None)


#: bump when what :func:`_read_raw_side` returns changes shape (old entries are then never read)
_RAW_SIDE_FORMAT = 1
#: entries the load cache keeps, newest first (one per tree and version of it; ~19 MB at release size)
_KEEP_LOADS = 4


def _raw_side_key(raw_root: Path, ids: list[int]) -> str:
    """The load cache's key: any edit to a file it reads, to the code that reads them, is another key.

    SHA-256 over the bytes of every file :func:`_read_raw_side` reads (or their absence), the user ids,
    the dataset modules' source, the entry format and the pandas version.
    """
    meta = {"format": _RAW_SIDE_FORMAT, "ids": ids, "pandas": pd.__version__}  # the entry is pickled frames
    digest = hashlib.sha256(json.dumps(meta).encode())
    for module in ("formats", "tree", "enrich"):
        digest.update((Path(__file__).parent / f"{module}.py").read_bytes())
    names = ["persona_seeds.csv"]
    for uid in ids:
        names += [f"users/user_{uid}/{f}" for f in ("categories.txt", "chat_topics.txt", "qa.csv")]
        names.append(f"personas/user_{uid}.txt")
    for name in names:
        path = raw_root / name
        digest.update(name.encode() + b"\0")
        digest.update(sha256_file(path).encode() if path.is_file() else b"absent")
    return digest.hexdigest()[:32]


def _raw_side(
    raw_root: Path, ids: list[int], *, cache: Any
) -> tuple[dict[int, tuple[Any, Any, Any, Any]], pd.DataFrame | None]:
    """:func:`_read_raw_side`, kept in ``cache`` (a folder, ``True`` for ``cache_root()/loads``, or off)."""
    if cache is None or cache is False:
        return _read_raw_side(raw_root, ids)
    import pickle

    folder = cache_root() / "loads" if cache is True else Path(cache)
    path = folder / f"{_raw_side_key(raw_root, ids)}.pkl"
    if path.is_file():
        try:
            with open(path, "rb") as fh:
                kept = pickle.load(fh)
            logger.info("raw-tree columns of %s read from %s", raw_root, path)
            return kept
        except Exception as exc:  # a damaged entry is read again from the tree, never trusted
            logger.warning("%s: unreadable load cache entry (%s); reading %s again", path, exc, raw_root)
    out = _read_raw_side(raw_root, ids)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            pickle.dump(out, fh, protocol=5)
    except OSError as exc:  # a cache that cannot be written costs a re-read next time, not the load
        logger.warning("%s: could not keep the raw-tree columns (%s); the load goes on without", folder, exc)
        return out
    for stale in sorted(folder.glob("*.pkl"), key=lambda f: f.stat().st_mtime, reverse=True)[_KEEP_LOADS:]:
        stale.unlink(missing_ok=True)  # an entry pruned here is read from the tree again when needed
    return out
