"""Corrupt cache files (issue 13.11), and caches on a full or read-only disk (issue 23.9).

Each store is first written for real, then damaged on disk in one of three ways: garbage bytes, a file
cut in half, and a valid SQLite database with the wrong schema. Opening it again must not raise
``sqlite3.DatabaseError``: the file is moved aside (its bytes kept, for a post-mortem), a warning names
both paths, a new store is built and the work goes on.
"""

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pv4kit.embeddings.cache import EmbeddingCache, hash_texts
from pv4kit.embeddings.models import embed_texts
from pv4kit.llm.client import complete
from pv4kit.llm.config import LLMConfig
from pv4kit.llm.store import usage_frame
from tests.llm_server import FakeLLMServer

KINDS = ("garbage", "truncated", "wrong_schema")


def _damage(path, kind):
    """Damage the SQLite file at ``path`` in place; returns the damaged bytes."""
    assert not path.with_name(path.name + "-wal").exists()  # the last close checkpointed the WAL
    if kind == "garbage":
        data = np.random.default_rng(0).integers(0, 256, size=8192, dtype=np.uint8).tobytes()
        path.write_bytes(data)
    elif kind == "truncated":
        data = path.read_bytes()
        assert len(data) > 8 * 4096, "the store is too small for a meaningful cut"
        data = data[: len(data) // 2]
        path.write_bytes(data)
    else:
        path.unlink()
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE emb (x TEXT)")
        con.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, body BLOB)")
        con.execute("INSERT INTO responses VALUES ('k', x'00')")
        con.commit()
        con.close()
        data = path.read_bytes()
    return data


def _aside(path):
    found = sorted(path.parent.glob(path.name + ".corrupt-*"))
    found = [p for p in found if not p.name.endswith(("-wal", "-shm"))]
    assert len(found) == 1, f"expected one moved-aside file beside {path}, found {found}"
    return found[0]


@pytest.mark.parametrize("kind", KINDS)
def test_corrupt_embedding_store_is_moved_aside_and_rebuilt(tmp_path, kind, caplog, fake_embedder):
    texts = [f"text number {i} " + "x" * 200 for i in range(300)]
    cache = EmbeddingCache(tmp_path / "emb")
    first = embed_texts(texts, embedder=fake_embedder, cache=cache, progress=False)
    path = cache.model_dir(fake_embedder.cache_key) / "embeddings.sqlite"
    damaged = _damage(path, kind)

    with caplog.at_level(logging.WARNING):
        again = embed_texts(texts, embedder=fake_embedder, cache=cache, progress=False)
    np.testing.assert_array_equal(again, first)
    aside = _aside(path)
    assert aside.read_bytes() == damaged  # the damaged file is kept, not deleted
    warning = next(r.getMessage() for r in caplog.records if "corrupt" in r.getMessage())
    assert str(path) in warning and str(aside) in warning
    # the rebuilt store works: everything is cached now
    assert cache.count(fake_embedder.cache_key) == len(texts)
    n = fake_embedder.n_encoded
    embed_texts(texts, embedder=fake_embedder, cache=cache, progress=False)
    assert fake_embedder.n_encoded == n


@pytest.mark.parametrize("kind", KINDS)
def test_corrupt_embedding_store_get_and_put_directly(tmp_path, kind):
    cache = EmbeddingCache(tmp_path / "emb")
    hashes = hash_texts([f"t{i}" + "y" * 300 for i in range(200)])
    cache.put("m", hashes, np.ones((200, 64), dtype=np.float32))
    _damage(cache.model_dir("m") / "embeddings.sqlite", kind)
    assert cache.get("m", hashes) == {}
    assert cache.put("m", hashes[:3], np.ones((3, 64))) == 3
    assert cache.count("m") == 3


@pytest.mark.parametrize("kind", KINDS)
def test_corrupt_llm_cache_is_moved_aside_and_rebuilt(tmp_path, kind, caplog):
    path = tmp_path / "llm.sqlite"
    reqs = [[{"role": "user", "content": f"question {i} " + "z" * 400}] for i in range(120)]
    with FakeLLMServer() as srv:
        config = LLMConfig(model="fake-model", base_url=srv.base_url, protocol="chat", temperature=0.0)
        first = complete(reqs, llm=config, cache=path, progress=False)
        damaged = _damage(path, kind)
        n = len(srv.requests)
        with caplog.at_level(logging.WARNING):
            again = complete(reqs, llm=config, cache=path, progress=False)
        assert [r.text for r in again] == [r.text for r in first]
        assert len(srv.requests) == n + len(reqs)  # the cache was lost: asked again, and stored again
        third = complete(reqs, llm=config, cache=path, progress=False)
        assert all(r.cached for r in third) and len(srv.requests) == n + len(reqs)
    aside = _aside(path)
    assert aside.read_bytes() == damaged
    warning = next(r.getMessage() for r in caplog.records if "corrupt" in r.getMessage())
    assert str(path) in warning and str(aside) in warning
    assert len(usage_frame(path)) == 2 * len(reqs)


