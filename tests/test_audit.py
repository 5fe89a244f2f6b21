from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pv4kit.analysis import audit
from pv4kit.analysis.audit import (
    letter_sequence_audit,
    letter_sequence_summary,
    row_letter_predictions,
    run_audit,
    write_audit,
)
from pv4kit.dataset.load import PV4Data


def _questions() -> pd.DataFrame:
    rows = [
        # user 1: reference (A) uniquely longest; B and C near-duplicates in the table embedder
        (
            1,
            0,
            "What would they pick for dinner?",
            ["a long long answer here", "x y", "x y z", "p q", "r s"],
            0,
        ),
        (
            1,
            1,
            "Where would they travel?",
            ["go by train", "go by car", "go by bus now", "fly", "walk there"],
            2,
        ),
        (1, 2, "What would they pick for dinner tonight?", ["soup", "salad", "steak", "rice", "fish"], 4),
        (2, 0, "How do they relax?", ["reading quietly", "loud concert", "long hike", "yoga", "napping"], 1),
        (
            2,
            1,
            "What gift would they buy?",
            ["a book", "a pen", "a watch", "a scarf", "nothing at all today"],
            4,
        ),
    ]
    frame = pd.DataFrame(rows, columns=["user_id", "question_index", "question", "choices", "a"])
    frame["answer"] = [c[a] for c, a in zip(frame["choices"], frame["a"], strict=True)]
    frame["answer_letter"] = ["ABCDE"[a] for a in frame["a"]]
    frame["split"] = "train"
    frame["category"] = pd.array([0, 1, 0, 0, 1], dtype="Int64")
    frame["category_name"] = [
        "Food choices",
        "Travel plans",
        "Food choices",
        "Relaxing habits",
        "Gift giving",
    ]
    frame["hard"] = [False, True, False, False, True]
    frame["rationale"] = [
        "He loves a long long answer",
        None,
        "fish every day",
        "reads quietly",
        "buys nothing",
    ]
    return frame.drop(columns="a")


def _data() -> PV4Data:
    q = _questions()
    users = pd.DataFrame(
        {
            "user_id": [1, 2],
            "role": ["train", "train"],
            "documents": [
                ["I took the train there and had fish soup.", "Dinner was soup."],
                ["Reading quietly helps."],
            ],
            "persona": ["p1", "p2"],
            "seed": [None, None],
            "categories": [None, None],
            "topics": [None, None],
        }
    )
    return PV4Data(questions=q, users=users, source="mem", fingerprint="f")


def test_length_audit_flags():
    lengths = audit.length_audit(_questions())
    first = lengths.iloc[0]
    assert first["ref_words"] == 5 and first["ref_longest"] and not first["ref_shortest"]
    assert first["word_spread"] == 3 and not first["within_2_words"]
    assert lengths.iloc[4]["ref_longest"]  # "nothing at all today"
    summary = audit.length_summary(lengths, n_boot=50)
    assert set(summary["metric"]) >= {"ref_longest", "within_2_words"}
    row = summary.set_index("metric").loc["ref_longest"]
    assert row["rate"] == pytest.approx(lengths["ref_longest"].mean())
    assert row["chance"] == 0.2


def test_position_audit_uniform_and_skewed():
    q = _questions()
    pos = audit.position_audit(q)
    assert list(pos["letter"]) == list("ABCDE") and pos["n"].sum() == len(q)
    skew = pd.concat(
        [q.assign(question_index=q["question_index"] + 10 * i) for i in range(8)], ignore_index=True
    )
    skew["choices"] = [["r", "b", "c", "d", "e"]] * len(skew)
    skew["answer"] = "r"
    assert audit.position_audit(skew)["pvalue"].iloc[0] < 1e-6
    by = audit.position_audit(q, by="user_id")
    assert set(by["group"]) == {"1", "2"}


