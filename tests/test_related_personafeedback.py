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


def test_load_tidy_frame_both_layouts_agree(data):
    p = data.pairs
    assert list(p.columns[:7]) == ["set", "tier", "user_id", "persona", "question", "chosen", "rejected"]
    assert len(p) == 24 and set(p["set"]) == {"general", "specific"}  # "spedific" folder normalised
    assert p.groupby(["set", "tier"]).size().tolist() == [4] * 6
    # both layouts are in the fixture: the per-persona files win, ids from their names, and they agree
    assert data.layouts_found == ["files", "lines"] and data.layout == "files" and data.id_rule == "file"
    assert data.layout_disagreements.empty
    # user 2 -> persona/2.json (Tom, pretty-printed over many lines)
    assert p.loc[p["user_id"] == "2", "persona"].iloc[0].startswith("Name: Tom\nDemographics:\n- Age: 67")
    # user 7 has no persona: two rows reported, persona NA; persona 5 is used by no row
    assert data.unjoined["pair_id"].tolist() == ["general/easy/4", "specific/hard/4"]
    assert p["persona"].isna().sum() == 2
    assert data.unused_personas["persona_key"].tolist() == ["5"]
    assert data.unused_personas["file"].tolist() == ["persona/5.json"]


def test_counts_per_set_and_tier(data):
    c = data.counts
    assert list(c.columns) == ["set", "tier", "n_rows", "n_joined", "n_unjoined"]
    assert c[["set", "tier"]].values.tolist()[:3] == [
        ["general", "easy"],
        ["general", "medium"],
        ["general", "hard"],
    ]
    total = c[c["set"] == "all"].iloc[0]
    assert (total["n_rows"], total["n_joined"], total["n_unjoined"]) == (24, 22, 2)
    ge = c[(c["set"] == "general") & (c["tier"] == "easy")].iloc[0]
    sh = c[(c["set"] == "specific") & (c["tier"] == "hard")].iloc[0]
    assert ge["n_unjoined"] == 1 and sh["n_unjoined"] == 1 and c["n_rows"].sum() == 48
    assert pf.PAPER_TOTAL == 8298


def _copy(tmp_path):
    root = tmp_path / "pf"
    shutil.copytree(FIXTURE, root)
    return root


def test_each_layout_alone_gives_the_same_join(tmp_path, data):
    files_only, lines_only = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    (files_only / "persona" / "all_personas.jsonl").unlink()
    for path in (lines_only / "persona").glob("*.json"):
        path.unlink()
    f, l_ = pf.load_personafeedback(files_only), pf.load_personafeedback(lines_only)
    assert (f.layout, f.id_rule, f.layouts_found) == ("files", "file", ["files"])
    assert (l_.layout, l_.id_rule, l_.layouts_found) == ("lines", "line", ["lines"])
    # nested sections render the same whichever layout they came from
    assert f.pairs["persona"].equals(l_.pairs["persona"]) and f.pairs["persona"].equals(data.pairs["persona"])
    assert f.personas["persona"].tolist() == l_.personas["persona"].tolist()
    with pytest.raises(FileNotFoundError, match="layout='lines'"):
        pf.load_personafeedback(files_only, layout="lines")
    for path in (files_only / "persona").glob("*.json"):
        path.unlink()
    with pytest.raises(FileNotFoundError, match=r"persona/<N>.json files nor persona/all_personas.jsonl"):
        pf.load_personafeedback(files_only)


def test_layouts_that_disagree_are_reported(tmp_path):
    root = _copy(tmp_path)
    rec = json.loads((root / "persona" / "3.json").read_text())
    rec["Bias"] = "changed"
    (root / "persona" / "3.json").write_text(json.dumps(rec))
    (root / "persona" / "5.json").unlink()
    (root / "persona" / "9.json").write_text(json.dumps({"Name": "Extra"}))
    d = pf.load_personafeedback(root)
    dis = d.layout_disagreements
    assert dis[["persona_key", "problem"]].values.tolist() == [
        ["3", "different"],
        ["5", "only_in_lines"],
        ["9", "only_in_files"],
    ]
    assert dis.loc[dis["persona_key"] == "3", "file"].iloc[0] == "persona/3.json"
    assert d.pairs.loc[d.pairs["user_id"] == "3", "persona"].iloc[0].endswith("Bias: changed")
    assert (
        pf.load_personafeedback(root, layout="lines")
        .pairs.loc[lambda p: p["user_id"] == "3", "persona"]
        .iloc[0]
        .endswith("Bias: sceptical of supplements")
    )


