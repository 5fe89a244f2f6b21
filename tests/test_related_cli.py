import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pv4kit.cli import main
from pv4kit.cli import related as cli_related

FIX = Path(__file__).parent / "fixtures"


def toy_embed(texts):
    return np.array([[t.lower().count(c) + 0.1 for c in "aeiouyst"] for t in texts])


@pytest.fixture
def no_model(monkeypatch):
    monkeypatch.setattr(cli_related, "_embedding", lambda args: {"embedder": toy_embed, "cache": True})


def test_recenter_commands_write_tables(tmp_path, no_model, capsys):
    for stage in ("stage1", "stage2", "stage3"):
        assert (
            main(["-q", "recenter", stage, "--data", str(FIX / "recenter"), "--out", str(tmp_path / stage)])
            == 0
        )
    assert "fleiss_kappa" in capsys.readouterr().out
    metrics = pd.read_csv(tmp_path / "stage2" / "metrics.csv")
    row = metrics[(metrics["method"] == "llm-a") & (metrics["subset"] == "all")].iloc[0]
    assert row["f1"] == pytest.approx(8 / 11)
    corr = pd.read_csv(tmp_path / "stage3" / "correlation.csv").set_index("rater")
    assert corr.loc["judge-x", "spearman_rho"] == pytest.approx(9.5 / np.sqrt(95))
    yes = pd.read_csv(tmp_path / "stage2" / "yes_rates.csv").set_index("rater")
    assert yes.loc["llm-a", "yes_rate"] == pytest.approx(6 / 11)
    cov = pd.read_csv(tmp_path / "stage3" / "coverage.csv").set_index("rater")
    assert cov.loc["human (any)", "n_unrated"] == 1
    assert len(pd.read_csv(tmp_path / "stage3" / "pairs.csv")) == 6
    config = json.loads((tmp_path / "stage1" / "config.json").read_text())
    assert config["command"] == "recenter stage1" and "pv4kit_version" in config


def test_personafeedback_load_and_reward_model(tmp_path, no_model, capsys):
    data = str(FIX / "personafeedback")
    assert main(["-q", "personafeedback", "load", "--data", data, "--out", str(tmp_path / "load")]) == 0
    out = capsys.readouterr().out
    assert "2 rows unjoined, 1 personas unused, 0 layout disagreements" in out
    assert "(the paper reports 8,298)" in out and "personas no row uses: 5" in out
    assert len(pd.read_csv(tmp_path / "load" / "unjoined.csv")) == 2
    counts = pd.read_csv(tmp_path / "load" / "counts.csv")
    assert counts.iloc[-1][["set", "n_rows", "n_joined", "n_unjoined"]].tolist() == ["all", 24, 22, 2]
    assert pd.read_csv(tmp_path / "load" / "unused_personas.csv")["file"].tolist() == ["persona/5.json"]
    assert main(["-q", "personafeedback", "load", "--data", data, "--layout", "lines"]) == 0
    assert "(lines layout of files+lines), join rule line" in capsys.readouterr().out
    assert main(["-q", "personafeedback", "reward-model", "--data", data, "--out", str(tmp_path / "rm")]) == 0
    acc = pd.read_csv(tmp_path / "rm" / "accuracy.csv")
    assert set(acc["method"]) == {"bradley_terry", "cosine"}


def test_personafeedback_judge_against_fake_server(tmp_path):
    from tests.llm_server import FakeLLMServer

    with FakeLLMServer(responder=lambda protocol, body, nth: "A") as srv:
        rc = main(
            [
                "-q",
                "personafeedback",
                "judge",
                "--data",
                str(FIX / "personafeedback"),
                "--model",
                "m",
                "--base-url",
                srv.base_url,
                "--cache",
                str(tmp_path / "c.sqlite"),
                "--both-orders",
                "--out",
                str(tmp_path / "judge"),
                "--limit",
                "2",
            ]
        )
    assert rc == 0
    bias = pd.read_csv(tmp_path / "judge" / "position_bias.csv").set_index("set")
    assert bias.loc["all", "bias"] == 1.0
    preds = pd.read_csv(tmp_path / "judge" / "predictions.csv")
    assert len(preds) == 2 * 12  # 2 per set x tier (the unjoined rows are 4th in their files), both orders


def test_offline_hub_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["personafeedback", "load"]) == 1
    assert "hf download PersonalAILab/PersonaFeedback" in capsys.readouterr().err