def test_candidate_only_solvers(fake_embedder):
    q = _questions()
    preds = audit.candidate_only_predictions(q, embedder=fake_embedder, cache=False)
    assert set(preds["solver"]) == set(audit.SOLVERS)
    assert len(preds) == 4 * len(q)
    longest = preds[preds["solver"] == "longest"].set_index("question_index")
    assert longest.loc[0].iloc[0]["predicted_letter"] == "A"
    acc = audit.solver_accuracy(preds, n_boot=50)
    assert list(acc.columns[:4]) == ["solver", "group", "n", "n_correct"]
    assert acc.set_index("solver").loc["longest", "accuracy"] == pytest.approx(longest["correct"].mean())
    by = audit.solver_accuracy(preds, by="category_name", n_boot=20)
    assert by["group"].nunique() == 4


def test_similarity_near_duplicates_and_rationale(make_fake_embedder):
    q = _questions()
    base = make_fake_embedder()
    table = {t: base.vector(t) for cs in q["choices"] for t in cs}
    table["x y"] = table["x y z"] = np.array([1, 0, 0, 0, 0, 0, 0, 0], dtype=np.float32)
    emb = make_fake_embedder(table)
    sim = audit.similarity_audit(q, embedder=emb, cache=False)
    first = sim.iloc[0]
    assert first["near_duplicate_candidates"] and first["max_pair_letters"] in ("BC", "CB")
    assert first["max_pair"] == pytest.approx(1.0, abs=1e-5)
    assert "rationale_correct" in sim and sim["rationale_pick"].isna().sum() == 1


def test_leakage_and_duplicates(fake_embedder):
    data = _data()
    leak = audit.leakage_audit(data.questions, data.users)
    assert len(leak) == 5 * len(data.questions)
    row = leak[(leak["user_id"] == 1) & (leak["question_index"] == 1) & (leak["letter"] == "A")].iloc[0]
    assert row["overlap"] == pytest.approx(1.0)  # "go by train": "train" appears in the chats
    summary = audit.leakage_summary(leak)
    assert list(summary["role"]) == ["reference", "distractor", "reference_unique_top"]
    dup = audit.duplicate_questions(data.questions, embedder=fake_embedder, cache=False, threshold=-1.0)
    assert set(dup["user_id"]) == {1, 2} and len(dup) == 3 + 1
    none = audit.duplicate_questions(data.questions, embedder=fake_embedder, cache=False, threshold=1.01)
    assert none.empty


def test_llm_candidate_only_with_fake_client():
    from pv4kit.llm.config import LLMConfig

    q = _questions()

    class Completions:
        def create(self, **kwargs):
            text = kwargs["messages"][-1]["content"]
            assert "Question:" in text and "E. " in text
            return {
                "choices": [{"message": {"content": "Answer: (A)"}, "finish_reason": "stop"}],
                "usage": {},
            }

    client = SimpleNamespace(chat=SimpleNamespace(completions=Completions()))
    cfg = LLMConfig(model="fake", base_url="http://127.0.0.1:1", protocol="chat", temperature=0.0)
    out = audit.llm_candidate_only(q, config=cfg, cache=None, client=client)
    assert (out["predicted_letter"] == "A").all() and out["solver"].iloc[0] == "llm:fake"
    assert out["correct"].tolist() == [x == "A" for x in q["answer_letter"]]
    assert audit.parse_letter("I think b") is None and audit.parse_letter("B.") == "B"


def test_llm_candidate_only_against_a_server_answering_errors_with_200_fails():
    """A gateway answering HTTP 200 + an error object: an error naming the server's words, not 0%."""
    from pv4kit.llm.config import LLMConfig
    from tests.llm_server import FakeLLMServer, Reply

    gateway = Reply(raw='{"error": {"message": "upstream model overloaded", "type": "server_error"}}')
    with FakeLLMServer(responder=lambda protocol, body, nth: gateway) as srv:
        cfg = LLMConfig(model="m", base_url=srv.base_url, protocol="chat", temperature=0.0, max_retries=0)
        with pytest.raises(RuntimeError, match="failed.*upstream model overloaded"):
            audit.llm_candidate_only(_questions(), config=cfg, cache=None)


