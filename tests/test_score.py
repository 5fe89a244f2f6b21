import json

import numpy as np
import pandas as pd
import pytest

from pv4kit.scoring.runs import read_predictions, write_generations
from pv4kit.scoring.score import answer_indices, clean_generation, compute_metrics, score_frame, score_run

TABLE = {
    "gen one": [1, 0, 0],
    "gen two": [0.6, 0.8, 0],
    "gen three": [0, 0, 1],
    "alpha": [0, 1, 0],
    "bravo": [1, 0.1, 0],
    "charlie": [-1, 0, 0],
    "delta": [0.5, 0.5, 0],
    "echo": [0, 0.2, 1],
    "twin": [0.6, 0.8, 0],
    "Paris\n": [0, 0, 1],
}


def _questions():
    rows = [
        # clear win: "gen one" is closest to bravo (B), the answer
        dict(
            user_id=1,
            question_index=0,
            choices=["alpha", "bravo", "charlie", "delta", "echo"],
            answer="bravo",
            hard=True,
            category=1,
            category_name="food",
        ),
        # tie: C and D are the same text; C (earliest) wins; answer is D
        dict(
            user_id=1,
            question_index=1,
            choices=["alpha", "charlie", "twin", "twin", "echo"],
            answer="twin",
            hard=False,
            category=2,
            category_name="travel",
        ),
        # empty and blank candidates never win, never embedded; whitespace around the answer is ignored
        dict(
            user_id=2,
            question_index=0,
            choices=["", "alpha", "charlie", "  ", "Paris\n"],
            answer=" Paris ",
            hard=False,
            category=2,
            category_name="travel",
        ),
    ]
    frame = pd.DataFrame(rows)
    frame.insert(2, "split", "test")
    frame["question"] = ["q1", "q2", "q3"]
    frame["answer_letter"] = ["B", "C", "E"]
    frame["rationale"] = pd.NA
    return frame


def _generations():
    return pd.DataFrame(
        {
            "user_id": [1, 1, 2],
            "question_index": [0, 1, 0],
            "split": "test",
            "generation": ["  gen one<|im_end|>", "gen two", "gen three\n"],
        }
    )


def test_clean_generation():
    assert clean_generation("  hi<|im_end|><|endoftext|> ") == "hi"
    assert clean_generation("<|im_start|>a<|im_sep|>b") == "ab"
    assert clean_generation(None) == ""


def test_score_frame_rules(make_fake_embedder, tmp_path):
    emb = make_fake_embedder(TABLE)
    pred = score_frame(_questions(), _generations(), embedder=emb, cache=tmp_path)
    assert list(pred["predicted_letter"]) == ["B", "C", "E"]
    assert list(pred["answer_letter"]) == ["B", "C", "E"]  # stripped match; first "twin" is C
    assert list(pred["correct"]) == [True, True, True]
    assert list(pred["tie"]) == [False, True, False]
    assert pred.loc[1, "margin"] == 0.0
    assert np.isnan(pred.loc[2, "sim_A"]) and np.isnan(pred.loc[2, "sim_D"])
    assert pred.loc[2, "n_candidates"] == 3
    assert pred.loc[0, "generation"] == "gen one"
    encoded = {t for call in emb.calls for t in call}
    assert "" not in encoded and "  " not in encoded and "gen one" in encoded
    # default: the reference's float16 cosine (a float16 value); float32 is the option
    assert pred.loc[0, "sim_B"] == pytest.approx(1 / np.sqrt(1.01), rel=1e-3)
    assert float(np.float16(pred.loc[0, "sim_B"])) == pred.loc[0, "sim_B"]
    assert pred["sim_A"].dtype == np.float32
    p32 = score_frame(_questions(), _generations(), embedder=emb, cache=tmp_path, numerics="float32")
    assert p32.loc[0, "sim_B"] == pytest.approx(1 / np.sqrt(1.01), rel=1e-6)
    assert list(p32["predicted_letter"]) == ["B", "C", "E"]


def test_tie_goes_to_earliest_letter_even_when_wrong(make_fake_embedder):
    q = _questions().iloc[[1]].copy()
    q["choices"] = [["alpha", "charlie", "twin", "twin ", "echo"]]
    q["answer"] = "twin "  # stripped: first match is C
    emb = make_fake_embedder({**TABLE, "twin ": TABLE["twin"]})
    pred = score_frame(q, _generations().iloc[[1]], embedder=emb, cache=False)
    assert pred.loc[0, "predicted_letter"] == "C" and pred.loc[0, "tie"]


