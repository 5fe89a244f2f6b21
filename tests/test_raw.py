import pytest

from pv4kit.dataset.formats import check_chat
from pv4kit.dataset.tree import chat_files, list_users, read_chats, read_user
from pv4kit.dataset.validate import format_report, validate_raw
from tests.rawtree import make_tree


@pytest.fixture
def tree(tmp_path):
    return make_tree(tmp_path / "raw", train=[6, 7], test=[130])


def codes(report):
    return set(report["code"])


def test_clean_tree_has_no_errors(tree):
    report = validate_raw(tree)
    assert not (report["severity"] == "error").any(), format_report(report)
    assert list_users(tree / "users") == [6, 7, 130]


def test_read_user_orders_chats_by_integer_stem(tree):
    d = tree / "users" / "user_6"
    for i in range(4, 12):
        (d / "chats" / f"{i}.txt").write_text(f"Leo: m{i}\nAssistant: r{i}")
    assert [p.name for p in chat_files(d)][8:11] == ["8.txt", "9.txt", "10.txt"]
    assert read_chats(d)[10].startswith("Leo: m10")
    u = read_user(d, raw_dir=tree)
    assert u.user_id == 6 and u.categories[0] == "Category 0 of user 6"  # as stored
    assert u.persona == "Persona of user 6." and u.seed.startswith("I am user 6")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Assistant: hi\nLeo: hey", "chat_format"),
        ("Leo: only the user", "chat_format"),
        ("", "chat_empty"),
        ("Leo: a\nAssistant: b\nLeo: c\nAssistant: d", "chat_turns"),
        ("Hello\nAssistant: b", "chat_format"),
    ],
)
def test_check_chat(text, code):
    assert code in {c for _, c, _ in check_chat(text)}


def test_validation_reports_each_problem_with_file_and_line(tree):
    u = tree / "users" / "user_6"
    (u / "chats" / "2.txt").unlink()  # gap
    (u / "chats" / "1.txt").write_text("User: hi\nAssistant: hello")  # bad format
    (u / "qa" / "1.txt").unlink()  # qa missing for a category
    u7 = tree / "users" / "user_7"
    (u7 / "qa" / "5.txt").write_text("<QUESTION>x")  # counts disagree
    (u7 / "chats" / "notes.txt").write_text("Leo: a\nAssistant: b")  # non-numeric chat name
    qa = u7 / "qa.csv"
    qa.write_text(qa.read_text().replace(",A,", ",Z,", 1))  # bad letter
    report = validate_raw(tree)
    assert {"chat_gap", "chat_format", "missing_file", "count_mismatch", "chat_name", "bad_letter"} <= codes(
        report
    )
    bad = report[report["code"] == "bad_letter"].iloc[0]
    assert bad["file"].endswith("user_7/qa.csv") and bad["line"] >= 2
    fmt = report[report["code"] == "chat_format"].iloc[0]
    assert fmt["file"].endswith("chats/1.txt") and fmt["line"] == 1
    text = format_report(report)
    assert "error(s)" in text and "chats/1.txt:1: error [chat_format]" in text


def test_stale_qa_csv_and_dropped_blocks_are_warnings(tree):
    u = tree / "users" / "user_130"
    with open(u / "qa" / "0.txt", "a") as fh:
        fh.write(
            "<QUESTION>\nLower?\n<CHOICE_A>\na\n<CHOICE_B>\nb\n<CHOICE_C>\nc\n<CHOICE_D>\nd\n<CHOICE_E>\ne\n"
            "<CORRECT_CHOICE>\nb\n"
        )
    report = validate_raw(tree)
    assert {"dropped_lowercase_letter"} <= codes(report)
    (u / "qa" / "0.txt").write_text((u / "qa" / "0.txt").read_text().replace("option A", "option Q"))
    assert "qa_stale" in codes(validate_raw(tree))
    assert not (validate_raw(tree)["severity"] == "error").any()


def test_empty_and_missing_trees(tmp_path):
    assert codes(validate_raw(tmp_path / "nope")) == {"no_tree"}
    (tmp_path / "users").mkdir()
    assert "no_tree" in codes(validate_raw(tmp_path)) or "no_users" in codes(validate_raw(tmp_path))
    with pytest.raises(FileNotFoundError, match="no user_N folders"):
        list_users(tmp_path / "users")


def test_hard_subset_entries_checked(tree):
    (tree / "hard_subset.csv").write_text("user_id,question_index\n130,0\n999,1\n130,77\n")
    report = validate_raw(tree)
    hard = report[report["code"] == "hard_unknown"]
    assert sorted(hard["line"].astype(int)) == [3, 4]


def test_cli_validate_exit_codes(tree, capsys):
    from pv4kit.cli import main

    assert main(["validate", str(tree)]) == 0
    (tree / "users" / "user_6" / "chats" / "0.txt").write_text("nonsense")
    assert main(["validate", str(tree)]) == 1
    out = capsys.readouterr().out
    assert "chats/0.txt:1: error [chat_format]" in out


@pytest.mark.parametrize("letter", ["", "AB"])
def test_empty_or_multi_letter_correct_choice_is_reported_not_raised(tree, letter):
    from pv4kit.dataset.questions import format_qa_csv, read_qa_csv

    path = tree / "users" / "user_7" / "qa.csv"
    table = read_qa_csv(path)
    table.loc[1, "correct_choice"] = letter
    path.write_text(format_qa_csv(table))
    report = validate_raw(tree)
    bad = report[report["code"] == "bad_letter"]
    assert len(bad) == 1 and bad.iloc[0]["file"].endswith("user_7/qa.csv") and bad.iloc[0]["line"] == 3


def test_bad_qa_index_and_category_are_reported_never_raised(tree):
    qa = tree / "users" / "user_130" / "qa.csv"
    lines = qa.read_text(encoding="utf-8").split("\n")
    head, first = lines[0].split(","), lines[1].split(",")
    first[head.index("index")], first[head.index("category")] = "²", "٣"  # digits int() or isdigit() take
    qa.write_text("\n".join([lines[0], ",".join(first), *lines[2:]]), encoding="utf-8")
    report = validate_raw(tree)
    rows = report[report["file"].astype(str).str.endswith("user_130/qa.csv")]
    assert {"qa_index", "qa_category"} <= set(rows["code"]), format_report(report)
    assert set(rows.loc[rows["code"].isin(["qa_index", "qa_category"]), "line"]) == {2}