def test_run_audit_and_write(tmp_path, fake_embedder):
    result = run_audit(_data(), embedder=fake_embedder, cache=tmp_path / "emb", n_boot=50)
    for name in ("lengths", "positions", "solver_accuracy", "similarity", "leakage", "duplicates", "flags"):
        assert name in result.tables
    flags = result["flags"]
    assert len(flags) == 5 and flags["n_flags"].ge(0).all()
    assert "solved_by_longest" in flags and "rationale_as_generation" in set(
        result["solver_accuracy"]["solver"]
    )
    assert "Candidate-only solvers" in result.summary and "Letters by row index" in result.summary
    assert {"letter_sequence", "letter_sequence_summary"} <= set(result.tables)
    assert "solved_by_row_letter" in flags
    paths = write_audit(result, tmp_path / "audit")
    assert (tmp_path / "audit" / "summary.txt").is_file() and len(paths) == len(result.tables) + 1
    with pytest.raises(KeyError, match="no audit table"):
        result["nope"]


def test_category_groups(make_fake_embedder):
    q = _questions()
    emb = make_fake_embedder(
        {
            "Food choices": [1, 0, 0],
            "Travel plans": [0, 1, 0],
            "Relaxing habits": [0, 0, 1],
            "Gift giving": [0.1, 0.99, 0],
        }
    )
    cats = audit.category_groups(q, embedder=emb, cache=False)
    assert len(cats) == 4  # (user, category) pairs
    groups = cats.set_index("category_name")["group"]
    assert groups["Travel plans"] == groups["Gift giving"] != groups["Food choices"]
    merged = audit.with_category_groups(q, cats)
    assert merged["group_label"].notna().all() and len(merged) == len(q)


def _letter_frame(sequences: dict[int, str]) -> pd.DataFrame:
    """One question per user and row index whose correct letter is given by ``sequences[user][k]``."""
    choices = ["a", "b", "c", "d", "e"]
    rows = [
        (u, k, f"q{k}", choices, choices["ABCDE".index(x)])
        for u, seq in sequences.items()
        for k, x in enumerate(seq)
    ]
    return pd.DataFrame(rows, columns=["user_id", "question_index", "question", "choices", "answer"])


