from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pv4kit.analysis import audit, audit_report, plots
from pv4kit.analysis.figures import browser_path, save_figure
from tests.test_audit import _data, _questions


@pytest.fixture(scope="module")
def tables():
    from tests.conftest import FakeEmbedder

    result = audit_report.run_audit(_data(), embedder=FakeEmbedder(), cache=False, n_boot=20)
    return result.tables


def _preds() -> pd.DataFrame:
    q = _questions()
    rng = np.random.default_rng(0)
    parts = []
    for run in ("a", "b"):
        parts.append(
            q[["user_id", "question_index", "category_name"]].assign(
                run=run,
                correct=rng.random(len(q)) > 0.5,
                predicted_letter=list("ABCDE"),
                margin=rng.random(len(q)) / 10,
                question=q["question"],
            )
        )
    return pd.concat(parts, ignore_index=True)


def test_audit_figures_build(tables):
    cats = tables["categories"]
    cats = cats.assign(x=np.arange(len(cats), dtype=float), y=np.arange(len(cats), dtype=float) ** 2)
    figs = [
        plots.category_balance(_questions()),
        plots.category_groups(cats),
        plots.category_map(cats),
        plots.answer_positions(tables["positions"]),
        plots.length_bias(tables["length_summary"]),
        plots.word_spread(tables["lengths"]),
        plots.accuracy_dots(tables["solver_accuracy"], title="solvers"),
        plots.accuracy_dots(tables["solver_accuracy_by_category"], title="by category"),
        plots.distractor_similarity(tables["similarity"]),
        plots.leakage(tables["leakage"]),
        plots.hard_composition(audit.with_category_groups(tables["lengths"], tables["categories"])),
    ]
    for fig in figs:
        assert fig.layout.title.text and len(fig.data) >= 1
        assert "$" not in fig.layout.title.text  # no LaTeX: static export needs no MathJax


def test_error_analysis_figures_build():
    from pv4kit.scoring.stats import compare

    preds = _preds()
    a, b = (preds[preds["run"] == r].drop(columns="run") for r in ("a", "b"))
    assert plots.paired_comparison(compare(a, b, n_boot=20), name_a="a", name_b="b").data
    assert plots.wrong_position(preds).data
    assert plots.margin_distribution(preds).data
    assert plots.per_user_accuracy(preds).data
    grid = preds.assign(x=np.arange(len(preds), dtype=float), y=np.ones(len(preds)))
    assert len(plots.question_map(grid).data) == 4


def test_umap_2d_small_and_seeded():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((30, 8)).astype(np.float32)
    a = plots.umap_2d(x, seed=0, n_epochs=20)
    b = plots.umap_2d(x, seed=0, n_epochs=20)
    assert a.shape == (30, 2) and np.allclose(a, b)
    assert plots.umap_2d(x[:3]).shape == (3, 2)  # PCA for tiny inputs
    with pytest.raises(ValueError, match="2-D"):
        plots.umap_2d(x[0])


def test_save_figure_html(tmp_path, monkeypatch):
    fig = plots.word_spread(audit.length_audit(_questions()))
    written = save_figure(fig, "spread", figures_dir=tmp_path, formats=("html",))
    assert written == [tmp_path / "spread.html"]
    assert (tmp_path / "plotly.min.js").is_file()  # pages load plotly from beside them, offline
    with pytest.raises(ValueError, match="formats"):
        save_figure(fig, "x", figures_dir=tmp_path, formats=("gif",))
    with pytest.raises(ValueError, match="name"):
        save_figure(fig, "x.png", figures_dir=tmp_path)


def test_save_figure_without_browser_writes_html_only(tmp_path, monkeypatch):
    import pv4kit.analysis.figures as figures

    monkeypatch.setattr(figures, "browser_path", lambda: None)
    figures._warn_html_only.cache_clear()
    fig = plots.word_spread(audit.length_audit(_questions()))
    with pytest.warns(RuntimeWarning, match="HTML only"):
        written = save_figure(fig, "spread", figures_dir=tmp_path)
    assert [p.suffix for p in written] == [".html"]


