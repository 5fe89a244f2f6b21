"""Dataset-side faults of issue 13 (items 2, 3, 6, 7, 9, 10), each on a fresh copy of the sample in raw/.

Every case was first written here against the code as it was and seen failing; the CLI cases run
``pv4kit`` as a user would (in process, through :func:`pv4kit.cli.main`) and read the message printed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from pv4kit.cli import main
from pv4kit.dataset.load import load
from pv4kit.dataset.validate import format_report, validate_raw

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


# ------------------------------------------------------------------ 9. errors that name the file


BAD_BYTES = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


def _spoil(path: Path, *, line: int = 3) -> None:
    """Put bytes that are not UTF-8 on ``line`` of a text file (a binary file when it has no lines)."""
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = b"caf\xe9 " + lines[line - 1]  # latin-1
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize(
    ("rel", "command"),
    [
        ("users/user_64/qa/2.txt", "qa-table"),
        ("users/user_64/chats/5.txt", "build"),
        ("users/user_64/categories.txt", "qa-table"),
        ("users/user_64/chat_topics.txt", "info"),
        ("users/user_64/qa.csv", "build"),
    ],
)
def test_non_utf8_text_names_file_and_line(sample, tmp_path, capsys, rel, command):
    path = sample / rel
    line = 2
    _spoil(path, line=line)
    report = validate_raw(sample)
    bad = errors(report, "not_utf8")
    assert list(bad["file"]) == [str(path)] and list(bad["line"]) == [line], report.to_string()
    argv = {
        "qa-table": ["qa-table", "--overwrite", "--users-dir", str(sample / "users")],
        "build": build_args(sample, tmp_path / "data"),
        "info": ["info", str(sample)],
    }[command]
    rc, _, err = run_cli(capsys, *argv)
    assert rc == 1
    assert f"{path}:{line}:" in err and "UTF-8" in err and "codec" not in err, err


def test_binary_files_name_the_file(sample, tmp_path, capsys):
    qa_txt = sample / "users" / "user_131" / "qa" / "0.txt"
    qa_txt.write_bytes(BAD_BYTES)
    chat = sample / "users" / "user_12" / "chats" / "0.txt"
    chat.write_bytes(b"Leo: hi\x00\x00\x00\nAssistant: hello")  # decodes, but a NUL is no text
    report = validate_raw(sample)
    assert set(errors(report, "not_utf8")["file"]) == {str(qa_txt)}
    assert set(errors(report, "binary")["file"]) == {str(chat)}
    rc, _, err = run_cli(capsys, "qa-table", "--users-dir", str(sample / "users"), "--overwrite")
    assert rc == 1 and f"{qa_txt}:1:" in err and "codec" not in err
    qa_txt.write_bytes(b"")
    rc, _, err = run_cli(capsys, *build_args(sample, tmp_path / "data"))
    assert rc == 1 and f"{chat}:1:" in err and "NUL" in err


def test_imported_jsonl_not_utf8_names_file_and_line(tmp_path):
    from pv4kit._io import iter_jsonl

    path = tmp_path / "predictions.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"predictions\.jsonl:3: .*UTF-8") as info:
        list(iter_jsonl(path))
    assert "codec" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "index,category,question,choice_a,choice_b,choice_c,choice_d,choice_e,correct_choice,rationale\n"
            "0,0,q,a,b,c,d,e,A,r\n"
            '1,0,"a quote that never closes,a,b,c,d,e,A,r\n',
            3,
        ),
        (
            "index,category,question,choice_a,choice_b,choice_c,choice_d,choice_e,correct_choice,rationale\n"
            "0,0,q,a,b,c,d,e,A,r\n1,0,q,a,b,c,d,e,A,r,extra,fields\n",
            3,
        ),
        ("", None),
    ],
)
def test_unparseable_qa_csv_names_the_file(sample, tmp_path, capsys, text, line):
    path = sample / "users" / "user_37" / "qa.csv"
    path.write_text(text)
    report = validate_raw(sample)
    bad = errors(report, "qa_unreadable")
    assert list(bad["file"]) == [str(path)], report.to_string()
    assert bad.iloc[0]["line"] == line or (line is None and pd.isna(bad.iloc[0]["line"]))
    rc, _, err = run_cli(capsys, *build_args(sample, tmp_path / "data"))
    where = f"{path}:{line}:" if line else f"{path}:"
    assert rc == 1 and where in err and ("not a readable CSV" in err or "is empty" in err), err
    rc, _, err = run_cli(capsys, "info", str(sample))
    assert rc == 1 and str(path) in err, err


def test_directory_where_qa_csv_should_be(sample, tmp_path, capsys):
    path = sample / "users" / "user_37" / "qa.csv"
    path.unlink()
    path.mkdir()
    report = validate_raw(sample)
    assert list(errors(report, "not_a_file")["file"]) == [str(path)], report.to_string()
    for argv in (
        build_args(sample, tmp_path / "data"),
        ["qa-table", "--overwrite", "--users-dir", str(sample / "users")],
        ["info", str(sample)],
    ):
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 1 and f"{path}: is a directory" in err, (argv, err)
    assert path.is_dir() and not list(path.iterdir())


def test_truncated_parquet_names_the_file(sample, tmp_path, capsys):
    out = tmp_path / "data"
    assert run_cli(capsys, *build_args(sample, out))[0] == 0
    test = out / "test.parquet"
    test.write_bytes(test.read_bytes()[:5000])
    rc, _, err = run_cli(capsys, "info", str(out))
    assert rc == 1 and str(test) in err and "pv4kit build" in err, err


def test_output_dir_naming_an_existing_file(sample, tmp_path, capsys):
    target = tmp_path / "data"
    target.write_text("my notes")
    rc, _, err = run_cli(capsys, *build_args(sample, target))
    assert rc == 1 and f"--output-dir {target}" in err and "is a file" in err, err
    assert target.read_text() == "my notes"


# ------------------------------------------------------------------ 2. qa-table --overwrite must not shrink


def _qa_table(capsys, sample, *extra):
    return run_cli(capsys, "qa-table", "--overwrite", "--users-dir", str(sample / "users"), *extra)


@pytest.mark.parametrize("fault", ["empty_categories", "one_category_line_too_few", "empty_qa_file"])
def test_qa_table_overwrite_refuses_to_shrink(sample, capsys, fault):
    from pv4kit.dataset.questions import read_qa_csv

    user = sample / "users" / "user_12"
    categories = user / "categories.txt"
    old = read_qa_csv(user / "qa.csv")
    if fault == "empty_categories":
        # read as the reference reads it, an empty file is one blank category: qa/0.txt alone is used
        categories.write_text("")
        bad_file, code, gone = categories, "empty_file", old[old["category"] != 0]
    elif fault == "one_category_line_too_few":
        lines = categories.read_text().splitlines(keepends=True)
        categories.write_text("".join(lines[:-1]).rstrip("\n"))  # no trailing blank item either
        bad_file, code, gone = user / "qa", "count_mismatch", old[old["category"] == len(lines) - 1]
    else:
        (user / "qa" / "3.txt").write_text("")
        bad_file, code, gone = user / "qa" / "3.txt", "empty_file", old[old["category"] == 3]
    report = validate_raw(sample)
    assert str(bad_file) in set(errors(report, code)["file"]), report.to_string()

    before = {p: p.read_bytes() for p in sorted(sample.rglob("qa.csv"))}
    rc, _, err = _qa_table(capsys, sample)
    assert rc == 1
    assert f"{user / 'qa.csv'}:" in err and "--force" in err, err
    assert f"{len(gone)} would go" in err and gone["question"].iloc[0][:40] in err, err
    assert {p: p.read_bytes() for p in before} == before  # nothing written, for any user

    rc, out, _ = _qa_table(capsys, sample, "--force")
    assert rc == 0 and "6 qa.csv written" in out
    assert len(read_qa_csv(user / "qa.csv")) == len(old) - len(gone)


def test_qa_table_shrink_check_lists_each_user_and_the_questions(sample):
    from pv4kit.dataset.questions import read_qa_csv, write_qa_tables

    (sample / "users" / "user_12" / "qa" / "0.txt").write_text("")
    (sample / "users" / "user_131" / "qa" / "9.txt").write_text("no tag here\n")
    gone_12 = read_qa_csv(sample / "users" / "user_12" / "qa.csv")
    gone_12 = gone_12[gone_12["category"] == 0]
    with pytest.raises(ValueError, match="user_131") as info:
        write_qa_tables(sample / "users", overwrite=True)
    message = str(info.value)
    assert f"{len(gone_12)} would go" in message
    assert gone_12["question"].iloc[0][:40] in message
    report = validate_raw(sample)
    assert str(sample / "users" / "user_131" / "qa" / "9.txt") in set(errors(report, "no_questions")["file"])
    # without --overwrite nothing is replaced, so nothing is refused
    assert write_qa_tables(sample / "users").attrs["summary"]["written"].sum() == 0


# ------------------------------------------------------------------ 3. malformed tags run fields together


def _second_block_line(text: str, tag: str) -> tuple[int, int]:
    """Offset and 1-based line of ``tag`` in the second ``<QUESTION>`` block of ``text``."""
    pos = text.index(tag, text.index("<QUESTION>", 1))
    return pos, text.count("\n", 0, pos) + 1


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("no_bracket", "tag_malformed"),  # "<CHOICE_B" without its ">"
        ("lower_case", "tag_malformed"),  # "<choice_b>"
        ("no_opening", "tag_malformed"),  # "CHOICE_B>"
        ("given_twice", "tag_repeated"),
        ("missing", "tag_missing"),
        ("out_of_order", "tag_order"),
    ],
)
def test_malformed_tags_are_validate_errors_and_flagged_in_the_drop_report(sample, capsys, fault, code):
    from pv4kit.dataset.questions import build_question_table, format_qa_csv

    path = sample / "users" / "user_131" / "qa" / "0.txt"
    text = path.read_text()
    pos, line = _second_block_line(text, "<CHOICE_B>")
    end = pos + len("<CHOICE_B>")
    block_line = text.count("\n", 0, text.index("<QUESTION>", 1)) + 1
    if fault == "no_bracket":
        text = text[:pos] + "<CHOICE_B" + text[end:]
    elif fault == "lower_case":
        text = text[:pos] + "<choice_b>" + text[end:]
    elif fault == "no_opening":
        text = text[:pos] + "CHOICE_B>" + text[end:]
    elif fault == "given_twice":
        c_pos, line = _second_block_line(text, "<CHOICE_C>")
        text = text[:c_pos] + "<CHOICE_B>\n" + text[c_pos:]  # a second <CHOICE_B> empties B
    elif fault == "missing":
        text = text[:pos] + text[end:]
        line = block_line
    else:  # <CHOICE_C> where <CHOICE_B> was, and <CHOICE_B> where <CHOICE_C> was
        c_pos, _ = _second_block_line(text, "<CHOICE_C>")
        c_end = c_pos + len("<CHOICE_C>")
        text = text[:pos] + "<CHOICE_C>" + text[end:c_pos] + "<CHOICE_B>" + text[c_end:]
    path.write_text(text)

    # the bytes of qa.csv stay the reference's parse (a field runs on or a choice is empty); flagged
    table, _ = build_question_table(path.parent.parent)
    rc, out, _ = run_cli(capsys, "qa-table", "--overwrite", "--force", "--users-dir", str(sample))
    assert rc == 0 and "malformed tags" in out and f"{path}:{line}:" in out, out
    assert (path.parent.parent / "qa.csv").read_text() == format_qa_csv(table)

    report = validate_raw(sample)
    bad = errors(report, code)
    assert list(bad["file"]) == [str(path)], report.to_string()
    assert int(bad.iloc[0]["line"]) == line
    assert "question 2" in bad.iloc[0]["message"] or "CHOICE_B" in bad.iloc[0]["message"]
    assert f"{path}:{line}: error [{code}]" in format_report(report)


def test_no_bracket_runs_correct_choice_and_rationale_into_choice_a(sample):
    """The symptom of the issue, kept as the reference parses it, and the flag in the drop report."""
    from pv4kit.dataset.questions import parse_qa_text, write_qa_tables

    path = sample / "users" / "user_131" / "qa" / "0.txt"
    before = write_qa_tables(sample / "users", overwrite=True).attrs["summary"].set_index("user_id")
    text = path.read_text()
    pos, line = _second_block_line(text, "<CHOICE_B>")
    text = text[:pos] + "<CHOICE_B" + text[pos + len("<CHOICE_B>") :]
    path.write_text(text)
    block = parse_qa_text(text)[1]
    assert "<CORRECT_CHOICE>" in block.choices[0] and "<CHOICE_B" in block.choices[0]
    report = write_qa_tables(sample / "users", overwrite=True, force=True)
    flagged = report[report["reason"] == "malformed_tags"]
    assert list(zip(flagged["file"], flagged["line"], strict=True)) == [(str(path), line)]
    assert "<CHOICE_B" in flagged.iloc[0]["detail"]
    summary = report.attrs["summary"].set_index("user_id")
    # a flag, not a drop: the block stays in qa.csv as the reference parse keeps it
    assert summary.loc[131, "malformed"] == 1 and summary.loc[131, "dropped"] == before.loc[131, "dropped"]
    assert summary.loc[131, "kept"] == before.loc[131, "kept"]


def test_sample_and_synthetic_trees_have_no_tag_problems(sample):
    from pv4kit.dataset.qatags import check_tags

    for path in sorted(sample.glob("users/*/qa/*.txt")):
        assert check_tags(path.read_text()) == [], path
    assert not validate_raw(sample)["code"].str.startswith("tag_").any()


# ------------------------------------------------------------------ 6. build's swap is atomic as a whole

# A child process replaces out/ (old set: a.txt, b.txt, manifest.json saying "old") by a new set, and is
# killed with SIGKILL at its k-th step: before and after every rename, exchange, link and file write,
# and half-way through removing the old copy. k runs from 1 until the child finishes unharmed.
_SWAP_CHILD = r"""
import os, shutil, signal, sys
from pathlib import Path
import pv4kit._io as io

