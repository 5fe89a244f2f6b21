from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pv4kit.analysis import audit, plots
from pv4kit.analysis.figures import browser_path, save_figure
from tests.test_audit import _data, _questions


@pytest.fixture(scope="module")
def tables():
    from tests.conftest import FakeEmbedder

    result = audit.run_audit(_data(), embedder=FakeEmbedder(), cache=False, n_boot=20)
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
    qmap = plots.question_map(grid)
    runs = list(dict.fromkeys(grid["run"]))
    assert [t.name for t in qmap.data] == [*runs, "correct", "wrong"]  # a trace per panel, two for the legend
    for run, trace in zip(runs, qmap.data, strict=False):
        sub = grid[grid["run"] == run]
        assert len(trace.x) == len(sub) and sorted(trace.customdata) == sorted(
            np.where(sub["correct"].astype(bool), "correct", "wrong")
        )
        # each point's colour is its own class: 1 -> the "correct" colour, 0 -> "wrong", nothing between
        assert list(trace.marker.color) == [int(c == "correct") for c in trace.customdata]
        assert [tuple(s) for s in trace.marker.colorscale] == [
            (0.0, plots.COLORS["wrong"]),
            (1.0, plots.COLORS["correct"]),
        ]
        assert (trace.marker.cmin, trace.marker.cmax, trace.marker.showscale) == (0, 1, False)
        assert f"{run} ({sub['correct'].astype(bool).mean():.0%} correct)" in [
            a.text for a in qmap.layout.annotations
        ]


def test_umap_2d_keeps_its_fit_and_refits_when_anything_differs(tmp_path, monkeypatch, caplog):
    import logging

    from pv4kit.analysis import projection

    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 8)).astype(np.float32)
    fresh = projection.umap_2d(x, seed=0, n_epochs=20, cache=False)
    first = projection.umap_2d(x, seed=0, n_epochs=20, cache=tmp_path)
    np.testing.assert_array_equal(first, fresh)  # the stored fit is the fit
    assert len(list(tmp_path.glob("*.npy"))) == 1
    fits = []
    real_fit = projection._fit_umap
    monkeypatch.setattr(projection, "_fit_umap", lambda *a, **k: fits.append(k) or real_fit(*a, **k))
    np.testing.assert_array_equal(projection.umap_2d(x, seed=0, n_epochs=20, cache=tmp_path), fresh)
    assert fits == []  # read back, not fitted
    projection.umap_2d(x, seed=1, n_epochs=20, cache=tmp_path)  # another seed
    projection.umap_2d(x[::-1].copy(), seed=0, n_epochs=20, cache=tmp_path)  # other vectors
    projection.umap_2d(x, seed=0, n_epochs=21, cache=tmp_path)  # other options
    assert len(fits) == 3 and len(list(tmp_path.glob("*.npy"))) == 4
    (stored,) = [p for p in tmp_path.glob("*.npy") if np.array_equal(np.load(p), fresh)]
    stored.write_bytes(b"not an array")
    with caplog.at_level(logging.WARNING, logger="pv4kit.analysis.projection"):
        again = projection.umap_2d(x, seed=0, n_epochs=20, cache=tmp_path)
    np.testing.assert_array_equal(again, fresh)
    assert len(fits) == 4 and "unreadable" in caplog.text and np.array_equal(np.load(stored), fresh)
    monkeypatch.setenv("PV4KIT_CACHE", str(tmp_path / "root"))
    projection.umap_2d(x, seed=0, n_epochs=20)  # cache=True: under $PV4KIT_CACHE/umap
    assert len(list((tmp_path / "root" / "umap").glob("*.npy"))) == 1


def test_umap_2d_small_and_seeded():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((30, 8)).astype(np.float32)
    a = plots.umap_2d(x, seed=0, n_epochs=20, cache=False)
    b = plots.umap_2d(x, seed=0, n_epochs=20, cache=False)
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


