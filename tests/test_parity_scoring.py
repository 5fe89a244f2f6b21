"""Parity of scoring and of the exported files with the reference scorer (Memorilla ``metrics.py``).

The ``_ref_*`` functions are independent transcriptions of the reference's rules, written from reading
``memorilla/metrics.py``, ``memorilla/embeddings.py``, ``memorilla/utils.py``, ``evaluate.py`` and
``evaluate_baselines.py`` (commit a5c2d6f); nothing is imported from the reference. pv4kit must agree with
them exactly (indices, float16 values, bytes), on inputs crafted to stress each rule.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pv4kit.scoring.score import clean_generation, score_frame

LETTERS = "ABCDE"

# --------------------------------------------------------------------------- transcribed reference rules


def _ref_encoder_output(rows: list[np.ndarray]) -> np.ndarray:
    """The reference's ``embed_texts``: each encoder output is written into a float16 array."""
    out = np.empty((len(rows), len(rows[0])), dtype=np.float16)
    for i, row in enumerate(rows):
        out[i] = row.tolist()
    return out


def _ref_pick(prediction: np.ndarray, candidates: np.ndarray, texts: list[str]) -> tuple[int, np.ndarray]:
    """The reference's choice rule for one row, on float16 arrays.

    Every choice starts at -inf (float64); the non-empty ones (``text.strip()``) get the cosine of the
    prediction vector and their own vector, each divided by its L2 norm + 1e-8 on the float16 arrays; the
    choice is ``np.argmax`` (the first maximum).
    """
    similarity = np.full(len(texts), -np.inf)
    filled = [j for j, text in enumerate(texts) if text.strip()]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        unit = prediction / (np.linalg.norm(prediction) + 1e-8)
        units = candidates / (np.linalg.norm(candidates, axis=-1, keepdims=True) + 1e-8)
        similarity[filled] = unit @ units.T
    return int(np.argmax(similarity)), similarity


def _ref_clean(text: str) -> str:
    """The reference's ``clean_generation``: one left-to-right pass that drops every occurrence of the four
    chat tokens (what is left around a removed token is not looked at again), then ``str.strip()``."""
    tokens = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|im_sep|>")
    kept, i = [], 0
    while i < len(text):
        hit = next((t for t in tokens if text.startswith(t, i)), None)
        if hit is None:
            kept.append(text[i])
            i += 1
        else:
            i += len(hit)
    return "".join(kept).strip()


# --------------------------------------------------------------------------- helpers


class _TableEmbedder:
    """Returns the float32 vector stored for each text (what a real encoder hands pv4kit)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.dim = len(next(iter(table.values())))
        self.name = "table"
        self.cache_key = f"table|dim={self.dim}"

    def encode(self, texts, *, batch_size=None, progress=False):  # noqa: ANN001, ANN201
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


def _frame(rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Questions and generations frames from ``{choices, answer, generation}`` rows (one user each)."""
    q = pd.DataFrame(
        {
            "user_id": [200 + i for i in range(len(rows))],
            "split": "test",
            "question_index": 0,
            "question": [f"q{i}" for i in range(len(rows))],
            "choices": [r["choices"] for r in rows],
            "answer": [r["answer"] for r in rows],
            "hard": False,
        }
    )
    g = q[["user_id", "question_index", "split"]].assign(generation=[r["generation"] for r in rows])
    return q, g


def _reference_predictions(rows: list[dict], table: dict[str, np.ndarray]) -> tuple[list[int], np.ndarray]:
    """Run the transcribed reference over ``rows``: one encoder call over generations + non-empty choices."""
    predictions = [r["generation"].strip() for r in rows]
    nonempty = [[c for c in r["choices"] if c.strip()] for r in rows]
    texts = predictions + [c for row in nonempty for c in row]
    vectors = _ref_encoder_output([table[t] for t in texts])
    picks, sims, offset = [], [], len(rows)
    for i, row in enumerate(rows):
        block = vectors[offset : offset + len(nonempty[i])]
        offset += len(nonempty[i])
        pick, similarity = _ref_pick(vectors[i], block, row["choices"])
        picks.append(pick)
        sims.append(similarity)
    return picks, np.array(sims)