out, kill_at, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
count = 0

def step():
    global count
    count += 1
    if count == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

def around(fn):
    def wrapped(*args, **kwargs):
        step()
        result = fn(*args, **kwargs)
        step()
        return result
    return wrapped

real_rmtree = shutil.rmtree
def rmtree(path, *args, **kwargs):
    step()
    files = sorted(p for p in Path(path).rglob("*") if p.is_file())
    if files:
        files[0].unlink()  # a removal killed half-way
        step()
    return real_rmtree(path, *args, **kwargs)

os.rename = around(os.rename)
os.replace = around(os.replace)
os.link = around(os.link)
shutil.rmtree = rmtree
io._exchange = around(io._exchange) if mode == "exchange" else (lambda a, b: False)

with io.replace_directory(out) as tmp:
    for name in ("a.txt", "b.txt"):
        step()
        (tmp / name).write_text(f"new {name}")
    io.atomic_write_json(tmp / "manifest.json", {"set": "new"})
print("steps", count)
"""

OLD = {"a.txt": "old a.txt", "b.txt": "old b.txt"}
NEW = {"a.txt": "new a.txt", "b.txt": "new b.txt"}


def _write_old(out: Path) -> None:
    import json

    out.mkdir()
    for name, text in OLD.items():
        (out / name).write_text(text)
    (out / "manifest.json").write_text(json.dumps({"set": "old"}))
    (out / "README.md").write_text("not a build product: kept")
    (out / ".out.abc123.tmp").mkdir()  # the temporary folder of an older pv4kit, killed
    (out / ".out.abc123.tmp" / "train.parquet").write_text("half")


def _state(out: Path) -> str:
    """ "old" or "new" when ``out`` holds one whole set (and the foreign file), else a description."""
    import json

    if not out.is_dir():
        return "missing"
    files = {p.name: p.read_text() for p in out.iterdir() if p.is_file()}
    if files.pop("README.md", None) != "not a build product: kept":
        return "README.md lost"
    which = json.loads(files.pop("manifest.json", '{"set": "no manifest"}'))["set"]
    expected = {"old": OLD, "new": NEW}.get(which)
    return which if files == expected else f"mixed: manifest {which}, files {sorted(files.items())}"


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


@pytest.mark.parametrize("mode", ["exchange", "two_renames"])
def test_swap_killed_at_each_step_leaves_old_or_new_and_recovers(tmp_path, mode):
    import os
    import subprocess
    import sys

    from pv4kit._io import recover_directory

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    seen = set()
    for kill_at in range(1, 60):
        root = tmp_path / str(kill_at)
        root.mkdir()
        out = root / "out"
        _write_old(out)
        child = subprocess.run(
            [sys.executable, "-c", _SWAP_CHILD, str(out), str(kill_at), mode], env=env, capture_output=True
        )
        state = _state(out)
        if child.returncode == 0:
            assert state == "new" and not _leftovers(out) and (out / "README.md").is_file()
            assert not (out / ".out.abc123.tmp").exists()
            break
        assert child.returncode == -9, child.stderr.decode()
        if mode == "exchange":  # never a moment without a whole output
            assert state in ("old", "new"), (kill_at, state)
        else:  # one moment between the two renames: the next run puts the new one in place
            assert state in ("old", "new", "missing"), (kill_at, state)
        seen.add(state)
        recover_directory(out)
        after = _state(out)
        assert after in ("old", "new") and (state == "missing" or after == state), (kill_at, state, after)
        assert not _leftovers(out), (kill_at, _leftovers(out))
    else:
        pytest.fail("the child never finished")
    assert kill_at > 10 and {"old", "new"} <= seen


_BUILD_CHILD = r"""
import os, signal, sys
kill_at, argv = int(sys.argv[1]), sys.argv[2:]
count = 0
def around(fn):
    def wrapped(*args, **kwargs):
        global count
        count += 1
        if count == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*args, **kwargs)
    return wrapped