def test_render_persona_sections_in_order():
    text = pf.render_persona(
        {"Bias": "x", "Name": "Ann", "Preference": {"Food": "tea"}, "Personality": ["calm"], "user_id": 3}
    )
    assert text == "Name: Ann\nPersonality:\n- calm\nPreference:\n- Food: tea\nBias: x"


def test_render_persona_nested_sections_are_readable():
    text = pf.render_persona(
        {
            "Name": "Ann",
            "Demographics": {"Location": {"City": "Oslo", "Country": "Norway"}, "Age": 40, "Pets": []},
            "Preference": {"Food": ["tea", "rye bread"], "Media": [{"kind": "podcast", "topic": "history"}]},
            "Bias": ["a", "b"],
        }
    )
    assert text == (
        "Name: Ann\nDemographics:\n- Location:\n  - City: Oslo\n  - Country: Norway\n- Age: 40\n"
        "Preference:\n- Food: tea, rye bread\n- Media: kind: podcast; topic: history\nBias:\n- a\n- b"
    )
    assert "{" not in text and "[" not in text


def test_explicit_id_field_wins_and_specific_spelling(tmp_path):
    root = _copy(tmp_path)
    (root / "data" / "spedific").rename(root / "data" / "specific")
    lines = (root / "persona" / "all_personas.jsonl").read_text().splitlines()
    recs = [dict(json.loads(line), user_id=10 + i) for i, line in enumerate(lines)]  # ids 10..14
    (root / "persona" / "all_personas.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    d = pf.load_personafeedback(root, sets=["specific"], layout="lines")
    assert d.id_rule == "field:user_id" and set(d.pairs["set"]) == {"specific"}
    assert d.pairs["persona"].isna().all() and len(d.unjoined) == 12  # fixture ids 1..4, 7 do not match
    assert pf.load_personafeedback(root, id_rule="line", layout="lines").pairs["persona"].notna().sum() == 22
    # with both layouts, the id field rule reports every persona as a disagreement
    assert set(pf.load_personafeedback(root).layout_disagreements["problem"]) == {
        "only_in_files",
        "only_in_lines",
    }
    with pytest.raises(ValueError, match="id_rule"):
        pf.load_personafeedback(root, id_rule="guess")
    with pytest.raises(ValueError, match="layout"):
        pf.load_personafeedback(root, layout="both")
    with pytest.raises(ValueError, match="tiers"):
        pf.load_personafeedback(root, tiers=["trivial"])


def test_bad_rows_name_file_and_line(tmp_path):
    root = _copy(tmp_path)
    with open(root / "data" / "general" / "easy.jsonl", "a") as fh:
        fh.write(json.dumps({"user_id": 1, "question": "q", "chosen": "c"}) + "\n")
    with pytest.raises(
        ValueError,
        match=r"easy.jsonl:5: missing field 'reject'.*found fields \['chosen', 'question', 'user_id'\]",
    ):
        pf.load_personafeedback(root)
    with pytest.raises(FileNotFoundError):
        pf.load_personafeedback(tmp_path / "nowhere")


def test_unknown_shape_names_file_line_and_fields(tmp_path):
    root = _copy(tmp_path)
    with open(root / "data" / "spedific" / "medium.jsonl", "a") as fh:
        fh.write(json.dumps({"uid": 1, "prompt": "q", "response_a": "a", "response_b": "b"}) + "\n")
    with pytest.raises(
        ValueError,
        match=r"medium.jsonl:5: missing field 'user_id'.*\['prompt', 'response_a', 'response_b', 'uid'\]",
    ):
        pf.load_personafeedback(root)
    root = _copy(tmp_path / "b")
    (root / "persona" / "2.json").write_text(json.dumps({"persona": "Tom", "age": 67}, indent=2))
    with pytest.raises(
        ValueError, match=r"persona/2.json:1: not a persona record.*found fields \['age', 'persona'\]"
    ):
        pf.load_personafeedback(root)
    (root / "persona" / "2.json").write_text('{"Name": "Tom",\n "Bias": }')
    with pytest.raises(ValueError, match=r"persona/2.json:2: not one JSON object"):
        pf.load_personafeedback(root)
    (root / "persona" / "2.json").write_text(json.dumps({"user_id": 3, "Name": "Tom"}))
    with pytest.raises(ValueError, match=r"persona/2.json:1: user_id 3 but the file name says the id is 2"):
        pf.load_personafeedback(root)
    (root / "persona" / "2.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"persona/2.json:1: expected a persona object, found list"):
        pf.load_personafeedback(root)


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
    """A fake with pv4kit.llm.client.complete's signature; answer(messages) -> text."""
    calls = []

    def complete(requests, *, llm, cache=None, step=None, progress=True, client=None, **kw):
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
    from pv4kit.llm.config import LLMConfig
    from tests.llm_server import FakeLLMServer

    answer = oracle(data.pairs)
    with FakeLLMServer(responder=lambda protocol, body, nth: answer(body["messages"])) as srv:
        config = LLMConfig(model="judge", base_url=srv.base_url, protocol="chat", temperature=0.0)
        preds = pf.judge_pairs(data.pairs, config=config, cache=tmp_path / "c.sqlite", progress=False)
        again = pf.judge_pairs(data.pairs, config=config, cache=tmp_path / "c.sqlite", progress=False)
    assert preds["correct"].all() and again["cached"].all()


def test_judge_against_a_server_answering_errors_with_200_fails(data, tmp_path, capsys):
    """A gateway answering HTTP 200 + an error object: errored rows and exit 1, not 0% accuracy."""
    from pathlib import Path

    from pv4kit.cli import main
    from tests.llm_server import FakeLLMServer, Reply

    fixture = Path(__file__).parent / "fixtures" / "personafeedback"
    gateway = Reply(raw='{"error": {"message": "upstream model overloaded", "type": "server_error"}}')
    with FakeLLMServer(responder=lambda protocol, body, nth: gateway) as srv:
        args = ["-q", "personafeedback", "judge", "--data", str(fixture), "--model", "m", "--limit", "2"]
        args += ["--base-url", srv.base_url, "--cache", str(tmp_path / "c.sqlite")]
        args += ["--out", str(tmp_path / "j"), "--max-retries", "0"]
        rc = main(args)
    out = capsys.readouterr().out
    assert rc == 1 and "failed" in out and "upstream model overloaded" in out
    preds = pd.read_csv(tmp_path / "j" / "predictions.csv")
    assert preds["error"].str.contains("upstream model overloaded").all()


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


def test_encode_gives_unit_rows_and_keeps_zero_rows():
    from pv4kit.related._common import encode

    out = encode(["ab", "", "c"], embedder=lambda texts: [[3.0, 4.0], [0.0, 0.0], [0.0, 2.0]])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [0.0, 1.0]], rtol=1e-6)


def test_head_per_group_caps_each_set_and_tier():
    pairs = pf.load_personafeedback(FIXTURE).pairs
    capped = pf.head_per_group(pairs, 1)
    assert capped.groupby(["set", "tier"]).size().max() == 1
    assert len(capped) == pairs.groupby(["set", "tier"]).ngroups
    assert pf.head_per_group(pairs, 0) is pairs
    with pytest.raises(ValueError, match="limit"):
        pf.head_per_group(pairs, -1)


def test_position_bias_with_failed_requests(data):
    def complete(requests, **kw):  # every third request fails: its pick is not "A"
        return [
            SimpleNamespace(text="A", error=None if i % 3 else "HTTP 500", cached=False)
            for i in range(len(requests))
        ]

    preds = pf.judge_pairs(data.pairs, config=None, both_orders=True, complete_fn=complete)
    ok = preds["error"].isna()
    assert preds.loc[ok, "parsed"].eq("A").all() and not preds["unparsed"].any() and 0 < ok.sum() < len(preds)
    bias = pf.position_bias(preds).set_index("set")
    assert bias.loc["all", "share_pick_A"] == pytest.approx(preds["parsed"].eq("A").mean())
