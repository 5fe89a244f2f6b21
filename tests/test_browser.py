"""The notebook-05 widget browser and a saved figure, driven in a real Chromium (Playwright).

JupyterLab runs on 127.0.0.1 with a token and the project's ``python3`` kernel, on a copy of the sample
in ``raw/`` with two scored runs; Chromium is Debian's (``/usr/bin/chromium``, never a Playwright
download) and reaches nothing but the loopback server (every other request is aborted and recorded).
Expected values are read from the runs' ``predictions.parquet``, never from the widget. Screenshots of
every state go to ``tests/artifacts/browser/`` (git-ignored); the path is printed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pv4kit
from pv4kit.analysis.figures import browser_path, save_figure
from pv4kit.scoring.runs import write_generations
from pv4kit.scoring.score import score_run
from tests.conftest import FakeEmbedder

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("PV4KIT_TEST_ARTIFACTS") or ROOT / "tests" / "artifacts") / "browser"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LETTERS = "ABCDE"
RUNS = ("echo", "rag_noisy")
TIMEOUT_MS = 90_000  # a loaded 2-core machine can take half a minute to open JupyterLab

pytestmark = pytest.mark.browser

playwright_sync = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright")


def _chromium() -> str:
    path = browser_path()
    if path is None:
        pytest.skip("no Chromium found (make browser installs Debian's chromium)")
    return path


class NoisyEmbedder(FakeEmbedder):
    """The fake embedder, except that ``text + " #noise"`` lands near ``text``: similar, not identical."""

    def vector(self, text: str) -> np.ndarray:
        if text.endswith(" #noise"):
            base = super().vector(text[: -len(" #noise")])
            rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
            return (base + 0.6 * rng.standard_normal(self.dim)).astype(np.float32)
        return super().vector(text)


def _runs(root: Path, data) -> None:
    """Two scored runs: ``echo`` repeats the reference (a distractor for every 7th question, shifted per
    user); ``rag_noisy`` a noisy copy of it (a distractor for every 5th) and records retrieved chats."""
    q = data.questions.reset_index(drop=True)
    letter = q["answer_letter"].map(LETTERS.index)
    echo = [
        c[(a + 1) % 5] if (qi + u) % 7 == 3 else c[a]
        for c, a, qi, u in zip(q["choices"], letter, q["question_index"], q["user_id"], strict=True)
    ]
    noisy = [
        (c[(a + 2) % 5] if (qi + 2 * u) % 5 == 1 else c[a]) + " #noise"
        for c, a, qi, u in zip(q["choices"], letter, q["question_index"], q["user_id"], strict=True)
    ]
    keys = q[["user_id", "question_index", "split"]]
    frames = {
        "echo": keys.assign(generation=echo),
        "rag_noisy": keys.assign(
            generation=noisy,
            retrieved_ids=[[int(i) % 3, 3] for i in q["question_index"]],
            retrieved_scores=[[0.71, 0.42]] * len(q),
        ),
    }
    embedder = NoisyEmbedder()
    for name, frame in frames.items():
        run = write_generations(
            root / name, frame, config={"data": "sample", "method": name, "model": "none"}
        )
        score_run(run, data=data, embedder=embedder, cache=False, n_boot=20)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A copy of the sample and notebook 05, with two scored runs, in a scratch project."""
    root = tmp_path_factory.mktemp("browser_project")
    shutil.copytree(ROOT / "raw", root / "raw")
    (root / "notebooks").mkdir()
    for name in ("05_browser.py", "jupytext.toml"):
        shutil.copy(ROOT / "notebooks" / name, root / "notebooks")
    data = pv4kit.load(str(root / "raw"))
    _runs(root / "runs", data)
    preds = {name: pd.read_parquet(root / "runs" / name / "predictions.parquet") for name in RUNS}
    return {"root": root, "data": data, "preds": preds}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(project):
    """JupyterLab on 127.0.0.1 (a token, the project's kernel, the repo's ``jupyter/overrides.json``)."""
    _chromium()
    root = project["root"]
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        # the kernel imports this checkout's pv4kit, and reads the scratch data and runs
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "PV4KIT_DATA": str(root / "raw"),
        "PV4KIT_RUNS": str(root / "runs"),
        "PV4KIT_FIGURES": str(root / "figures"),
        "PV4KIT_CACHE": str(root / ".cache"),
        # a fresh user: no settings, workspaces or config of the person running the tests
        "JUPYTER_CONFIG_DIR": str(root / "jupyter-config"),
        "JUPYTERLAB_SETTINGS_DIR": str(root / "lab-user-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(root / "lab-workspaces"),
        "JUPYTER_RUNTIME_DIR": str(root / "jupyter-runtime"),
    }
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root / 'notebooks'}",
        f"--LabApp.app_settings_dir={ROOT / 'jupyter'}",  # what `make lab` uses
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(root / "jupyterlab.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(cmd, env=env, cwd=root / "notebooks", stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(proc, f"{url}/api/status?token={token}", root / "jupyterlab.log")
        yield {"url": url, "token": token, "log": root / "jupyterlab.log"}
    finally:
        proc.terminate()  # jupyter_server shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait_for_server(proc: subprocess.Popen, status_url: str, log: Path, timeout: float = 90.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(status_url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"JupyterLab did not answer in {timeout:.0f}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def chromium():
    """Debian's Chromium under Playwright, headless and off the network (a fresh profile per launch)."""
    path = _chromium()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser test screenshots: {ARTIFACTS}")
    with playwright_sync.sync_playwright() as p:
        # Playwright gives every launch a fresh temporary --user-data-dir of its own
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _page(browser, *, allow: str, viewport=(1400, 1700)):
    """A page whose requests outside ``allow`` (a URL prefix) are aborted and recorded."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    blocked: list[str] = []
    errors: list[str] = []

    def route(r):
        if r.request.url.startswith(allow) or r.request.url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return context, page, blocked, errors


# --------------------------------------------------------------------------- notebook 05 in JupyterLab

_READ_DETAIL = """(out) => {
  const q = (sel) => out.querySelector(sel);
  const detail = [...out.querySelectorAll('.widget-html-content')].find(
      e => e.querySelector('table.pv4-candidates') || e.textContent.includes('No question selected'));
  const rows = detail ? [...detail.querySelectorAll('table.pv4-candidates tr[data-letter]')] : [];
  return {
    header: detail && detail.querySelector('h4') ? detail.querySelector('h4').innerText : null,
    text: detail ? detail.innerText : '',
    rows: rows.map(tr => ({
      letter: tr.dataset.letter,
      mark: tr.cells[0].innerText,
      candidate: tr.querySelector('.pv4-candidate').innerText,
      runs: Object.fromEntries([...tr.querySelectorAll('td[data-run]')].map(td => [td.dataset.run, {
        sim: td.querySelector('.pv4-sim').innerText, pick: !!td.querySelector('.pv4-pick')}])),
    })),
    verdicts: Object.fromEntries([...(detail ? detail.querySelectorAll('.pv4-verdict') : [])].map(
      p => [p.dataset.run, p.innerText])),
    options: [...q('.widget-select select').options].map(o => o.textContent),
    selected: q('.widget-select select').selectedIndex,
    label: [...out.querySelectorAll('.widget-html-content')].map(e => e.innerText)
      .find(t => t.startsWith('Questions')) || null,
  };
}"""


def _norm(text: str) -> str:
    return " ".join(str(text).replace("\xa0", " ").split())


def _expected(project, uid: int, qi: int) -> dict:
    rows = {}
    for name, preds in project["preds"].items():
        hit = preds[(preds["user_id"] == uid) & (preds["question_index"] == qi)]
        assert len(hit) == 1, (name, uid, qi)
        rows[name] = hit.iloc[0]
    return rows


def _check_detail(state: dict, project, uid: int, qi: int) -> None:
    """The rendered question against the runs' predictions.parquet rows for (uid, qi)."""
    rows = _expected(project, uid, qi)
    first = next(iter(rows.values()))
    assert state["header"].startswith(f"User {uid}, question {qi} ({first['split']}"), state["header"]
    assert _norm(first["question"]) in _norm(state["text"])
    assert [r["letter"] for r in state["rows"]] == list(LETTERS)
    for j, row in enumerate(state["rows"]):
        letter = row["letter"]
        assert _norm(row["candidate"]) == _norm(first["choices"][j]), (letter, row["candidate"])
        assert ("\u2713" in row["mark"]) == (letter == first["answer_letter"]), (letter, row["mark"])
        assert set(row["runs"]) == set(RUNS)
        for name, pred in rows.items():
            cell = row["runs"][name]
            assert cell["sim"] == f"{float(pred[f'sim_{letter}']):.3f}", (name, letter, cell)
            assert cell["pick"] == (pred["predicted_letter"] == letter), (name, letter, cell)
    for name, pred in rows.items():
        verdict = "correct" if bool(pred["correct"]) else "wrong"
        assert f"predicted {pred['predicted_letter']} ({verdict}" in state["verdicts"][name]


def _wrong_list(project, uid: int) -> list[int]:
    wrong: set[int] = set()
    for preds in project["preds"].values():
        sub = preds[(preds["user_id"] == uid) & ~preds["correct"].astype(bool)]
        wrong |= {int(q) for q in sub["question_index"]}
    return sorted(wrong)


def _listed(state: dict) -> list[int]:
    return [int(_norm(o).split(" ", 1)[0]) for o in state["options"]]


def test_browser_notebook_in_jupyterlab(project, lab, chromium):
    data = project["data"]
    users = [int(u) for u in data.users["user_id"]]
    context, page, blocked, errors = _page(chromium, allow=lab["url"])
    try:
        # a new user's path: open the jupytext .py file; overrides.json makes it a notebook
        t0 = time.monotonic()
        page.goto(f"{lab['url']}/lab/tree/05_browser.py?token={lab['token']}")
        panel = page.locator(".jp-NotebookPanel").first
        panel.locator(".jp-Cell").first.wait_for()
        kernel = panel.locator(".jp-KernelName")
        playwright_sync.expect(kernel).to_have_text("Python 3 (pv4kit)", timeout=TIMEOUT_MS)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        t_open = time.monotonic() - t0

        page.get_by_role("menuitem", name="Run", exact=True).click()
        t1 = time.monotonic()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        out = panel.locator(".jp-OutputArea-output:has(.widget-select)")
        out.locator("table.pv4-candidates").wait_for()
        t_paint = time.monotonic() - t1
        # the notebook's last cell selects the last user and prints the label of its first question
        last, first_q = users[-1], int(data.questions.query("user_id == @users[-1]")["question_index"].min())
        playwright_sync.expect(panel.locator(".jp-OutputArea-output").last).to_contain_text(f"{first_q:>3} [")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        handle = out.element_handle()

        def state() -> dict:
            return handle.evaluate(_READ_DETAIL)

        def wait_header(text: str) -> dict:
            page.wait_for_function(
                "([out, t]) => [...out.querySelectorAll('.widget-html-content h4')].some("
                "h => h.innerText.startsWith(t))",
                arg=[handle, text],
            )
            return state()

        def wait_label(start: str, part: str) -> dict:
            # the widget sets the list's label after the list itself: this label means a new list
            page.wait_for_function(
                "([out, s, p]) => [...out.querySelectorAll('.widget-html-content')].some("
                "e => e.innerText.startsWith(s) && e.innerText.includes(p))",
                arg=[handle, start, part],
            )
            return state()

        def shot(name: str) -> None:
            out.screenshot(path=str(ARTIFACTS / f"{name}.png"))

        s = wait_header(f"User {last}, question {first_q} (")
        page.screenshot(path=str(ARTIFACTS / "00_jupyterlab.png"))
        _check_detail(s, project, last, first_q)
        n_last = int((data.questions["user_id"] == last).sum())
        assert s["label"] == f"Questions of user {last} ({n_last})" and len(s["options"]) == n_last
        shot("01_run_all")

        # the user selector: another user, its first question shown
        uid = users[1]
        qs = sorted(int(q) for q in data.questions.query("user_id == @uid")["question_index"])
        out.locator(".widget-dropdown select").select_option(label=f"user {uid}")
        s = wait_header(f"User {uid}, question {qs[0]} (")
        _check_detail(s, project, uid, qs[0])
        assert _listed(s) == qs and s["selected"] == 0
        shot("02_user_changed")

        # the question selector: a question both runs got wrong if any, else one run got wrong
        rows = {n: p[p["user_id"] == uid].set_index("question_index") for n, p in project["preds"].items()}
        n_wrong = sum((~r["correct"].astype(bool)).astype(int) for r in rows.values())
        qi = int(n_wrong.sort_values(ascending=False, kind="stable").index[0])
        assert n_wrong[qi] >= 1
        out.locator(".widget-select select").select_option(index=qs.index(qi))
        s = wait_header(f"User {uid}, question {qi} (")
        _check_detail(s, project, uid, qi)
        assert "wrong" in " ".join(s["verdicts"].values())
        shot("03_question_changed")

        # the box: only questions some run got wrong, checked against predictions.parquet
        out.locator(".widget-checkbox input[type=checkbox]").check()
        expected = _wrong_list(project, uid)
        assert 0 < len(expected) < len(qs)
        s = wait_label(f"Questions of user {uid} (", "only those")
        assert _listed(s) == expected
        s = wait_header(f"User {uid}, question {expected[0]} (")
        assert (
            s["label"]
            == f"Questions of user {uid} ({len(expected)} of {len(qs)}, only those some run got wrong)"
        )
        _check_detail(s, project, uid, expected[0])
        shot("04_only_wrong")

        # still ticked, another user: its own wrong list
        uid2 = users[2]
        out.locator(".widget-dropdown select").select_option(label=f"user {uid2}")
        expected2 = _wrong_list(project, uid2)
        s = wait_label(f"Questions of user {uid2} (", "only those")
        assert _listed(s) == expected2
        s = wait_header(f"User {uid2}, question {expected2[0]} (")
        _check_detail(s, project, uid2, expected2[0])
        shot("05_only_wrong_other_user")

        # layout: the widget fits the output area (no horizontal overflow) and its text is readable
        fit = handle.evaluate(
            """(out) => ({scroll: out.scrollWidth, client: out.clientWidth,
                right: out.getBoundingClientRect().right,
                parts: [...out.querySelectorAll('.widget-select, .widget-dropdown, table.pv4-candidates')]
                  .map(e => e.getBoundingClientRect().right),
                lh: parseFloat(getComputedStyle(out.querySelector('table.pv4-candidates')).lineHeight),
                fs: parseFloat(getComputedStyle(out.querySelector('table.pv4-candidates')).fontSize)})"""
        )
        assert fit["scroll"] <= fit["client"] + 1 and max(fit["parts"]) <= fit["right"] + 1, fit
        assert fit["fs"] >= 12 and fit["lh"] <= 2 * fit["fs"], fit
        print(f"JupyterLab open {t_open:.1f}s, run all to widget {t_paint:.1f}s")
        assert not errors, errors
        assert not blocked, blocked
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "failure_page.png"))
        raise
    finally:
        context.close()


