import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pv4kit.related import recenter as rc

FIXTURE = Path(__file__).parent / "fixtures" / "recenter"


def _copy(tmp_path):
    root = tmp_path / "rc"
    shutil.copytree(FIXTURE, root)
    return root


def embed(texts):
    # deterministic toy embedding: letter counts
    return np.array([[t.lower().count(c) + 0.1 for c in "aeiouy"] for t in texts])


@pytest.fixture(scope="module")
def s1():
    return rc.load_stage1(FIXTURE)


@pytest.fixture(scope="module")
def s2():
    return rc.load_stage2(FIXTURE)


@pytest.fixture(scope="module")
def ratings():
    return rc.stage3_ratings(rc.load_stage3(FIXTURE))


def test_stage1_load_and_acceptance(s1):
    assert len(s1.items) == 5 and len(s1.annotations) == 13  # ann03 did not judge item 1
    acc = rc.stage1_acceptance(s1)
    assert acc["accepted"].tolist() == [True, True, False, False, False]  # 1-1 split is not accepted
    assert acc["n_ratings"].tolist() == [3, 3, 3, 2, 2] and acc["matches_release"].all()


def test_stage1_agreement_by_hand(s1):
    ag = rc.stage1_agreement(s1).set_index(["metric", "scale", "raters"])["value"]
    three = "ok/unsure/bad"
    # complete items: counts (bad,unsure,ok) [0,0,3] [0,1,2] [2,1,0] -> (5/9 - 33/81) / (48/81) = 1/4
    assert ag["fleiss_kappa", three, "all"] == pytest.approx(0.25)
    # coincidences over 5 units: n_ok=6, n_unsure=4, n_bad=3, D_o = 6/13, D_e = 108/156 -> 1/3
    assert ag["krippendorff_alpha", three, "all"] == pytest.approx(1 / 3)
    # ann01 [ok ok bad ok unsure] vs ann02 [ok unsure bad bad unsure]: p_o=.6, p_e=7/25 -> 4/9
    assert ag["cohen_kappa", three, "ann01-ann02"] == pytest.approx(4 / 9)
    # binary ok-vs-not: ann01 [1 1 0 1 0] ann02 [1 0 0 0 0]: p_o=.6, p_e=(3*1+2*4)/25 -> (15-11)/(25-11)
    assert ag["cohen_kappa", "ok vs not", "ann01-ann02"] == pytest.approx(4 / 14)
    assert ("cohen_kappa_linear", three, "ann01-ann02") in ag.index


def test_stage1_confidence_is_a_float(s1, tmp_path):
    assert s1.items["confidence"].dtype == float and s1.items["confidence"].tolist()[:2] == [0.9, 0.85]
    root = _copy(tmp_path)
    path = root / "stage1" / "items.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    recs[1]["merged_attributes"][0]["confidence"] = "high"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(
        ValueError, match=r"items.jsonl:2: merged_attributes\[0\].confidence: expected a number"
    ):
        rc.load_stage1(root)


def test_stage2_labels_collapse_and_ties_are_relevant(s2):
    labels = rc.stage2_labels(s2)
    assert len(labels) == len(s2.items) == 12  # every (item, attribute) pair is kept
    rated = labels[labels["human"].notna()]
    assert rated["human"].tolist() == [True, False, False, False, True, False, True, False, True, False, True]
    tie = labels[(labels["item_index"] == 3) & (labels["attribute"] == "Programs in Python")].iloc[0]
    assert tie["n_ratings"] == 2 and tie["n_relevant"] == 1 and tie["human"]
    assert (rated["human"] == rated["ground_truth"].astype(bool)).all()
    # item 4 shares prompt 0 and the text "Enjoys hiking" with item 0: the tool showed it once, under item 0
    unrated = labels[labels["human"].isna()]
    assert unrated[["item_index", "attribute", "n_ratings"]].values.tolist() == [[4, "Enjoys hiking", 0]]


def test_relevance_binarised_as_the_authors_do():
    # convert_task2_to_task3.py: necessary_explicit | necessary_implicit | optional -> relevant
    for label in (
        "necessary_explicit",
        "necessary_implicit",
        "optional",
        "Necessary-Explicit",
        True,
        1,
        "YES",
    ):
        assert rc.relevance_label(label) is True
    for label in ("unnecessary", "forbidden", False, 0, "no"):
        assert rc.relevance_label(label) is False
    for label in ("none", "", None, float("nan")):
        assert rc.relevance_label(label) is None
    with pytest.raises(ValueError, match="unknown relevance label"):
        rc.relevance_label("maybe", where="f:1")
    with pytest.raises(ValueError, match="f:1: relevance 3 is neither 0 nor 1"):
        rc.relevance_label(3, where="f:1")


