"""Answer prompts for the baselines: pure message building, token counting and the context budget.

The layout is the reference's (``evaluate_baselines.py``): a system turn ``"You are a helpful
assistant."``, then one user turn made of the documents joined by blank lines, a blank line and the
question (not stripped). With no documents the user turn is the question alone.

**Context budget** (``truncation="relevance"``, an option; the default is the reference's front cut of the
whole prompt's tokens, :mod:`pv4kit.baselines.truncation`). The budget is the reference's
:func:`pv4kit.baselines.tokens.reference_budget`: ``max(max_model_len - max_new_tokens - margin, 1)``.
When a prompt does not fit, the *least relevant* documents are dropped one at a time (never the system prompt
or the question). Prompt sizes are counted as the sum of their parts (system, each document, the
separators, the question) plus :data:`TEMPLATE_OVERHEAD` tokens per message for the chat template. BPE merges
across the blank-line separators make that exact to within a few tokens, which the margin absorbs; each
document is counted once per user, so long contexts are not re-tokenised for every question.

**Token counters** (:func:`get_token_counter`): a Hugging Face tokenizer (``--tokenizer``, loaded lazily
with transformers; the local model's folder for ``--model local``), a ``llama-cpp-python`` server's
``/extras/tokenize``, else the documented estimate ``ceil(chars / 4)``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pv4kit.text import list_items

logger = logging.getLogger(__name__)

#: version of the answer prompt layout, recorded in every run's config
PROMPT_VERSION = "pv4kit-answer-1"
SYSTEM_PROMPT = "You are a helpful assistant."
DOCUMENT_SEPARATOR = "\n\n"
#: tokens added per message by a chat template (role header and end marker); covered by the margin
TEMPLATE_OVERHEAD = 5
DEFAULT_MARGIN = 32


def build_user_content(question: str, documents: Sequence[str] = (), *, suffix: str = "") -> str:
    """The user turn: documents joined by blank lines, a blank line, then the question and ``suffix``."""
    for i, doc in enumerate(documents):
        if not isinstance(doc, str):
            raise TypeError(f"documents[{i}]: expected str, got {type(doc).__name__}")
    if not isinstance(question, str):
        raise TypeError(f"question: expected str, got {type(question).__name__}")
    body = question + suffix
    if not documents:
        return body
    return DOCUMENT_SEPARATOR.join(documents) + DOCUMENT_SEPARATOR + body


def build_messages(
    question: str,
    documents: Sequence[str] = (),
    *,
    system: str | None = SYSTEM_PROMPT,
    suffix: str = "",
) -> list[dict[str, str]]:
    """The chat messages of one answer request (pure).

    Args:
        question: The question, used as given (not stripped, as in the reference).
        documents: Context documents in the order they should appear.
        system: System prompt; ``None`` or ``""`` sends no system turn.
        suffix: Text appended right after the question (the reference's protocol suffix; empty for PV4).

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``.

    Example:
        >>> build_messages("Which gift?", ["chat one", "chat two"])[1]["content"]
        'chat one\\n\\nchat two\\n\\nWhich gift?'
    """
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": build_user_content(question, documents, suffix=suffix)})
    return messages


# --------------------------------------------------------------------------- token counting


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of texts; ``name`` is recorded in ``context.json``."""

    name: str

    def count(self, texts: Sequence[str]) -> list[int]:
        """Number of tokens of each text (no special tokens added)."""


@dataclass
class CharEstimate:
    """The fallback estimate: ``ceil(len(text) / chars_per_token)`` (4 characters per token for English)."""

    chars_per_token: float = 4.0
    name: str = "chars/4"

    def count(self, texts: Sequence[str]) -> list[int]:
        """Estimated tokens of each text."""
        return [math.ceil(len(t) / self.chars_per_token) for t in texts]


@dataclass
class LlamaServerCounter:
    """Exact counts from a llama.cpp (``llama-cpp-python``) server's ``POST /extras/tokenize``.

    Args:
        base_url: The server's OpenAI base URL (``http://127.0.0.1:PORT/v1``); ``/v1`` is stripped.
        timeout: Seconds per request.
    """

    base_url: str
    timeout: float = 30.0
    name: str = "llama.cpp /extras/tokenize"
    _memo: dict[str, int] = field(default_factory=dict, repr=False)

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of each text (memoised per text)."""
        import httpx

        root = self.base_url.rstrip("/")
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        out = []
        with httpx.Client(timeout=self.timeout) as client:
            for text in texts:
                if text not in self._memo:
                    if not text:
                        self._memo[text] = 0
                    else:
                        r = client.post(f"{root}/extras/tokenize", json={"input": text, "add_special": False})
                        r.raise_for_status()
                        self._memo[text] = len(r.json()["tokens"])
                out.append(self._memo[text])
        return out


@dataclass
class HFTokenizerCounter:
    """Counts with a Hugging Face tokenizer (loaded lazily with ``transformers.AutoTokenizer``)."""

    name_or_path: str
    name: str = ""
    _tok: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.name = self.name or f"hf:{self.name_or_path}"

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of each text, without special tokens."""
        if self._tok is None:
            try:
                from transformers import AutoTokenizer
            except ImportError:  # pragma: no cover - a declared dependency
                raise ImportError(
                    "tokenizer: a Hugging Face tokenizer needs transformers: pip install transformers"
                ) from None
            try:
                self._tok = AutoTokenizer.from_pretrained(self.name_or_path)
            except OSError as exc:
                raise OSError(
                    f"tokenizer: could not load {self.name_or_path!r} ({exc}); pass a local folder, or leave "
                    "tokenizer unset for the chars/4 estimate"
                ) from exc
        if not texts:
            return []
        enc = self._tok(list(texts), add_special_tokens=False)["input_ids"]  # type: ignore[operator]
        return [len(ids) for ids in enc]


def _probe_llama_server(base_url: str) -> bool:
    import httpx

    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    try:
        r = httpx.post(f"{root}/extras/tokenize", json={"input": "hi"}, timeout=5.0)
        return r.status_code == 200 and "tokens" in r.json()
    except (httpx.HTTPError, ValueError):
        return False


def get_token_counter(
    tokenizer: str | None = None, *, base_url: str | None = None, probe: bool = True
) -> TokenCounter:
    """Pick a token counter.

    Args:
        tokenizer: ``"chars"`` for the estimate, ``"server"`` for the llama.cpp server at ``base_url``,
            or a Hugging Face tokenizer name/path; ``None`` tries the server (when ``base_url`` is a
            llama.cpp server) and falls back to the estimate.
        base_url: The model's OpenAI base URL.
        probe: With ``tokenizer=None``, ask ``base_url`` whether it serves ``/extras/tokenize``.

    Returns:
        A :class:`TokenCounter`.
    """
    if tokenizer == "chars":
        return CharEstimate()
    if tokenizer == "server":
        if not base_url:
            raise ValueError("tokenizer='server' needs base_url (a llama.cpp server)")
        return LlamaServerCounter(base_url)
    if tokenizer:
        return HFTokenizerCounter(tokenizer)
    if base_url and probe and _probe_llama_server(base_url):
        return LlamaServerCounter(base_url)
    logger.info("no tokenizer given; counting prompt tokens as ceil(chars / 4)")
    return CharEstimate()


# --------------------------------------------------------------------------- the budget


@dataclass(frozen=True)
class FitResult:
    """Which documents of one prompt fit the budget.

    Attributes:
        kept: Positions (into the ``documents`` given to :func:`fit_documents`) kept, in display order.
        dropped: Positions dropped, least relevant first.
        prompt_tokens: Counted prompt size with the kept documents.
        full_tokens: Counted prompt size with every document.
        fits: Whether ``prompt_tokens <= budget`` (false only when even the bare question is too long).
    """

    kept: list[int]
    dropped: list[int]
    prompt_tokens: int
    full_tokens: int
    fits: bool

    @property
    def truncated(self) -> bool:
        """Whether any document was dropped."""
        return bool(self.dropped)


def fit_documents(
    doc_tokens: Sequence[int],
    *,
    fixed_tokens: int,
    budget: int,
    priority: Sequence[int] | None = None,
    separator_tokens: int = 1,
) -> FitResult:
    """Drop the least relevant documents until the prompt fits ``budget`` (pure).

    Args:
        doc_tokens: Token count of each document, in display order.
        fixed_tokens: Tokens that are always kept: system prompt, question and template overhead.
        budget: Largest prompt size in tokens.
        priority: Document positions from most to least relevant (default: display order, so the last
            document is dropped first).
        separator_tokens: Tokens of one blank-line separator (one per document).

    Returns:
        A :class:`FitResult`.
    """
    n = len(doc_tokens)
    order = list(range(n)) if priority is None else [int(i) for i in priority]
    if sorted(order) != list(range(n)):
        raise ValueError(f"priority: expected a permutation of 0..{n - 1}, got {order}")
    sizes = [int(t) + separator_tokens for t in doc_tokens]
    full = fixed_tokens + sum(sizes)
    total = full
    keep = set(range(n))
    dropped: list[int] = []
    for pos in reversed(order):
        if total <= budget:
            break
        keep.discard(pos)
        dropped.append(pos)
        total -= sizes[pos]
    return FitResult(
        kept=sorted(keep), dropped=dropped, prompt_tokens=total, full_tokens=full, fits=total <= budget
    )


def fixed_prompt_tokens(question: str, *, system: str | None, counter: TokenCounter, suffix: str = "") -> int:
    """Tokens of the parts never dropped: system prompt, question, and the template overhead."""
    parts = [question + suffix] + ([system] if system else [])
    return sum(counter.count(parts)) + TEMPLATE_OVERHEAD * len(parts)


# --------------------------------------------------------------------------- the attributes pipeline

#: stage 1 (once per user and chunk of chats): the user's attributes, one per line
ATTRIBUTE_EXTRACTION = (
    "The conversations above are between a user and an assistant. List the user's personal attributes "
    "that they reveal: preferences, habits, values, skills and circumstances. Write one attribute per "
    'line, each line starting with "- ", as a short statement about the user. Write nothing else.'
)
#: stage 2 (once per question): which numbered attributes matter for the question
ATTRIBUTE_SELECTION = (
    "Attributes of a user:\n{attributes}\n\nQuestion: {question}\n\nWhich of the numbered attributes are "
    "relevant to answering the question? Reply with their numbers separated by commas (for example: 2, 5), "
    "or NONE if none is relevant. Reply with nothing else."
)
ATTRIBUTE_HEADER = "Attributes of the user:"

_SELECTION = re.compile(r"^(?:none|\d{1,3}(?:\s*,\s*\d{1,3})*)$", re.IGNORECASE)


def extraction_messages(chats: Sequence[str], *, system: str | None = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """Stage 1: the chats, then the extraction instruction (the documents-then-question layout)."""
    return build_messages(ATTRIBUTE_EXTRACTION, chats, system=system)


def parse_attributes(text: str, *, max_attributes: int = 50) -> list[str]:
    """Bulleted or numbered lines of a stage-1 answer, deduplicated (case-insensitive), in order."""
    out: list[str] = []
    seen: set[str] = set()
    for item in list_items(text or "", loose=True, marked_only=True):  # pv4kit's one list reading
        key = item.casefold()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
        if len(out) >= max_attributes:
            break
    return out


def selection_messages(
    question: str, attributes: Sequence[str], *, system: str | None = SYSTEM_PROMPT
) -> list[dict[str, str]]:
    """Stage 2: the numbered attributes and the question; the model answers with numbers or NONE."""
    listing = "\n".join(f"{i}. {a}" for i, a in enumerate(attributes, start=1))
    prompt = ATTRIBUTE_SELECTION.format(attributes=listing, question=question)
    return build_messages(prompt, (), system=system)


def parse_selection(text: str, n: int) -> list[int] | None:
    """Strictly parse a stage-2 answer into 0-based attribute positions.

    Accepts ``NONE`` or comma-separated numbers in ``1..n`` (surrounding whitespace and one trailing
    period allowed); anything else, including an out-of-range number, gives ``None`` (the caller falls
    back to all attributes and counts it).

    Example:
        >>> parse_selection("2, 5", 6), parse_selection("none", 6), parse_selection("I think 2", 6)
        ([1, 4], [], None)
    """
    t = (text or "").strip().rstrip(".").strip()
    if not _SELECTION.match(t):
        return None
    if t.lower() == "none":
        return []
    nums = [int(x) for x in t.split(",")]
    if any(not 1 <= k <= n for k in nums):
        return None
    return sorted({k - 1 for k in nums})


def attribute_document(attributes: Sequence[str]) -> str:
    """Stage 3's context document: a header and one ``- attribute`` line each (``""`` when none)."""
    if not attributes:
        return ""
    return ATTRIBUTE_HEADER + "\n" + "\n".join(f"- {a}" for a in attributes)