def test_letter_sequence_identical_across_users():
    q = _letter_frame({u: "ABEABEEDBDEEEEABDCABEADEDBEC" for u in range(6)})
    table = letter_sequence_audit(q)
    assert len(table) == 28 and (table["n_users"] == 6).all() and (table["modal_share"] == 1.0).all()
    assert "".join(table["modal_letter"]) == "ABEABEEDBDEEEEABDCABEADEDBEC"
    summary = letter_sequence_summary(q, n_perm=200, seed=0).set_index("metric")
    modal, row = summary.loc["modal_letter_of_row"], summary.loc["row_letter"]
    assert modal["rate"] == 1.0 and modal["n"] == len(q) and modal["chance"] < 0.7
    assert modal["pvalue"] == pytest.approx(1 / 201)
    assert row["rate"] == 1.0 and row["pvalue"] == pytest.approx(1 / 201)
    preds = row_letter_predictions(q)
    assert preds["correct"].all() and set(preds["solver"]) == {"row_letter"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_letter_sequence_independent_users(seed):
    rng = np.random.default_rng(seed)
    q = _letter_frame({u: "".join(rng.choice(list("ABCDE"), size=40)) for u in range(50)})
    summary = letter_sequence_summary(q, n_perm=50, seed=seed).set_index("metric")
    modal, row = summary.loc["modal_letter_of_row"], summary.loc["row_letter"]
    assert modal["rate"] < 0.4 and abs(modal["rate"] - modal["chance"]) < 0.05  # ~0.28 for 50 users
    assert row["rate"] < 0.3 and abs(row["chance"] - 0.2) < 0.05
    assert letter_sequence_audit(q)["modal_share"].max() < 0.6


def test_letter_sequence_unshared_rows():
    # user 2 has one record fewer; row 3 belongs to user 1 alone
    q = _letter_frame({1: "ABCD", 2: "ABC"})
    table = letter_sequence_audit(q).set_index("question_index")
    assert table.loc[3, "n_users"] == 1 and table.loc[3, "modal_share"] == 1.0
    summary = letter_sequence_summary(q, n_perm=10).set_index("metric")
    assert summary.loc["modal_letter_of_row", "n"] == 6 and summary.loc["row_letter", "n"] == 6
    preds = row_letter_predictions(q).set_index(["user_id", "question_index"])
    assert pd.isna(preds.loc[(1, 3), "predicted_letter"]) and not preds.loc[(1, 3), "correct"]
    assert preds.loc[(2, 0), "predicted_letter"] == "A"


def test_similarity_ignores_empty_candidates(make_fake_embedder):
    q = _questions().iloc[[1]].copy()
    q["choices"] = [["go by train", "go by car", "go by bus now", "fly", ""]]
    far = np.array([0, 1, 0, 0, 0, 0, 0, 0], dtype=np.float32)
    table = {"go by train": -far, "go by car": -far, "go by bus now": far, "fly": -far}
    sim = audit.similarity_audit(q, embedder=make_fake_embedder(table), cache=False).iloc[0]
    # every non-empty distractor is opposite the reference (cosine -1); the empty one must not count
    assert sim["ref_nearest_distractor"] == pytest.approx(-1.0)
    assert sim["ref_mean_distractor"] == pytest.approx(-1.0)
    assert "E" not in sim["max_pair_letters"] and sim["nearest_distractor_letter"] != "E"


def _solver_accuracy_per_group(predictions, by, n_boot, seed, chance=0.2):
    """The per-group loop solver_accuracy used to run (bootstrap_ci and binomtest per group)."""
    from scipy.stats import binomtest

    from pv4kit.scoring.stats import bootstrap_ci

    rows = []
    keys = ["solver", by] if by else ["solver"]
    for key, sub in predictions.groupby(keys, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        ci = bootstrap_ci(sub.assign(v=sub["correct"].astype(float)), value="v", n_boot=n_boot, seed=seed)
        k = int(sub["correct"].sum())
        p = binomtest(k, len(sub), chance, alternative="greater").pvalue
        rows.append(
            (key[0], str(key[1]) if by else "all", len(sub), k, ci["estimate"], ci["low"], ci["high"], p)
        )
    return rows


@pytest.mark.parametrize("by", [None, "category_name"])
def test_solver_accuracy_equals_the_per_group_loop(by):
    rng = np.random.default_rng(3)
    n = 600
    preds = pd.DataFrame(
        {
            "user_id": rng.integers(0, 12, n),
            "question_index": np.arange(n),
            "solver": rng.choice(["longest", "shortest", "nearest_to_question"], n),
            "category_name": rng.choice(["work", "food", "travel", "money", "pets"], n),
            "correct": rng.random(n) < 0.3,
        }
    )
    got = audit.solver_accuracy(preds, by=by, n_boot=200, seed=4)
    want = _solver_accuracy_per_group(preds, by, 200, 4)
    assert len(got) == len(want)
    for r, w in zip(got.itertuples(index=False), want, strict=True):
        assert (r.solver, r.group, r.n, r.n_correct, r.accuracy, r.ci_low, r.ci_high, r.binom_p) == w


def test_reference_unique_top_matches_its_definition():
    rng = np.random.default_rng(0)
    rows = []
    for q in range(200):
        ref = rng.integers(0, 5)
        top = rng.random(5) < 0.3
        rows += [(1, q, k == ref, bool(top[k])) for k in range(5)]
    leak = pd.DataFrame(rows, columns=["user_id", "question_index", "is_reference", "top_overlap"])
    got = audit.reference_unique_top(leak)
    for (u, q), g in leak.groupby(["user_id", "question_index"]):
        want = bool(g.loc[g["is_reference"], "top_overlap"].all() and g["top_overlap"].sum() == 1)
        assert bool(got.loc[(u, q)]) == want


def test_run_audit_store_reads_back_and_keys_honestly(tmp_path, make_fake_embedder, caplog):
    store = tmp_path / "audits"
    data = _data()
    first_emb = make_fake_embedder()
    first = run_audit(data, embedder=first_emb, cache=False, n_boot=50, store=store)
    assert first_emb.n_encoded > 0 and len([p for p in store.iterdir()]) == 1
    again_emb = make_fake_embedder()
    again = run_audit(data, embedder=again_emb, cache=False, n_boot=50, store=store)
    assert again_emb.n_encoded == 0  # nothing recomputed
    assert again.summary == first.summary
    for name, table in first.tables.items():
        pd.testing.assert_frame_equal(again[name], table)
    # other options, other questions or another embedder are other results
    other = make_fake_embedder(name="other")
    run_audit(data, embedder=other, cache=False, n_boot=50, store=store)
    assert other.n_encoded > 0
    fewer = make_fake_embedder()
    data.questions = data.questions.iloc[:-1]
    run_audit(data, embedder=fewer, cache=False, n_boot=50, store=store)
    assert fewer.n_encoded > 0
    # a damaged entry is recomputed with a warning, never trusted
    for pkl in store.glob("*/result.pkl"):
        pkl.write_bytes(b"not a pickle")
    damaged = make_fake_embedder()
    with caplog.at_level("WARNING"):
        run_audit(data, embedder=damaged, cache=False, n_boot=50, store=store)
    assert damaged.n_encoded > 0 and "unreadable stored audit" in caplog.text
    assert not [p for p in store.iterdir() if p.name.startswith(".")]  # no temp folders left


def _length_audit_loop(questions):
    """The per-row loop length_audit was before it was vectorised (a transcription)."""
    from pv4kit.analysis.audit import _base
    from pv4kit.schema import answer_indices

    rows = []
    for choices, a in zip(questions["choices"], answer_indices(questions), strict=True):
        choices = [c if isinstance(c, str) else "" for c in choices]
        words = np.array([len(c.split()) for c in choices])
        chars = np.array([len(c.strip()) for c in choices])
        others = [j for j in range(5) if j != a]
        key = words * 10_000 + chars
        first = [tuple(w.lower().strip(",.;:") for w in c.split()[:2]) for c in choices]
        rows.append(
            {
                "answer_letter": "ABCDE"[a],
                "ref_words": int(words[a]),
                "ref_chars": int(chars[a]),
                "distractor_words_mean": float(words[others].mean()),
                "distractor_words_min": int(words[others].min()),
                "distractor_words_max": int(words[others].max()),
                "distractor_chars_mean": float(chars[others].mean()),
                "word_spread": int(words.max() - words.min()),
                "within_2_words": bool(words.max() - words.min() <= 2),
                "ref_word_rank": int(1 + (words[others] > words[a]).sum()),
                "ref_longest": bool((key[others] < key[a]).all()),
                "ref_shortest": bool((key[others] > key[a]).all()),
                "ref_longest_chars": bool((chars[others] < chars[a]).all()),
                "ref_shortest_chars": bool((chars[others] > chars[a]).all()),
                "shared_first_word": int(
                    sum(bool(first[a]) and first[j][:1] == first[a][:1] for j in others)
                ),
                "shared_first_two": int(sum(first[j] == first[a] and len(first[a]) == 2 for j in others)),
            }
        )
    return pd.concat([_base(questions), pd.DataFrame(rows)], axis=1)


def test_length_audit_equals_the_per_row_loop_on_ties_blanks_and_punctuation():
    rng = np.random.default_rng(7)
    vocab = ["Go", "go,", "walk", "Walk.", "...", ";", "the", "a", "park", "home"]
    rows = []
    for q in range(400):
        choices = [" ".join(rng.choice(vocab, size=rng.integers(0, 4))) for _ in range(5)]
        a = int(rng.integers(5))
        choices[a] = choices[a] or "Go home"  # the answer must be a non-empty choice
        if len(set(c.strip() for c in choices)) < 5:  # the answer's text must be its own
            choices = [
                c if j == a or c.strip() != choices[a].strip() else c + " x" for j, c in enumerate(choices)
            ]
        rows.append(
            {
                "user_id": 1 + q % 3,
                "question_index": q,
                "split": "test",
                "choices": choices,
                "answer": choices[a],
            }
        )
    questions = pd.DataFrame(rows)
    pd.testing.assert_frame_equal(audit.length_audit(questions), _length_audit_loop(questions))
    assert audit.length_audit(questions)["shared_first_two"].max() >= 1  # the draw exercises each rule
    assert (
        audit.length_audit(questions)["ref_longest"].any()
        and audit.length_audit(questions)["ref_shortest"].any()
    )


def test_cli_audit_refuses_an_output_file_before_auditing(tmp_path, monkeypatch, capsys):
    import functools

    import pv4kit.cli.analysis as cli_analysis
    from pv4kit.cli import main

    target = tmp_path / "notes.txt"
    target.write_text("mine")

    @functools.wraps(cli_analysis.run_audit)  # its signature gives the command's options
    def fail(*args, **kwargs):
        pytest.fail("audited before checking -o")

    monkeypatch.setattr(cli_analysis, "run_audit", fail)
    assert main(["audit", "--data", str(tmp_path / "data"), "-o", str(target)]) == 1
    err = capsys.readouterr().err
    assert f"--output-dir {target}: is a file, not a directory" in err and target.read_text() == "mine"


def _without(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    return frame.drop(columns=column)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda e: audit.length_audit(_without(_questions(), "choices")),
            "questions: missing column(s) ['choices']",
        ),
        (
            lambda e: audit.position_audit(_without(_questions(), "answer")),
            "questions: missing column(s) ['answer']",
        ),
        (lambda e: audit.position_audit(_questions(), by="nope"), "questions: missing column(s) ['nope']"),
        (
            lambda e: audit.length_summary(_without(audit.length_audit(_questions()), "ref_longest")),
            "lengths: missing column(s) ['ref_longest']",
        ),
        (
            lambda e: audit.candidate_only_predictions(
                _without(_questions(), "question"), embedder=e, cache=False
            ),
            "questions: missing column(s) ['question']",
        ),
        (
            lambda e: audit.similarity_audit(_without(_questions(), "answer"), embedder=e, cache=False),
            "questions: missing column(s) ['answer']",
        ),
        (
            lambda e: audit.duplicate_questions(_without(_questions(), "question"), embedder=e, cache=False),
            "questions: missing column(s) ['question']",
        ),
        (
            lambda e: audit.leakage_audit(_questions(), _without(_data().users, "documents")),
            "users: missing column(s) ['documents']",
        ),
        (
            lambda e: audit.leakage_summary(
                _without(audit.leakage_audit(_questions(), _data().users), "overlap")
            ),
            "leakage: missing column(s) ['overlap']",
        ),
        (
            lambda e: audit.category_groups(_without(_questions(), "category_name"), embedder=e, cache=False),
            "questions: missing column(s) ['category_name']",
        ),
        (
            lambda e: audit.with_category_groups(
                _questions(), pd.DataFrame({"user_id": [1], "category": [0]})
            ),
            "categories: missing column(s) ['group', 'group_label']",
        ),
        (
            lambda e: audit.solver_accuracy(pd.DataFrame({"user_id": [1], "correct": [True]}), n_boot=10),
            "predictions: missing column(s) ['solver']",
        ),
        (
            lambda e: audit.question_flags(_without(audit.length_audit(_questions()), "within_2_words")),
            "lengths: missing column(s) ['within_2_words']",
        ),
        (
            lambda e: audit.solver_accuracy(
                pd.DataFrame({"user_id": [1], "solver": ["x"], "correct": [True]}), n_boot=-1
            ),
            "n_boot must be an integer >= 1, got -1",
        ),
        (
            lambda e: audit.length_summary(audit.length_audit(_questions()), n_boot=0),
            "n_boot must be an integer >= 1, got 0",
        ),
    ],
)
def test_audit_functions_name_a_missing_column_and_its_frame(call, message, fake_embedder):
    # pandas raised a bare KeyError('choices') naming neither the frame nor what it needs
    with pytest.raises(ValueError, match=re.escape(message)):
        call(fake_embedder)


