"""Load PV4 into two tidy frames, from released parquet, the Memorilla-Data layout, a raw tree or the hub.

``questions`` has one row per question keyed by ``(user_id, question_index)`` (the row's position in the
user's ``qa.csv``, recovered from the split rule for parquet); ``users`` one row per user, chats held once.
A parquet load takes category names, rationales and personas from a raw tree beside it when there is one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pv4kit.dataset.hub import PV4_HUB_ID, download_dataset, looks_like_hub_id
from pv4kit.dataset.splits import assign_splits, split_indices
from pv4kit.dataset.tree import (
    RawUser,
    input_fingerprint,
    read_hard_subset,
    read_persona_seeds,
    read_user,
    user_roles,
)
from pv4kit.schema import (
    CHOICE_COLUMNS,
    DEFAULT_TEST_USERS,
    DEFAULT_TRAIN_USERS,
    LETTERS,
    QUESTION_COLUMNS,
    QUESTION_KEY,
    SPLITS,
    USER_COLUMNS,
    answer_indices,
)

logger = logging.getLogger(__name__)

# what load() reads of a hub snapshot (the chats come from the parquet's documents)
_HUB_PATTERNS = """data/*.parquet data/pv4/*.parquet data/user_splits.csv raw/personas/* raw/persona_seeds.csv
    raw/hard_subset.csv raw/users/*/categories.txt raw/users/*/chat_topics.txt raw/users/*/qa.csv""".split()


@dataclass
class PV4Data:
    """PV4 as two tidy frames.

    Attributes:
        questions: One row per question (columns :data:`pv4kit.schema.QUESTION_COLUMNS`).
        users: One row per user (:data:`pv4kit.schema.USER_COLUMNS`); ``documents`` holds the chats once.
        source: Where the data came from (path or hub id).
        fingerprint: SHA-256 identifying the input files (for provenance and caches).
        kind: ``"parquet"``, ``"memorilla"``, ``"raw"`` or ``"hub"``.
        users_outside: Users of a raw tree outside both id ranges, left out (a warning is logged).
    """

    questions: pd.DataFrame
    users: pd.DataFrame
    source: str
    fingerprint: str
    kind: str = "parquet"
    users_outside: list[int] = field(default_factory=list)
    _by_user: dict[int, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_user = {int(u): i for i, u in enumerate(self.users["user_id"])}

    def _user_row(self, user_id: int) -> pd.Series:
        if int(user_id) not in self._by_user:
            raise KeyError(f"user {user_id} is not in {self.source}; users: {sorted(self._by_user)}")
        return self.users.iloc[self._by_user[int(user_id)]]

    def documents(self, user_id: int) -> list[str]:
        """The chats of ``user_id`` in topic order."""
        return list(self._user_row(user_id)["documents"])

    def persona(self, user_id: int) -> str | None:
        """The persona profile of ``user_id`` (``None`` when the source has no raw files)."""
        value = self._user_row(user_id)["persona"]
        return None if pd.isna(value) else str(value)

    def split(self, name: str) -> pd.DataFrame:
        """The questions of one split (``train``, ``validation`` or ``test``)."""
        if name not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
        return self.questions[self.questions["split"] == name].reset_index(drop=True)

    def summary(self) -> pd.DataFrame:
        """Users, questions and hard questions per split, as a small frame."""
        table = self.questions.groupby("split").agg(
            users=("user_id", "nunique"), questions=("user_id", "size"), hard=("hard", "sum")
        )
        return table.reindex(SPLITS, fill_value=0).rename_axis("split").reset_index()

    def per_user(self) -> pd.DataFrame:
        """Questions per split and the number of chats, one row per user (index ``user_id``)."""
        table = self.questions.groupby(["user_id", "split"]).size().unstack(fill_value=0)
        table["chats"] = [len(self.documents(u)) for u in table.index]
        return table

    def __repr__(self) -> str:
        counts = ", ".join(f"{r.split} {r.questions}" for r in self.summary().itertuples())
        return f"PV4Data({self.kind} {self.source!r}: {len(self.users)} users; {counts})"


def _quick_fingerprint(paths: list[Path]) -> str:
    """Hash of names, sizes and the first and last MiB of each file (fast on multi-GB parquet)."""
    digest = hashlib.sha256()
    for p in sorted(paths):
        size = p.stat().st_size
        digest.update(f"{p.name}\0{size}\0".encode())
        with open(p, "rb") as fh:
            digest.update(fh.read(1 << 20))
            if size > 1 << 20:
                fh.seek(-(1 << 20), 2)
                digest.update(fh.read())
    return digest.hexdigest()


def _finish_questions(frame: pd.DataFrame) -> pd.DataFrame:
    types = {"user_id": "int64", "question_index": "int64", "category": "Int64", "hard": "bool"}
    return frame.reindex(columns=QUESTION_COLUMNS).astype(types).reset_index(drop=True)


def _read_raw(root: Path, user_ids: list[int], *, whole: bool) -> tuple[list[RawUser], pd.DataFrame | None]:
    """The users of ``user_ids`` with a folder in the raw tree, and all their ``qa.csv`` rows (or ``None``).

    Each row carries ``user_id``, ``position`` (its row in ``qa.csv``) and ``category_name``. ``whole``
    (loading the tree itself) reads the chats and requires a ``qa.csv`` with good letters from every user.
    """
    seeds, users, tables = read_persona_seeds(root), [], []
    for uid in user_ids:
        if (udir := root / "users" / f"user_{uid}").is_dir():
            u = read_user(udir, raw_dir=root, chats=whole, seeds=seeds, require_qa=whole)
            users.append(u)
            if u.qa is not None:
                names = [u.categories[c] if c < len(u.categories) else None for c in u.qa["category"]]
                tables.append(u.qa.assign(user_id=uid, position=np.arange(len(u.qa)), category_name=names))
    return users, pd.concat(tables, ignore_index=True) if tables else None


def _load_raw(raw_dir: Path, ranges: dict[str, tuple[int, int]], *, fraction: float, seed: int) -> PV4Data:
    users_dir = raw_dir / "users"
    roles, outside = user_roles(users_dir, **ranges)
    raw_users, qa = _read_raw(raw_dir, list(roles), whole=True)
    hard_path = raw_dir / "hard_subset.csv" if (raw_dir / "hard_subset.csv").is_file() else None
    hard = read_hard_subset(hard_path)
    hard_keys = set(zip(hard["user_id"], hard["question_index"], strict=True))
    plan = assign_splits({u.user_id: len(u.qa) for u in raw_users}, **ranges, fraction=fraction, seed=seed)
    q = plan.merge(qa, left_on=QUESTION_KEY, right_on=["user_id", "position"], how="left")
    choices, letters = q[CHOICE_COLUMNS].to_numpy(), q["correct_choice"].str.strip().str.upper()
    q = q.assign(
        question_index=q["index"],
        choices=choices.tolist(),
        answer=choices[np.arange(len(q)), letters.map(LETTERS.index).to_numpy()],
        answer_letter=letters,
        hard=[key in hard_keys for key in zip(q["user_id"], q["index"], strict=True)],
    )
    users = _users_frame(roles, {u.user_id: u.chats for u in raw_users}, raw_users)
    fingerprint = input_fingerprint(users_dir, hard_subset=hard_path)
    return PV4Data(_finish_questions(q), users, str(raw_dir), fingerprint, "raw", users_outside=outside)


def _users_frame(roles: dict[int, str], docs: dict[int, list[str]], raw_users: list[RawUser]) -> pd.DataFrame:
    """The users frame: each user's role and documents, and what the raw tree holds of it."""
    raw = {u.user_id: (u.persona, u.seed, u.categories or None, u.topics or None) for u in raw_users}
    rows = [(u, role, docs[u], *raw.get(u, (None,) * 4)) for u, role in roles.items()]
    return pd.DataFrame(rows, columns=USER_COLUMNS)


