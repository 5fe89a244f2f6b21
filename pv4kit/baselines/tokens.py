"""Prompt tokens: the reference's budget and ``context.json``, the server probe, and one family of tokenizers.

Every tokenizer has a ``name`` (recorded in ``context.json``), ``exact``, and ``count(texts)`` for plain text
and/or ``length(messages)`` for a whole chat; exact ones also ``encode_chat``.
"""

from __future__ import annotations

import json
import logging
import math
import os
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pv4kit.baselines.prompting import TEMPLATE_OVERHEAD
from pv4kit.llm.config import Message
from pv4kit.redact import redact_url

logger = logging.getLogger(__name__)

#: tokens the reference keeps free besides the output (``GENERATION_RESERVE``)
GENERATION_RESERVE = 32
#: what vLLM's chat template receives so that a thinking model answers directly
NO_THINKING = {"enable_thinking": False}


def reference_budget(max_model_len: int, max_new_tokens: int, *, margin: int = GENERATION_RESERVE) -> int:
    """The reference's prompt budget: ``max(max_model_len - max_new_tokens - margin, 1)``.

    Clamped to 1 as the reference's ``prepare_prompts`` does: every prompt is then cut to its last token.
    """
    return max(int(max_model_len) - int(max_new_tokens) - int(margin), 1)


def reference_context(lengths: Sequence[int], *, max_model_len: int, max_input_tokens: int) -> dict[str, Any]:
    """``context.json`` as the reference writes it, from the **untruncated** prompt lengths.

    ``fit_rate`` in percent (2 decimals), ``mean_prompt_tokens`` with one decimal, NumPy's linear
    percentiles as floats, ``tokens_dropped`` the sum of what went over the budget.
    """
    n = np.asarray(lengths, dtype=np.int64)
    over = n > max_input_tokens
    return {
        "max_model_len": int(max_model_len),
        "max_input_tokens": int(max_input_tokens),
        "num_prompts": int(n.size),
        "num_truncated": int(over.sum()),
        "fit_rate": round(100.0 * float(np.mean(~over)), 2),
        "mean_prompt_tokens": round(float(n.mean()), 1),
        "max_prompt_tokens": int(n.max()),
        "tokens_dropped": int(np.maximum(n - max_input_tokens, 0).sum()),
        **{f"p{q}_prompt_tokens": float(np.percentile(n, q)) for q in (50, 90, 95, 99)},
    }


def vllm_serve_flags(*, max_model_len: int, yarn_factor: float | None = None) -> list[str]:
    """The ``vllm serve`` flags of the reference's engine for one context window (and YaRN factor)."""
    flags = ["--dtype", "bfloat16", "--max-model-len", str(int(max_model_len)), "--generation-config", "vllm"]
    if yarn_factor is not None:
        # YaRN over Qwen3's native 32,768 positions
        rope = {"rope_type": "yarn", "factor": float(yarn_factor), "original_max_position_embeddings": 32_768}
        override = {"rope_scaling": rope, "max_position_embeddings": int(max_model_len)}
        flags += ["--hf-overrides", "'" + json.dumps(override, separators=(",", ":")) + "'"]
    return flags


@dataclass(frozen=True)
class ServerInfo:
    """What ``GET /v1/models`` (and llama.cpp's ``/props``, vLLM's ``/version``) say about an endpoint.

    Attributes:
        kind: ``"vllm"``, ``"llama.cpp"``, ``"llama-cpp-python"``, ``"other"`` or ``"unknown"`` (no answer).
        max_model_len: The served context length, when reported.
        models: The model ids listed.
        version: The engine's version, when reported.
        served_model: What the model id is served from (vLLM's ``root``).
    """

    kind: str
    max_model_len: int | None = None
    models: tuple[str, ...] = ()
    version: str | None = None
    served_model: str | None = None


