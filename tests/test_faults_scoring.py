"""Fault cases of the scoring commands (issue 13): comparing runs made on different data, importing over
an existing run. Each test reproduced the fault before the fix."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from pv4kit.baselines.hard import derive_hard_subset, hard_flags, hard_report
from pv4kit.cli import main
from pv4kit.dataset.load import load
from pv4kit.scoring.refformat import export_reference, import_reference
from pv4kit.scoring.runs import read_generations, read_run_config, write_generations
from pv4kit.scoring.score import score_run
from pv4kit.scoring.stats import compare
from tests.rawtree import make_tree


def _score(run_dir, data, embedder, generations):
    write_generations(run_dir, generations, config={"data": data.source, "method": "m", "model": "x"})
    score_run(run_dir, data=data, embedder=embedder, cache=False, n_boot=20)


@pytest.fixture
def two_trees(tmp_path):
    """Tree ``a`` and a copy ``b`` in which one test question's text was edited in ``qa.csv``."""
    a = make_tree(tmp_path / "a", train=[6], test=[126, 127], n_categories=2, per_category=3)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    qa = b / "users" / "user_126" / "qa.csv"
    text = qa.read_text()
    assert "User 126, category 1, question 2?" in text
    qa.write_text(text.replace("User 126, category 1, question 2?", "User 126, an edited question?"))
    return a, b


def _answers(data):
    test = data.split("test")
    return test[["user_id", "question_index", "split"]].assign(generation=test["answer"])


def test_compare_refuses_runs_scored_on_different_data(two_trees, tmp_path, make_fake_embedder, capsys):
    da, db = load(two_trees[0]), load(two_trees[1])
    assert da.fingerprint != db.fingerprint
    edited = db.questions[db.questions["question"] == "User 126, an edited question?"]
    qi = int(edited["question_index"].iloc[0])
    emb = make_fake_embedder()
    _score(tmp_path / "run_a", da, emb, _answers(da))
    _score(tmp_path / "run_b", db, emb, _answers(db))

    with pytest.raises(ValueError, match=rf"different data.*user 126 question {qi} \(question\)"):
        compare(tmp_path / "run_a", tmp_path / "run_b", n_boot=20)
    assert main(["-q", "compare", str(tmp_path / "run_a"), str(tmp_path / "run_b"), "--n-boot", "20"]) == 1
    err = capsys.readouterr().err
    assert f"user 126 question {qi}" in err and "--force" in err and "Traceback" not in err
    # --force compares anyway (with a warning)
    table = compare(tmp_path / "run_a", tmp_path / "run_b", n_boot=20, force=True)
    assert table.attrs["data_differs"] is True
    assert main(["-q", "compare", str(tmp_path / "run_a"), str(tmp_path / "run_b"), "--force"]) == 0


