"""Step 6: per-user splits of the question tables into ``train``/``validation``/``test`` parquet files.

Training users split their questions with :func:`split_indices`; evaluation users keep all of theirs, in
``qa.csv`` order, in ``test``. Every row carries the user's chats as ``documents``; the files are the
reference's ``build_dataset.py``'s, byte for byte.
"""

from __future__ import annotations

import contextlib
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

from pv4kit._io import atomic_write_json, atomic_write_text, provenance, replace_directory
from pv4kit._options import check_number
from pv4kit.dataset.formats import raise_first, read_qa_csv
from pv4kit.dataset.tree import (
    chat_files,
    hard_problems,
    input_fingerprint,
    read_chats,
    read_hard_subset,
    user_roles,
    users_dir_of,
)
from pv4kit.schema import (
    CHOICE_COLUMNS,
    DEFAULT_TEST_USERS,
    DEFAULT_TRAIN_USERS,
    LETTERS,
    ROLE_SPLITS,
    SPLITS,
    check_ranges,
    normalise_letter,
    user_role,
)

logger = logging.getLogger(__name__)


def split_indices(n: int, *, fraction: float = 0.1, seed: int = 23) -> tuple[np.ndarray, np.ndarray]:
    """Split ``n`` question positions into ``(train, validation)`` index arrays, in permutation order.

    Equal to ``datasets.Dataset.train_test_split(test_size=fraction, seed=seed)``: a permutation from
    ``numpy.random.default_rng(seed)``, its first ``ceil(fraction * n)`` entries held out.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    perm = np.random.default_rng(seed).permutation(n)
    n_val = math.ceil(fraction * n)
    return perm[n_val:], perm[:n_val]


def assign_splits(
    sizes: dict[int, int],
    *,
    train_users: tuple[int, int] = DEFAULT_TRAIN_USERS,
    test_users: tuple[int, int] = DEFAULT_TEST_USERS,
    fraction: float = 0.1,
    seed: int = 23,
) -> pd.DataFrame:
    """Assign every question of ``sizes`` (``{user_id: number of questions}``) to a split.

    Frame ``user_id, split, question_index`` in the order rows appear in each split's file; users outside
    both ranges are left out.
    """
    check_ranges(train_users, test_users)
    rows = []
    for uid in sorted(sizes):
        role = user_role(uid, train_users=train_users, test_users=test_users)
        if role == "train":
            train, val = split_indices(sizes[uid], fraction=fraction, seed=seed)
            rows += [(uid, "train", i) for i in train] + [(uid, "validation", i) for i in val]
        elif role == "test":
            rows += [(uid, "test", i) for i in range(sizes[uid])]
    frame = pd.DataFrame(rows, columns=["user_id", "split", "question_index"])
    return frame.astype({"user_id": "int64", "split": str, "question_index": "int64"})


def _user_table(rows: pd.DataFrame, chats: list[str], hard: set[int], uid: int, schema):
    """One user's rows of one split as a pyarrow table in the released schema."""
    import pyarrow as pa
    import pyarrow.compute as pc

    choices = rows[CHOICE_COLUMNS].to_numpy()
    answers = [c[LETTERS.index(x)] for c, x in zip(choices, rows["correct_choice"], strict=True)]
    documents = pa.array([chats], type=schema.field("documents").type)  # one list, taken once per row
    columns = [
        np.full(len(rows), uid, dtype=np.int64),
        rows["question"].tolist(),
        answers,
        [list(c) for c in choices],
        pc.take(documents, np.zeros(len(rows), dtype=np.int64)),
        [int(i) in hard for i in rows["index"]],
    ]
    return pa.Table.from_pydict(dict(zip(schema.names, columns, strict=True)), schema=schema)


def _read_table(users_dir: Path, uid: int, role: str) -> pd.DataFrame:
    """One user's checked ``qa.csv``, letters normalised, rows ordered by ``index`` (as the reference)."""
    path = users_dir / f"user_{uid}" / "qa.csv"
    qa = read_qa_csv(path, check_answers=True)
    qa["correct_choice"] = qa["correct_choice"].map(normalise_letter)
    if role == "train" and len(qa) < 2:
        logger.warning("%s: training user %d has %d question(s)", path, uid, len(qa))
    chat_files(users_dir / f"user_{uid}")  # names and duplicate numbers, before anything is written
    return qa.sort_values("index", kind="stable").reset_index(drop=True)


