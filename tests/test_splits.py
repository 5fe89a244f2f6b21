import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pv4kit.dataset.splits import assign_splits, build_dataset, split_indices
from tests.rawtree import make_tree


@pytest.mark.parametrize("n", [2, 3, 7, 10, 11, 19, 133, 140, 143, 145, 158])
def test_split_equals_datasets_train_test_split(n):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"i": list(range(n))}).train_test_split(test_size=0.1, seed=23)
    train, val = split_indices(n)
    assert train.tolist() == ds["train"]["i"]
    assert val.tolist() == ds["test"]["i"]
    assert len(val) == math.ceil(0.1 * n)


def test_split_rule_any_seed():
    for seed in range(5):
        for n in (5, 50):
            train, val = split_indices(n, seed=seed)
            assert sorted([*train, *val]) == list(range(n))
            perm = np.random.default_rng(seed).permutation(n)
            assert val.tolist() == perm[: math.ceil(0.1 * n)].tolist()


def test_assign_splits_order_and_ranges():
    plan = assign_splits({6: 10, 200: 4, 130: 3})
    assert set(plan["user_id"]) == {6, 130}  # 200 is outside both ranges
    test = plan[plan["split"] == "test"]
    assert test["question_index"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="overlap"):
        assign_splits({6: 3}, train_users=(1, 130), test_users=(126, 155))


@pytest.fixture
def tree(tmp_path):
    return make_tree(tmp_path / "raw", train=[6, 7, 125], test=[126, 155], n_categories=3, per_category=4)


def test_build_schema_rows_row_groups_and_hard(tree, tmp_path):
    (tree / "hard_subset.csv").write_text("user_id,question_index\n126,3\n155,0\n155,11\n")
    out = tmp_path / "data"
    summary = build_dataset(tree / "users", out, hard_subset=tree / "hard_subset.csv", progress=False)
    assert list(summary.columns) == ["user_id", "role", "questions", "train", "validation", "test", "hard"]
    assert summary["questions"].tolist() == [12] * 5
    assert summary["validation"].tolist()[:3] == [2, 2, 2] and summary["hard"].sum() == 3
    expected_schema = "user_id: int64\nquestion: string\nanswer: string\nchoices: list<element: string>\n"
    for split in ("train", "validation", "test"):
        pf = pq.ParquetFile(out / f"{split}.parquet")
        assert str(pf.schema_arrow).startswith(expected_schema)
        assert pf.num_row_groups == (3 if split != "test" else 2)  # one row group per user
    train = pd.read_parquet(out / "train.parquet")
    assert len(train) == 30
    row = train.iloc[0]
    assert row["answer"] in list(row["choices"]) and len(row["choices"]) == 5
    assert list(row["documents"])[0].startswith("Leo: message 0 of user 6")
    assert not train["hard"].any()
    test = pd.read_parquet(out / "test.parquet")
    assert test["hard"].sum() == 3 and test.loc[3, "hard"] and test.loc[12, "hard"]
    assert (
        (out / "user_splits.csv")
        .read_text()
        .startswith("user_id,role,questions,train,validation,test,hard\n")
    )
    assert (out / "manifest.json").is_file()
    # train rows follow the permutation order of the split rule
    qa = pd.read_csv(tree / "users" / "user_6" / "qa.csv", keep_default_na=False)
    tr, _ = split_indices(12)
    assert train["question"].tolist()[:10] == qa["question"].iloc[tr].tolist()


def test_collection_id_column(tree, tmp_path):
    build_dataset(tree / "users", tmp_path / "m", id_column="collection_id", progress=False)
    assert pq.read_schema(tmp_path / "m" / "test.parquet").names[0] == "collection_id"


