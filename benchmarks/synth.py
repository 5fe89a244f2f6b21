"""A full-size synthetic PV4 raw tree for benchmarks (149 users, 200 chats, ~140 questions each)."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = (
    "river lantern quiet market budget garden sketch ferry winter coffee ledger violin harbor cedar "
    "thread pepper runway canvas signal meadow orbit pocket basil ember copper walnut tide prairie"
).split()


def _text(rng: random.Random, n_chars: int) -> str:
    out, size = [], 0
    while size < n_chars:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n_chars]


def train_ids() -> list[int]:
    """The released id layout: 6-125 without 7 (119 users)."""
    return [i for i in range(6, 126) if i != 7]


def test_ids() -> list[int]:
    """Evaluation users 126-155 (30 users)."""
    return list(range(126, 156))


def write_synthetic_tree(
    root: str | Path,
    *,
    n_chats: int = 200,
    chat_chars: int = 1500,
    seed: int = 0,
    users: list[int] | None = None,
) -> Path:
    """Write the raw tree (categories, topics, chats, tagged qa files) under ``root``; returns ``root``."""
    root = Path(root)
    rng = random.Random(seed)
    ids = users if users is not None else train_ids() + test_ids()
    for uid in ids:
        d = root / "users" / f"user_{uid}"
        (d / "chats").mkdir(parents=True, exist_ok=True)
        (d / "qa").mkdir(exist_ok=True)
        (d / "categories.txt").write_text(
            "\n".join(f"Category {c} {_text(rng, 30)}" for c in range(10)) + "\n"
        )
        (d / "chat_topics.txt").write_text("\n".join(_text(rng, 80) for _ in range(n_chats)) + "\n")
        for i in range(n_chats):
            half = chat_chars // 2
            (d / "chats" / f"{i}.txt").write_text(f"Leo: {_text(rng, half)}\nAssistant: {_text(rng, half)}")
        n_q = rng.randint(133, 145)
        per_cat = [n_q // 10 + (1 if c < n_q % 10 else 0) for c in range(10)]
        for c in range(10):
            blocks = []
            for _ in range(per_cat[c]):
                choices = "".join(f"<CHOICE_{x}>\n{_text(rng, 80)}\n" for x in "ABCDE")
                blocks.append(
                    f"<QUESTION>\n{_text(rng, 300)}?\n{choices}<CORRECT_CHOICE>\n{rng.choice('ABCDE')}\n"
                    f"<RATIONALE>\n{_text(rng, 200)}\n<WORD_COUNTS>\nA: 12 | B: 12 | C: 12 | D: 12 | E: 12\n"
                )
            (d / "qa" / f"{c}.txt").write_text("\n".join(blocks))
    (root / "hard_subset.csv").write_text("user_id,question_index\n")
    return root