def test_missing_answer_raises_before_embedding(make_fake_embedder):
    q = _questions()
    q.loc[2, "answer"] = "London"
    emb = make_fake_embedder(TABLE)
    with pytest.raises(ValueError, match="user 2 question 0: answer 'London'"):
        score_frame(q, _generations(), embedder=emb, cache=False)
    assert emb.calls == []
    with pytest.raises(ValueError, match="expected 5 choices"):
        answer_indices(q.assign(choices=[["a", "b"]] * 3))


def test_generation_errors(make_fake_embedder):
    emb = make_fake_embedder(TABLE)
    gens = _generations()
    with pytest.raises(ValueError, match="match no question"):
        score_frame(_questions(), gens.assign(question_index=[0, 1, 9]), embedder=emb, cache=False)
    with pytest.raises(ValueError, match="different split"):
        score_frame(_questions(), gens.assign(split="train"), embedder=emb, cache=False)


def test_metrics_null_hard_and_ci(make_fake_embedder):
    pred = score_frame(_questions(), _generations(), embedder=make_fake_embedder(TABLE), cache=False)
    m = compute_metrics(pred.assign(hard=False), n_boot=200, seed=1)
    assert m["accuracy"] == 1.0 and m["n"] == 3 and m["n_users"] == 2
    assert m["accuracy_hard"] is None and m["accuracy_hard_ci"] == [None, None] and m["n_hard"] == 0
    assert m["n_ties"] == 1
    assert [c["category_name"] for c in m["by_category"]] == ["food", "travel"]
    assert [u["user_id"] for u in m["by_user"]] == [1, 2]
    m2 = compute_metrics(pred.assign(correct=[True, False, False]), n_boot=200, seed=1)
    assert m2["accuracy"] == pytest.approx(1 / 3) and m2["accuracy_hard"] == 1.0
    lo, hi = m2["accuracy_ci"]
    assert 0 <= lo <= 1 / 3 <= hi <= 1
    json.dumps(m2)  # serialisable


def test_score_run_writes_and_reuses_cache(make_fake_embedder, tmp_path):
    run = tmp_path / "runs" / "r1"
    write_generations(run, _generations(), config={"data": "unused", "method": "no_docs", "model": "m"})
    emb = make_fake_embedder(TABLE)
    cache = tmp_path / "cache"
    pred, metrics = score_run(run, data=_questions(), embedder=emb, cache=cache, n_boot=100)
    on_disk = read_predictions(run)
    assert list(on_disk["predicted_letter"]) == ["B", "C", "E"]
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["accuracy"] == 1.0 and saved["method"] == "no_docs" and saved["n_missing_generations"] == 0
    assert saved["embedder"]["name"] == "fake"
    # a second run with new generations embeds only those
    run2 = tmp_path / "runs" / "r2"
    write_generations(
        run2, _generations().assign(generation=["new a", "new b", "gen two"]), config={"data": "unused"}
    )
    n_before = emb.n_encoded
    score_run(run2, data=_questions(), embedder=emb, cache=cache, n_boot=100)
    assert emb.n_encoded - n_before == 2


def test_score_with_real_minilm(minilm, tmp_path):
    q = pd.DataFrame(
        {
            "user_id": [7, 7],
            "split": "test",
            "question_index": [0, 1],
            "question": ["What drink?", "Which pet?"],
            "choices": [
                ["A cup of green tea", "Black coffee, no sugar", "Orange juice", "", "Sparkling water"],
                ["A golden retriever", "A tabby cat", "A goldfish", "A parrot", "A hamster"],
            ],
            "answer": ["Black coffee, no sugar", "A tabby cat"],
            "hard": [True, False],
            "category": [1, 2],
            "category_name": ["drinks", "pets"],
        }
    )
    gens = pd.DataFrame(
        {
            "user_id": [7, 7],
            "question_index": [0, 1],
            "split": "test",
            "generation": ["You'd like a strong black coffee without sugar.", "Your cat, a tabby."],
        }
    )
    pred = score_frame(q, gens, embedder=minilm, cache=tmp_path)
    assert list(pred["predicted_letter"]) == ["B", "B"]
    assert pred["correct"].all() and not pred["tie"].any() and (pred["margin"] > 0).all()


def test_score_frame_names_a_null_key_of_the_generations():
    questions = pd.DataFrame(
        {"user_id": [1], "question_index": [0], "choices": [["a", "b", "c", "d", "e"]], "answer": ["a"]}
    )
    gens = pd.DataFrame({"user_id": [None], "question_index": [0], "generation": ["a"]})
    with pytest.raises(ValueError, match=r"generations: user_id is null in 1 row\(s\) \(row\(s\) \[0\]\)"):
        score_frame(questions, gens, embedder=None)
