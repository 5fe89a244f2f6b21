"""Grow the sample raw tree to the release's shape, for the release-scale benchmarks.

149 users with the release's ids (6-125 without 7, then 126-155), 200 chats each and 10 categories x 15
questions each. Every user copies one sample user (training ids copy the sample's training users, test ids
its test users, in turn); chats, topics and question blocks are repeated with a variant tag so that every
text in the grown tree is unique (embedding caches cannot shortcut duplicates). The hard subset marks a
seeded ~15% of each test user's questions (:func:`add_hard_subset`), as the release's 629 of 4,237.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

from synth import test_ids, train_ids

_FIELD = re.compile(r"(<(?:QUESTION|CHOICE_[A-E]|RATIONALE)>\s*\n)([^\n<]*)")


def _tag_block(block: str, tag: str) -> str:
    """Append ``tag`` to the first line of the question, every choice and the rationale of a tagged block."""
    return _FIELD.sub(
        lambda m: f"{m.group(1)}{m.group(2).rstrip()} {tag}" if m.group(2).strip() else m.group(0), block
    )


def _blocks(text: str) -> list[str]:
    parts = text.strip().split("<QUESTION>")
    return ["<QUESTION>" + p for p in parts[1:] if p.strip()]


def _sample_users(raw: Path) -> tuple[list[Path], list[Path]]:
    users = sorted((raw / "users").glob("user_*"), key=lambda p: int(p.name.split("_")[1]))
    train = [u for u in users if int(u.name.split("_")[1]) <= 125]
    test = [u for u in users if int(u.name.split("_")[1]) >= 126]
    return train, test


def grow_tree(
    sample: str | Path,
    out: str | Path,
    *,
    n_chats: int = 200,
    n_categories: int = 10,
    per_category: int = 15,
) -> Path:
    """Write a release-shaped raw tree under ``out`` grown from the raw tree ``sample``; returns ``out``.

    Args:
        sample: The sample raw tree (``raw/``).
        out: Output folder (created; must not hold a ``users`` folder yet).
        n_chats: Chats (and topics) per user.
        n_categories: Categories per user.
        per_category: Question blocks per category file.

    ``hard_subset.csv`` is left empty: :func:`add_hard_subset` fills it once step 5 has run.
    """
    sample, out = Path(sample), Path(out)
    train_src, test_src = _sample_users(sample)
    (out / "personas").mkdir(parents=True, exist_ok=True)
    ids = [(uid, train_src) for uid in train_ids()] + [(uid, test_src) for uid in test_ids()]
    for k, (uid, pool) in enumerate(ids):
        src = pool[k % len(pool)]
        src_id = int(src.name.split("_")[1])
        dst = out / "users" / f"user_{uid}"
        (dst / "chats").mkdir(parents=True)
        (dst / "qa").mkdir()
        persona = sample / "personas" / f"user_{src_id}.txt"
        if persona.is_file():
            (out / "personas" / f"user_{uid}.txt").write_text(persona.read_text() + f"\n(user {uid})\n")
        cats = (src / "categories.txt").read_text().split("\n")
        cats = [c for c in cats if c.strip()]
        (dst / "categories.txt").write_text(
            "\n".join(f"{cats[c % len(cats)]} (u{uid} c{c})" for c in range(n_categories))
        )
        topics = [t for t in (src / "chat_topics.txt").read_text().split("\n") if t.strip()]
        chats = sorted((src / "chats").glob("*.txt"), key=lambda p: int(p.stem))
        (dst / "chat_topics.txt").write_text(
            "\n".join(f"{topics[i % len(topics)]} (u{uid} t{i})" for i in range(n_chats))
        )
        for i in range(n_chats):
            text = chats[i % len(chats)].read_text()
            (dst / "chats" / f"{i}.txt").write_text(text.rstrip() + f" (u{uid} t{i})")
        blocks = [b for p in sorted((src / "qa").glob("*.txt")) for b in _blocks(p.read_text())]
        for c in range(n_categories):
            chosen = [blocks[(c * per_category + j) % len(blocks)] for j in range(per_category)]
            text = "\n\n".join(_tag_block(b, f"(u{uid} c{c} q{j})") for j, b in enumerate(chosen))
            (dst / "qa" / f"{c}.txt").write_text(text + "\n")
    seeds = sample / "persona_seeds.csv"
    if seeds.is_file():
        shutil.copy(seeds, out / "persona_seeds.csv")
    (out / "hard_subset.csv").write_text("user_id,question_index\n")
    return out


def add_hard_subset(out: str | Path, *, hard_share: float = 0.15, seed: int = 0) -> int:
    """Write ``hard_subset.csv`` for the test users of a tree whose ``qa.csv`` files exist; returns rows."""
    import pandas as pd

    out = Path(out)
    rng = random.Random(seed)
    rows = []
    for uid in test_ids():
        qa = out / "users" / f"user_{uid}" / "qa.csv"
        n = len(pd.read_csv(qa, usecols=["index"]))
        rows += [(uid, i) for i in sorted(rng.sample(range(n), round(hard_share * n)))]
    pd.DataFrame(rows, columns=["user_id", "question_index"]).to_csv(out / "hard_subset.csv", index=False)
    return len(rows)