@pytest.mark.skipif(browser_path() is None, reason="no Chromium: static export unavailable")
def test_save_figure_png_pdf(tmp_path):
    fig = plots.word_spread(audit.length_audit(_questions()))
    written = save_figure(fig, "spread", figures_dir=tmp_path)
    assert [p.suffix for p in written] == [".html", ".png", ".pdf"]
    assert (tmp_path / "spread.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "spread.pdf").read_bytes()[:4] == b"%PDF"


def test_paired_comparison_marks_p_zero_as_significant():
    table = pd.DataFrame(
        {
            "scope": ["overall", "overall"],
            "group": ["all", "hard"],
            "diff": [0.3, 0.01],
            "diff_low": [0.25, -0.02],
            "diff_high": [0.35, 0.04],
            "n": [3000, 600],
            "a_only": [1200, 10],
            "b_only": [0, 9],
            "mcnemar_p": [0.0, 0.9],
        }
    )
    colors = list(plots.paired_comparison(table).data[0].marker.color)
    assert colors == ["#d95f02", "#7570b3"]


def _many_groups(n_groups=300, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for solver in ("run_a", "run_b"):
        for g in range(n_groups):
            n = int(rng.integers(5, 20))
            k = int(rng.integers(0, n + 1))
            acc = k / n
            rows.append((solver, f"group {g}", n, k, acc, max(acc - 0.1, 0), min(acc + 0.1, 1)))
    return pd.DataFrame(rows, columns=["solver", "group", "n", "n_correct", "accuracy", "ci_low", "ci_high"])


def test_accuracy_dots_at_release_size_keeps_best_worst_and_pools_the_rest():
    acc = _many_groups()
    fig = plots.accuracy_dots(acc, title="per group", max_groups=30)
    groups = list(dict.fromkeys(y for tr in fig.data for y in tr.y))
    assert len(groups) == 31 and groups[15].startswith("others (270 groups")
    assert fig.layout.height * 2 <= 3000  # the PNG (scale 2) stays under 3,000 px
    pooled = acc[~acc["group"].isin(groups)]
    a = pooled[pooled["solver"] == "run_a"]
    x = dict(zip(fig.data[0].y, fig.data[0].x, strict=True))[groups[15]]
    assert x == pytest.approx(a["n_correct"].sum() / a["n"].sum())
    mean = acc.groupby("group")["accuracy"].mean()
    assert mean[groups[0]] == mean.max() and mean[groups[-1]] == mean.min()
    small = plots.accuracy_dots(acc[acc["group"].isin(["group 1", "group 2"])], title="two")
    assert {y for tr in small.data for y in tr.y} == {"group 1", "group 2"}


def test_paired_comparison_at_release_size():
    rng = np.random.default_rng(1)
    n = 300
    cats = pd.DataFrame(
        {
            "scope": "category",
            "group": [f"category {i}" for i in range(n)],
            "n": rng.integers(10, 16, n),
            "diff": rng.normal(0, 0.2, n),
            "a_only": rng.integers(0, 5, n),
            "b_only": rng.integers(0, 5, n),
            "mcnemar_p": rng.random(n),
        }
    )
    cats["diff_low"], cats["diff_high"] = cats["diff"] - 0.1, cats["diff"] + 0.1
    head = pd.DataFrame(
        [
            {
                "scope": "overall",
                "group": "all",
                "n": 4000,
                "diff": 0.01,
                "diff_low": 0,
                "diff_high": 0.02,
                "a_only": 1,
                "b_only": 2,
                "mcnemar_p": 0.5,
            },
            {
                "scope": "hard",
                "group": "hard",
                "n": 600,
                "diff": 0.02,
                "diff_low": 0,
                "diff_high": 0.04,
                "a_only": 1,
                "b_only": 2,
                "mcnemar_p": 0.5,
            },
        ]
    )
    fig = plots.paired_comparison(pd.concat([head, cats], ignore_index=True), max_categories=28)
    labels = list(fig.data[0].y)
    assert len(labels) == 2 + 28 + 1 and labels[:2] == ["all", "hard"]
    assert labels[16].startswith("others (272 categories")
    assert fig.layout.height * 2 <= 3000
    shown = cats.set_index("group").loc[[lab.removeprefix("category: ") for lab in labels[2:16]], "diff"]
    assert shown.min() >= cats["diff"].nlargest(14).min()


def test_category_map_labels_only_when_readable():
    rng = np.random.default_rng(2)

    def cats(n):
        return pd.DataFrame(
            {
                "x": rng.random(n),
                "y": rng.random(n),
                "category_name": [f"c{i}" for i in range(n)],
                "user_id": rng.integers(0, 149, n),
                "group_label": [f"g{i % (n // 2)}" for i in range(n)],
            }
        )

    assert all("text" in tr.mode for tr in plots.category_map(cats(20)).data)
    big = plots.category_map(cats(1490))
    assert all(tr.mode == "markers" for tr in big.data) and big.layout.showlegend is False
