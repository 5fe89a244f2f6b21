"""The hub path against a loopback Hugging Face endpoint (issue 13.14, issue 11.13).

``tests/hf_server.py`` serves dataset repos on 127.0.0.1 and each test runs pv4kit in a fresh Python
process with ``HF_ENDPOINT`` pointing at it (``huggingface_hub`` reads ``HF_ENDPOINT``,
``HF_HUB_OFFLINE`` and ``HF_HOME`` when it is imported, so a process of its own is the honest way to set
them, as a user does). ``HF_HOME`` is a temporary folder: no stored token, nothing written to the real
cache.

The requests ``huggingface_hub`` 2.4 makes for ``snapshot_download(repo_id, repo_type="dataset",
allow_patterns=...)``, logged by the server (``FakeHub.requests``) and asserted below so that the server
stays honest:

1. ``GET /api/agent-harnesses`` once per process (a registry fetch; the server answers 404, which
   ``huggingface_hub`` ignores);
2. ``GET /api/datasets/{owner}/{name}/revision/main``: the repo info, whose ``sha`` is the commit;
3. ``GET /api/datasets/{owner}/{name}/tree/{sha}?recursive=true&expand=false``: the file listing (kept
   in the cache as ``trees/{sha}.json``, so a later download of the same commit skips it);
4. for each listed file matching ``allow_patterns``: ``HEAD /datasets/{owner}/{name}/resolve/{sha}/{path}``
   (``X-Repo-Commit``, ``ETag``, ``Content-Length``), then ``GET`` of the same URL for the bytes.

An unknown repo fails at (2) with 401 ``X-Error-Code: RepoNotFound`` (404 when a token is sent); a gated
repo passes (2) and (3) and fails at (4) with 401 (no token) or 403 (a token without access),
``X-Error-Code: GatedRepo``. pv4kit's "the other id exists" check is one more (2) without a revision
(``GET /api/datasets/{owner}/{name}``, ``HfApi.repo_exists``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pv4kit.dataset.hub import PV4_HUB_ID, PV4_HUB_IDS, looks_like_hub_id
from tests.hf_server import FakeHub

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures"
CARD_ID, REFERENCE_ID = "MemoryAsModality/PersonalizationV4", "memorilla/PersonalizationV4"
GRANTED = "hf_granted_token_0123456789"


def _tree_files(folder: Path, prefix: str = "") -> dict[str, bytes]:
    return {
        prefix + p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def pv4_files(tmp_path_factory) -> dict[str, bytes]:
    """PV4 in the hub layout: the card's ``data/{split}.parquet`` built from the sample, plus ``raw/``."""
    from pv4kit.dataset.splits import build_dataset

    out = tmp_path_factory.mktemp("pv4") / "data"
    build_dataset(ROOT / "raw" / "users", out, progress=False)
    files = {f"data/{p.name}": p.read_bytes() for p in out.glob("*.parquet")}
    files.update(_tree_files(ROOT / "raw" / "users", "raw/users/"))
    files["README.md"] = b"---\nextra_gated_heading: Request access to PersonalizationV4\n---\n"
    return files


@pytest.fixture(scope="module")
def hub(pv4_files):
    """The card's id (gated, as the real dataset is) and both related benchmarks; no reference id."""
    with FakeHub() as srv:
        srv.add_dataset(CARD_ID, pv4_files, gated=True).granted.add(GRANTED)
        srv.add_dataset("PersonalAILab/PersonaFeedback", _tree_files(FIX / "personafeedback"))
        srv.add_dataset("leczhang/recenter-personalization", _tree_files(FIX / "recenter"))
        yield srv


def _run(code: str, *, endpoint: str, home: Path, offline: bool = False) -> dict:
    """Run ``code`` in a fresh process against ``endpoint``; returns the dict ``out`` it fills.

    In the script, ``scenario(name, token)`` marks the request log (``FakeHub.by_mark``) and sets
    ``HF_TOKEN`` (read by ``huggingface_hub`` at each call); ``error_of(fn, ...)`` returns the exception's
    type and message, or ``None``.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(home),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        PYTHONPATH=str(ROOT),
    )
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    script = (
        "import contextlib, io, json, os, urllib.request\nimport pv4kit\nout = {}\n"
        "def scenario(name, token=None):\n"
        "    if not os.environ.get('HF_HUB_OFFLINE'):\n"
        f"        urllib.request.urlopen('{endpoint}/__mark__/' + name).read()\n"
        "    os.environ.pop('HF_TOKEN', None)\n"
        "    if token:\n        os.environ['HF_TOKEN'] = token\n"
        "def error_of(fn, *a, **k):\n"
        "    try:\n        fn(*a, **k)\n    except Exception as exc:\n"
        "        return {'type': type(exc).__name__, 'message': str(exc)}\n"
        "    return None\n" + code + "\nprint('RESULT' + json.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=home, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


ONLINE = """
scenario('gated_401')
out['gated_401'] = error_of(pv4kit.load, 'MemoryAsModality/PersonalizationV4')
from pv4kit.cli import main
buf = io.StringIO()
with contextlib.redirect_stderr(buf):
    out['cli_rc'] = main(['-q', 'info', 'MemoryAsModality/PersonalizationV4'])