@pytest.mark.parametrize(
    ("hard", "match"),
    [
        ("user_id,question_index\n6,0\n", "training user"),
        ("user_id,question_index\n999,0\n", "not among the users"),
        ("user_id,question_index\n126,99\n", "has no question 99"),
        ("user,q\n126,1\n", "expected the columns user_id and question_index"),
        ("user_id,question_index\n126,x\n", "must be an integer"),
    ],
)
def test_bad_hard_subset_leaves_previous_output(tree, tmp_path, hard, match):
    out = tmp_path / "data"
    build_dataset(tree / "users", out, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (tree / "hard_subset.csv").write_text(hard)
    with pytest.raises(ValueError, match=match):
        build_dataset(tree / "users", out, hard_subset=tree / "hard_subset.csv", progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_bad_letter_and_empty_answer_are_errors_before_writing(tree, tmp_path):
    qa = tree / "users" / "user_7" / "qa.csv"
    qa.write_text(qa.read_text().replace("\n0,0,", "\n0,0,", 1))
    frame = pd.read_csv(qa, keep_default_na=False)
    frame.loc[1, "correct_choice"] = "F"
    frame.to_csv(qa, index=False)
    out = tmp_path / "data"
    with pytest.raises(ValueError, match=r"user_7/qa.csv:3: correct_choice must be one of A-E"):
        build_dataset(tree / "users", out, progress=False)
    assert not list(out.glob("*.parquet"))
    frame.loc[1, "correct_choice"] = "B"
    frame.loc[1, "choice_b"] = ""
    frame.to_csv(qa, index=False)
    with pytest.raises(ValueError, match="correct choice B is empty"):
        build_dataset(tree / "users", out, progress=False)


def test_missing_qa_csv_and_empty_dirs(tree, tmp_path):
    (tree / "users" / "user_6" / "qa.csv").unlink()
    with pytest.raises(FileNotFoundError, match="qa-table"):
        build_dataset(tree / "users", tmp_path / "d", progress=False)
    (tmp_path / "empty" / "users").mkdir(parents=True)
    with pytest.raises(FileNotFoundError):
        build_dataset(tmp_path / "empty", tmp_path / "d", progress=False)
    with pytest.raises(ValueError, match="overlap"):
        build_dataset(tree / "users", tmp_path / "d", train_users=(1, 130), progress=False)


def test_cli_build_and_qa_table(tree, tmp_path, capsys):
    from pv4kit.cli import main

    assert main(["qa-table", "--users-dir", str(tree / "users"), "--overwrite"]) == 0
    assert main(["-q", "build", "--users-dir", str(tree / "users"), "--output-dir", str(tmp_path / "d")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert (
        main(["build", "--users-dir", str(tree), "--output-dir", str(tmp_path / "d"), "--train-users", "x-y"])
        == 1
    )
    assert "--train-users" in capsys.readouterr().err


@pytest.mark.parametrize("letter", ["AB", "BCD", "abcde"])
def test_multi_letter_correct_choice_is_an_error(tree, tmp_path, letter):
    qa = tree / "users" / "user_7" / "qa.csv"
    frame = pd.read_csv(qa, keep_default_na=False)
    frame.loc[1, "correct_choice"] = letter
    frame.to_csv(qa, index=False)
    with pytest.raises(ValueError, match=r"user_7/qa.csv:3: correct_choice must be one of A-E"):
        build_dataset(tree / "users", tmp_path / "data", progress=False)


def test_build_settings_are_keywords_and_bad_ones_fail_before_writing(tree, tmp_path):
    import inspect

    params = inspect.signature(build_dataset).parameters
    assert {"train_users", "test_users", "validation_fraction", "seed", "id_column"} <= set(params)
    over = build_dataset(tree / "users", tmp_path / "c", seed=5, validation_fraction=0.5, progress=False)
    assert over["validation"].tolist() == [6, 6, 6, 0, 0]
    with pytest.raises(TypeError, match="valdation_fraction"):
        build_dataset(tree / "users", tmp_path / "d", valdation_fraction=0.2, progress=False)
    with pytest.raises(ValueError, match="overlap"):
        build_dataset(tree / "users", tmp_path / "d", train_users=(1, 130), progress=False)
    with pytest.raises(ValueError, match="validation_fraction must be a number >= 0 and < 1"):
        build_dataset(tree / "users", tmp_path / "d", validation_fraction=1.5, progress=False)
    assert not (tmp_path / "d").exists()


def test_build_and_load_fingerprint_the_same_input_files(tree, tmp_path):
    import json

    from pv4kit.dataset.load import load
    from pv4kit.dataset.tree import input_files

    hard = tree / "hard_subset.csv"
    hard.write_text("user_id,question_index\n126,3\n")
    build_dataset(tree / "users", tmp_path / "data", hard_subset=hard, progress=False)
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    before = load(tree)
    assert manifest["input_fingerprint"] == before.fingerprint  # one definition of the inputs
    files = input_files(tree / "users", hard_subset=hard)
    assert hard in files and all(p.name == "qa.csv" or p.parent.name == "chats" for p in files if p != hard)
    hard.write_text("user_id,question_index\n126,4\n")  # another hard subset is other data
    assert load(tree).fingerprint != before.fingerprint


def test_cli_id_ranges_parse_and_name_the_option():
    from pv4kit.cli._args import id_range_text, parse_id_range
    from pv4kit.schema import DEFAULT_TRAIN_USERS

    assert parse_id_range("6-125", name="--train-users") == (6, 125)
    assert parse_id_range("7", name="--train-users") == (7, 7)
    assert parse_id_range(id_range_text(DEFAULT_TRAIN_USERS), name="x") == DEFAULT_TRAIN_USERS
    with pytest.raises(ValueError, match="--test-users: range start 9 is above its end 3"):
        parse_id_range("9-3", name="--test-users")


def test_a_raw_trees_fingerprint_is_the_same_wherever_it_lies(tmp_path):
    import shutil
    from pathlib import Path

    from pv4kit.dataset.load import load

    raw = Path(__file__).resolve().parents[1] / "raw"
    shutil.copytree(raw, tmp_path / "elsewhere")
    assert load(raw).fingerprint == load(tmp_path / "elsewhere").fingerprint
    (tmp_path / "elsewhere" / "hard_subset.csv").write_text("user_id,question_index\n131,0\n")
    assert load(raw).fingerprint != load(tmp_path / "elsewhere").fingerprint


def test_user_splits_counts_hard_rows_as_the_reference(tmp_path):
    """A repeated qa.csv index listed as hard marks two rows; user_splits.csv counts both (the reference)."""
    tree = make_tree(tmp_path / "raw", train=[6], test=[126], n_categories=2, per_category=3)
    qa = tree / "users" / "user_126" / "qa.csv"
    frame = pd.read_csv(qa, dtype=str, keep_default_na=False)
    frame.loc[1, "index"] = "0"
    frame.to_csv(qa, index=False, lineterminator="\n")
    (tree / "hard_subset.csv").write_text("user_id,question_index\n126,0\n")
    build_dataset(tree / "users", tmp_path / "out", hard_subset=tree / "hard_subset.csv", progress=False)
    test = pq.read_table(tmp_path / "out" / "test.parquet").to_pandas()
    splits = pd.read_csv(tmp_path / "out" / "user_splits.csv").set_index("user_id")
    assert test["hard"].sum() == 2 == splits.loc[126, "hard"]