def test_stage2_reads_rating_and_relevant(s2, tmp_path):
    ann = s2.annotations.set_index(["annotator", "item_index", "attribute"])
    # five-way labels under "rating" (ann04, task-2 records) and under "relevant" (ann06)
    assert ann.loc[("ann04", 1, "Works as a software engineer"), "label"] == "forbidden"
    assert ann.loc[("ann06", 0, "Enjoys hiking"), ["label", "relevant"]].tolist() == ["optional", True]
    assert ann.loc[("ann05", 0, "Is vegetarian"), ["label", "relevant"]].tolist() == [True, True]
    # ann06's item-3 labels are none / null / "": missing, so no row
    assert ("ann06", 3) not in set(
        zip(s2.annotations["annotator"], s2.annotations["item_index"], strict=True)
    )
    root = _copy(tmp_path)
    path = root / "stage2" / "annotations" / "ann05.jsonl"
    rec = {
        "index": 2,
        "relevance_judgments": [{"attribute": "Has a dog", "rating": "optional", "relevant": False}],
    }
    with open(path, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    with pytest.raises(
        ValueError, match=r"ann05.jsonl:5: judgment of 'Has a dog': rating 'optional' and relevant"
    ):
        rc.load_stage2(root)


def test_stage2_coverage_counts_unrated_pairs(s2):
    cov = s2.coverage.set_index("rater")
    cols = ["n_pairs", "n_rated", "n_unrated", "n_missing_label", "n_orphan"]
    assert cov.loc["ann04", cols].tolist() == [12, 11, 1, 0, 0]
    assert cov.loc["ann06", cols].tolist() == [12, 8, 4, 3, 0]  # none, null and "" are missing labels
    assert cov.loc["human (any)", cols].tolist() == [12, 11, 1, 3, 0]
    assert cov.loc["llm-b", cols].tolist() == [12, 9, 3, 1, 0]  # one unparsed answer
    assert cov.loc["llm (any)", "n_unrated"] == 1
    assert s2.judgments.set_index("model")["model_name"].loc["llm-a"].iloc[0] == "vendor/LLM-A-Instruct"


def test_stage2_yes_rates(s2):
    y = rc.stage2_yes_rates(s2).set_index("rater")
    assert y.loc["llm-a", ["n", "n_yes"]].tolist() == [11, 6]
    assert y.loc["llm-b", ["n", "n_yes"]].tolist() == [9, 5]
    assert y.loc["ann06", ["n", "n_yes"]].tolist() == [8, 3]
    assert y.loc["llm (mean)", "yes_rate"] == pytest.approx((6 / 11 + 5 / 9) / 2)


def test_stage2_metrics_by_hand(s2):
    preds = rc.stage2_predictions(s2, embedder=embed, cache=None, seed=0)
    m = rc.stage2_metrics(preds, subset="all").set_index("method")
    # llm-a: tp 4 fp 2 fn 1 tn 4
    assert m.loc["llm-a", ["tp", "fp", "fn", "tn"]].tolist() == [4, 2, 1, 4]
    assert m.loc["llm-a", "precision"] == pytest.approx(2 / 3) and m.loc["llm-a", "recall"] == pytest.approx(
        0.8
    )
    assert m.loc["llm-a", "f1"] == pytest.approx(8 / 11)
    # llm-b: two judgments missing (one absent, one unparsed) -> predicted not relevant, counted
    assert m.loc["llm-b", "n_missing"] == 2 and m.loc["llm-b", "f1"] == pytest.approx(0.8)
    assert set(m.index) == {"llm-a", "llm-b", "coarse_filter", "embedding", "bm25"}
    # thresholds come from the tune prompts only; test metrics use the other prompts
    t = rc.stage2_metrics(preds)
    assert (t["subset"] == "test").all() and (t["n"] < 11).all()
    tune = preds[(preds["split"] == "tune") & (preds["method"] == "bm25")]
    assert tune["threshold"].iloc[0] == rc.choose_threshold(tune["score"], tune["human"])
    assert preds.equals(rc.stage2_predictions(s2, embedder=embed, cache=None, seed=0))


def test_choose_threshold():
    assert rc.choose_threshold(np.array([0.9, 0.8, 0.3, 0.1]), np.array([1, 1, 0, 1])) == 0.1  # F1 6/7 vs 4/5
    assert rc.choose_threshold(np.array([0.9, 0.8, 0.3]), np.array([1, 1, 0])) == 0.8


def test_stage2_agreement_by_hand(s2):
    ag = rc.stage2_agreement(s2)
    assert list(ag.columns) == ["group", "statistic", "rater_a", "rater_b", "value", "n", "agreement"]
    assert set(ag["statistic"]) == {"cohen_kappa", "fleiss_kappa", "krippendorff_alpha"}
    hh = ag[(ag["rater_a"] == "ann04") & (ag["rater_b"] == "ann05")].iloc[0]
    # 9/11 agree; yes-rates 4/11 and 6/11 -> p_e = 59/121 -> kappa = 40/62
    assert hh["group"] == "human-human" and hh["statistic"] == "cohen_kappa" and hh["n"] == 11
    assert hh["agreement"] == pytest.approx(9 / 11) and hh["value"] == pytest.approx(40 / 62)
    assert set(ag["group"]) >= {"human-human", "llm-llm", "llm-human", "llm-majority", "human (all)"}
    multi = ag[ag["statistic"] != "cohen_kappa"]
    assert set(multi["group"]) == {"human (all)", "llm (all)"} and len(multi) == 4
    assert multi[["rater_a", "rater_b"]].isna().all().all() and multi["agreement"].isna().all()
    assert ag[ag["statistic"] == "cohen_kappa"][["rater_a", "rater_b"]].notna().all().all()


def test_stage3_summary_distribution_and_spearman(ratings):
    assert len(ratings) == 14 + 10
    s = rc.stage3_summary(ratings).set_index("rater")
    assert s.loc["humans (pooled)", "n"] == 14
    assert s.loc["humans (pooled)", "mean_rating"] == pytest.approx(43 / 14)
    assert s.loc["humans (pooled)", "share_not_preferred"] == pytest.approx(8 / 14)
    assert s.loc["human mean per pair", "share_not_preferred"] == pytest.approx(3 / 5)
    dist = rc.stage3_distribution(ratings)
    pooled = dist[dist["rater"] == "humans (pooled)"]["count"].tolist()
    assert pooled == [2, 3, 3, 4, 2]
    corr = rc.stage3_correlation(ratings).set_index("rater")
    # judge-x ranks [1,2,3,4.5,4.5] vs human-mean ranks [1..5]: 9.5 / sqrt(9.5 * 10)
    assert corr.loc["judge-x", "spearman_rho"] == pytest.approx(9.5 / np.sqrt(95))
    assert corr.loc["judge-x", "n"] == 5 and corr.loc["ann06", "n"] == 4


def test_stage3_generations_joined_by_prompt_id_and_model_tag():
    d = rc.load_stage3(FIXTURE)
    g = d.generations
    assert len(g) == 7 and sorted(g["condition"].unique()) == ["gt_attributes", "no_context"]
    assert set(g["model_tag"]) == {"llama-3.3-70b", "gpt-5.4"}
    assert set(g.loc[g["model_tag"] == "llama-3.3-70b", "model_name"]) == {
        "meta-llama/Llama-3.3-70B-Instruct"
    }
    joined = g.set_index(["prompt_id", "condition", "model_tag"])["item_index"]
    assert joined.loc[("u1_1", "no_context", "llama-3.3-70b")] == 1
    assert joined.loc[("u2_2", "gt_attributes", "gpt-5.4")] == 2
    assert pd.isna(joined.loc[("u9_5", "gt_attributes", "llama-3.3-70b")])  # no item has this prompt
    assert g["matches_item"].dropna().all() and g["matches_item"].notna().sum() == 5


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mode", "no_context", r"gt_attributes_llama-3.3-70b.jsonl:2: record mode 'no_context' but the file"),
        ("model", "gpt-5.4", r"gt_attributes_llama-3.3-70b.jsonl:2: record model 'gpt-5.4' but the file"),
    ],
)
def test_stage3_generation_disagreeing_with_its_file_name(tmp_path, field, value, message):
    root = _copy(tmp_path)
    path = root / "stage3" / "generations" / "gt_attributes_llama-3.3-70b.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    recs[1][field] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ValueError, match=message):
        rc.load_stage3(root)


