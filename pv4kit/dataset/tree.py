"""The raw release tree: where each file sits, reading one user or the whole tree.

Layout (as released)::

    raw/
      personas/user_N.txt            persona profile of user N
      persona_seeds.csv              user_id, seed
      hard_subset.csv                user_id, question_index
      users/user_N/
        categories.txt               one category per line (line i <-> qa/i.txt)
        chat_topics.txt              one topic per line (line i <-> chats/i.txt)
        chats/{i}.txt                two-turn chat: "Leo: ..." then "Assistant: ..."
        qa/{i}.txt                   tagged model output for category i
        qa.csv                       step 5's question table
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pv4kit._io import read_csv, read_text, sha256_file
from pv4kit.dataset.formats import problem, raise_first, read_list, read_qa_csv
from pv4kit.schema import check_ranges, user_role

logger = logging.getLogger(__name__)

#: a user folder's name, ``user_N``
USER_DIR_RE = re.compile(r"^user_(\d+)$")
_PERSONA_RE = re.compile(r"^user_(\d+)\.txt$")


@dataclass
class RawUser:
    """One user's files from the raw tree (lists empty and the rest ``None`` where a file is absent)."""

    user_id: int
    path: Path
    categories: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    chats: list[str] = field(default_factory=list)
    qa: pd.DataFrame | None = None
    persona: str | None = None
    seed: str | None = None


def users_dir_of(raw_dir: str | Path) -> Path:
    """Return the ``users`` directory of a raw tree (``raw_dir`` itself when it holds ``user_N`` dirs)."""
    raw_dir = Path(raw_dir)
    if (raw_dir / "users").is_dir():
        return raw_dir / "users"
    if raw_dir.is_dir() and any(USER_DIR_RE.match(p.name) for p in raw_dir.iterdir() if p.is_dir()):
        return raw_dir
    raise FileNotFoundError(f"{raw_dir}: not a PV4 raw tree (expected a users/ folder with user_N folders)")


