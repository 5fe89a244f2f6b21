"""Write small synthetic raw trees for tests (the release layout, deterministic content)."""

from __future__ import annotations

from pathlib import Path

LETTERS = "ABCDE"


def qa_block(q: str, choices: list[str | None], letter: str, rationale: str = "because") -> str:
    """One tagged block; a ``None`` choice leaves its tag out entirely."""
    out = [f"<QUESTION>\n{q}"]
    for x, c in zip(LETTERS, choices, strict=True):
        if c is not None:
            out.append(f"<CHOICE_{x}>\n{c}")
    out.append(f"<CORRECT_CHOICE>\n{letter}")
    out.append(f"<RATIONALE>\n{rationale}\n<WORD_COUNTS>\nA: 3 | B: 3 | C: 3 | D: 3 | E: 3")
    return "\n".join(out) + "\n"


def write_user(
    users_dir: Path,
    uid: int,
    *,
    n_categories: int = 2,
    per_category: int = 3,
    n_chats: int = 4,
    extra_blocks: dict[int, str] | None = None,
) -> Path:
    """Write ``users/user_{uid}`` with valid content; ``extra_blocks`` appends text to ``qa/{c}.txt``."""
    d = users_dir / f"user_{uid}"
    (d / "chats").mkdir(parents=True, exist_ok=True)
    (d / "qa").mkdir(exist_ok=True)
    (d / "categories.txt").write_text(
        "\n".join(f"Category {i} of user {uid}" for i in range(n_categories))  # as the reference writes
    )
    (d / "chat_topics.txt").write_text("\n".join(f"Topic {i}" for i in range(n_chats)))  # no trailing newline
    for i in range(n_chats):
        (d / "chats" / f"{i}.txt").write_text(f"Leo: message {i} of user {uid}\nAssistant: reply {i}")
    for c in range(n_categories):
        blocks = []
        for k in range(per_category):
            choices = [f"u{uid} c{c} q{k} option {x}" for x in LETTERS]
            blocks.append(qa_block(f"User {uid}, category {c}, question {k}?", choices, LETTERS[(k + c) % 5]))
        text = "\n".join(blocks) + (extra_blocks or {}).get(c, "")
        (d / "qa" / f"{c}.txt").write_text(text)
    return d


def make_tree(root: Path, train: list[int], test: list[int], **kwargs) -> Path:
    """A raw tree with personas, seeds, an empty hard subset and qa.csv files (step 5 run)."""
    from pv4kit.dataset.questions import write_qa_tables

    users = root / "users"
    (root / "personas").mkdir(parents=True, exist_ok=True)
    seeds = ["user_id,seed"]
    for uid in [*train, *test]:
        write_user(users, uid, **kwargs)
        (root / "personas" / f"user_{uid}.txt").write_text(f"Persona of user {uid}.")
        seeds.append(f'{uid},"I am user {uid}. I like tests."')
    (root / "persona_seeds.csv").write_text("\n".join(seeds) + "\n")
    (root / "hard_subset.csv").write_text("user_id,question_index\n")
    write_qa_tables(users)
    return root
