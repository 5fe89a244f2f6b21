"""Step 6: per-user splits of the question tables into ``train``/``validation``/``test`` parquet files.

Training users (ids in ``train_users``) draw a permutation of their questions with
``numpy.random.default_rng(seed)``; the first ``ceil(fraction * n)`` go to validation and the rest to
train, both in permutation order (the rule of ``datasets.Dataset.train_test_split(test_size=fraction,
seed=seed)``). Evaluation users (ids in ``test_users``) keep all their questions, in the order of
``qa.csv``'s ``index`` column, in ``test``. Every row carries the user's chats, read as stored, as
``documents``. Each user writes one row group to each split of its role, an empty one included, and
``user_splits.csv`` names the roles ``training`` and ``evaluation``: the files are those the reference's
``build_dataset.py`` writes, byte for byte.
"""

from __future__ import annotations

import csv
import io
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pv4kit._io import atomic_write_json, atomic_write_text, provenance, replace_directory
from pv4kit._options import check_number, merge_options
from pv4kit.dataset.formats import check_answer_letters, read_qa_csv
from pv4kit.dataset.tree import (
    chat_files,
    input_fingerprint,
    list_users,
    read_chats,
    read_hard_subset,
    users_dir_of,
)
from pv4kit.schema import (
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


#: ``user_splits.csv``: its columns and the role names, as the reference writes them
USER_SPLITS_COLUMNS = ("user_id", "role", "questions", *SPLITS, "hard")
REFERENCE_ROLES = {"train": "training", "test": "evaluation"}


def split_indices(n: int, *, fraction: float = 0.1, seed: int = 23) -> tuple[np.ndarray, np.ndarray]:
    """Split ``n`` question positions into ``(train, validation)`` index arrays.

    Equal to ``datasets.Dataset.train_test_split(test_size=fraction, seed=seed)``: a permutation from
    ``numpy.random.default_rng(seed)``, its first ``ceil(fraction * n)`` entries held out.

    Args:
        n: Number of questions of the user (0 and 1 are split as the reference splits them: nothing,
            or the one question held out).
        fraction: Share held out for validation, in ``(0, 1)``.
        seed: Seed of the permutation (the same for every user).

    Returns:
        ``(train_positions, validation_positions)``, both in permutation order.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got n={n}")
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
    """Assign every question of every user to a split, in output row order.

    Args:
        sizes: ``{user_id: number of questions}``.
        train_users: Inclusive id range of training users.
        test_users: Inclusive id range of evaluation users.
        fraction: Validation share of each training user.
        seed: Seed of the per-user permutation.

    Returns:
        Frame ``user_id, split, question_index`` in the order rows appear in each split's file.
    """
    check_ranges(train_users, test_users)
    parts = []
    for uid in sorted(sizes):
        n = sizes[uid]
        role = user_role(uid, train_users=train_users, test_users=test_users)
        if role == "train":
            train, val = split_indices(n, fraction=fraction, seed=seed)
            parts.append(pd.DataFrame({"user_id": uid, "split": "train", "question_index": train}))
            parts.append(pd.DataFrame({"user_id": uid, "split": "validation", "question_index": val}))
        elif role == "test":
            parts.append(pd.DataFrame({"user_id": uid, "split": "test", "question_index": np.arange(n)}))
    if not parts:
        return pd.DataFrame(
            {
                "user_id": pd.Series(dtype="int64"),
                "split": pd.Series(dtype=str),
                "question_index": pd.Series(dtype="int64"),
            }
        )
    out = pd.concat(parts, ignore_index=True)
    return out.astype({"user_id": "int64", "question_index": "int64"})


def parquet_schema(id_column: str = "user_id"):  # noqa: ANN201 - pyarrow type
    """The released parquet schema: id, question, answer, choices, documents, hard."""
    import pyarrow as pa

    return pa.schema(
        [
            (id_column, pa.int64()),
            ("question", pa.string()),
            ("answer", pa.string()),
            ("choices", pa.list_(pa.string())),
            ("documents", pa.list_(pa.string())),
            ("hard", pa.bool_()),
        ]
    )


def _user_table(
    qa: pd.DataFrame, positions: np.ndarray, chats: list[str], hard: set[int], *, uid: int, id_column: str
):  # noqa: ANN202
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = qa.iloc[positions]
    letters = rows["correct_choice"].to_numpy()
    choices = rows[["choice_a", "choice_b", "choice_c", "choice_d", "choice_e"]].to_numpy()
    answers = [c[LETTERS.index(x)] for c, x in zip(choices, letters, strict=True)]
    one = pa.array([chats], type=pa.list_(pa.string()))
    documents = pc.take(one, pa.array(np.zeros(len(rows), dtype=np.int64)))
    return pa.table(
        {
            id_column: pa.array(np.full(len(rows), uid, dtype=np.int64)),
            "question": pa.array(rows["question"].tolist(), type=pa.string()),
            "answer": pa.array(answers, type=pa.string()),
            "choices": pa.array([list(c) for c in choices], type=pa.list_(pa.string())),
            "documents": documents,
            "hard": pa.array([int(i) in hard for i in rows["index"]], type=pa.bool_()),
        },
        schema=parquet_schema(id_column),
    )


def format_user_splits(rows: list[dict[str, object]]) -> str:
    """Render ``user_splits.csv`` as the reference writes it (``csv`` module, ``\\n`` line ends).

    Args:
        rows: One dict per user with the keys of :data:`USER_SPLITS_COLUMNS`.
    """
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=USER_SPLITS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """The settings of step 6 (:func:`build_dataset`), each recorded in ``manifest.json``.

    Attributes:
        train_users: Inclusive id range of training users.
        test_users: Inclusive id range of evaluation users.
        validation_fraction: Held-out share of each training user's questions.
        seed: Seed of the per-user permutation.
        id_column: Name of the id column (``collection_id`` for the Memorilla-Data layout).
    """

    train_users: tuple[int, int] = DEFAULT_TRAIN_USERS
    test_users: tuple[int, int] = DEFAULT_TEST_USERS
    validation_fraction: float = 0.1
    seed: int = 23
    id_column: str = "user_id"

    def __post_init__(self) -> None:
        check_ranges(self.train_users, self.test_users)
        check_number(self.validation_fraction, "validation_fraction", ge=0, lt=1)
        check_number(self.seed, "seed", ge=0, integer=True)


@dataclass
class BuildInputs:
    """What step 6 read and checked before writing anything."""

    users_dir: Path
    roles: dict[int, str]  # user -> "train" | "test", the users built, in id order
    tables: dict[int, pd.DataFrame]  # user -> qa.csv rows ordered by their index column
    hard: dict[int, set[int]]  # user -> index values of its hard questions


def _build_roles(users_dir: Path, options: BuildOptions) -> dict[int, str]:
    """The role of each user built; users outside both ranges are skipped with a warning."""
    roles = {
        u: user_role(u, train_users=options.train_users, test_users=options.test_users)
        for u in list_users(users_dir)
    }
    skipped = [u for u, r in roles.items() if r is None]
    if skipped:
        logger.warning("skipping %d user(s) outside both ranges: %s", len(skipped), skipped)
    roles = {u: r for u, r in roles.items() if r is not None}
    if not roles:
        raise ValueError(
            f"{users_dir}: no user falls in train users {options.train_users} or test users "
            f"{options.test_users}"
        )
    return roles


def _read_table(users_dir: Path, uid: int, role: str) -> pd.DataFrame:
    """One user's checked ``qa.csv``, letters normalised, rows ordered by ``index`` (as the reference)."""
    path = users_dir / f"user_{uid}" / "qa.csv"
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: qa.csv is missing; build it with write_qa_tables({str(users_dir)!r}) "
            "(`pv4kit qa-table`)"
        )
    qa = read_qa_csv(path)
    check_answer_letters(qa, path)
    qa["correct_choice"] = qa["correct_choice"].map(normalise_letter)
    if role == "train" and len(qa) < 2:
        logger.warning("%s: training user %d has %d question(s)", path, uid, len(qa))
    chat_files(users_dir / f"user_{uid}")  # names and duplicate numbers, before anything is written
    return qa.sort_values("index", kind="stable").reset_index(drop=True)


