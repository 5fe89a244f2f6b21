import random

import pandas as pd
import pytest

from pv4kit.dataset.questions import (
    QA_COLUMNS,
    build_question_table,
    format_qa_csv,
    parse_qa_text,
    read_qa_csv,
    shuffle_records,
    write_qa_tables,
)
from tests.rawtree import qa_block, write_user

CHOICES = ["alpha one", "beta two", "gamma three", "delta four", "epsilon five"]


def test_parse_fields_preamble_and_rationale():
    text = "Here are your questions:\n" + qa_block("Q1?", CHOICES, "C", "R1") + qa_block("Q2?", CHOICES, "A")
    blocks = parse_qa_text(text)
    # the preamble is a block of its own (as in the reference), flagged as leading
    assert [b.question for b in blocks] == ["Here are your questions:", "Q1?", "Q2?"]
    assert [b.leading for b in blocks] == [True, False, False] and not blocks[0].letter
    blocks = blocks[1:]
    assert blocks[0].choices == tuple(CHOICES)
    assert blocks[0].letter == "C"
    assert blocks[0].rationale.startswith("R1\n<WORD_COUNTS>")  # WORD_COUNTS included, as the reference
    assert blocks[0].line == 2 and blocks[1].line > blocks[0].line


@pytest.mark.parametrize(
    ("letter_text", "letter", "raw"),
    [
        ("C", "C", "C"),
        ("C)", "C", "C"),
        ("  E.", "E", "E"),
        ("c", "", "c"),
        ("Choice C", "", ""),
        ("CD", "", ""),
    ],
)
def test_letter_rule(letter_text, letter, raw):
    b = parse_qa_text(
        f"<QUESTION>q<CHOICE_A>a<CHOICE_B>b<CHOICE_C>c<CHOICE_D>d<CHOICE_E>e<CORRECT_CHOICE>{letter_text}"
    )
    assert b[0].letter == letter
    assert b[0].raw_letter == raw


def test_missing_tag_runs_to_end_of_block():
    b = parse_qa_text(qa_block("Q?", ["a", "b", "c", "d", None], "B"))[0]
    assert b.choices[4] == ""
    assert b.choices[3].startswith("d\n<CORRECT_CHOICE>\nB")  # D runs on to the end of the block
    assert b.letter == "B"


def _reference_shuffle(records, seed=42):
    """Independent transcription of the reference rule for cross-checking."""
    rng = random.Random(seed)
    out = []
    for cat, q, choices, letter in records:
        if not letter:
            continue
        correct = choices["ABCDE".index(letter)]
        if not correct:
            continue
        new = rng.choice("ABCDE")
        rest = list(choices)
        rest.remove(correct)
        rng.shuffle(rest)
        rest.insert("ABCDE".index(new), correct)
        out.append((cat, q, rest, new))
    return out


def test_shuffle_matches_reference_rule_and_drops_without_drawing():
    rng = random.Random(7)
    text_by_cat = {}
    records = []
    for cat in range(3):
        blocks = []
        for k in range(6):
            choices = [f"c{cat} q{k} {x}" for x in "abcde"]
            if k == 1:
                choices[2] = ""  # empty correct choice when letter C
            letter = rng.choice(["A", "B", "C", "D", "E", "c", ""])
            if k == 1:
                letter = "C"
            blocks.append(qa_block(f"q {cat}-{k}", choices, letter))
            records.append((cat, f"q {cat}-{k}", choices, letter if letter.isupper() else ""))
        text_by_cat[cat] = "".join(blocks)
    parsed = [(c, b) for c in range(3) for b in parse_qa_text(text_by_cat[c])]
    rows, drops = shuffle_records(parsed, seed=42)
    expected = _reference_shuffle(records)
    assert [
        (r["category"], r["question"], [r[f"choice_{x}"] for x in "abcde"], r["correct_choice"]) for r in rows
    ] == [(c, q, ch, le) for c, q, ch, le in expected]
    assert len(rows) + len(drops) == 18
    assert {d["reason"] for d in drops} <= {"empty_correct_choice", "no_letter", "lowercase_letter"}
    for r in rows:  # the correct text sits at the new letter
        assert r[f"choice_{r['correct_choice'].lower()}"].endswith(("a", "b", "c", "d", "e"))


def test_duplicate_correct_text_removes_first_equal_one():
    b = parse_qa_text(qa_block("q", ["same", "x", "same", "y", "z"], "C"))
    rows, _ = shuffle_records([(0, b[0])], seed=42)
    values = [rows[0][f"choice_{x}"] for x in "abcde"]
    assert sorted(values) == sorted(["same", "x", "same", "y", "z"])


def test_build_table_report_and_csv_roundtrip(tmp_path):
    extra = {
        0: qa_block("lower?", CHOICES, "b") + qa_block("", CHOICES, "A"),
        1: qa_block("empty correct?", ["a", "", "c", "d", "e"], "B") + qa_block("no letter?", CHOICES, "?"),
    }
    d = write_user(tmp_path, 7, extra_blocks=extra)
    table, drops = build_question_table(d)
    assert list(table.columns) == QA_COLUMNS
    assert len(table) == 6 and table["index"].tolist() == list(range(6))
    assert sorted(drops["reason"]) == [
        "empty_correct_choice",
        "empty_question",
        "lowercase_letter",
        "no_letter",
    ]
    assert drops["file"].str.endswith(".txt").all() and (drops["line"] > 1).all()
    text = format_qa_csv(table)
    assert "\r\n" not in text and text.startswith(",".join(QA_COLUMNS) + "\n")
    path = tmp_path / "qa.csv"
    path.write_text(text)
    back = read_qa_csv(path)
    pd.testing.assert_frame_equal(back, table.astype({"index": "int64", "category": "int64"}))


def test_csv_quoting_and_empty_choices(tmp_path):
    d = write_user(
        tmp_path,
        8,
        n_categories=1,
        per_category=0,
        extra_blocks={0: qa_block('Has "quotes", commas\nand a newline?', ["x, y", "", "z", "w", "v"], "A")},
    )
    table, _ = build_question_table(d)
    (tmp_path / "qa.csv").write_text(format_qa_csv(table))
    back = read_qa_csv(tmp_path / "qa.csv")
    assert back.loc[0, "question"] == 'Has "quotes", commas\nand a newline?'
    assert (back.iloc[0][["choice_a", "choice_b", "choice_c", "choice_d", "choice_e"]] == "").sum() == 1


def test_missing_qa_file_is_clear(tmp_path):
    d = write_user(tmp_path, 9)
    (d / "qa" / "1.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"qa/1.txt.*category 1"):
        build_question_table(d)


def test_write_qa_tables_keeps_existing_unless_overwrite(tmp_path):
    write_user(tmp_path, 10)
    write_user(tmp_path, 11)
    report = write_qa_tables(tmp_path)
    assert report.attrs["summary"]["written"].all()
    target = tmp_path / "user_10" / "qa.csv"
    target.write_text("edited")
    write_qa_tables(tmp_path)
    assert target.read_text() == "edited"
    write_qa_tables(tmp_path, overwrite=True)
    assert target.read_text().startswith("index,category")
    assert not list(tmp_path.rglob("*.tmp"))


def test_read_qa_csv_bad_integer_names_file_and_line(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text(",".join(QA_COLUMNS) + "\n0,0,q,a,b,c,d,e,A,r\n1,x,q,a,b,c,d,e,B,r\n")
    with pytest.raises(ValueError, match=r"qa.csv:3: category must be a non-negative integer, found 'x'"):
        read_qa_csv(path)
