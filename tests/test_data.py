import os
import tracemalloc

import pandas as pd
import pytest

from pv4kit.dataset.load import QUESTION_COLUMNS, USER_COLUMNS, load
from pv4kit.dataset.splits import build_dataset
from tests.rawtree import make_tree


@pytest.fixture
def built(tmp_path):
    tree = make_tree(
        tmp_path / "raw", train=[6, 9], test=[126, 140], n_categories=3, per_category=5, n_chats=6
    )
    (tree / "hard_subset.csv").write_text("user_id,question_index\n126,2\n140,14\n")
    build_dataset(tree / "users", tmp_path / "data", hard_subset=tree / "hard_subset.csv", progress=False)
    return tree, tmp_path / "data"


def test_raw_and_parquet_give_the_same_questions(built):
    tree, data_dir = built
    raw = load(tree)
    pq = load(data_dir)
    assert list(raw.questions.columns) == QUESTION_COLUMNS == list(pq.questions.columns)
    assert list(raw.users.columns) == USER_COLUMNS
    assert raw.kind == "raw" and pq.kind == "parquet"
    key = ["user_id", "split", "question_index"]
    a = raw.questions.sort_values(key).reset_index(drop=True)
    b = pq.questions.sort_values(key).reset_index(drop=True)
    for col in ["user_id", "split", "question_index", "question", "answer", "answer_letter", "hard"]:
        assert a[col].tolist() == b[col].tolist(), col
    assert a["choices"].tolist() == b["choices"].tolist()
    # the parquet next to a raw tree (recorded in manifest.json) is enriched with categories and personas
    assert b["category"].tolist() == a["category"].tolist()
    assert b["category_name"].notna().all()
    assert pq.persona(126) == "Persona of user 126."
    assert raw.questions["hard"].sum() == 2
    assert raw.documents(9) == pq.documents(9) and len(raw.documents(9)) == 6
    summary = pq.summary().set_index("split")
    assert summary.loc["test", "questions"] == 30 and summary.loc["validation", "questions"] == 4


def test_question_index_recovered_without_raw(built, tmp_path):
    _, data_dir = built
    bare = tmp_path / "elsewhere" / "bare"  # no raw/ beside it
    bare.mkdir(parents=True)
    for s in ("train", "validation", "test"):
        (bare / f"{s}.parquet").write_bytes((data_dir / f"{s}.parquet").read_bytes())
    data = load(bare)
    assert data.questions["category"].isna().all()
    assert data.persona(6) is None
    ref = load(data_dir).questions
    assert data.questions["question_index"].tolist() == ref["question_index"].tolist()
    assert (
        data.questions.groupby("user_id")["question_index"]
        .apply(lambda s: sorted(s) == list(range(len(s))))
        .all()
    )


def test_memorilla_layout(built, tmp_path):
    tree, _ = built
    out = tmp_path / "mem" / "data" / "pv4"
    build_dataset(tree / "users", out, id_column="collection_id", progress=False)
    for s in ("train", "validation", "test"):
        os.rename(out / f"{s}.parquet", out / f"{s}-00000-of-00001.parquet")
    data = load(tmp_path / "mem")
    assert data.kind == "memorilla" and data.questions["user_id"].nunique() == 4


def test_splits_filter_and_errors(built, tmp_path):
    tree, data_dir = built
    assert set(load(data_dir, splits=["test"]).questions["split"]) == {"test"}
    with pytest.raises(ValueError, match="unknown split"):
        load(data_dir, splits=["dev"])
    with pytest.raises(FileNotFoundError, match="no such folder"):
        load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="neither"):
        load(tmp_path / "empty")
    with pytest.raises(KeyError, match="user 5 is not in"):
        load(tree).documents(5)


def test_hub_id_offline_gives_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        RuntimeError, match="could not get dataset 'memorilla/PersonalizationV4'.*local folder"
    ):
        load("memorilla/PersonalizationV4")


def test_documents_not_materialised_per_row(tmp_path):
    tree = make_tree(tmp_path / "raw", train=[6], test=[126], n_categories=2, per_category=30, n_chats=40)
    for i in range(40):  # make the chats big
        (tree / "users" / "user_126" / "chats" / f"{i}.txt").write_text(
            "Leo: " + "x" * 20000 + "\nAssistant: ok"
        )
    build_dataset(tree / "users", tmp_path / "data", progress=False)
    tracemalloc.start()
    data = load(tmp_path / "data")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    docs_bytes = 40 * 20000
    assert len(data.documents(126)) == 40
    assert peak < 10 * docs_bytes  # 60 rows x 800 KB would be 48 MB if read per row
    naive = pd.read_parquet(tmp_path / "data" / "test.parquet")
    assert len(naive) == 60


def test_question_index_follows_the_split_rows_not_the_default_ranges(tmp_path):
    # built with a wider training range: user 130 is a training user although the default test range
    # (126-155) holds it; its positions must come from the split rule, not 0..n-1
    tree = make_tree(tmp_path / "raw", train=[6, 130], test=[141], n_categories=2, per_category=5, n_chats=3)
    build_dataset(
        tree / "users", tmp_path / "data", train_users=(6, 140), test_users=(141, 155), progress=False
    )
    raw = load(tree, train_users=(6, 140), test_users=(141, 155)).questions
    pq = load(tmp_path / "data").questions
    key = ["user_id", "split", "question_index"]
    a = raw.sort_values(key).reset_index(drop=True)
    b = pq.sort_values(key).reset_index(drop=True)
    assert a[key].values.tolist() == b[key].values.tolist()
    assert a["question"].tolist() == b["question"].tolist()


@pytest.mark.parametrize("letter", ["", "AB", "X"])
def test_raw_bad_correct_choice_names_file_and_line(tmp_path, letter):
    from pv4kit.dataset.questions import format_qa_csv, read_qa_csv

    tree = make_tree(tmp_path / "raw", train=[6], test=[126], n_categories=1, per_category=3, n_chats=2)
    path = tree / "users" / "user_126" / "qa.csv"
    table = read_qa_csv(path)
    table.loc[1, "correct_choice"] = letter
    path.write_text(format_qa_csv(table))
    with pytest.raises(ValueError, match=r"user_126/qa.csv:3: correct_choice must be one of A-E"):
        load(tree)


def test_quick_fingerprint_sees_the_tail_of_mid_sized_files(tmp_path):
    from pv4kit.dataset.load import _quick_fingerprint

    path = tmp_path / "train.parquet"
    data = bytearray(b"x" * (3 << 19))  # 1.5 MiB: more than the first MiB, less than two
    path.write_bytes(data)
    before = _quick_fingerprint([path])
    data[-10:] = b"y" * 10
    path.write_bytes(data)
    assert _quick_fingerprint([path]) != before