os.replace, os.rename = around(os.replace), around(os.rename)
import pv4kit._io as io
if hasattr(io, "_exchange"):
    io._exchange = around(io._exchange)
from pv4kit.cli import main
sys.exit(main(argv))
"""


def _snapshot(out: Path) -> dict[str, str]:
    import hashlib

    names = ("train.parquet", "validation.parquet", "test.parquet", "user_splits.csv")
    return {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in names if (out / n).is_file()}


def test_build_killed_at_each_move_keeps_a_whole_output_and_the_next_build_recovers(sample, tmp_path, capsys):
    """The issue's case end to end: `pv4kit build` killed (SIGKILL) at each file or folder move."""
    import json
    import os
    import subprocess
    import sys

    new_args = ("--validation-fraction", "0.3")  # moves rows between train and validation
    assert run_cli(capsys, *build_args(sample, tmp_path / "new", *new_args))[0] == 0
    new = _snapshot(tmp_path / "new")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    assert run_cli(capsys, *build_args(sample, tmp_path / "old"))[0] == 0
    (tmp_path / "old" / "README.md").write_text("kept")
    old = _snapshot(tmp_path / "old")
    for kill_at in range(1, 12):
        out = tmp_path / f"data{kill_at}"
        shutil.copytree(tmp_path / "old", out)
        argv = build_args(sample, out, *new_args)
        proc = subprocess.run(
            [sys.executable, "-c", _BUILD_CHILD, str(kill_at), *argv], env=env, capture_output=True
        )
        if proc.returncode == 0:
            assert _snapshot(out) == new and not _leftovers(out) and not list(out.glob(".*"))
            break
        assert proc.returncode == -9, proc.stderr.decode()
        fraction = json.loads((out / "manifest.json").read_text())["validation_fraction"]
        assert (_snapshot(out), fraction) in ((old, 0.1), (new, 0.3)), f"killed at move {kill_at}: mixed"
        assert (out / "README.md").read_text() == "kept"
        assert run_cli(capsys, *build_args(sample, out, *new_args))[0] == 0  # the next build recovers
        assert _snapshot(out) == new and not _leftovers(out) and not list(out.glob(".*"))
        assert (out / "README.md").read_text() == "kept"
    else:
        pytest.fail("the build never finished")
    assert kill_at > 2