def _find_parquet(root: Path) -> tuple[dict[str, list[Path]], str] | None:
    """Split -> parquet files under ``root`` and the layout name, or ``None``."""
    memorilla = [root / "data" / "pv4", root / "pv4"]
    for base in [root, root / "data", *memorilla]:
        found = {s: sorted(base.glob(f"{s}.parquet")) or sorted(base.glob(f"{s}-*.parquet")) for s in SPLITS}
        if found := {s: files for s, files in found.items() if files}:
            return found, "memorilla" if base in memorilla else "parquet"
    return None


def _read_documents(files: list[Path], id_column: str, wanted: set[int]) -> dict[int, list[str]]:
    """Each user's documents, from the user's first row."""
    import pyarrow.parquet as pq

    docs: dict[int, list[str]] = {}
    for path in files:
        pf = pq.ParquetFile(path)  # read once already by _read_splits, which names a damaged file
        for g in range(pf.num_row_groups):
            ids, first = np.unique(pf.read_row_group(g, columns=[id_column]).column(0), return_index=True)
            rows = {int(u): int(i) for u, i in zip(ids, first, strict=True) if u in wanted and u not in docs}
            if not rows:
                continue
            if max(rows.values()) == 0:  # a row group that starts with the one user needed: read one row
                col = next(pf.iter_batches(batch_size=1, row_groups=[g], columns=["documents"])).column(0)
            else:
                col = pf.read_row_group(g, columns=["documents"]).column(0)
            docs.update({u: col[i].as_py() for u, i in rows.items()})
        if len(docs) == len(wanted):
            break
    return docs