def test_hard_refuses_runs_scored_on_different_data(two_trees, tmp_path, make_fake_embedder, capsys):
    """``hard`` (hard_flags, hard_report, derive_hard_subset) uses the check ``compare`` uses (issue 23.4)."""
    da, db = load(two_trees[0]), load(two_trees[1])
    emb = make_fake_embedder()
    _score(tmp_path / "no_docs", da, emb, _answers(da))
    _score(tmp_path / "rag", db, emb, _answers(db))
    runs = (tmp_path / "no_docs", tmp_path / "rag")
    for combine in (hard_flags, hard_report, derive_hard_subset):
        with pytest.raises(ValueError, match=r"different data.*user 126 question \d+ \(question\)"):
            combine(*runs)
    out = tmp_path / "h.csv"
    argv = ["-q", "hard", "--no-docs", str(runs[0]), "--rag", str(runs[1]), "--output", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "different data" in err and "--force" in err and "Traceback" not in err, err
    assert not out.exists()
    assert main([*argv, "--force"]) == 0
    assert len(hard_flags(*runs, force=True)) == len(da.split("test"))


def test_the_notebooks_runs_refuse_runs_scored_on_different_data(two_trees, tmp_path, make_fake_embedder):
    """Notebooks 04, 05 and 07 combine every run of a folder: the same check as compare (issue 23.4)."""
    from pv4kit.analysis.notebooks import load_scored_runs

    da, db = load(two_trees[0]), load(two_trees[1])
    emb = make_fake_embedder()
    _score(tmp_path / "runs" / "a", da, emb, _answers(da))
    _score(tmp_path / "runs" / "b", db, emb, _answers(db))
    with pytest.raises(
        ValueError, match=r"runs A \(.*runs/a\) and B \(.*runs/b\) were scored on different data"
    ):
        load_scored_runs(tmp_path / "runs")
    assert sorted(load_scored_runs(tmp_path / "runs", force=True)) == ["a", "b"]


def test_compare_refuses_data_whose_chats_differ(tmp_path, make_fake_embedder):
    a = make_tree(tmp_path / "a", train=[6], test=[126], n_categories=1, per_category=3)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    (b / "users" / "user_126" / "chats" / "0.txt").write_text("Leo: another chat\nAssistant: yes")
    da, db = load(a), load(b)
    assert da.fingerprint != db.fingerprint
    emb = make_fake_embedder()
    _score(tmp_path / "run_a", da, emb, _answers(da))
    _score(tmp_path / "run_b", db, emb, _answers(db))
    with pytest.raises(ValueError, match="no question in both runs differs"):
        compare(tmp_path / "run_a", tmp_path / "run_b", n_boot=20)


def test_compare_same_data_and_frames_still_work(two_trees, tmp_path, make_fake_embedder):
    da = load(two_trees[0])
    emb = make_fake_embedder()
    _score(tmp_path / "run_a", da, emb, _answers(da))
    wrong = _answers(da).assign(generation="nothing like it")
    _score(tmp_path / "run_b", da, emb, wrong)
    table = compare(tmp_path / "run_a", tmp_path / "run_b", n_boot=20)
    assert table.attrs["data_differs"] is False
    # frames carry no fingerprint: their question texts are compared
    pa = pd.read_parquet(tmp_path / "run_a" / "predictions.parquet")
    pb = pa.copy()
    pb.loc[0, "answer"] = "another answer"
    with pytest.raises(ValueError, match="answer"):
        compare(pa, pb, n_boot=20)


def test_import_refuses_to_replace_a_run(tmp_path, make_fake_embedder, capsys):
    tree = make_tree(tmp_path / "raw", train=[6], test=[126], n_categories=1, per_category=3)
    data = load(tree)
    emb = make_fake_embedder()
    run = tmp_path / "run"
    _score(run, data, emb, _answers(data))
    ref = export_reference(run, out_dir=tmp_path / "ref")
    existing = tmp_path / "existing"
    gens = _answers(data).assign(generation="my own answers")
    write_generations(existing, gens, config={"data": str(tree), "method": "mine", "model": "x"})
    before = (existing / "generations.parquet").read_bytes(), (existing / "config.json").read_bytes()

    with pytest.raises(FileExistsError, match="pass force=True"):
        import_reference(ref / "predictions.jsonl", data=data, run_dir=existing)
    assert main(["-q", "import", str(ref / "predictions.jsonl"), str(existing), "--data", str(tree)]) == 1
    assert "already holds a run" in capsys.readouterr().err
    after = (existing / "generations.parquet").read_bytes(), (existing / "config.json").read_bytes()
    assert after == before  # nothing was touched

    args = ["-q", "import", str(ref / "predictions.jsonl"), str(existing), "--data", str(tree), "--force"]
    assert main(args) == 0
    assert read_run_config(existing)["method"] == "imported"
    assert read_generations(existing)["generation"].tolist() == _answers(data)["generation"].tolist()
    # an empty directory is not a run: importing into it needs no --force
    (tmp_path / "empty").mkdir()
    import_reference(ref / "predictions.jsonl", data=data, run_dir=tmp_path / "empty")
    assert json.loads((tmp_path / "empty" / "config.json").read_text())["n_imported"] == 3
