import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pv4kit.related import recenter as rc

FIXTURE = Path(__file__).parent / "fixtures" / "recenter"


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


def test_stage2_labels_collapse_and_ties_are_relevant(s2):
    labels = rc.stage2_labels(s2)
    assert labels["human"].tolist() == [
        True,
        False,
        False,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
        True,
    ]
    tie = labels[(labels["item_index"] == 3) & (labels["attribute"] == "Programs in Python")].iloc[0]
    assert tie["n_ratings"] == 2 and tie["n_relevant"] == 1 and tie["human"]
    assert (labels["human"] == labels["ground_truth"].astype(bool)).all()
    assert rc.relevance_label("Necessary-Explicit") and not rc.relevance_label("forbidden")
    with pytest.raises(ValueError, match="unknown relevance label"):
        rc.relevance_label("maybe", where="f:1")


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


def test_stage3_generations_and_bad_rating(tmp_path):
    d = rc.load_stage3(FIXTURE)
    assert sorted(d.generations["condition"].unique()) == ["gt_attributes", "no_context"]
    assert set(d.generations["model"]) == {"llama-3.3-70b"}
    root = tmp_path / "rc"
    shutil.copytree(FIXTURE, root)
    with open(root / "stage3" / "annotations" / "ann04.jsonl", "a") as fh:
        fh.write(json.dumps({"index": 1, "ratings": {"Is vegetarian": 7}}) + "\n")
    with pytest.raises(ValueError, match=r"ann04.jsonl:4: rating 7"):
        rc.load_stage3(root)


def test_missing_stage_and_offline_hub(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="stage2/items.jsonl"):
        rc.load_stage2(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match="leczhang/recenter-personalization"):
        rc.load_stage1("leczhang/recenter-personalization")