# --------------------------------------------------------------------------- a saved figure from disk


def test_saved_figure_renders_offline(project, chromium, tmp_path):
    from pv4kit.analysis import plots
    from pv4kit.scoring.stats import compare

    a, b = (project["preds"][n] for n in RUNS)
    table = compare(a, b, n_boot=20)
    fig = plots.paired_comparison(table, name_a=RUNS[0], name_b=RUNS[1])
    # one point per finite row the figure draws (many categories: the largest differences and "others")
    n_points = int(np.isfinite(np.asarray(fig.data[0].x, dtype=float)).sum())
    paths = save_figure(
        fig,
        "paired_comparison",
        figures_dir=tmp_path,
        formats=("html",),
    )
    html = paths[0]

    context, page, blocked, errors = _page(chromium, allow=tmp_path.as_uri(), viewport=(1100, 800))
    context.set_offline(True)
    try:
        page.goto(html.as_uri())
        points = page.locator(".js-plotly-plot .scatterlayer .points path.point")
        shown = table[np.isfinite(table["diff"].astype(float))].reset_index(drop=True)  # NaN: no point
        assert n_points >= 3
        playwright_sync.expect(points).to_have_count(n_points)
        assert page.evaluate("typeof window.Plotly.version") == "string"
        title = page.locator(".js-plotly-plot .gtitle").text_content()
        assert title.startswith(f"Paired comparison: {RUNS[0]} vs {RUNS[1]}")

        row = shown.iloc[0]
        box = points.first.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2 + 30, box["y"] + box["height"] / 2 + 30)
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=5)
        hover = page.locator(".hoverlayer .hovertext")
        hover.wait_for()
        text = _norm(hover.text_content())
        assert text.startswith(str(row["group"])), text
        assert f"diff {row['diff']:.1%} (n={int(row['n'])})" in text, text
        assert f"only A {int(row['a_only'])}, only B {int(row['b_only'])}" in text, text
        page.screenshot(path=str(ARTIFACTS / "10_figure_hover.png"))
        assert not errors, errors
        assert not blocked, blocked
        assert (tmp_path / "plotly.min.js").is_file()  # the bundle is local, beside the page
    finally:
        context.close()