def _recover_positions(frame: pd.DataFrame, *, fraction: float, seed: int) -> np.ndarray:
    """``question_index`` of every parquet row from the split rule.

    A user whose rows are all ``test`` keeps ``qa.csv`` order; any other user's rows follow the split rule
    (decided by the rows themselves, so a build with other id ranges than the defaults is read right).
    """
    out = np.empty(len(frame), dtype=np.int64)
    for uid, grp in frame.groupby("user_id", sort=False):
        if set(grp["split"]) == {"test"}:
            out[grp.index.to_numpy()] = np.arange(len(grp))
            continue
        train_pos, val_pos = split_indices(len(grp), fraction=fraction, seed=seed)
        tr, va = grp.index[grp["split"] == "train"], grp.index[grp["split"] == "validation"]
        if len(tr) != len(train_pos) or len(va) != len(val_pos):
            raise ValueError(
                f"user {uid}: {len(tr)} train and {len(va)} validation rows do not follow the split rule "
                f"(fraction {fraction}, seed {seed} gives {len(train_pos)} and {len(val_pos)}); pass the "
                "right validation fraction and seed"
            )
        out[tr.to_numpy()], out[va.to_numpy()] = train_pos, val_pos
    return out


def _read_splits(found: dict[str, list[Path]]) -> tuple[pd.DataFrame, str]:
    """Every column but ``documents`` of the parquet files, with a ``split`` column; the id column's name."""
    import pyarrow.parquet as pq

    parts, id_column = [], "user_id"
    for split, files in found.items():
        for path in files:
            try:
                pf = pq.ParquetFile(path)
                names = pf.schema_arrow.names
                id_column = "collection_id" if "collection_id" in names else "user_id"
                need = [id_column, "question", "answer", "choices", "hard"]
                t = pf.read(columns=[c for c in need if c in names]).to_pandas()
            except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
                raise ValueError(
                    f"{path}: not a readable parquet file ({exc}); a truncated or damaged download or build? "
                    "Rebuild it with `pv4kit build` or download it again"
                ) from None
            if missing := [c for c in need if c not in names]:
                raise ValueError(f"{path}: parquet lacks columns {missing}; found {names}")
            _check_rows(t, path, id_column)
            parts.append(t.rename(columns={id_column: "user_id"}).assign(split=split))
    return pd.concat(parts, ignore_index=True), id_column


def _check_rows(table: pd.DataFrame, path: Path, id_column: str) -> None:
    """Refuse a null id, question, answer or choices, or a question twice for one user."""
    for column in (id_column, "question", "answer", "choices"):
        nulls = np.flatnonzero(table[column].isna().to_numpy())
        if len(nulls):
            raise ValueError(
                f"{path}: row {nulls[0]} has no {column!r} (null; {len(nulls)} such row(s)); every row needs "
                f"one. Rebuild the file with `pv4kit build`"
            )
    seen = table[[id_column, "question", "answer"]].assign(_choices=[tuple(c) for c in table["choices"]])
    dup = seen.duplicated(keep=False).to_numpy()
    if dup.any():
        first = seen[dup].iloc[0]
        rows = np.flatnonzero((seen == first).all(axis=1).to_numpy())
        raise ValueError(
            f"{path}: rows {' and '.join(map(str, rows))} are the same question of user {first[id_column]} "
            f"({first['question'][:80]!r}); a duplicate would shift the index of every question after it. "
            f"{int(dup.sum())} row(s) in all are duplicates; rebuild the file with `pv4kit build`"
        )


def _load_parquet(root: Path, found: dict[str, list[Path]], kind: str, fraction: float, seed: int) -> PV4Data:
    manifests = (root / "manifest.json", root / "data" / "manifest.json")
    manifest = next((json.loads(p.read_text()) for p in manifests if p.is_file()), {})
    fraction, seed = manifest.get("validation_fraction", fraction), manifest.get("seed", seed)
    frame, id_column = _read_splits(found)
    frame["choices"] = [list(c) for c in frame["choices"]]
    frame["question_index"] = _recover_positions(frame, fraction=fraction, seed=seed)
    frame["answer_letter"] = [LETTERS[i] for i in answer_indices(frame)]
    frame["category"], frame["category_name"], frame["rationale"] = pd.NA, None, None
    all_files = [p for fs in found.values() for p in fs]
    ids = sorted(frame["user_id"].unique().tolist())
    docs = _read_documents(all_files, id_column, set(ids))
    roles = frame.groupby("user_id")["split"].agg(lambda s: "test" if "test" in set(s) else "train")
    # a raw tree next to the parquet (the hub layout, or the users_dir a build recorded) adds what it holds
    candidates = [Path(manifest["users_dir"]).parent] if manifest.get("users_dir") else []
    candidates += [root / "raw", root.parent / "raw"]
    raw_root = next((r for r in candidates if (r / "users").is_dir()), None)
    raw_users, qa = _read_raw(raw_root, ids, whole=False) if raw_root else ([], None)  # chats: the parquet's
    if qa is not None:
        _enrich(frame, qa, raw_root)
    users = _users_frame(roles.to_dict(), docs, raw_users)
    return PV4Data(_finish_questions(frame), users, str(root), _quick_fingerprint(all_files), kind)