def _near_tie_rows(n: int, dim: int, seed: int) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Rows whose five candidates sit within 3e-4 (odd rows) or 3e-3 (even rows) cosine of each other
    (float16 resolution near 1 is 4.9e-4), unnormalised, some with empty candidates."""
    rng = np.random.default_rng(seed)
    rows, table = [], {}
    for i in range(n):
        q = rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        texts = [f"row {i} choice {j}" for j in range(5)]
        for j in rng.choice(5, size=int(rng.integers(0, 3)), replace=False):
            texts[j] = ["", "  ", "\n"][int(rng.integers(3))]
        for text in texts:
            if text.strip():
                noise = rng.standard_normal(dim).astype(np.float32)
                noise -= (noise @ q) * q
                noise /= np.linalg.norm(noise)
                angle = 0.14 + (0.002 if i % 2 else 0.02) * rng.random()  # ties, and near-ties
                vec = np.cos(angle) * q + np.sin(angle) * noise
                table[text] = (vec * rng.uniform(0.5, 3.0)).astype(np.float32)
        gen = f"generation {i}"
        table[gen] = (q * rng.uniform(0.5, 3.0)).astype(np.float32)
        answer = next(t for t in texts if t.strip())
        rows.append({"choices": texts, "answer": answer, "generation": gen})
    return rows, table


# --------------------------------------------------------------------------- scoring numerics


def test_float16_near_ties_match_the_reference_exactly():
    rows, table = _near_tie_rows(300, 2560, seed=7)
    picks, ref_sims = _reference_predictions(rows, table)
    q, g = _frame(rows)
    emb = _TableEmbedder(table)
    pred = score_frame(q, g, embedder=emb, cache=False, progress=False).set_index("user_id").loc[q["user_id"]]
    assert [LETTERS.index(x) for x in pred["predicted_letter"]] == picks
    # the similarities themselves are the reference's float16 values (-inf in the reference = NaN here)
    ours = pred[[f"sim_{x}" for x in LETTERS]].to_numpy(dtype=np.float64)
    assert np.array_equal(np.where(np.isnan(ours), -np.inf, ours), ref_sims)
    # the ties the float16 arithmetic makes go to the earliest letter, as np.argmax does
    assert pred["tie"].sum() > 0
    # float32 (the option) really is different arithmetic: it disagrees on some of these near-ties
    p32 = score_frame(q, g, embedder=emb, cache=False, progress=False, numerics="float32")
    p32 = p32.set_index("user_id").loc[q["user_id"]]
    assert (p32["predicted_letter"].to_numpy() != pred["predicted_letter"].to_numpy()).sum() > 0


def test_crafted_float16_tie_goes_to_the_earliest_letter():
    # B and C differ by 1e-4 in cosine: float32 prefers C, float16 rounds both to one value and the
    # reference's argmax takes B
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)

    def at(cos: float) -> np.ndarray:
        return np.array([cos, np.sqrt(1 - cos**2), 0.0], dtype=np.float32)

    table = {"gen": q, "a": at(0.2), "b": at(0.99001), "c": at(0.99011), "d": at(-0.5), "e": at(0.3)}
    rows = [{"choices": list("abcde"), "answer": "c", "generation": "gen"}]
    picks, _ = _reference_predictions(rows, table)
    assert picks == [1]
    qf, g = _frame(rows)
    emb = _TableEmbedder(table)
    default = score_frame(qf, g, embedder=emb, cache=False, progress=False)
    assert default.loc[0, "predicted_letter"] == "B" and bool(default.loc[0, "tie"])
    assert not bool(default.loc[0, "correct"])
    p32 = score_frame(qf, g, embedder=emb, cache=False, progress=False, numerics="float32")
    assert p32.loc[0, "predicted_letter"] == "C" and bool(p32.loc[0, "correct"])


def test_empty_candidates_zero_vectors_and_overflow_follow_the_reference():
    big = np.full(384, 40.0, dtype=np.float32)  # squares overflow float16: the norm is inf
    table = {
        "gen": np.linspace(-1, 1, 384).astype(np.float32),
        "zero": np.zeros(384, dtype=np.float32),
        "big": big,
        "near": np.linspace(-1, 1.1, 384).astype(np.float32),
        "far": np.linspace(1, -1, 384).astype(np.float32),
        "gen big": big,
    }
    rows = [
        # empty and blank choices keep -inf and never win; the zero vector's NaN is what argmax picks
        {"choices": ["", "far", "zero", "  ", "near"], "answer": "near", "generation": "gen"},
        {"choices": ["far", "", "near", "\t", ""], "answer": "near", "generation": " gen\n"},
        {"choices": ["far", "big", "near", "", ""], "answer": "big", "generation": "gen big"},
    ]
    picks, _ = _reference_predictions(rows, table)
    q, g = _frame(rows)
    pred = score_frame(q, g, embedder=_TableEmbedder(table), cache=False, progress=False)
    assert [LETTERS.index(x) for x in pred["predicted_letter"]] == picks


def test_unknown_numerics_is_refused():
    rows = [{"choices": list("abcde"), "answer": "a", "generation": "a"}]
    q, g = _frame(rows)
    table = {t: np.ones(3, dtype=np.float32) for t in "abcde"}
    with pytest.raises(ValueError, match="numerics"):
        score_frame(q, g, embedder=_TableEmbedder(table), cache=False, numerics="bfloat16")


def test_empty_answer_is_refused_where_the_reference_would_score_it():
    # the reference's choice_index matches "" to the first empty choice (never predicted, so always wrong,
    # or right by accident when every choice is empty); pv4kit refuses such a question before embedding
    rows = [{"choices": ["a", "", "c", "d", "e"], "answer": "  ", "generation": "a"}]
    q, g = _frame(rows)
    table = {t: np.ones(3, dtype=np.float32) for t in "acde"}
    with pytest.raises(ValueError, match="user 200 question 0"):
        score_frame(q, g, embedder=_TableEmbedder(table), cache=False)


def test_score_run_records_its_numerics(tmp_path):
    from pv4kit.scoring.runs import write_generations
    from pv4kit.scoring.score import score_run

    rows = [{"choices": list("abcde"), "answer": "b", "generation": "b"}]
    q, g = _frame(rows)
    emb = _TableEmbedder({t: np.eye(5, dtype=np.float32)["abcde".index(t)] for t in "abcde"})
    write_generations(tmp_path / "run", g, config={"data": "<DataFrame>"})
    _, m = score_run(tmp_path / "run", data=q, embedder=emb, cache=False, n_boot=10)
    assert m["numerics"] == "float16" and m["accuracy"] == 1.0
    _, m = score_run(tmp_path / "run", data=q, embedder=emb, cache=False, n_boot=10, numerics="float32")
    assert m["numerics"] == "float32"


@pytest.mark.parametrize(
    "text",
    [
        "  Paris<|im_end|>\n",
        "<|im_start|>a<|endoftext|> b<|im_sep|>",
        "<|im_<|im_end|>start|>",  # one pass: the joined <|im_start|> stays
        "<|im_sta<|endoftext|>rt|> tail",
        "<|im_e<|im_end|>nd|>",
        "<|IM_END|> case matters <|im_end|",
        "<|im_end|><|im_end|><|im_end|>",
        "\u3000\x0b answer \u2028<|endoftext|>\x1c",
        "<<|im_sep|>|im_end|>>",
        "",
    ],
)
def test_clean_generation_is_the_reference_rule(text):
    assert clean_generation(text) == _ref_clean(text)


# --------------------------------------------------------------------------- export formats


def _ref_predictions_jsonl(dataset: pd.DataFrame, predictions: list[str]) -> bytes:
    """The reference's ``predictions.jsonl`` for a split (rows in stored order) and its cleaned predictions:
    ``question``, ``answer``, ``prediction``, then ``choices`` and ``hard`` if the split has those columns;
    one ``json.dumps(..., ensure_ascii=False)`` line each."""
    extra = [c for c in ("choices", "hard") if c in dataset.columns]
    lines = []
    for (_, row), prediction in zip(dataset.iterrows(), predictions, strict=True):
        record = {"question": row["question"], "answer": row["answer"], "prediction": prediction}
        for column in extra:
            value = row[column]
            record[column] = list(value) if column == "choices" else bool(value)
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return "".join(lines).encode("utf-8")


def _ref_metrics_json(correct: list[bool], hard: list[bool] | None, script: str) -> bytes:
    """The reference's ``metrics.json``: ``evaluate.py`` asks for ``accuracy_hard`` only when some row is
    hard, ``evaluate_baselines.py`` always (0.0 on an empty mask); percentages rounded to 2 decimals, then
    ``num_examples``; ``json.dump(indent=2)`` and a newline."""
    ok = np.array(correct)
    scores = {"accuracy": float(ok.mean())}
    if script == "evaluate_baselines.py" or (hard is not None and any(hard)):
        mask = np.asarray(hard if hard is not None else [False] * len(ok), dtype=bool)
        scores["accuracy_hard"] = float(ok[mask].mean()) if mask.any() else 0.0
    summary = {name: round(100 * value, 2) for name, value in scores.items()}
    summary["num_examples"] = len(ok)
    return (json.dumps(summary, indent=2) + "\n").encode()


def _export_case(tmp_path, questions: pd.DataFrame, generations: list[str], **kwargs):  # noqa: ANN202
    from pv4kit.scoring.refformat import export_reference
    from pv4kit.scoring.runs import write_generations
    from pv4kit.scoring.score import score_run

    run = tmp_path / "run"
    gens = questions[["user_id", "question_index", "split"]].assign(generation=generations)
    # generations in another order than the data's rows
    write_generations(run, gens.iloc[::-1], config={"data": "<DataFrame>", "method": "m", "model": "x"})
    emb = _TableEmbedder(
        {
            t: np.random.default_rng(len(t)).standard_normal(8).astype(np.float32)
            for t in _texts(questions, gens)
        }
    )
    pred, _ = score_run(run, data=questions, embedder=emb, cache=False, n_boot=10)
    out = export_reference(run, data=questions, out_dir=tmp_path / "ref", **kwargs)
    by_key = pred.set_index(["user_id", "question_index"])
    keys = list(zip(questions["user_id"], questions["question_index"], strict=True))
    correct = [bool(by_key.loc[k, "correct"]) for k in keys]
    cleaned = [by_key.loc[k, "generation"] for k in keys]
    return out, correct, cleaned


def _texts(questions: pd.DataFrame, gens: pd.DataFrame) -> set[str]:
    texts = {clean_generation(g) for g in gens["generation"]}
    return texts | {c for cs in questions["choices"] for c in cs if c.strip()}


def _unsorted_questions(with_hard: bool | None) -> pd.DataFrame:
    """Rows in a stored order that is not (user_id, question_index) order, with text that stresses JSON."""
    q = pd.DataFrame(
        {
            "user_id": [147, 147, 131, 131, 131],
            "split": "test",
            "question_index": [2, 0, 1, 0, 2],
            "question": ["Café or tea?", "  Spaces kept \n", 'Quote " and \\ back', "emoji 🍰?", "tab\there"],
            "choices": [
                ["café", "thé", "", "eau", "lait"],
                ["a b", "c d", "e f", "g h", "i j"],
                ['say "x"', "path \\ y", "z", "w", "v"],
                ["🍰 cake", "pie", "tart", "", " "],
                ["one", "two", "three", "four", "five"],
            ],
            "answer": ["thé", "  e f ", "z", "pie", "five"],
        }
    )
    if with_hard is not None:
        q["hard"] = [False, with_hard, False, with_hard, False]
    return q


GENERATIONS = ["thé<|im_end|>", " e f", "z\n", "<|im_start|>pie", "one"]


@pytest.mark.parametrize("script", ["evaluate_baselines.py", "evaluate.py"])
@pytest.mark.parametrize("with_hard", [True, False, None])  # None: the data has no hard column
def test_export_is_byte_identical_to_the_reference(tmp_path, script, with_hard):
    q = _unsorted_questions(with_hard)
    form = "baselines" if script == "evaluate_baselines.py" else "evaluate"
    out, correct, cleaned = _export_case(tmp_path, q, GENERATIONS, metrics_form=form)
    assert cleaned == [clean_generation(g) for g in GENERATIONS]
    assert (out / "predictions.jsonl").read_bytes() == _ref_predictions_jsonl(q, cleaned)
    hard = None if with_hard is None else list(q["hard"])
    assert (out / "metrics.json").read_bytes() == _ref_metrics_json(correct, hard, script)
    first = json.loads((out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()[0])
    expected_keys = ["question", "answer", "prediction", "choices"] + (
        ["hard"] if with_hard is not None else []
    )
    assert list(first) == expected_keys  # no "hard": null where the reference writes no hard
    metrics = json.loads((out / "metrics.json").read_text())
    if script == "evaluate_baselines.py":
        assert list(metrics) == ["accuracy", "accuracy_hard", "num_examples"]
        if not with_hard:
            assert metrics["accuracy_hard"] == 0.0
    else:
        assert ("accuracy_hard" in metrics) == bool(with_hard)


def test_export_follows_the_loaded_datasets_row_order(tmp_path):
    from pv4kit.dataset.load import load
    from pv4kit.scoring.refformat import export_reference
    from pv4kit.scoring.runs import write_generations
    from pv4kit.scoring.score import score_run
    from tests.conftest import FakeEmbedder
    from tests.rawtree import make_tree

    tree = make_tree(tmp_path / "raw", train=[6, 7], test=[126], n_categories=2, per_category=5)
    data = load(tree)
    train = data.split("train")
    assert list(train["question_index"]) != sorted(train["question_index"])  # the split's permuted order
    run = tmp_path / "run"
    gens = data.questions[["user_id", "question_index", "split"]].assign(generation="some answer")
    write_generations(run, gens.sample(frac=1, random_state=1), config={"data": str(tree), "method": "m"})
    score_run(run, data=data, embedder=FakeEmbedder(), cache=False, n_boot=10)
    with pytest.raises(ValueError, match="one split per folder"):
        export_reference(run)
    out = export_reference(run, split="train")  # the data named in config.json
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert [x["question"] for x in lines] == list(train["question"])
    assert (out / "predictions.jsonl").read_bytes() == _ref_predictions_jsonl(
        train, ["some answer"] * len(train)
    )
