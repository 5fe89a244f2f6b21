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
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pv4kit._io import read_csv, read_text, sha256_file
from pv4kit.dataset.formats import read_list, read_qa_csv

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


def user_folder_id(path: Path) -> int | None:
    """The id of a ``user_N`` folder, ``None`` for a name of another form.

    Raises:
        ValueError: For ``N`` not in plain ASCII digits without leading zeros (``user_007``): the reference
            reads it as user 7 but every file names ``user_7``, so it is refused, naming the right name.
    """
    m = USER_DIR_RE.match(path.name)
    if not m:
        return None
    uid = int(m.group(1))
    if path.name != f"user_{uid}":
        raise ValueError(
            f"{path}: a user folder is named user_<id> with the id in ASCII digits and no leading zeros; "
            f"found {path.name!r} (read by the reference as user {uid}): rename it user_{uid}"
        )
    return uid


def list_users(users_dir: str | Path) -> list[int]:
    """Sorted ids of the ``user_N`` folders in ``users_dir`` (``FileNotFoundError`` when there is none)."""
    users_dir = Path(users_dir)
    if not users_dir.is_dir():
        raise FileNotFoundError(f"{users_dir}: users directory does not exist")
    ids = sorted(uid for p in users_dir.iterdir() if p.is_dir() and (uid := user_folder_id(p)) is not None)
    if not ids:
        raise FileNotFoundError(f"{users_dir}: no user_N folders found")
    return ids


def is_chat_file(p: Path) -> bool:
    """Whether a file in ``chats/`` is a chat; ``False`` for a hidden non-``.txt`` file (``.DS_Store``).

    Raises:
        ValueError: Naming a file not named ``<integer>.txt`` (the reference reads ``+1.txt`` as chat 1
            and stops on ``.1.txt`` with a bare ``ValueError``).
    """
    if p.name.startswith(".") and p.suffix != ".txt":
        return False
    if p.suffix != ".txt" or not p.stem.isdecimal():
        raise ValueError(f"{p}: chat file names must be '<integer>.txt', found {p.name!r}")
    return True


def chat_files(user_dir: str | Path) -> list[Path]:
    """The ``chats/{i}.txt`` files by integer stem; ``ValueError`` for a bad name or a number given twice."""
    chats_dir = Path(user_dir) / "chats"
    files = (
        sorted((p for p in chats_dir.iterdir() if is_chat_file(p)), key=lambda p: int(p.stem))
        if chats_dir.is_dir()
        else []
    )
    for number, same in duplicate_chats(files).items():
        raise ValueError(f"{chats_dir}: {duplicate_message(number, same)}")
    return files


def duplicate_chats(files: list[Path]) -> dict[int, list[Path]]:
    """Chat numbers given by more than one file (``08.txt`` beside ``8.txt``), with those files."""
    by_number: dict[int, list[Path]] = {}
    for p in files:
        by_number.setdefault(int(p.stem), []).append(p)
    return {n: sorted(ps, key=lambda p: p.name) for n, ps in sorted(by_number.items()) if len(ps) > 1}


def duplicate_message(number: int, files: list[Path]) -> str:
    """The message for chat ``number`` given by several ``files`` (what to do about it included)."""
    both = "both" if len(files) == 2 else "all"
    names = " and ".join(p.name for p in files)
    return (
        f"{names} are {both} chat {number}; each chat number must have one file "
        "(rename or remove the extra one)"
    )


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


def read_user(
    user_dir: str | Path,
    *,
    raw_dir: str | Path | None = None,
    chats: bool = True,
    seeds: dict[int, str] | None = None,
) -> RawUser:
    """Read one ``users/user_N`` folder (and its persona and seed when ``raw_dir`` is given).

    ``chats=False`` leaves the chats unread; ``seeds`` is ``read_persona_seeds(raw_dir)``, read once.
    """
    user_dir = Path(user_dir)
    m = USER_DIR_RE.match(user_dir.name)
    if not m:
        raise ValueError(f"{user_dir}: expected a folder named user_N")
    if not user_dir.is_dir():
        raise FileNotFoundError(f"{user_dir}: user folder does not exist")
    uid = int(m.group(1))
    user = RawUser(user_id=uid, path=user_dir, chats=read_chats(user_dir) if chats else [])
    lists = [user_dir / "categories.txt", user_dir / "chat_topics.txt"]
    user.categories, user.topics = (read_list(p) if p.is_file() else [] for p in lists)
    if (user_dir / "qa.csv").exists():  # a directory there is an error, not a missing table
        user.qa = read_qa_csv(user_dir / "qa.csv")
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
    """SHA-256 over the names (relative to ``users_dir``) and contents of :func:`input_files`.

    The same wherever the tree lies, so runs and caches made from a copy elsewhere still match.
    """
    users_dir = Path(users_dir)
    named = [("users/" + p.relative_to(users_dir).as_posix(), p) for p in input_files(users_dir)]
    if hard_subset is not None:
        named.append(("hard_subset.csv", Path(hard_subset)))
    digest = hashlib.sha256()
    for name, path in sorted(named):
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()