def test_static_embedder_gets_its_own_cutoffs_and_every_table_names_it(static_small, tmp_path):
    from pv4kit.analysis.audit import CUTOFFS, cutoffs
    from pv4kit.embeddings.models import MINILM, get_embedder

    static = get_embedder(f"static:{static_small}")
    cut = cutoffs(static)
    assert static.name in CUTOFFS and cut != CUTOFFS[MINILM] == cutoffs("someone-elses-model")
    result = run_audit(_data(), embedder=static, cache=tmp_path / "emb", n_boot=50)
    sim = result["similarity"]
    assert (sim["near_duplicate_candidates"] == (sim["max_pair"] >= cut["near_duplicate"])).all()
    for name in ("solver_predictions", "solver_accuracy", "similarity", "duplicates", "categories", "flags"):
        assert set(result[name]["embedder"]) <= {static.name}, name
    assert f"embedder {static.name}" in result.summary
    assert f"(>= {cut['near_duplicate']:.3g})" in result.summary
    assert f"(cosine distance < {cut['category_distance']:.3g})" in result.summary


def _duplicate_loop(questions, vecs, threshold):
    rows = []
    for uid, grp in questions.reset_index(drop=True).groupby("user_id", sort=True):
        pos = grp.index.to_numpy()
        sims = vecs[pos] @ vecs[pos].T
        a, b = np.nonzero(np.triu(sims >= threshold, k=1))
        for i, j in zip(a, b, strict=True):
            qa, qb = grp.iloc[i], grp.iloc[j]
            rows.append(
                (int(uid), int(qa["question_index"]), int(qb["question_index"]), float(sims[i, j]))
                + (qa["question"], qb["question"])
            )
    cols = ["user_id", "question_index_a", "question_index_b", "similarity", "question_a", "question_b"]
    return pd.DataFrame(rows, columns=cols).sort_values("similarity", ascending=False, ignore_index=True)