def test_stage3_generation_file_names(tmp_path):
    root = _copy(tmp_path)
    gens = root / "stage3" / "generations"
    (gens / "gt_attributes_gpt-5.4.jsonl").rename(gens / "eval_results_task5_gt_attributes_gpt-5.4.jsonl")
    assert "gpt-5.4" in set(rc.load_stage3(root).generations["model_tag"])  # the tool's file names
    (gens / "no_context_llama-3.3-70b.jsonl").rename(gens / "generic-llama.jsonl")
    with pytest.raises(ValueError, match=r"generic-llama.jsonl: file name is not <condition>_<model>.jsonl"):
        rc.load_stage3(root)


def test_same_model_tags_and_record_names():
    # file-name tags beside the generator names the authors' records carry
    assert rc.same_model("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct")
    assert rc.same_model("gemma-4-31b-it", "google/gemma-4-31B-it")
    assert rc.same_model("gpt-5.4", "gpt-5.4")
    assert rc.same_model(
        "claude-sonnet-4-6",
        "arn:aws:bedrock:us-east-2:000000000000:inference-profile/us.anthropic.claude-sonnet-4-6",
    )
    assert not rc.same_model("llama-3.3-70b", "meta-llama/Llama-3.1-8B-Instruct")
    assert not rc.same_model("gpt-5.4", "gpt-5.4-mini")


