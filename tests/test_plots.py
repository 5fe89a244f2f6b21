from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pv4kit import audit, audit_report, plots
from pv4kit.figures import browser_path, save_figure
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
    from pv4kit.stats import compare

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
    import pv4kit.figures as figures

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