def check_user_folders(users_dir: Path) -> tuple[list[int], list[dict]]:
    """The sorted ids of the ``user_N`` folders in ``users_dir``, and the problems of the other folders.

    ``N`` must be plain ASCII digits without leading zeros (``user_007`` is an error: the reference reads it
    as user 7 but every file names ``user_7``); another folder name is a warning, a hidden one is ignored.
    """
    ids, problems = [], []
    for p in sorted(p for p in users_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        uid = int(m.group(1)) if (m := USER_DIR_RE.match(p.name)) else None
        if uid is not None and p.name == f"user_{uid}":
            ids.append(uid)
        elif uid is not None:
            message = (
                "a user folder is named user_<id> with the id in ASCII digits and no leading zeros; found "
                f"{p.name!r} (read by the reference as user {uid}): rename it user_{uid}"
            )
            problems.append(problem(p, None, "user_name", message))
        else:
            message = f"folder {p.name!r} is not named user_N; ignored"
            problems.append(problem(p, None, "user_name", message, "warning"))
    return sorted(ids), problems


def list_users(users_dir: str | Path) -> list[int]:
    """Sorted ids of the ``user_N`` folders in ``users_dir`` (``FileNotFoundError`` when there is none)."""
    users_dir = Path(users_dir)
    if not users_dir.is_dir():
        raise FileNotFoundError(f"{users_dir}: users directory does not exist")
    ids, problems = check_user_folders(users_dir)
    raise_first(problems)
    if not ids:
        raise FileNotFoundError(f"{users_dir}: no user_N folders found")
    return ids


def user_roles(
    users_dir: Path, *, train_users: tuple[int, int], test_users: tuple[int, int]
) -> tuple[dict[int, str], list[int]]:
    """The role of each user of ``users_dir`` in the id ranges, and the users outside both (logged).

    Raises:
        ValueError: When the ranges overlap or no user falls in them.
    """
    check_ranges(train_users, test_users)
    roles = {u: user_role(u, train_users=train_users, test_users=test_users) for u in list_users(users_dir)}
    if outside := [u for u, role in roles.items() if role is None]:
        logger.warning(
            "%s: left out %d user(s) outside train users %s and test users %s: %s",
            *(users_dir, len(outside), train_users, test_users, outside),
        )
    if not (roles := {u: role for u, role in roles.items() if role}):
        raise ValueError(
            f"{users_dir}: no user falls in train users {train_users} or test users {test_users}"
        )
    return roles, outside


def check_chat_files(user_dir: str | Path) -> tuple[list[Path], list[dict]]:
    """The ``chats/{i}.txt`` files by integer stem, and a problem for each bad name or number given twice.

    A hidden file not ending ``.txt`` (``.DS_Store``) is passed over; any other name but ``<integer>.txt`` is
    an error (the reference reads ``+1.txt`` as chat 1 and stops on ``.1.txt`` with a bare ``ValueError``).
    """
    chats_dir, files, problems = Path(user_dir) / "chats", [], []
    for p in sorted(chats_dir.iterdir()) if chats_dir.is_dir() else []:
        if p.suffix == ".txt" and p.stem.isdecimal():
            files.append(p)
        elif p.suffix == ".txt" or not p.name.startswith("."):
            message = f"chat file names must be '<integer>.txt', found {p.name!r}"
            problems.append(problem(p, None, "chat_name", message))
    files.sort(key=lambda p: int(p.stem))
    for number, group in itertools.groupby(files, key=lambda p: int(p.stem)):
        same = list(group)
        if len(same) > 1:
            message = (
                f"{' and '.join(p.name for p in same)} are {'both' if len(same) == 2 else 'all'} chat "
                f"{number}; each chat number must have one file (rename or remove the extra one)"
            )
            problems.append(problem(chats_dir, None, "chat_duplicate", message))
    return files, problems


def chat_files(user_dir: str | Path) -> list[Path]:
    """The ``chats/{i}.txt`` files by integer stem; ``ValueError`` for a bad name or a number given twice."""
    files, problems = check_chat_files(user_dir)
    raise_first(problems)
    return files


def read_chats(user_dir: str | Path, *, strip: bool = False) -> list[str]:
    """Read a user's chats in topic order, each as stored (as the reference reads them) unless ``strip``."""
    chats = [read_text(p) for p in chat_files(user_dir)]
    return [c.strip() for c in chats] if strip else chats


def read_persona_seeds(raw_dir: str | Path) -> dict[int, str]:
    """Read ``persona_seeds.csv`` as ``{user_id: seed}`` ({} when absent)."""
    path = Path(raw_dir) / "persona_seeds.csv"
    if not path.is_file():
        return {}
    frame = read_csv(path, dtype={"user_id": "int64", "seed": str}, keep_default_na=False)
    if list(frame.columns[:2]) != ["user_id", "seed"]:
        raise ValueError(f"{path}: expected columns user_id, seed; found {list(frame.columns)}")
    return dict(zip(frame["user_id"].astype(int), frame["seed"], strict=True))


def read_hard_subset(path: str | Path | None) -> pd.DataFrame:
    """Read ``hard_subset.csv`` (``user_id, question_index``); a ``None`` path gives an empty frame.

    Columns are found by name, as the reference's ``csv.DictReader`` finds them (other columns are not read).
    """
    frame = read_csv(path) if path is not None else pd.DataFrame(columns=["user_id", "question_index"])
    if not {"user_id", "question_index"} <= set(frame.columns):
        raise ValueError(
            f"{path}: expected the columns user_id and question_index, found {list(frame.columns)}"
        )
    frame = frame[["user_id", "question_index"]]
    for col in frame.columns if len(frame) else []:
        if not pd.api.types.is_integer_dtype(frame[col]):
            bad = frame.index[pd.to_numeric(frame[col], errors="coerce").isna()]
            raise ValueError(f"{path}:{int(bad[0]) + 2 if len(bad) else 2}: {col} must be an integer")
    return frame.astype("int64").drop_duplicates().reset_index(drop=True)


def hard_problems(
    path: str | Path | None,
    users: list[int],
    questions: Callable[[int], set[int] | None],
    *,
    train_users: tuple[int, int],
    test_users: tuple[int, int],
) -> list[dict]:
    """A problem for each ``hard_subset.csv`` entry that is not a question of a test user among ``users``.

    ``questions(user_id)`` gives the question indices of a test user (``None``: unknown, not checked).
    """
    words = f"train users {train_users[0]}-{train_users[1]}, test users {test_users[0]}-{test_users[1]}"
    roles = {u: user_role(u, train_users=train_users, test_users=test_users) for u in users}
    out = []
    for line, (uid, index) in enumerate(read_hard_subset(path).itertuples(index=False), start=2):
        role = roles.get(uid, "absent")
        if role == "test":
            known = questions(uid)
            if known is not None and index not in known:
                message = f"user {uid} has no question {index} (it has {len(known)})"
                out.append(problem(path, line, "hard_unknown", message))
            continue
        code, why = {
            "absent": ("hard_unknown", "who is not among the users of the tree"),
            "train": ("hard_training", f"a training user ({words}); hard questions must be test questions"),
            None: ("hard_unbuilt", f"who is outside both ranges ({words}) and is not built"),
        }[role]
        out.append(problem(path, line, code, f"hard entry for user {uid}, {why}"))
    return out


def read_user(
    user_dir: str | Path,
    *,
    raw_dir: str | Path | None = None,
    chats: bool = True,
    seeds: dict[int, str] | None = None,
    require_qa: bool = False,
) -> RawUser:
    """Read one ``users/user_N`` folder (and its persona and seed when ``raw_dir`` is given).

    ``chats=False`` leaves the chats unread; ``seeds`` is ``read_persona_seeds(raw_dir)``, read once;
    ``require_qa`` refuses a missing ``qa.csv`` or a bad answer letter in it (else a missing one is ``None``).
    """
    user_dir = Path(user_dir)
    if not (m := USER_DIR_RE.match(user_dir.name)):
        raise ValueError(f"{user_dir}: expected a folder named user_N")
    if not user_dir.is_dir():
        raise FileNotFoundError(f"{user_dir}: user folder does not exist")
    uid, lists = int(m.group(1)), (user_dir / "categories.txt", user_dir / "chat_topics.txt")
    user = RawUser(uid, user_dir, chats=read_chats(user_dir) if chats else [])
    user.categories, user.topics = (read_list(p) if p.is_file() else [] for p in lists)
    if require_qa or (user_dir / "qa.csv").exists():  # a directory there is an error, not a missing table
        user.qa = read_qa_csv(user_dir / "qa.csv", check_answers=require_qa)
    if raw_dir is not None:
        persona = Path(raw_dir) / "personas" / f"user_{uid}.txt"
        user.persona = read_text(persona).strip() if persona.is_file() else None
        user.seed = (seeds if seeds is not None else read_persona_seeds(raw_dir)).get(uid)
    return user


def list_personas(persona_dir: str | Path) -> list[int]:
    """Sorted ids of ``user_N.txt`` persona files in ``persona_dir``."""
    persona_dir = Path(persona_dir)
    if not persona_dir.is_dir():
        raise FileNotFoundError(f"{persona_dir}: persona directory does not exist")
    return sorted(int(m.group(1)) for p in persona_dir.iterdir() if (m := _PERSONA_RE.match(p.name)))


def input_files(users_dir: str | Path, *, hard_subset: str | Path | None = None) -> list[Path]:
    """The files a dataset is made of, for its fingerprint: every ``qa.csv``, ``chats/*``, ``hard_subset``."""
    named = (p for p in Path(users_dir).rglob("*") if p.name == "qa.csv" or p.parent.name == "chats")
    extra = [Path(hard_subset)] if hard_subset is not None else []
    return sorted([p for p in named if p.is_file()] + extra)


def input_fingerprint(users_dir: str | Path, *, hard_subset: str | Path | None = None) -> str:
    """SHA-256 of the names (relative to ``users_dir``: copies match) and contents of :func:`input_files`."""
    users_dir = Path(users_dir)
    named = [("users/" + p.relative_to(users_dir).as_posix(), p) for p in input_files(users_dir)]
    if hard_subset is not None:
        named.append(("hard_subset.csv", Path(hard_subset)))
    digest = hashlib.sha256()
    for name, path in sorted(named):
        digest.update(f"{name}\0{sha256_file(path)}".encode())
    return digest.hexdigest()
