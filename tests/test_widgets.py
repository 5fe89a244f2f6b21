from __future__ import annotations

import pytest

from pv4kit.analysis.widgets import browser
from pv4kit.scoring.runs import write_generations
from pv4kit.scoring.score import score_run
from tests.test_audit import _data


@pytest.fixture
def scored_run(tmp_path, fake_embedder):
    data = _data()
    q = data.questions
    gens = q[["user_id", "question_index", "split"]].assign(
        generation=q["answer"], retrieved_ids=[[0, 1] if u == 1 else [0] for u in q["user_id"]]
    )
    run = write_generations(
        tmp_path / "echo", gens, config={"data": "mem", "method": "echo", "model": "none"}
    )
    preds, _ = score_run(run, data=data, embedder=fake_embedder, cache=False, n_boot=20)
    return data, {"echo": preds.merge(gens[["user_id", "question_index", "retrieved_ids"]])}


def test_browser_selections(scored_run):
    data, runs = scored_run
    box = browser(data, runs)
    c = box.controls
    assert "User 1" in c["user_info"].value and "I took the train" in c["user_info"].value
    assert [v for _, v in c["question"].options] == [0, 1, 2]
    assert "What would they pick for dinner?" in c["detail"].value
    c["user"].value = 2
    assert [v for _, v in c["question"].options] == [0, 1]
    c["question"].value = 1
    detail = c["detail"].value
    assert "What gift would they buy?" in detail and "echo" in detail and "predicted E (correct" in detail
    assert "chats retrieved by echo" in detail and "Reading quietly helps." in detail
    # the prediction is marked in text, not by colour alone; the list has a label with its count
    assert detail.count("class='pv4-pick'") == 1 and "<tr data-letter='E'>" in detail
    assert c["question_label"].value == "<b>Questions</b> of user 2 (2)"
    c["only_wrong"].value = True  # echoing the answer is never wrong
    assert c["question"].options == () and "No question selected" in c["detail"].value
    assert c["question_label"].value == "<b>Questions</b> of user 2 (0 of 2, only those some run got wrong)"


def test_browser_without_runs_and_bad_user():
    data = _data()
    box = browser(data, {})
    assert "No scored run covers this question" in box.controls["detail"].value
    with pytest.raises(ValueError, match="user_id"):
        browser(data, {}, user_id=99)