def test_output_dir_holding_the_inputs_or_the_current_directory_is_refused(sample, capsys, monkeypatch):
    before = sorted(p.relative_to(sample) for p in sample.rglob("*"))
    rc, _, err = run_cli(capsys, *build_args(sample, sample))
    assert rc == 1 and "holds the users folder" in err, err
    monkeypatch.chdir(sample / "personas")
    rc, _, err = run_cli(capsys, *build_args(sample, sample / "personas"))
    assert rc == 1 and "current directory" in err, err
    assert sorted(p.relative_to(sample) for p in sample.rglob("*")) == before


# ------------------------------------------------------------------ users outside the id ranges (issue 23.5)


def test_users_outside_the_id_ranges_are_reported_by_load_info_and_validate(sample, capsys, caplog):
    (sample / "users" / "user_12").rename(sample / "users" / "user_500")
    with caplog.at_level("WARNING", logger="pv4kit.dataset.load"):
        data = load(sample)
    assert 500 not in set(data.users["user_id"])
    assert any("user(s) outside" in r.getMessage() and "500" in r.getMessage() for r in caplog.records)
    rc, out, _ = run_cli(capsys, "info", str(sample))
    assert rc == 0 and "left out 1 user(s) outside" in out and "[500]" in out, out
    report = validate_raw(sample)
    rows = report[report["code"] == "user_outside"]
    assert len(rows) == 1 and "user 500" in rows["message"].iloc[0], format_report(report)
    assert rows["severity"].iloc[0] == "warning"
    rc, out, _ = run_cli(capsys, "validate", str(sample))
    assert "[user_outside] user 500" in out, out