def test_stage3_pairs_keep_unrated_and_coverage():
    d = rc.load_stage3(FIXTURE)
    pairs = rc.stage3_pairs(d)
    assert len(pairs) == len(d.items) == 6
    spicy = pairs[pairs["attribute"] == "Likes spicy food"].iloc[0]
    assert spicy["n_human"] == 0 and pd.isna(spicy["human_mean"]) and spicy["n_llm"] == 0
    dog = pairs[(pairs["item_index"] == 2) & (pairs["attribute"] == "Has a dog")].iloc[0]
    assert dog["n_human"] == 2 and dog["human_mean"] == pytest.approx(1.5)  # ann06 left it null
    cov = d.coverage.set_index("rater")
    cols = ["n_pairs", "n_rated", "n_unrated", "n_missing_label", "n_orphan"]
    assert cov.loc["ann06", cols].tolist() == [6, 4, 2, 1, 0]
    assert cov.loc["human (any)", cols].tolist() == [6, 5, 1, 1, 0]


def test_stage3_display_assignment_and_orientation(tmp_path):
    d = rc.load_stage3(FIXTURE)
    side = d.annotations.groupby("annotator")["personalised_side"].agg(lambda s: "".join(s))
    assert side.to_dict() == {"ann04": "BBBBB", "ann05": "AAAAA", "ann06": "AABB"}
    assert rc.personalised_side({"personalized": "B", "no_context": "A"}) == "B"
    assert rc.personalised_side(["gt_attributes", "no_context"]) == "A"
    assert rc.personalised_side(None) is None
    ratings = rc.stage3_ratings(d)
    o = rc.stage3_orientation(ratings).set_index(["kind", "personalised_side"])
    # humans: side B ratings 5,2,4,3,1,3,4 ; side A ratings 4,3,5,2,2,4,1
    assert o.loc[("human", "B"), ["n", "mean_rating"]].tolist() == [7, pytest.approx(22 / 7)]
    assert o.loc[("human", "A"), ["n", "mean_rating"]].tolist() == [7, pytest.approx(21 / 7)]
    root = _copy(tmp_path)
    with open(root / "stage3" / "annotations" / "ann04.jsonl", "a") as fh:
        fh.write(
            json.dumps(
                {"index": 1, "ratings": {"Is vegetarian": 4}, "display_assignment": {"A": "x", "B": "y"}}
            )
        )
    with pytest.raises(
        ValueError, match=r"ann04.jsonl:4: display_assignment \{'A': 'x', 'B': 'y'\} not understood"
    ):
        rc.load_stage3(root)


def test_stage3_bad_rating(tmp_path):
    root = _copy(tmp_path)
    with open(root / "stage3" / "annotations" / "ann04.jsonl", "a") as fh:
        fh.write(json.dumps({"index": 1, "ratings": {"Is vegetarian": 7}}) + "\n")
    with pytest.raises(ValueError, match=r"ann04.jsonl:4: rating 7"):
        rc.load_stage3(root)