@pytest.mark.parametrize("threshold", [-1.0, 0.2, 0.6, 1.01])
def test_duplicate_questions_equal_the_per_pair_loop(fake_embedder, threshold):
    rng = np.random.default_rng(3)
    n = 60
    q = pd.DataFrame(
        {
            "user_id": rng.integers(1, 5, n),
            "question_index": np.arange(n),
            "question": [f"q{int(k)}" for k in rng.integers(0, 25, n)],  # repeats: exact duplicates too
        }
    ).sample(frac=1.0, random_state=1)
    from pv4kit.embeddings.models import embed_texts
    from pv4kit.vectors import unit_rows

    vecs = unit_rows(embed_texts(list(q["question"]), embedder=fake_embedder, cache=False))
    got = audit.duplicate_questions(q, embedder=fake_embedder, cache=False, threshold=threshold)
    want = _duplicate_loop(q, vecs, threshold)
    # an empty loop frame has object columns; the vectorised one keeps its dtypes
    pd.testing.assert_frame_equal(got.drop(columns="embedder"), want, check_dtype=len(want) > 0)


def test_category_groups_give_a_name_with_a_zero_vector_a_group_of_its_own(make_fake_embedder):
    # a static embedder maps a name made only of tokens it does not know to the zero vector
    table = {"travel": [1.0, 0.0], "trips": [0.99, 0.1], "zzz": [0.0, 0.0], "food": [0.0, 1.0]}
    q = pd.DataFrame(
        {
            "user_id": [1, 2, 3, 4],
            "category": [0, 0, 0, 0],
            "category_name": ["travel", "trips", "zzz", "food"],
        }
    )
    cats = audit.category_groups(q, embedder=make_fake_embedder(table), cache=False, distance=0.3)
    group = dict(zip(cats["category_name"], cats["group"], strict=True))
    assert group["travel"] == group["trips"] and len({group["zzz"], group["food"], group["travel"]}) == 3
