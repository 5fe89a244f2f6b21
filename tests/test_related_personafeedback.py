import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pv4kit.related import personafeedback as pf

FIXTURE = Path(__file__).parent / "fixtures" / "personafeedback"


@pytest.fixture(scope="module")
def data():
    return pf.load_personafeedback(FIXTURE)


def test_load_tidy_frame_and_line_number_join(data):
    p = data.pairs
    assert list(p.columns[:7]) == ["set", "tier", "user_id", "persona", "question", "chosen", "rejected"]
    assert len(p) == 24 and set(p["set"]) == {"general", "specific"}  # "spedific" folder normalised
    assert p.groupby(["set", "tier"]).size().tolist() == [4] * 6
    assert data.id_rule == "line"
    # user 2 -> line 2 of all_personas.jsonl (Tom)
    assert p.loc[p["user_id"] == "2", "persona"].iloc[0].startswith("Name: Tom\nDemographics:\n- Age: 67")
    # user 7 has no persona: two rows reported, persona NA
    assert data.unjoined["pair_id"].tolist() == ["general/easy/4", "specific/hard/4"]
    assert p["persona"].isna().sum() == 2


def test_render_persona_sections_in_order():
    text = pf.render_persona(
        {"Bias": "x", "Name": "Ann", "Preference": {"Food": "tea"}, "Personality": ["calm"], "user_id": 3}
    )
    assert text == "Name: Ann\nPersonality:\n- calm\nPreference:\n- Food: tea\nBias: x"


def test_explicit_id_field_wins_and_specific_spelling(tmp_path):
    root = tmp_path / "pf"
    shutil.copytree(FIXTURE, root)
    (root / "data" / "spedific").rename(root / "data" / "specific")
    lines = (root / "persona" / "all_personas.jsonl").read_text().splitlines()
    recs = [dict(json.loads(line), user_id=10 + i) for i, line in enumerate(lines)]  # ids 10..13
    (root / "persona" / "all_personas.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    d = pf.load_personafeedback(root, sets=["specific"])
    assert d.id_rule == "field:user_id" and set(d.pairs["set"]) == {"specific"}
    assert d.pairs["persona"].isna().all() and len(d.unjoined) == 12  # fixture ids 1..4, 7 do not match
    assert pf.load_personafeedback(root, id_rule="line").pairs["persona"].notna().sum() == 22
    with pytest.raises(ValueError, match="id_rule"):
        pf.load_personafeedback(root, id_rule="guess")
    with pytest.raises(ValueError, match="tiers"):
        pf.load_personafeedback(root, tiers=["trivial"])


def test_bad_rows_name_file_and_line(tmp_path):
    root = tmp_path / "pf"
    shutil.copytree(FIXTURE, root)
    with open(root / "data" / "general" / "easy.jsonl", "a") as fh:
        fh.write(json.dumps({"user_id": 1, "question": "q", "chosen": "c"}) + "\n")
    with pytest.raises(ValueError, match=r"easy.jsonl:5: missing field 'reject'"):
        pf.load_personafeedback(root)
    with pytest.raises(FileNotFoundError):
        pf.load_personafeedback(tmp_path / "nowhere")


def test_hub_id_offline_gives_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match=r"(?s)PersonalAILab/PersonaFeedback.*HF_HUB_OFFLINE.*hf download"):
        pf.load_personafeedback("PersonalAILab/PersonaFeedback")


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ("A", "A"),
        (" B.\n", "B"),
        ("**A**", "A"),
        ("(B)", "B"),
        ("Answer: A", "A"),
        ("Final answer: Response B", "B"),
        ("a", None),
        ("A or B", None),
        ("I think A is better", None),
        ("", None),
        (None, None),
        ("AB", None),
        ("C", None),
    ],
)
def test_parse_judge_reply_is_strict(reply, parsed):
    assert pf.parse_judge_reply(reply) == parsed


def test_judge_requests_positions_are_seeded_per_pair(data):
    req = pf.judge_requests(data.pairs, seed=1)
    assert len(req) == 22  # the two unjoined rows are skipped
    assert req.equals(pf.judge_requests(data.pairs, seed=1))
    # stable per pair: a subset gets the same positions
    sub = pf.judge_requests(data.pairs.iloc[5:9], seed=1).set_index("pair_id")["chosen_position"]
    assert sub.equals(req.set_index("pair_id").loc[sub.index, "chosen_position"])
    assert set(req["chosen_position"]) == {"A", "B"}
    assert not req["chosen_position"].equals(pf.judge_requests(data.pairs, seed=2)["chosen_position"])
    row = req.iloc[0]
    user = row["messages"][1]["content"]
    pair = data.pairs.set_index("pair_id").loc[row["pair_id"]]
    first = pair["chosen"] if row["chosen_position"] == "A" else pair["rejected"]
    assert user.index("# Response A\n" + first) < user.index("# Response B")
    assert pair["persona"] in user and pair["question"] in user
    both = pf.judge_requests(data.pairs, both_orders=True)
    assert len(both) == 44 and both.groupby("pair_id")["chosen_position"].apply(set).eq({"A", "B"}).all()