# ------------------------------------------------------------------ parquet rows (issue 23.6, 23.9)


def _edit_parquet(path: Path, edit) -> None:
    """Rewrite ``path`` with ``edit(frame)`` applied (every column, documents included)."""
    frame = pd.read_parquet(path)
    edit(frame).to_parquet(path, index=False)


def test_a_duplicated_parquet_row_is_an_error_naming_the_file_and_rows(sample, tmp_path, capsys):
    out = tmp_path / "data"
    assert run_cli(capsys, *build_args(sample, out))[0] == 0
    test = out / "test.parquet"
    _edit_parquet(test, lambda f: pd.concat([f.iloc[:3], f.iloc[[2]], f.iloc[3:]], ignore_index=True))
    with pytest.raises(ValueError, match=rf"{test}: rows 2 and 3 are the same question of user 131"):
        load(out)
    rc, _, err = run_cli(capsys, "info", str(out))
    assert rc == 1 and "rows 2 and 3" in err and "Traceback" not in err, err


def test_a_parquet_row_with_null_choices_is_an_error_naming_the_file_and_row(sample, tmp_path, capsys):
    out = tmp_path / "data"
    assert run_cli(capsys, *build_args(sample, out))[0] == 0
    test = out / "test.parquet"

    def null_choices(frame):
        frame["choices"] = frame["choices"].astype(object)
        frame.at[4, "choices"] = None
        return frame

    _edit_parquet(test, null_choices)
    with pytest.raises(ValueError, match=rf"{test}: row 4 has no 'choices'"):
        load(out)
    rc, _, err = run_cli(capsys, "info", str(out))
    assert rc == 1 and "row 4 has no 'choices'" in err and "Traceback" not in err, err