out['cli_stderr'] = buf.getvalue()
scenario('gated_403', 'hf_someone_else_0123456789')
out['gated_403'] = error_of(pv4kit.load, 'MemoryAsModality/PersonalizationV4')
scenario('reference_id')
out['reference_id'] = error_of(pv4kit.load, 'memorilla/PersonalizationV4')
scenario('card_id', GRANTED)
d = pv4kit.load()
out['card_id'] = {'kind': d.kind, 'source': d.source, 'n': len(d.questions),
                  'users': len(d.users), 'named': int(d.questions['category_name'].notna().sum())}
scenario('related')
from pv4kit.related import personafeedback as pf, recenter as rc
out['pf'] = len(pf.load_personafeedback().pairs)
out['rc'] = len(rc.load_stage1('leczhang/recenter-personalization').items)
scenario('unknown_related')
out['unknown_related'] = error_of(pf.load_personafeedback, 'PersonalAILab/PersonaFeedbackX')
"""


@pytest.fixture(scope="module")
def online(hub, tmp_path_factory):
    """One process through every online scenario (in an order where no download hides a failure)."""
    home = tmp_path_factory.mktemp("hf_home")
    hub.requests.clear()
    out = _run(f"GRANTED = {GRANTED!r}\n" + ONLINE, endpoint=hub.endpoint, home=home)
    return out, hub.by_mark(), home


def _paths(requests, method: str | None = None) -> list[str]:
    return [p for m, p, _ in requests if method is None or m == method]


# --------------------------------------------------------------------------- ids


def test_card_id_is_the_default_and_both_ids_are_known():
    import inspect

    import pv4kit

    assert PV4_HUB_ID == CARD_ID and PV4_HUB_IDS == (CARD_ID, REFERENCE_ID)
    assert inspect.signature(pv4kit.load).parameters["source"].default == CARD_ID


def test_one_hub_id_rule(tmp_path, monkeypatch):
    """``owner/name`` as the hub validates it; an existing path, a Path object or a file name is not one."""
    from pv4kit.related import _common

    for text in (CARD_ID, REFERENCE_ID, "PersonalAILab/PersonaFeedback", "Qwen/Qwen2.5-7B", "a/b"):
        assert looks_like_hub_id(text), text
    for text in ("data", "./a/b", "/abs/x", "~/x/y", "a/b/c", "a--b/c", "a/b..c", "a/b.git", "-a/b", "a/b-"):
        assert not looks_like_hub_id(text), text
    for text in ("runs/predictions.parquet", "out/qa.csv", "x/y.jsonl"):
        assert not looks_like_hub_id(text), text  # a data file, never a dataset id
    monkeypatch.chdir(tmp_path)
    (tmp_path / "owner" / "name").mkdir(parents=True)
    assert not looks_like_hub_id("owner/name")  # an existing folder wins
    assert not looks_like_hub_id(Path("some/where"))  # a Path is a path
    # the related loaders use the same rule: a data-file name is "no such folder", not a hub download
    with pytest.raises(FileNotFoundError, match="no such folder"):
        _common.resolve_source("x/y.jsonl", repo_id="PersonalAILab/PersonaFeedback")


# --------------------------------------------------------------------------- downloads


def test_load_card_id_downloads_only_the_needed_files(online, hub):
    out, log, _ = online
    got = out["card_id"]
    assert got["kind"] == "hub" and got["source"] == CARD_ID  # pv4kit.load() with no argument
    assert got["n"] == 168 and got["users"] == 6
    assert got["named"] == 168  # categories joined from the downloaded raw/users/*/categories.txt
    sha = hub.repos[CARD_ID].sha
    base = f"/datasets/{CARD_ID}/resolve/{sha}/"
    requests = log["card_id"]
    assert f"/api/datasets/{CARD_ID}/revision/main" in _paths(requests, "GET")
    # the listing was fetched by the first (gated) attempt and cached per commit (trees/<sha>.json)
    listing = f"/api/datasets/{CARD_ID}/tree/{sha}?recursive=true&expand=false"
    assert listing in _paths(log["gated_401"], "GET") and listing not in _paths(requests)
    for split in ("train", "validation", "test"):
        assert base + f"data/{split}.parquet" in _paths(requests, "HEAD")
        assert base + f"data/{split}.parquet" in _paths(requests, "GET")
    assert base + "README.md" not in _paths(requests)  # allow_patterns: only what load() reads
    assert not any("/chats/" in p for p in _paths(requests))  # chats come from the parquet's documents
    assert all(auth for _, p, auth in requests if "/resolve/" in p)  # the token was sent


def test_related_benchmarks_load_from_their_hub_ids(online):
    out, log, _ = online
    assert out["pf"] > 0 and out["rc"] > 0
    for repo in ("PersonalAILab/PersonaFeedback", "leczhang/recenter-personalization"):
        assert f"/api/datasets/{repo}/revision/main" in _paths(log["related"], "GET")
        assert any(p.startswith(f"/datasets/{repo}/resolve/") for p in _paths(log["related"], "GET"))


# --------------------------------------------------------------------------- failures, one message each


def test_gated_without_token_says_log_in_and_where_to_ask(online, hub):
    out, log, _ = online
    err = out["gated_401"]
    assert err["type"] == "HubAccessError"
    msg = err["message"]
    assert "gated" in msg and "hf auth login" in msg and "HF_TOKEN" in msg and "no token" in msg
    assert f"{hub.endpoint}/datasets/{CARD_ID}" in msg  # the page where access is requested
    assert any(
        "/resolve/" in p for p in _paths(log["gated_401"], "HEAD")
    )  # refused at the file, as the hub does
    assert out["cli_rc"] == 1 and out["cli_stderr"].count("\n") == 1 and "hf auth login" in out["cli_stderr"]


def test_gated_with_a_token_without_access_says_request_access(online, hub):
    out, _, _ = online
    msg = out["gated_403"]["message"]
    assert out["gated_403"]["type"] == "HubAccessError" and "403" in msg
    assert f"{hub.endpoint}/datasets/{CARD_ID}" in msg and "hf auth login" in msg
    assert "hf_someone_else" not in msg  # the token is never printed


def test_reference_id_not_found_says_the_card_id_exists(online):
    out, log, _ = online
    msg = out["reference_id"]["message"]
    assert out["reference_id"]["type"] == "HubNotFoundError"
    assert "'memorilla/PersonalizationV4' was not found" in msg
    assert f"exists as '{CARD_ID}'" in msg and f'pv4kit.load("{CARD_ID}")' in msg
    assert f"/api/datasets/{CARD_ID}" in _paths(log["reference_id"], "GET")  # it asked, it did not guess


def test_unknown_related_id_has_no_alternative(online):
    out, _, _ = online
    msg = out["unknown_related"]["message"]
    assert "'PersonalAILab/PersonaFeedbackX' was not found" in msg and "exists as" not in msg


def test_card_id_not_found_says_the_reference_id_exists(pv4_files, tmp_path):
    with FakeHub() as other:
        other.add_dataset(REFERENCE_ID, pv4_files)
        out = _run(
            "out['err'] = error_of(pv4kit.load)\n"
            "out['ok'] = pv4kit.load('memorilla/PersonalizationV4').kind\n",
            endpoint=other.endpoint,
            home=tmp_path,
        )
    msg = out["err"]["message"]
    assert f"'{CARD_ID}' was not found" in msg and f"exists as '{REFERENCE_ID}'" in msg
    assert out["ok"] == "hub"  # both ids are accepted


def test_offline_mode_has_its_own_message_and_uses_the_cache(online, hub):
    """HF_HUB_OFFLINE=1: what was downloaded loads from the cache; what was not gets its own message."""
    _, _, home = online
    hub.requests.clear()
    out = _run(
        "out['n'] = len(pv4kit.load().questions)\n"
        "out['err'] = error_of(pv4kit.load, 'memorilla/PersonalizationV4')\n"
        "from pv4kit.related import personafeedback as pf\n"
        "out['pf'] = error_of(pf.load_personafeedback, 'PersonalAILab/PersonaFeedbackX')\n",
        endpoint=hub.endpoint,
        home=home,
        offline=True,
    )
    assert out["n"] == 168
    for err in (out["err"], out["pf"]):
        assert err["type"] == "HubOfflineError"
        assert "HF_HUB_OFFLINE" in err["message"] and "hf download" in err["message"]
        assert "gated" not in err["message"]
    assert not hub.requests  # offline means no request at all


def test_refused_connection_has_its_own_message(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = _run(
        "out['err'] = error_of(pv4kit.load, 'MemoryAsModality/PersonalizationV4')\n",
        endpoint=f"http://127.0.0.1:{port}",
        home=tmp_path,
    )
    msg = out["err"]["message"]
    assert out["err"]["type"] == "HubUnreachableError"
    assert f"http://127.0.0.1:{port}" in msg and "hf download" in msg
    assert "HF_HUB_OFFLINE" not in msg and "gated" not in msg