def server_root(base_url: str) -> str:
    """The server root of an OpenAI base URL (``http://host:8000/v1`` -> ``http://host:8000``)."""
    return base_url.rstrip("/").removesuffix("/v1")


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

    ``base_url`` ``None`` is the OpenAI API (not asked); ``model`` is the ``/v1/models`` entry read (default:
    the first); the key in ``api_key_env`` is sent as a bearer token when set.
    """
    if not base_url:
        return ServerInfo("other")
    import httpx

    root, headers = server_root(base_url), _auth(api_key_env)

    def ask(method: str, url: str, **kwargs: Any) -> dict[str, Any] | None:
        """The JSON object a 200 answer holds ({} for another status; None on an error or a non-object)."""
        try:
            r = httpx.request(method, url, timeout=timeout, headers=headers, **kwargs)
            body = r.json() if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return None
        return body if isinstance(body, dict) else None

    found = ask("GET", f"{base_url.rstrip('/')}/models")
    if found is None:
        return ServerInfo("unknown")
    listing = [m for m in found.get("data", []) if isinstance(m, dict)]
    models = tuple(str(m.get("id")) for m in listing)
    entry = next((m for m in listing if m.get("id") == model), listing[0] if listing else {})
    owner = str(entry.get("owned_by", ""))
    if owner == "vllm":
        mml, served = entry.get("max_model_len"), entry.get("root")
        version = (ask("GET", f"{root}/version") or {}).get("version")
        version, served = (str(v) if v else None for v in (version, served))
        return ServerInfo("vllm", int(mml) if mml is not None else None, models, version, served)
    if owner == "llamacpp":
        props = ask("GET", f"{root}/props") or {}
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        return ServerInfo("llama.cpp", int(n_ctx) if n_ctx else None, models)
    if "tokens" in (ask("POST", f"{root}/extras/tokenize", json={"input": "hi"}) or {}):
        return ServerInfo("llama-cpp-python", None, models)
    return ServerInfo("other", None, models)


def _post(url: str, body: dict[str, Any], *, timeout: float, api_key_env: str | None = None) -> Any:
    """The JSON answer of ``POST url`` (an error status raises)."""
    import httpx

    r = httpx.post(url, json=body, timeout=timeout, headers=_auth(api_key_env))
    r.raise_for_status()
    return r.json()


@dataclass
class CharEstimate:
    """The fallback text counter: ``ceil(len(text) / chars_per_token)``."""

    chars_per_token: float = 4.0
    name: str = "chars/4"
    exact: bool = False

    def count(self, texts: Sequence[str]) -> list[int]:
        """Estimated tokens of each text."""
        return [math.ceil(len(t) / self.chars_per_token) for t in texts]


@dataclass
class LlamaServerCounter:
    """Text counts from a ``llama-cpp-python`` server's ``POST /extras/tokenize`` (memoised per text)."""

    base_url: str
    timeout: float = 30.0
    name: str = "llama.cpp /extras/tokenize"
    exact: bool = False
    _memo: dict[str, int] = field(default_factory=dict, repr=False)

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of each text."""
        url = f"{server_root(self.base_url)}/extras/tokenize"
        for text in dict.fromkeys(t for t in texts if t and t not in self._memo):
            body = {"input": text, "add_special": False}
            self._memo[text] = len(_post(url, body, timeout=self.timeout)["tokens"])
        return [self._memo[t] if t else 0 for t in texts]


@dataclass
class EstimateChatTokenizer:
    """An estimate of a chat's prompt length: a text counter over the contents plus template overhead."""

    counter: Any = field(default_factory=CharEstimate)
    exact: bool = False

    @property
    def name(self) -> str:
        """The counter's name, marked as an estimate."""
        return f"estimate: {self.counter.name} + template overhead"

    def length(self, messages: Sequence[Message]) -> int:
        """Estimated prompt length (3 tokens for the assistant header of the generation prompt)."""
        body = sum(self.counter.count([m["content"] for m in messages]))
        return body + TEMPLATE_OVERHEAD * len(messages) + 3

    def truncate_messages(self, messages: Sequence[Message], budget: int) -> list[Message]:
        """Front truncation: the system turn first, then the longest suffix of the user turn that fits."""
        msgs = [dict(m) for m in messages]
        while len(msgs) > 1 and self.length(msgs) > budget:
            msgs.pop(0)
        if self.length(msgs) <= budget:
            return msgs
        text = msgs[0]["content"]

        def fits(cut: int) -> bool:
            return self.length([{**msgs[0], "content": text[cut:]}]) <= budget

        cut = bisect_left(range(len(text) + 1), True, key=fits)  # the smallest cut from the front that fits
        return [{**msgs[0], "content": text[cut:]}]


class _Exact:
    """A tokenizer that encodes a chat to the decoder's prompt ids (``encode_chat``): its length is theirs."""

    exact = True

    def length(self, messages: Sequence[Message]) -> int:
        """The exact prompt length."""
        return len(self.encode_chat(messages))  # type: ignore[attr-defined]