@pytest.mark.skipif(browser_path() is None, reason="no Chromium: static export unavailable")
def test_save_figures_renders_every_static_file_in_one_batch(tmp_path, monkeypatch):
    import kaleido

    from pv4kit.analysis.figures import save_figures

    figs = {
        "spread": plots.word_spread(audit.length_audit(_questions())),
        "positions": plots.answer_positions(audit.position_audit(_questions())),
    }
    calls = []
    real = kaleido.write_fig_from_object_sync
    monkeypatch.setattr(
        kaleido, "write_fig_from_object_sync", lambda specs, **kw: calls.append(specs) or real(specs, **kw)
    )
    written = save_figures(figs, figures_dir=tmp_path)
    assert [p.name for p in written] == [f"{n}.{f}" for n in figs for f in ("html", "png", "pdf")]
    assert len(calls) == 1 and len(calls[0]) == 4  # one batch: two figures x PNG and PDF
    pngs = {name: (tmp_path / f"{name}.png").read_bytes() for name in figs}
    for name in figs:
        assert pngs[name][:4] == b"\x89PNG" and (tmp_path / f"{name}.pdf").read_bytes()[:4] == b"%PDF"
    hidden = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert hidden == [".pv4kit-figures.json"]  # the record of what each file was made from; no temporary left
    # nothing changed: nothing is rendered again (and no browser is needed)
    before = {p: p.stat().st_mtime_ns for p in written if p.suffix != ".html"}
    assert save_figures(figs, figures_dir=tmp_path) == written and len(calls) == 1
    assert {p: p.stat().st_mtime_ns for p in before} == before
    # a changed figure, a file replaced by hand and force=True are rendered again
    figs["spread"].update_layout(title="another title")
    (tmp_path / "positions.pdf").write_bytes(b"%PDF-1.4 replaced by hand")
    save_figures(figs, figures_dir=tmp_path)
    assert sorted(Path(s["path"]).suffix + ":" + Path(s["path"]).name.split(".")[1] for s in calls[1]) == [
        ".pdf:positions",
        ".pdf:spread",
        ".png:spread",
    ]
    save_figures(figs, figures_dir=tmp_path, force=True)
    assert len(calls) == 3 and len(calls[2]) == 4
    for name in ("positions",):  # the same width and height as one by one (spread's title changed)
        (single,) = save_figure(figs[name], name, figures_dir=tmp_path / "one", formats=("png",))
        assert pngs[name][16:24] == single.read_bytes()[16:24]


def test_save_figures_keeps_the_html_when_the_export_fails(tmp_path, monkeypatch):
    import kaleido

    from pv4kit.analysis import figures as figmod

    monkeypatch.setattr(figmod, "static_export_available", lambda: True)
    monkeypatch.setattr(figmod, "start_export_server", lambda **kw: True)

    def broken(specs, **kw):
        raise RuntimeError("the browser went away")

    monkeypatch.setattr(kaleido, "write_fig_from_object_sync", broken)
    figmod._warn_html_only.cache_clear()
    fig = plots.word_spread(audit.length_audit(_questions()))
    with pytest.warns(RuntimeWarning, match="the browser went away"):
        written = figmod.save_figures({"spread": fig}, figures_dir=tmp_path)
    assert [p.name for p in written] == ["spread.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plotly.min.js", "spread.html"]
    with pytest.raises(ValueError, match="file stem"):
        figmod.save_figures({"a.png": fig}, figures_dir=tmp_path)


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


# --------------------------------------------------------------------------- projection


def _many_questions(n_users: int = 4, per_user: int = 10) -> pd.DataFrame:
    rows = [
        {"user_id": u, "question_index": i, "question": f"What would user {u} choose in case {i}?"}
        for u in range(1, n_users + 1)
        for i in range(per_user)
    ]
    return pd.DataFrame(rows)


def test_with_question_umap_fits_once_on_the_questions_the_frame_holds(make_fake_embedder):
    from pv4kit.analysis.projection import umap_2d, with_question_umap

    questions = _many_questions()
    answered = questions[questions["user_id"] != 4]  # user 4 is in no run: it must not be embedded
    frame = pd.concat(
        [answered.assign(run="a", correct=True), answered.iloc[::-1].assign(run="b", correct=False)],
        ignore_index=True,
    )
    emb = make_fake_embedder()
    out = with_question_umap(frame, questions, embedder=emb, cache=False, seed=3, n_epochs=30)
    assert out[["run", "user_id", "question_index"]].equals(frame[["run", "user_id", "question_index"]])
    # one embedding call, for the 30 distinct questions of the frame, none of user 4's
    assert len(emb.calls) == 1 and sorted(emb.calls[0]) == sorted(answered["question"])
    # both runs' rows of a question share its point, and the points are one UMAP of those questions
    by_key = out.groupby(["user_id", "question_index"])[["x", "y"]].nunique()
    assert (by_key == 1).all().all()
    ordered = answered.sort_values(["user_id", "question_index"])
    expected = umap_2d(np.stack([emb.vector(t) for t in ordered["question"]]), seed=3, n_epochs=30)
    got = ordered[["user_id", "question_index"]].merge(out.drop_duplicates(["user_id", "question_index"]))
    assert np.allclose(got[["x", "y"]].to_numpy(), expected)
    with pytest.raises(KeyError, match=r"1 question\(s\) not in questions.*\(9, 0\)"):
        extra = pd.DataFrame({"user_id": [9], "question_index": [0]})
        with_question_umap(pd.concat([frame, extra]), questions, embedder=emb, cache=False)