def _read_hard(
    hard_subset: str | Path | None, roles: dict[int, str], tables: dict[int, pd.DataFrame]
) -> dict[int, set[int]]:
    """The hard entries by user; each must name a question of a test user built."""
    hard_by_user: dict[int, set[int]] = {}
    for i, e in enumerate(read_hard_subset(hard_subset).itertuples(index=False)):
        where = f"{hard_subset}:{i + 2}"
        if e.user_id not in tables:
            raise ValueError(f"{where}: hard entry for user {e.user_id}, who is not among the users built")
        if roles[e.user_id] != "test":
            raise ValueError(
                f"{where}: hard entry for user {e.user_id}, a training user; hard questions "
                "must be test questions"
            )
        if e.question_index not in set(tables[e.user_id]["index"]):
            raise ValueError(
                f"{where}: user {e.user_id} has no question {e.question_index} "
                f"(it has {len(tables[e.user_id])})"
            )
        hard_by_user.setdefault(int(e.user_id), set()).add(int(e.question_index))
    return hard_by_user


def read_build_inputs(
    users_dir: str | Path, *, hard_subset: str | Path | None = None, options: BuildOptions | None = None
) -> BuildInputs:
    """Step 6's first step: read and check every input (nothing is written).

    Raises:
        ValueError, FileNotFoundError: Naming the file (and line) of the first bad input: a missing
            ``qa.csv``, a bad letter or empty answer, a bad chat file name or a chat number given twice,
            a hard entry that is not a test question.
    """
    options = options or BuildOptions()
    users_dir = users_dir_of(users_dir)
    roles = _build_roles(users_dir, options)
    tables = {uid: _read_table(users_dir, uid, role) for uid, role in roles.items()}
    return BuildInputs(users_dir, roles, tables, _read_hard(hard_subset, roles, tables))


