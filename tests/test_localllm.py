import contextlib
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
    with pytest.raises(ValueError, match="base_url"):
        with localllm.resolve_endpoint("local", "http://x/v1"):
            pass


def test_a_missing_vllm_environment_is_one_message_naming_make_vllm(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PV4KIT_VLLM_PYTHON", str(tmp_path / "no-venv" / "python"))
    with pytest.raises(FileNotFoundError, match=r"local engine \(vLLM\) is not installed.*`make vllm`"):
        with localllm.resolve_endpoint("local"):
            pass
    from pv4kit.cli import main

    assert main(["-q", "demo", "--raw", str(tmp_path / "nothing")]) == 1  # before any stage ran
    assert "`make vllm`" in capsys.readouterr().err
    monkeypatch.setenv("PV4KIT_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PV4KIT_VLLM_PYTHON", sys.executable)
    with pytest.raises(FileNotFoundError, match=r"local model is not prepared.*`make vllm`"):
        localllm.smollm2_dir()


def test_a_server_that_dies_at_start_names_its_kept_log(monkeypatch, tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'engine core failed: out of cheese' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PV4KIT_VLLM_PYTHON", str(fake))
    with pytest.raises(RuntimeError, match=r"exited with code 3.*its log is .*vllm-m-\d+\.log") as err:
        with localllm.vllm_server("m", served_model_name="m", log_dir=tmp_path / "logs", startup_timeout=30):
            pass
    assert "out of cheese" in str(err.value)
    (log,) = (tmp_path / "logs").glob("vllm-m-*.log")
    assert "out of cheese" in log.read_text()  # kept after the failure


# a stand-in for the vLLM server: answers /health, writes its pid, runs until killed
_STUB_SERVER = """
import http.server, os, sys
from pathlib import Path

port, pidfile = int(sys.argv[1]), sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"{}" if self.path == "/health" else b""
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
from pathlib import Path
from pv4kit.llm import local as localllm

stub, pidfile, model = sys.argv[1:4]
localllm.server_command = lambda model, *, port, **_: [sys.executable, stub, str(port), pidfile]
logs = Path(pidfile).parent
with localllm.vllm_server(model, served_model_name="stub", startup_timeout=30, log_dir=logs):
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


def test_server_command_is_the_fast_one_process_start():
    cmd = localllm.server_command(
        Path("m"), port=1, served_model_name="a", runner="pooling", max_model_len=512, python="py"
    )
    assert cmd[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    for flag, value in [("--runner", "pooling"), ("--max-model-len", "512"), ("--dtype", "float32")]:
        assert cmd[cmd.index(flag) + 1] == value
    assert "--enforce-eager" in cmd and cmd[cmd.index("--distributed-executor-backend") + 1] == "uni"
    with pytest.raises(ValueError, match="runner must be"):
        localllm.start_server("m", served_model_name="a", runner="embed")
