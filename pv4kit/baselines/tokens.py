"""Exact prompt tokens for the baselines: chat tokenizers, the server probe, front truncation, context.json.

The reference (``evaluate_baselines.py``) renders each prompt with the decoder's chat template
(``add_generation_prompt=True``, ``enable_thinking=False``), encodes the text without adding special
tokens, and keeps the **last** ``max_input_tokens = max(max_model_len - max_new_tokens - 32, 1)`` ids: an
over-long prompt loses its system turn and oldest chats first and always keeps the question. Its
``context.json`` describes the *untruncated* lengths.

Where the ids come from (:func:`get_chat_tokenizer`):

* ``--tokenizer NAME_OR_PATH``: the Hugging Face tokenizer and its chat template (:class:`HFChatTokenizer`);
* else the server's own tokenizer: vLLM's ``POST /tokenize`` with the messages (:class:`VLLMChatTokenizer`)
  or llama.cpp's ``POST /apply-template`` then ``POST /tokenize`` (:class:`LlamaCppChatTokenizer`);
* else an estimate (:class:`EstimateChatTokenizer`, ``ceil(chars / 4)`` or a server that tokenizes text
  but cannot render the template, such as ``llama-cpp-python``), logged and marked ``exact: false`` in
  ``context.json``.

:func:`probe_server` asks ``GET /v1/models`` what the server is (vLLM reports ``owned_by: "vllm"`` and
its ``max_model_len``; llama.cpp ``owned_by: "llamacpp"``, its context from ``GET /props``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pv4kit.redact import redact_url

logger = logging.getLogger(__name__)

#: tokens the reference keeps free besides the output (``GENERATION_RESERVE``)
GENERATION_RESERVE = 32
#: the percentiles of ``context.json``
PERCENTILES = (50, 90, 95, 99)
#: keys of the reference's ``context.json``, in its order
REFERENCE_CONTEXT_KEYS = (
    "max_model_len",
    "max_input_tokens",
    "num_prompts",
    "num_truncated",
    "fit_rate",
    "mean_prompt_tokens",
    "max_prompt_tokens",
    "tokens_dropped",
    *(f"p{q}_prompt_tokens" for q in PERCENTILES),
)
#: the reference's PV4 full-context window: 65,536 tokens with YaRN x2 over Qwen3's native 32,768
FULL_CONTEXT_LENGTH = 65_536
RETRIEVAL_CONTEXT_LENGTH = 32_768
FULL_CONTEXT_YARN_FACTOR = 2.0
YARN_ORIGINAL_MAX_POSITION_EMBEDDINGS = 32_768
#: what vLLM's chat template receives so that a thinking model answers directly
NO_THINKING = {"enable_thinking": False}

Message = dict[str, str]


def reference_budget(max_model_len: int, max_new_tokens: int, *, margin: int = GENERATION_RESERVE) -> int:
    """The reference's prompt budget: ``max(max_model_len - max_new_tokens - margin, 1)`` (``margin`` 32).

    Below ``max_new_tokens + margin + 1`` (289 tokens by default) the budget is clamped to 1, as the
    reference's ``prepare_prompts`` does: every prompt is then cut to its last token.
    """
    return max(int(max_model_len) - int(max_new_tokens) - int(margin), 1)


def truncate_front(ids: Sequence[int], budget: int) -> list[int]:
    """The last ``budget`` ids of a prompt (the whole prompt when it fits)."""
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    ids = list(ids)
    return ids[len(ids) - budget :] if len(ids) > budget else ids


def reference_context(lengths: Sequence[int], *, max_model_len: int, max_input_tokens: int) -> dict[str, Any]:
    """``context.json`` as the reference writes it, from the **untruncated** prompt lengths.

    ``fit_rate`` is the percentage of prompts kept whole (2 decimals), ``mean_prompt_tokens`` has one
    decimal, the percentiles are NumPy's (linear interpolation) as floats, ``tokens_dropped`` sums what
    went over the budget.

    Raises:
        ValueError: On an empty list (the reference's statistics are undefined there).
    """
    if len(lengths) == 0:
        raise ValueError("lengths: no prompts to describe")
    n = np.asarray(lengths, dtype=np.int64)
    over = n > max_input_tokens
    out: dict[str, Any] = {
        "max_model_len": int(max_model_len),
        "max_input_tokens": int(max_input_tokens),
        "num_prompts": int(n.size),
        "num_truncated": int(over.sum()),
        "fit_rate": round(100.0 * float(np.mean(~over)), 2),
        "mean_prompt_tokens": round(float(n.mean()), 1),
        "max_prompt_tokens": int(n.max()),
        "tokens_dropped": int(np.maximum(n - max_input_tokens, 0).sum()),
    }
    for q in PERCENTILES:
        out[f"p{q}_prompt_tokens"] = float(np.percentile(n, q))
    return out


def vllm_serve_flags(*, max_model_len: int, yarn_factor: float | None = None) -> list[str]:
    """The ``vllm serve`` flags of the reference's engine for one context window.

    ``--generation-config vllm`` keeps the model's ``generation_config.json`` from changing greedy
    decoding; the YaRN override is the reference's ``hf_overrides`` for a factor.
    """
    import json

    flags = ["--dtype", "bfloat16", "--max-model-len", str(int(max_model_len)), "--generation-config", "vllm"]
    if yarn_factor is not None:
        override = {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": float(yarn_factor),
                "original_max_position_embeddings": YARN_ORIGINAL_MAX_POSITION_EMBEDDINGS,
            },
            "max_position_embeddings": int(max_model_len),
        }
        flags += ["--hf-overrides", "'" + json.dumps(override, separators=(",", ":")) + "'"]
    return flags


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class ServerInfo:
    """What ``GET /v1/models`` (and llama.cpp's ``/props``) say about an endpoint.

    Attributes:
        kind: ``"vllm"``, ``"llama.cpp"``, ``"llama-cpp-python"``, ``"other"`` or ``"unknown"`` (no answer).
        max_model_len: The served context length, when the server reports one.
        models: The model ids it lists.
        version: The engine's version (vLLM's ``GET /version``), when it reports one.
        served_model: What the model id is served from (vLLM's ``root``: a folder or hub id).
    """

    kind: str
    max_model_len: int | None = None
    models: tuple[str, ...] = ()
    version: str | None = None
    served_model: str | None = None


def server_root(base_url: str) -> str:
    """The server root of an OpenAI base URL (``http://host:8000/v1`` -> ``http://host:8000``)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _auth(api_key_env: str | None) -> dict[str, str]:
    """The ``Authorization`` header for a server started with a key (from the environment, never stored)."""
    key = os.environ.get(api_key_env) if api_key_env else None
    return {"Authorization": f"Bearer {key}"} if key else {}


def probe_server(
    base_url: str | None,
    model: str | None = None,
    *,
    timeout: float = 10.0,
    api_key_env: str | None = "OPENAI_API_KEY",
) -> ServerInfo:
    """Ask an endpoint what it is and how long a context it serves (never raises on a network error).

    Args:
        base_url: The OpenAI base URL (``None``: the OpenAI API, not asked).
        model: The model id whose entry of ``/v1/models`` is read (default: the first).
        timeout: Seconds per request.
        api_key_env: Environment variable with the server's key, sent as a bearer token when set.
    """
    if not base_url:
        return ServerInfo("other")
    import httpx

    root = server_root(base_url)
    headers = _auth(api_key_env)
    try:
        r = httpx.get(f"{base_url.rstrip('/')}/models", timeout=timeout, headers=headers)
        listing = r.json().get("data", []) if r.status_code == 200 else []
    except (httpx.HTTPError, ValueError, AttributeError):
        return ServerInfo("unknown")
    models = tuple(str(m.get("id")) for m in listing if isinstance(m, dict))
    entry = next((m for m in listing if isinstance(m, dict) and m.get("id") == model), None)
    entry = entry or (listing[0] if listing and isinstance(listing[0], dict) else {})
    owner = str(entry.get("owned_by", ""))
    if owner == "vllm":
        mml, version = entry.get("max_model_len"), None
        try:
            version = httpx.get(f"{root}/version", timeout=timeout, headers=headers).json().get("version")
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
        root_of = entry.get("root")
        return ServerInfo(
            "vllm",
            int(mml) if mml is not None else None,
            models,
            version=str(version) if version else None,
            served_model=str(root_of) if root_of else None,
        )
    if owner == "llamacpp":
        n_ctx = None
        try:
            props = httpx.get(f"{root}/props", timeout=timeout, headers=headers).json()
            n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
        return ServerInfo("llama.cpp", int(n_ctx) if n_ctx else None, models)
    try:
        r = httpx.post(f"{root}/extras/tokenize", json={"input": "hi"}, timeout=timeout, headers=headers)
        if r.status_code == 200 and "tokens" in r.json():
            return ServerInfo("llama-cpp-python", None, models)
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    return ServerInfo("other", None, models)


# --------------------------------------------------------------------------- chat tokenizers


@runtime_checkable
class ChatTokenizer(Protocol):
    """Turns a chat into the decoder's prompt ids (``exact``) or estimates its length."""

    name: str
    exact: bool

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:
        """The prompt ids of a chat with the generation prompt, thinking off, no added special tokens."""

    def length(self, messages: Sequence[Message]) -> int:
        """The prompt's length in tokens."""


class _ExactLength:
    """``length`` of a tokenizer that encodes exactly: the number of its prompt ids."""

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:  # pragma: no cover - overridden
        raise NotImplementedError

    def length(self, messages: Sequence[Message]) -> int:
        """The exact prompt length."""
        return len(self.encode_chat(messages))


@dataclass
class HFChatTokenizer(_ExactLength):
    """A Hugging Face tokenizer's chat template and vocabulary, as the reference uses them.

    Args:
        tokenizer: A name or path for ``AutoTokenizer.from_pretrained``, or a loaded tokenizer.
    """

    tokenizer: Any
    name: str = ""
    exact: bool = True
    _tok: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.tokenizer, str):
            self._tok = self.tokenizer
            self.name = self.name or f"hf:{getattr(self._tok, 'name_or_path', '') or 'tokenizer'}"
        else:
            self.name = self.name or f"hf:{self.tokenizer}"

    @property
    def tok(self) -> Any:
        """The loaded tokenizer (loaded on first use)."""
        if self._tok is None:
            try:
                from transformers import AutoTokenizer
            except ImportError:  # pragma: no cover - a declared dependency
                raise ImportError(
                    "tokenizer: a Hugging Face tokenizer needs transformers: pip install transformers"
                ) from None
            try:
                self._tok = AutoTokenizer.from_pretrained(self.tokenizer, trust_remote_code=True)
            except (OSError, ValueError) as exc:
                raise OSError(
                    f"tokenizer: could not load {self.tokenizer!r} ({exc}); pass a local folder or a hub id "
                    "of the decoder"
                ) from exc
            if not getattr(self._tok, "chat_template", None):
                raise ValueError(f"tokenizer: {self.tokenizer!r} has no chat template; pass the decoder's")
        return self._tok

    def render(self, messages: Sequence[Message]) -> str:
        """The chat rendered by the template (generation prompt on, thinking off)."""
        return self.tok.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True, enable_thinking=False
        )

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:
        """The reference's prompt ids: the rendered text encoded without added special tokens."""
        return list(self.tok.encode(self.render(messages), add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids, special tokens kept."""
        return self.tok.decode(list(ids), skip_special_tokens=False)


@dataclass
class VLLMChatTokenizer(_ExactLength):
    """vLLM's own template and tokenizer: ``POST /tokenize`` with the messages.

    The request is ``{"model", "messages", "add_generation_prompt": true, "add_special_tokens": false,
    "chat_template_kwargs": {"enable_thinking": false}}``; the answer ``{"count", "max_model_len",
    "tokens"}``.
    """

    base_url: str
    model: str
    timeout: float = 60.0
    name: str = "vllm /tokenize"
    exact: bool = True
    api_key_env: str | None = "OPENAI_API_KEY"

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:
        """The server's prompt ids of the chat."""
        import httpx

        body = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "add_generation_prompt": True,
            "add_special_tokens": False,
            "chat_template_kwargs": dict(NO_THINKING),
        }
        r = httpx.post(
            f"{server_root(self.base_url)}/tokenize",
            json=body,
            timeout=self.timeout,
            headers=_auth(self.api_key_env),
        )
        r.raise_for_status()
        return [int(t) for t in r.json()["tokens"]]


@dataclass
class LlamaCppChatTokenizer(_ExactLength):
    """llama.cpp's server: ``POST /apply-template`` renders, ``POST /tokenize`` encodes (no BOS added)."""

    base_url: str
    timeout: float = 60.0
    name: str = "llama.cpp /apply-template + /tokenize"
    exact: bool = True
    api_key_env: str | None = "OPENAI_API_KEY"

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:
        """The server's prompt ids of the chat."""
        import httpx

        root = server_root(self.base_url)
        with httpx.Client(timeout=self.timeout, headers=_auth(self.api_key_env)) as client:
            r = client.post(
                f"{root}/apply-template",
                json={"messages": [dict(m) for m in messages], "chat_template_kwargs": dict(NO_THINKING)},
            )
            r.raise_for_status()
            prompt = r.json()["prompt"]
            r = client.post(
                f"{root}/tokenize", json={"content": prompt, "add_special": False, "parse_special": True}
            )
            r.raise_for_status()
        return [int(t) if not isinstance(t, dict) else int(t["id"]) for t in r.json()["tokens"]]


#: chat-template tokens per message assumed by the estimate (role header and end marker)
ESTIMATE_OVERHEAD_PER_MESSAGE = 5
#: the assistant header of the generation prompt assumed by the estimate
ESTIMATE_GENERATION_PROMPT = 3


@dataclass
class EstimateChatTokenizer:
    """An estimate: a text counter (``ceil(chars / 4)`` by default) over the contents plus template overhead.

    Args:
        counter: A :class:`pv4kit.baselines.prompting.TokenCounter` for plain text (default: chars/4).
    """

    counter: Any = None
    name: str = ""
    exact: bool = False

    def __post_init__(self) -> None:
        if self.counter is None:
            from pv4kit.baselines.prompting import CharEstimate

            self.counter = CharEstimate()
        self.name = self.name or f"estimate: {self.counter.name} + template overhead"

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:  # pragma: no cover - never exact
        """Not available for an estimate."""
        raise NotImplementedError("an estimate has no token ids")

    def length(self, messages: Sequence[Message]) -> int:
        """Estimated prompt length."""
        body = sum(self.counter.count([m["content"] for m in messages]))
        return body + ESTIMATE_OVERHEAD_PER_MESSAGE * len(messages) + ESTIMATE_GENERATION_PROMPT

    def truncate_messages(self, messages: Sequence[Message], budget: int) -> list[Message]:
        """Front truncation of the messages: the system turn first, then the front of the user turn.

        The kept user text is the longest suffix whose estimated prompt fits ``budget`` (binary search on
        the character offset); the question at the end survives unless it alone is over the budget.
        """
        msgs = [dict(m) for m in messages]
        if self.length(msgs) <= budget:
            return msgs
        while len(msgs) > 1:
            msgs.pop(0)
            if self.length(msgs) <= budget:
                return msgs
        text = msgs[0]["content"]
        lo, hi = 0, len(text)  # smallest cut that fits
        while lo < hi:
            mid = (lo + hi) // 2
            if self.length([{**msgs[0], "content": text[mid:]}]) <= budget:
                hi = mid
            else:
                lo = mid + 1
        return [{**msgs[0], "content": text[lo:]}]


def get_chat_tokenizer(
    tokenizer: Any = None,
    *,
    base_url: str | None = None,
    model: str | None = None,
    server: ServerInfo | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
) -> ChatTokenizer:
    """Pick the prompt tokenizer: ``--tokenizer``, else the server's, else the logged estimate.

    Args:
        tokenizer: A Hugging Face name/path or tokenizer object; ``"chars"`` for the estimate; ``"server"``
            to require the server's; ``None`` to use the server's when it has one.
        base_url: The endpoint's OpenAI base URL.
        model: The model id (vLLM's ``/tokenize`` wants it).
        server: The endpoint's :class:`ServerInfo` (probed when ``None`` and ``base_url`` is set).
        api_key_env: Environment variable with the server's key.
    """
    if tokenizer is not None and not isinstance(tokenizer, str):
        return HFChatTokenizer(tokenizer)
    if tokenizer == "chars":
        logger.warning(
            "prompt tokens are estimated as ceil(chars / 4) plus template overhead (tokenizer='chars')"
        )
        return EstimateChatTokenizer()
    if tokenizer and tokenizer != "server":
        return HFChatTokenizer(tokenizer)
    if server is None and base_url:
        server = probe_server(base_url, model, api_key_env=api_key_env)
    kind = server.kind if server else "other"
    if kind == "vllm" and base_url and model:
        return VLLMChatTokenizer(base_url, model, api_key_env=api_key_env)
    if kind == "llama.cpp" and base_url:
        return LlamaCppChatTokenizer(base_url, api_key_env=api_key_env)
    if kind == "llama-cpp-python" and base_url:
        from pv4kit.baselines.prompting import LlamaServerCounter

        logger.warning(
            "llama-cpp-python cannot render its chat template over HTTP: prompt tokens are its "
            "/extras/tokenize counts of the contents plus an estimated template overhead (pass "
            "tokenizer=NAME_OR_PATH for exact counts)"
        )
        return EstimateChatTokenizer(LlamaServerCounter(base_url))
    if tokenizer == "server":
        raise ValueError(
            f"tokenizer='server': {redact_url(base_url) if base_url else 'the endpoint'} ({kind}) has no "
            "tokenizer endpoint pv4kit "
            "knows "
            "(vLLM /tokenize, llama.cpp /apply-template + /tokenize); pass tokenizer=NAME_OR_PATH"
        )
    logger.warning(
        "no tokenizer: prompt tokens are estimated as ceil(chars / 4) plus template overhead; pass "
        "tokenizer=NAME_OR_PATH "
        "(the decoder's Hugging Face tokenizer) for the reference's exact counts"
    )
    return EstimateChatTokenizer()