def test_usage_frame_of_a_corrupt_ledger_names_the_file(tmp_path):
    path = tmp_path / "llm.sqlite"
    path.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(ValueError, match=r"llm\.sqlite.*(corrupt|not a SQLite)"):
        usage_frame(path)
    assert path.read_bytes() == b"definitely not sqlite" * 100  # reading never moves or changes it


def test_llm_cache_damaged_mid_file_is_recovered_when_read(tmp_path, caplog):
    """Damage deep inside the file passes the open checks; SQLite's "malformed" on a read is handled too."""
    path = tmp_path / "llm.sqlite"
    reqs = [[{"role": "user", "content": f"question {i} " + "z" * 400}] for i in range(120)]
    with FakeLLMServer() as srv:
        config = LLMConfig(model="fake-model", base_url=srv.base_url, protocol="chat", temperature=0.0)
        first = complete(reqs, llm=config, cache=path, progress=False)
        data = bytearray(path.read_bytes())
        mid = len(data) // 2 // 4096 * 4096
        data[mid + 100 : mid + 4000] = b"\xff" * 3900  # one page in the middle: header and size stay valid
        path.write_bytes(bytes(data))
        with caplog.at_level(logging.WARNING):
            again = complete(reqs, llm=config, cache=path, progress=False)
        assert [r.text for r in again] == [r.text for r in first]
        third = complete(reqs, llm=config, cache=path, progress=False)
        assert all(r.cached for r in third)
    aside = _aside(path)
    assert aside.read_bytes() == bytes(data)
    assert any("malformed" in r.getMessage() and str(aside) in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- 23.9 a full or read-only disk

REPO = Path(__file__).resolve().parents[1]


def _on_small_disk(disk, command, *, size="64k", read_only=False, setup=""):
    """Run ``command`` (argv) where ``disk`` is a fresh tmpfs of ``size`` (read-only after the shell
    ``setup`` when ``read_only``), in a private mount namespace that vanishes with the process."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode:
        pytest.skip("a small or read-only disk needs `unshare -m` (root)")
    disk.mkdir()
    script = f"mount -t tmpfs -o size={size} tmpfs '{disk}' && {setup} "
    script += f"mount -o remount,ro '{disk}' && " if read_only else ""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = ["unshare", "-m", "sh", "-c", script + 'exec "$@"', "sh", *command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO, env=env)


def _one_clear_line(proc, *words):
    err = proc.stderr.strip()
    assert proc.returncode == 1 and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("pv4kit answer: error: "), err
    assert all(w in errors[0] for w in words), err


@pytest.mark.parametrize("fault", ["full", "read-only", "read-only-existing"])
def test_llm_cache_on_a_full_or_read_only_disk_is_one_clear_error(tmp_path, fault):
    """`answer` whose cache is on a full or read-only disk: one line naming the file and the fix."""
    disk, seed = tmp_path / "disk", tmp_path / "seed.sqlite"
    with FakeLLMServer(responder=lambda protocol, body, nth: "A" * 20_000) as srv:
        if fault == "read-only-existing":
            config = LLMConfig(model="m", base_url=srv.base_url, protocol="chat")
            complete([[{"role": "user", "content": "x"}]], llm=config, cache=seed, progress=False)
        argv = [sys.executable, "-m", "pv4kit", "-q", "answer", "--data", "raw", "--method", "no_docs"]
        argv += ["--model", "m", "--tokenizer", "chars", "--limit", "12", "--base-url", srv.base_url]
        argv += ["--runs-dir", str(tmp_path / "runs"), "--cache", str(disk / "llm.sqlite")]
        setup = f"cp '{seed}' '{disk}/llm.sqlite' && " if fault == "read-only-existing" else ""
        proc = _on_small_disk(disk, argv, read_only=fault != "full", setup=setup)
    _one_clear_line(proc, str(disk / "llm.sqlite"), "PV4KIT_CACHE")


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_embedding_cache_on_a_full_or_read_only_disk_is_one_clear_error(tmp_path, fault):
    """EmbeddingCache.put on a full or read-only disk: an error naming the store and the fix."""
    disk = tmp_path / "disk"
    code = (
        "import numpy as np\n"
        "from pv4kit.embeddings.cache import EmbeddingCache\n"
        f"cache = EmbeddingCache({str(disk)!r})\n"
        "try:\n"
        "    cache.put('m', [str(i) for i in range(200)], np.ones((200, 384)))\n"
        "except OSError as exc:\n"
        "    raise SystemExit(f'{type(exc).__name__}: {exc}')\n"
    )
    proc = _on_small_disk(disk, [sys.executable, "-c", code], read_only=fault == "read-only")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "CacheStorageError" in proc.stderr and str(disk) in proc.stderr, proc.stderr
    assert "PV4KIT_CACHE" in proc.stderr, proc.stderr
