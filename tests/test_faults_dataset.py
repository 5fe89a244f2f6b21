"""Dataset-side faults of issue 13 (items 2, 3, 6, 7, 9, 10), each on a fresh copy of the sample in raw/.

Every case was first written here against the code as it was and seen failing; the CLI cases run
``pv4kit`` as a user would (in process, through :func:`pv4kit.cli.main`) and read the message printed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pv4kit.cli import main
from pv4kit.raw import validate_raw

RAW = Path(__file__).resolve().parents[1] / "raw"


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A fresh copy of the sample raw tree (train users 12, 37, 64, 101; test users 131, 147)."""
    shutil.copytree(RAW, tmp_path / "raw")
    return tmp_path / "raw"


def errors(report, code: str):
    """The error rows of ``report`` with ``code``."""
    return report[(report["code"] == code) & (report["severity"] == "error")]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``pv4kit *argv`` and return ``(exit code, stdout, stderr)``."""
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def build_args(sample: Path, out: Path, *extra: str) -> list[str]:
    return [
        "-q",
        "build",
        "--users-dir",
        str(sample / "users"),
        "--hard-subset",
        str(sample / "hard_subset.csv"),
        "--output-dir",
        str(out),
        *extra,
    ]


# ------------------------------------------------------------------ 7. duplicate chat numbers


def test_duplicate_chat_numbers_are_an_error_in_validate_and_build(sample, tmp_path, capsys):
    chats = sample / "users" / "user_37" / "chats"
    shutil.copy(chats / "8.txt", chats / "08.txt")
    shutil.copy(chats / "8.txt", chats / "topic.txt")  # a bad name too: both are reported
    report = validate_raw(sample)
    dup = errors(report, "chat_duplicate")
    assert len(dup) == 1, report.to_string()
    message = dup.iloc[0]["message"]
    assert "08.txt" in message and "8.txt" in message and "chat 8" in message
    assert len(errors(report, "chat_name")) == 1

    (chats / "topic.txt").unlink()
    out = tmp_path / "data"
    rc, _, err = run_cli(capsys, *build_args(sample, out))
    assert rc == 1
    assert "08.txt" in err and "chat 8" in err and "user_37" in err
    assert not out.exists()


# ------------------------------------------------------------------ 10. hard entry of a training user


def test_hard_entry_for_a_training_user_is_reported_by_validate(sample, capsys):
    (sample / "hard_subset.csv").write_text("user_id,question_index\n131,1\n12,0\n")
    report = validate_raw(sample)
    bad = errors(report, "hard_training")
    assert list(bad["line"]) == [3], report.to_string()
    assert "user 12" in bad.iloc[0]["message"] and "training user" in bad.iloc[0]["message"]
    rc, out, _ = run_cli(capsys, "validate", str(sample), "--errors-only")
    assert rc == 1 and "hard_subset.csv:3: error [hard_training]" in out
    # with other ranges, user 12 is an evaluation user and the entry is fine
    (sample / "hard_subset.csv").write_text("user_id,question_index\n12,0\n")
    rc, out, _ = run_cli(capsys, "validate", str(sample), "--train-users", "30-125", "--test-users", "6-29")
    assert rc == 0, out
    # a user outside both ranges is not built, so its hard entry cannot be built either
    report = validate_raw(sample, train_users=(30, 125), test_users=(126, 155))
    assert "user 12" in errors(report, "hard_unbuilt").iloc[0]["message"]