def fake_complete(answer):
    """A fake with pv4kit.llm.complete's signature; answer(messages) -> text."""
    calls = []

    def complete(requests, *, config, cache=None, step=None, progress=True, client=None, **kw):
        calls.append((step, len(requests)))
        return [SimpleNamespace(text=answer(m), error=None, cached=False) for m in requests]

    complete.calls = calls
    return complete


def oracle(pairs, *, garbage_every=0, always=None):
    chosen = set(pairs["chosen"])
    seen = {"n": 0}

    def answer(messages):
        seen["n"] += 1
        if garbage_every and seen["n"] % garbage_every == 0:
            return "Both are fine."
        if always:
            return always
        text = messages[-1]["content"]
        a = text.split("# Response A\n")[1].split("\n\n# Response B")[0]
        return "A" if a in chosen else "B"

    return answer


def test_judge_pairs_accuracy_and_unparsed_count_as_wrong(data):
    fake = fake_complete(oracle(data.pairs, garbage_every=5))
    preds = pf.judge_pairs(data.pairs, config=None, complete_fn=fake)
    assert fake.calls == [("pf_judge", 22)]
    assert preds["unparsed"].sum() == 4 and not preds.loc[preds["unparsed"], "correct"].any()
    assert preds["correct"].sum() == 18
    acc = pf.judge_accuracy(preds)
    overall = acc[(acc["set"] == "all") & (acc["tier"] == "all")].iloc[0]
    assert overall["n"] == 22 and overall["accuracy"] == pytest.approx(18 / 22) and overall["unparsed"] == 4
    assert overall["ci_low"] < 18 / 22 < overall["ci_high"] and overall["chance"] == 0.5
    assert set(acc["order"]) == {"random"}
    boot = pf.judge_accuracy(preds, interval="bootstrap")
    assert boot["accuracy"].equals(acc["accuracy"])


def test_position_bias_with_both_orders(data):
    preds = pf.judge_pairs(
        data.pairs, config=None, both_orders=True, complete_fn=fake_complete(oracle(data.pairs, always="A"))
    )
    bias = pf.position_bias(preds).set_index("set")
    assert bias.loc["all", "acc_chosen_A"] == 1.0 and bias.loc["all", "acc_chosen_B"] == 0.0
    assert bias.loc["all", "bias"] == 1.0 and bias.loc["all", "share_pick_A"] == 1.0
    assert bias.loc["all", "consistent"] == 0.0 and bias.loc["all", "n_pairs"] == 22
    with pytest.raises(ValueError, match="both_orders"):
        pf.position_bias(pf.judge_pairs(data.pairs, config=None, complete_fn=fake_complete(lambda m: "A")))


def test_judge_errors_are_reported_not_right(data):
    def complete(requests, **kw):
        return [SimpleNamespace(text="", error="HTTP 500", cached=False) for _ in requests]

    preds = pf.judge_pairs(data.pairs.head(3), config=None, complete_fn=complete)
    assert not preds["correct"].any() and preds["error"].notna().all() and not preds["unparsed"].any()


def test_judge_through_real_llm_client_and_fake_server(data, tmp_path):
    from pv4kit.llm import LLMConfig
    from tests.llm_server import FakeLLMServer

    answer = oracle(data.pairs)
    with FakeLLMServer(responder=lambda protocol, body, nth: answer(body["messages"])) as srv:
        config = LLMConfig(model="judge", base_url=srv.base_url, protocol="chat", temperature=0.0)
        preds = pf.judge_pairs(data.pairs, config=config, cache=tmp_path / "c.sqlite", progress=False)
        again = pf.judge_pairs(data.pairs, config=config, cache=tmp_path / "c.sqlite", progress=False)
    assert preds["correct"].all() and again["cached"].all()


def test_pv4_score_nearest_to_chosen(data, make_fake_embedder):
    pairs = data.pairs[data.pairs["persona"].notna()].head(3)
    gens = pd.DataFrame(
        {"pair_id": pairs["pair_id"], "generation": [pairs["chosen"].iloc[0], pairs["rejected"].iloc[1], ""]}
    )
    out = pf.pv4_score(pairs, gens, embedder=make_fake_embedder(dim=16), cache=None)
    assert out["correct"].tolist() == [True, False, False]
    assert out["failed"].tolist() == [False, False, True]
    assert out["sim_chosen"].iloc[0] == pytest.approx(1.0, abs=1e-6)


def test_generate_answers_then_score(data):
    pairs = data.pairs[data.pairs["persona"].notna()].head(4)
    chosen = dict(zip(pairs["question"], pairs["chosen"], strict=True))
    fake = fake_complete(lambda m: chosen[m[-1]["content"].split("My question: ")[1]])
    gens = pf.generate_answers(pairs, config=None, complete_fn=fake)
    assert fake.calls == [("pf_generate", 4)]
    assert "About me:\nName:" in pf.generation_messages("Name: X", "q?")[1]["content"]

    def embed(texts):
        return np.array([[len(t), t.count("e") + 1.0, t.count(" ") + 1.0] for t in texts])

    assert pf.pv4_score(pairs, gens, embedder=embed, cache=None)["correct"].all()