@pytest.mark.parametrize(
    ("loader", "relpath", "record", "fields"),
    [
        (
            rc.load_stage1,
            "stage1/items.jsonl",
            {"item_index": 9, "attributes": []},
            "['attributes', 'item_index']",
        ),
        (rc.load_stage1, "stage1/annotations/ann01.jsonl", {"judgments": ["ok"]}, "['judgments']"),
        (rc.load_stage2, "stage2/items.jsonl", {"item_index": 9, "prompt": "p"}, "['item_index', 'prompt']"),
        (rc.load_stage2, "stage2/annotations/ann04.jsonl", {"index": 0, "labels": {}}, "['index', 'labels']"),
        (
            rc.load_stage2,
            "stage2/llm_judgments/llm-a.jsonl",
            {"sample_index": 0, "answer": "YES"},
            "['answer', 'sample_index']",
        ),
        (rc.load_stage3, "stage3/items.jsonl", {"item_index": 9, "attrs": []}, "['attrs', 'item_index']"),
        (
            rc.load_stage3,
            "stage3/llm_judgments/judge-x.jsonl",
            {"sample_index": 0, "score": 4},
            "['sample_index', 'score']",
        ),
        (
            rc.load_stage3,
            "stage3/generations/no_context_llama-3.3-70b.jsonl",
            {"id": "u1_0", "text": "t"},
            "['id', 'text']",
        ),
    ],
)
def test_unknown_shape_names_file_line_and_fields(tmp_path, loader, relpath, record, fields):
    root = _copy(tmp_path)
    path = root / relpath
    line = len(path.read_text().splitlines()) + 1
    with open(path, "a") as fh:
        fh.write(json.dumps(record) + "\n")
    name = relpath.rsplit("/", 1)[-1]
    with pytest.raises(
        ValueError,
        match=rf"{re.escape(name)}:{line}: not a .* record: expected .*; found fields {re.escape(fields)}",
    ):
        loader(root)


def test_missing_stage_and_offline_hub(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="stage2/items.jsonl"):
        rc.load_stage2(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match="leczhang/recenter-personalization"):
        rc.load_stage1("leczhang/recenter-personalization")


def test_tables_the_cli_prints_come_from_the_library(s1, s2):
    acc = rc.stage1_acceptance(s1)
    by_source = rc.acceptance_by_source(acc)
    assert list(by_source.columns) == ["source", "n", "accepted"]
    assert by_source["n"].sum() == len(acc)
    for src, part in acc.groupby("source", dropna=False):
        row = by_source[by_source["source"].isna()] if pd.isna(src) else by_source[by_source["source"] == src]
        assert row["accepted"].item() == pytest.approx(part["accepted"].mean())
    preds = rc.stage2_predictions(s2, embedder=embed, cache=None, seed=0)
    both = rc.stage2_metrics(preds, subset=["test", "all"])
    expected = pd.concat([rc.stage2_metrics(preds, subset=s) for s in ("test", "all")], ignore_index=True)
    pd.testing.assert_frame_equal(both, expected)
    with pytest.raises(ValueError, match="subset"):
        rc.stage2_metrics(preds, subset=["test", "dev"])
    ag = rc.stage2_agreement(s2)
    summary = rc.agreement_summary(ag).set_index("group")
    hh = ag[(ag["group"] == "human-human") & (ag["statistic"] == "cohen_kappa")]
    assert summary.loc["human-human", "cohen_kappa"] == pytest.approx(hh["value"].mean())
    assert summary.loc["human-human", "agreement"] == pytest.approx(hh["agreement"].mean())
    assert list(summary.index) == list(dict.fromkeys(ag.loc[ag["statistic"] == "cohen_kappa", "group"]))


def test_the_recenter_module_defines_its_names():
    assert rc.load_stage2.__module__ == rc.relevance_label.__module__ == "pv4kit.related.recenter"
    with pytest.raises(AttributeError, match="no attribute 'load_stage4'"):
        rc.load_stage4  # noqa: B018


@pytest.mark.parametrize(
    ("relpath", "loader"),
    [
        ("stage1/annotations/ann01.jsonl", rc.load_stage1),
        ("stage1/items.jsonl", rc.load_stage1),
        ("stage2/annotations/ann04.jsonl", rc.load_stage2),
        ("stage2/llm_judgments/llm-a.jsonl", rc.load_stage2),
        ("stage3/annotations/ann04.jsonl", rc.load_stage3),
    ],
)
def test_a_duplicated_record_names_the_file_and_both_lines(tmp_path, relpath, loader):
    # the same item twice in one file: stage 1 failed in pivot ("Index contains duplicate entries"),
    # stage 2 kept the first silently
    root = _copy(tmp_path)
    path = root / relpath
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[0]]) + "\n")
    message = (
        rf"{re.escape(str(path))}:{len(lines) + 1}: a second .* record for item \d+ \(the first is line 1\)"
    )
    with pytest.raises(ValueError, match=message):
        loader(root)


def test_cli_recenter_duplicate_record_is_one_line(tmp_path, capsys):
    from pv4kit.cli import main

    root = _copy(tmp_path)
    path = root / "stage1" / "annotations" / "ann02.jsonl"
    path.write_text(path.read_text() + path.read_text().splitlines()[0] + "\n")
    assert main(["recenter", "stage1", "--data", str(root), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"{path}:" in err and "a second" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