def test_with_category_umap(tables):
    from pv4kit.analysis.projection import with_category_umap

    cats = with_category_umap(tables["categories"], seed=0)
    assert {"x", "y"} <= set(cats.columns) and cats[["x", "y"]].notna().all().all()
    assert len(cats) == len(tables["categories"])
    empty = with_category_umap(tables["categories"].iloc[:0])
    assert empty.empty and {"x", "y"} <= set(empty.columns)


def test_exact_knn_in_blocks_matches_a_full_sort(monkeypatch):
    from pv4kit.analysis import projection
    from pv4kit.vectors import unit_rows

    rng = np.random.default_rng(0)
    x = unit_rows(rng.standard_normal((257, 6)).astype(np.float32))
    monkeypatch.setattr(projection, "_KNN_BLOCK", 50)  # six blocks, the last one short
    order, dist = projection._exact_knn(x, 7)
    full = np.clip(1.0 - x @ x.T, 0.0, 2.0)
    np.fill_diagonal(full, 0.0)
    want = np.argsort(full, axis=1, kind="stable")[:, :7]
    assert (order == want).all() and (order[:, 0] == np.arange(257)).all()
    assert np.allclose(dist, np.take_along_axis(full, want, axis=1), atol=1e-6)


def test_related_figures():
    acc = pd.DataFrame(
        {
            "set": ["general", "general", "general"],
            "tier": ["easy", "hard", "all"],
            "method": ["cosine", "cosine", "cosine"],
            "accuracy": [0.6, 0.55, 0.58],
            "ci_low": [0.5, 0.45, 0.5],
            "ci_high": [0.7, 0.65, 0.66],
        }
    )
    fig = plots.reward_model_accuracy(acc)
    assert [list(t.x) for t in fig.data] == [["easy", "hard"]]  # the pooled "all" tier is not drawn
    assert np.allclose(fig.data[0].error_y.array, [0.1, 0.1])
    assert any(s.y0 == 0.5 for s in fig.layout.shapes)  # the chance line
    dist = pd.DataFrame(
        {"rating": [1, 2, 1, 2], "share": [0.3, 0.7, 0.5, 0.5], "rater": ["a", "a", "b", "b"], "kind": "k"}
    )
    fig = plots.rating_distribution(dist)
    assert sorted(t.name for t in fig.data) == ["a", "b"]


def test_mathjax_lives_under_the_cache_root(tmp_path, monkeypatch):
    from pv4kit.analysis.figures import mathjax_path

    monkeypatch.delenv("PV4KIT_MATHJAX", raising=False)
    monkeypatch.setenv("PV4KIT_CACHE", str(tmp_path))
    assert mathjax_path() is None
    script = tmp_path / "mathjax" / "package" / "es5" / "tex-svg.js"
    script.parent.mkdir(parents=True)
    script.write_text("// mathjax")
    assert mathjax_path() == script


def test_fits_made_from_cached_embeddings_are_kept_beside_that_cache(tmp_path, monkeypatch):
    from pv4kit.analysis.projection import beside_embeddings
    from pv4kit.embeddings.cache import EmbeddingCache

    store = tmp_path / "proj" / ".cache" / "pv4kit" / "embeddings"
    assert beside_embeddings(store) == store.parent / "umap"
    assert beside_embeddings(str(store)) == store.parent / "umap"
    assert beside_embeddings(EmbeddingCache(store)) == store.parent / "umap"
    assert beside_embeddings(True) is True and beside_embeddings(None) is False
    assert beside_embeddings(False) is False