def test_a_question_differing_from_qa_csv_is_named_in_the_warning(sample, tmp_path, capsys, caplog):
    out = tmp_path / "data"
    assert run_cli(capsys, *build_args(sample, out))[0] == 0

    def edit(frame):
        frame.at[1, "question"] = "An edited question?"
        return frame

    _edit_parquet(out / "test.parquet", edit)
    with caplog.at_level("WARNING", logger="pv4kit.dataset.load"):
        load(out)
    assert "1 question(s) differ" in caplog.text and "user 131 question 1" in caplog.text, caplog.text
    assert "'An edited question?' in the parquet" in caplog.text


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch) -> Path:
    """A folder whose disk is full: a 64 KiB tmpfs where mounting is allowed, else parquet writes fail as
    pyarrow fails on a full disk (``OSError(28, ...)``, no file named)."""
    import subprocess

    folder = tmp_path / "tiny"
    folder.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)]
    if shutil.which("mount") and subprocess.run(mount, capture_output=True).returncode == 0:
        yield folder
        # lazy: a file the failed build left open may still hold the mount
        subprocess.run(["umount", "-l", str(folder)], check=False)
        return
    import pyarrow.parquet as pq

    def full(self, *args, **kwargs):
        raise OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    yield folder


def test_build_on_a_full_disk_names_the_output_folder(sample, full_disk, capsys):
    target = full_disk / "data"
    rc, _, err = run_cli(capsys, *build_args(sample, target))
    assert rc == 1 and f"{target}: No space left on device" in err, err
    assert "it was left as it was" in err and not target.exists()