@dataclass
class HFChatTokenizer(_Exact):
    """A Hugging Face tokenizer (a name/path, loaded here, or a loaded one) and its chat template."""

    tokenizer: Any
    name: str = ""

    def __post_init__(self) -> None:
        self.tok = self.tokenizer
        if isinstance(self.tokenizer, str):
            from transformers import AutoTokenizer

            try:
                self.tok = AutoTokenizer.from_pretrained(self.tokenizer, trust_remote_code=True)
            except (OSError, ValueError) as exc:
                raise OSError(
                    f"tokenizer: could not load {self.tokenizer!r} ({exc}); pass a local folder or a hub id "
                    "of the decoder"
                ) from exc
        label = self.tokenizer if isinstance(self.tokenizer, str) else None
        self.name = self.name or f"hf:{label or getattr(self.tok, 'name_or_path', '') or 'tokenizer'}"

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of each text, without special tokens."""
        if not texts:
            return []
        return [len(ids) for ids in self.tok(list(texts), add_special_tokens=False)["input_ids"]]

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:
        """The reference's prompt ids: the chat rendered (generation prompt, thinking off), encoded as is."""
        if not getattr(self.tok, "chat_template", None):
            raise ValueError(f"tokenizer: {self.tokenizer!r} has no chat template; pass the decoder's")
        text = self.tok.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True, enable_thinking=False
        )
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids, special tokens kept."""
        return self.tok.decode(list(ids), skip_special_tokens=False)


@dataclass
class ServerChatTokenizer(_Exact):
    """The server's own template and tokenizer (thinking off).

    vLLM (``kind="vllm"``): ``POST /tokenize`` with the messages; llama.cpp: ``POST /apply-template`` renders,
    ``POST /tokenize`` encodes (no BOS added).
    """

    base_url: str
    model: str | None = None
    kind: str = "vllm"
    timeout: float = 60.0
    api_key_env: str | None = "OPENAI_API_KEY"

    @property
    def name(self) -> str:
        """``vllm /tokenize`` or ``llama.cpp /apply-template + /tokenize``."""
        return "vllm /tokenize" if self.kind == "vllm" else "llama.cpp /apply-template + /tokenize"

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:
        """The server's prompt ids of the chat."""
        root, kw = server_root(self.base_url), {"timeout": self.timeout, "api_key_env": self.api_key_env}
        chat = {"messages": [dict(m) for m in messages], "chat_template_kwargs": dict(NO_THINKING)}
        if self.kind == "vllm":
            body = {"model": self.model, **chat, "add_generation_prompt": True, "add_special_tokens": False}
        else:
            prompt = _post(f"{root}/apply-template", chat, **kw)["prompt"]
            body = {"content": prompt, "add_special": False, "parse_special": True}
        tokens = _post(f"{root}/tokenize", body, **kw)["tokens"]
        return [int(t["id"]) if isinstance(t, dict) else int(t) for t in tokens]


def get_token_counter(tokenizer: str | None = None, *, base_url: str | None = None) -> Any:
    """The text counter of ``truncation="relevance"``.

    ``tokenizer``: ``"chars"`` (the estimate), ``"server"`` (the ``llama-cpp-python`` server at ``base_url``)
    or a Hugging Face name/path; ``None``: that server when ``base_url`` is one, else the estimate.
    """
    if tokenizer == "chars":
        return CharEstimate()
    if tokenizer and tokenizer != "server":
        return HFChatTokenizer(tokenizer)
    if tokenizer == "server" and not base_url:
        raise ValueError("tokenizer='server' needs base_url (a llama.cpp server)")
    if tokenizer == "server" or (base_url and probe_server(base_url).kind == "llama-cpp-python"):
        return LlamaServerCounter(base_url)
    logger.info("no tokenizer given; counting prompt tokens as ceil(chars / 4)")
    return CharEstimate()


def get_chat_tokenizer(
    tokenizer: Any = None,
    *,
    base_url: str | None = None,
    model: str | None = None,
    server: ServerInfo | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
) -> Any:
    """The prompt tokenizer of ``truncation="front"``: ``tokenizer``, else the server's, else the estimate.

    ``tokenizer`` is a tokenizer of this module (used as is), a Hugging Face name/path or tokenizer object,
    ``"chars"`` (the estimate), ``"server"`` (the server's, required) or ``None`` (the server's when it has
    one); ``server`` is the endpoint's :class:`ServerInfo` (probed when ``None``).
    """
    if hasattr(tokenizer, "length"):
        return tokenizer
    if tokenizer not in (None, "", "chars", "server"):
        return HFChatTokenizer(tokenizer)
    if server is None and base_url and tokenizer != "chars":
        server = probe_server(base_url, model, api_key_env=api_key_env)
    kind = server.kind if server and base_url and tokenizer != "chars" else "other"
    if (kind == "vllm" and model) or kind == "llama.cpp":
        return ServerChatTokenizer(base_url, model, kind, api_key_env=api_key_env)
    if kind == "llama-cpp-python":  # it tokenizes text but cannot render its chat template over HTTP
        msg = "llama-cpp-python: prompt tokens are its /extras/tokenize counts plus an estimated template "
        logger.warning(msg + "overhead (pass tokenizer=NAME_OR_PATH for exact counts)")
        return EstimateChatTokenizer(LlamaServerCounter(base_url))
    if tokenizer == "server":
        raise ValueError(
            f"tokenizer='server': {redact_url(base_url) if base_url else 'the endpoint'} ({kind}) has no "
            "tokenizer endpoint pv4kit knows (vLLM /tokenize, llama.cpp /apply-template + /tokenize); pass "
            "tokenizer=NAME_OR_PATH"
        )
    logger.warning(
        "tokenizer=%r: prompt tokens are estimated as ceil(chars / 4) plus template overhead; pass tokenizer="
        "NAME_OR_PATH (the decoder's Hugging Face tokenizer) for the reference's exact counts",
        tokenizer,
    )
    return EstimateChatTokenizer()