def _enrich(frame: pd.DataFrame, qa: pd.DataFrame, raw_root: Path) -> None:
    """Fill ``category, category_name, rationale`` in place from the raw tree's ``qa`` rows, by position.

    A question the tree holds under another text is counted in a warning.
    """
    raw = qa[["user_id", "position", "question", "category", "category_name", "rationale"]].rename(
        columns={"position": "question_index", "question": "raw_question"}
    )
    merged = frame[[*QUESTION_KEY, "question"]].merge(raw, on=QUESTION_KEY, how="left")
    present = merged["raw_question"].notna().to_numpy()
    differ = present & (merged["raw_question"] != merged["question"]).to_numpy()
    if differ.any():
        first = merged[differ].iloc[0]
        logger.warning(
            "%d question(s) differ between the parquet and %s (first: user %s question %s, %r in the "
            "parquet, %r in qa.csv); their category names and rationales may belong to other questions",
            *(int(differ.sum()), raw_root, first["user_id"], first["question_index"]),
            *(str(first["question"])[:60], str(first["raw_question"])[:60]),
        )
    frame["category"] = pd.array(merged["category"], dtype="Int64")
    for col in ("category_name", "rationale"):
        frame[col] = merged[col].astype(object).where(present, None).to_numpy()


def load(
    source: str | Path = PV4_HUB_ID,
    *,
    splits: list[str] | None = None,
    train_users: tuple[int, int] = DEFAULT_TRAIN_USERS,
    test_users: tuple[int, int] = DEFAULT_TEST_USERS,
    validation_fraction: float = 0.1,
    seed: int = 23,
    revision: str | None = None,
) -> PV4Data:
    """Load PV4 from a local folder or a hub dataset id.

    Args:
        source: A ``data/`` folder of ``{train,validation,test}.parquet``, a folder in the Memorilla-Data
            layout (``data/pv4/<split>-*.parquet`` with ``collection_id``), a raw tree (holding
            ``users/``), or a hub dataset id: by default the dataset card's; the reference code's
            ``"memorilla/PersonalizationV4"`` works too (a gated dataset needs access and ``hf auth login``).
        splits: Keep only these splits (default: all present).
        train_users: Inclusive id range of training users (raw trees; parquet rows carry their split).
        test_users: Inclusive id range of evaluation users.
        validation_fraction: Held-out share used by the split rule (read from ``manifest.json`` if present).
        seed: Seed of the split rule (read from ``manifest.json`` if present).
        revision: Hub revision (branch, tag or commit) when ``source`` is a hub id.

    Raises:
        FileNotFoundError: When a local ``source`` holds neither parquet files nor a raw tree.
        pv4kit.dataset.hub.HubError: When a hub id cannot be downloaded (the subclass and message say why).
    """
    if bad := [s for s in splits or [] if s not in SPLITS]:
        raise ValueError(f"splits: unknown split(s) {bad}; expected any of {SPLITS}")
    root, hub = Path(source), looks_like_hub_id(source)
    if hub:
        logger.info("downloading %s from the Hugging Face hub", source)
        root = download_dataset(str(source), allow_patterns=_HUB_PATTERNS, revision=revision)
    if not root.exists():
        raise FileNotFoundError(f"{source}: no such folder (expected a data/ folder, a raw tree or a hub id)")
    if found := _find_parquet(root):
        data = _load_parquet(root, *found, fraction=validation_fraction, seed=seed)
    elif raw := next((r for r in (root, root / "raw") if (r / "users").is_dir()), None):
        ranges = {"train_users": train_users, "test_users": test_users}
        data = _load_raw(raw, ranges, fraction=validation_fraction, seed=seed)
    else:
        raise FileNotFoundError(
            f"{root}: found neither {{train,validation,test}}.parquet, data/pv4/<split>-*.parquet, nor a raw "
            "tree with users/user_N folders"
        )
    if splits:
        data.questions = data.questions[data.questions["split"].isin(splits)].reset_index(drop=True)
    if hub:
        data.kind, data.source = "hub", str(source)
    logger.info("%r", data)
    return data