def build_dataset(
    users_dir: str | Path,
    output_dir: str | Path,
    *,
    hard_subset: str | Path | None = None,
    train_users: tuple[int, int] = DEFAULT_TRAIN_USERS,
    test_users: tuple[int, int] = DEFAULT_TEST_USERS,
    validation_fraction: float = 0.1,
    seed: int = 23,
    id_column: str = "user_id",
    progress: bool = True,
) -> pd.DataFrame:
    """Build ``{train,validation,test}.parquet``, ``user_splits.csv`` and ``manifest.json`` from raw users.

    Every input is checked before anything is written; ``output_dir`` is replaced as a whole (other files in
    it are carried over), never left half-written. Users outside both ranges are skipped. Returns the
    ``user_splits.csv`` frame (roles ``training`` / ``evaluation``, as the reference writes them).

    Args:
        users_dir: ``raw/users`` (or the raw tree holding it).
        output_dir: Where the files go.
        hard_subset: Optional ``hard_subset.csv`` (``user_id, question_index``).
        train_users: Inclusive id range of training users.
        test_users: Inclusive id range of evaluation users.
        validation_fraction: Held-out share of each training user's questions.
        seed: Seed of the per-user permutation.
        id_column: Name of the id column (``collection_id`` for the Memorilla-Data layout).
        progress: Show a progress bar.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm.auto import tqdm

    check_number(validation_fraction, "validation_fraction", ge=0, lt=1)
    check_number(seed, "seed", ge=0, integer=True)
    users_dir = users_dir_of(users_dir)
    out = Path(output_dir).resolve()
    if out == users_dir.resolve() or out in users_dir.resolve().parents:
        raise ValueError(
            f"{output_dir}: the output folder holds the users folder {users_dir}; the build replaces its "
            "output folder as a whole, so name a folder of its own (e.g. data)"
        )
    ranges = {"train_users": train_users, "test_users": test_users}
    roles, outside = user_roles(users_dir, **ranges)
    tables = {uid: _read_table(users_dir, uid, role) for uid, role in roles.items()}
    raise_first(hard_problems(hard_subset, [*roles, *outside], lambda u: set(tables[u]["index"]), **ranges))
    hard = read_hard_subset(hard_subset).groupby("user_id")["question_index"].agg(set)
    sizes = {u: len(t) for u, t in tables.items()}
    plan = assign_splits(sizes, **ranges, fraction=validation_fraction, seed=seed)
    groups = plan.groupby(["user_id", "split"], sort=False)["question_index"]
    positions = dict(iter(groups))  # iter: a GroupBy has .keys, which dict() would take for a mapping
    strings = pa.list_(pa.string())
    schema = pa.schema(
        [(id_column, pa.int64()), ("question", pa.string()), ("answer", pa.string()), ("choices", strings)]
        + [("documents", strings), ("hard", pa.bool_())]
    )
    summary = [
        {"user_id": u, "role": {"train": "training", "test": "evaluation"}[role], "questions": len(tables[u])}
        | {split: len(positions.get((u, split), ())) for split in SPLITS}
        | {"hard": sum(int(i) in hard.get(u, ()) for i in tables[u]["index"])}  # rows, as the reference
        for u, role in roles.items()
    ]
    # the writers close (inner context) before the new folder is swapped in (outer)
    with replace_directory(output_dir) as tmp, contextlib.ExitStack() as stack:
        writers = {s: stack.enter_context(pq.ParquetWriter(tmp / f"{s}.parquet", schema)) for s in SPLITS}
        for uid in tqdm(list(roles), desc="build", unit="user", disable=not progress):
            chats = read_chats(users_dir / f"user_{uid}")
            for split in ROLE_SPLITS[roles[uid]]:  # an empty row group too, as the reference
                rows = tables[uid].iloc[positions.get((uid, split), [])]
                writers[split].write_table(_user_table(rows, chats, hard.get(uid, set()), uid, schema))
        frame = pd.DataFrame(summary)
        atomic_write_text(tmp / "user_splits.csv", frame.to_csv(index=False, lineterminator="\n"))
        manifest = provenance(
            step="build",
            users_dir=str(users_dir),
            hard_subset=str(hard_subset) if hard_subset else None,
            train_users=list(train_users),
            test_users=list(test_users),
            validation_fraction=validation_fraction,
            seed=seed,
            id_column=id_column,
            input_fingerprint=input_fingerprint(users_dir, hard_subset=hard_subset),
            rows={s: int(frame[s].sum()) for s in SPLITS},
        )
        atomic_write_json(tmp / "manifest.json", manifest)
    return frame