def _write_row_groups(
    folder: Path, inputs: BuildInputs, options: BuildOptions, *, progress: bool
) -> pd.DataFrame:
    """Step 6's second step: one row group per user and split of its role; the ``user_splits.csv`` frame."""
    import pyarrow.parquet as pq
    from tqdm.auto import tqdm

    plan = assign_splits(
        {u: len(t) for u, t in inputs.tables.items()},
        train_users=options.train_users,
        test_users=options.test_users,
        fraction=options.validation_fraction,
        seed=options.seed,
    )
    groups = plan.groupby(["user_id", "split"], sort=False)
    schema = parquet_schema(options.id_column)
    summary = []
    writers = {s: pq.ParquetWriter(folder / f"{s}.parquet", schema) for s in SPLITS}
    try:
        for uid in tqdm(list(inputs.roles), desc="build", unit="user", disable=not progress):
            role, qa, hard = inputs.roles[uid], inputs.tables[uid], inputs.hard.get(uid, set())
            chats = read_chats(inputs.users_dir / f"user_{uid}")
            counts = {"user_id": uid, "role": REFERENCE_ROLES[role], "questions": len(qa)}
            for split in SPLITS:
                key = (uid, split)
                positions = groups.get_group(key)["question_index"].to_numpy() if key in groups.groups else []
                counts[split] = len(positions)
                if split in ROLE_SPLITS[role]:  # an empty row group too, as the reference
                    positions = np.asarray(positions, dtype=np.int64)
                    table = _user_table(qa, positions, chats, hard, uid=uid, id_column=options.id_column)
                    writers[split].write_table(table)
            counts["hard"] = sum(int(i) in hard for i in qa["index"])
            summary.append(counts)
    finally:
        for w in writers.values():
            w.close()
    atomic_write_text(folder / "user_splits.csv", format_user_splits(summary))
    return pd.DataFrame(summary, columns=list(USER_SPLITS_COLUMNS))


def _manifest(
    inputs: BuildInputs, hard_subset: str | Path | None, options: BuildOptions, frame: pd.DataFrame
) -> dict:
    settings = asdict(options)
    settings.update(train_users=list(options.train_users), test_users=list(options.test_users))
    return provenance(
        step="build",
        users_dir=str(inputs.users_dir),
        hard_subset=str(hard_subset) if hard_subset else None,
        **settings,
        input_fingerprint=input_fingerprint(inputs.users_dir, hard_subset=hard_subset),
        rows={s: int(frame[s].sum()) for s in SPLITS},
    )


def build_dataset(
    users_dir: str | Path,
    output_dir: str | Path,
    *,
    hard_subset: str | Path | None = None,
    options: BuildOptions | None = None,
    progress: bool = True,
    **settings: object,
) -> pd.DataFrame:
    """Build ``{train,validation,test}.parquet`` and ``user_splits.csv`` from a raw users tree.

    Everything is validated before anything is written (:func:`read_build_inputs`: bad letters, empty
    answers, hard-subset entries that are not test questions, overlapping ranges, duplicate chat
    numbers); files are written into a temporary folder beside ``output_dir`` that replaces it as a whole
    when all are complete (:func:`pv4kit._io.replace_directory`: other files in ``output_dir`` are carried
    over), so a failure or a kill at any step leaves the previous output or the new one, never a mix.

    Args:
        users_dir: ``raw/users`` (or the raw tree holding it).
        output_dir: Where the parquet files, ``user_splits.csv`` and ``manifest.json`` go.
        hard_subset: Optional ``hard_subset.csv`` (``user_id, question_index``).
        options: The split settings (:class:`BuildOptions`; default: the reference's).
        progress: Show a progress bar.
        **settings: Any field of :class:`BuildOptions` by name (``train_users``, ``test_users``,
            ``validation_fraction``, ``seed``, ``id_column``), over ``options``.

    Returns:
        The ``user_splits.csv`` frame (roles ``training`` / ``evaluation``, as the reference writes them).
    """
    options = merge_options(BuildOptions, options or BuildOptions(), settings, where="build_dataset")
    users_dir = users_dir_of(users_dir)
    out = Path(output_dir).resolve()
    if out == users_dir.resolve() or out in users_dir.resolve().parents:
        raise ValueError(
            f"{output_dir}: the output folder holds the users folder {users_dir}; the build replaces its "
            "output folder as a whole, so name a folder of its own (e.g. data)"
        )
    inputs = read_build_inputs(users_dir, hard_subset=hard_subset, options=options)
    with replace_directory(output_dir) as tmp:
        frame = _write_row_groups(tmp, inputs, options, progress=progress)
        atomic_write_json(tmp / "manifest.json", _manifest(inputs, hard_subset, options, frame))
    logger.info("built %s: %s", output_dir, ", ".join(f"{s} {int(frame[s].sum())} rows" for s in SPLITS))
    return frame
