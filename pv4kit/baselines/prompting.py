"""Answer prompts: the reference's message layout and pv4kit's fit of documents to a budget.

The layout is ``evaluate_baselines.py``'s: a system turn, then one user turn of the documents joined by blank
lines, a blank line and the question (not stripped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: version of the answer prompt layout, recorded in every run's config
PROMPT_VERSION = "pv4kit-answer-1"
SYSTEM_PROMPT = "You are a helpful assistant."
DOCUMENT_SEPARATOR = "\n\n"
#: tokens added per message by a chat template (role header and end marker); covered by the margin
TEMPLATE_OVERHEAD = 5


def build_messages(
    question: str, documents: Sequence[str] = (), *, system: str | None = SYSTEM_PROMPT, suffix: str = ""
) -> list[dict[str, str]]:
    """The chat messages of one answer request: system turn (none when ``system`` is empty), user turn.

    Example:
        >>> build_messages("Which gift?", ["chat one", "chat two"])[1]["content"]
        'chat one\\n\\nchat two\\n\\nWhich gift?'
    """
    for name, text in [*((f"documents[{i}]", d) for i, d in enumerate(documents)), ("question", question)]:
        if not isinstance(text, str):
            raise TypeError(f"{name}: expected str, got {type(text).__name__}")
    user = {"role": "user", "content": DOCUMENT_SEPARATOR.join([*documents, question + suffix])}
    return [{"role": "system", "content": system}, user] if system else [user]


@dataclass(frozen=True)
class FitResult:
    """Which documents of one prompt fit the budget.

    Attributes:
        kept: Positions kept, in display order.
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

    ``doc_tokens``: each document's tokens, in display order; ``fixed_tokens``: always kept (system prompt,
    question, template); ``priority``: positions most relevant first (default: the last dropped first);
    ``separator_tokens``: one blank-line separator's tokens (one per document).
    """
    n = len(doc_tokens)
    order = list(range(n)) if priority is None else [int(i) for i in priority]
    if sorted(order) != list(range(n)):
        raise ValueError(f"priority: expected a permutation of 0..{n - 1}, got {order}")
    sizes = [int(t) + separator_tokens for t in doc_tokens]
    full = total = fixed_tokens + sum(sizes)
    dropped: list[int] = []
    for pos in reversed(order):
        if total <= budget:
            break
        dropped.append(pos)
        total -= sizes[pos]
    kept = sorted(set(range(n)) - set(dropped))
    return FitResult(kept=kept, dropped=dropped, prompt_tokens=total, full_tokens=full, fits=total <= budget)


def fixed_prompt_tokens(question: str, *, system: str | None, counter: Any) -> int:
    """Tokens of the parts never dropped: system prompt, question, and the template overhead."""
    parts = [question] + ([system] if system else [])
    return sum(counter.count(parts)) + TEMPLATE_OVERHEAD * len(parts)


def count_documents(docs: Sequence[str], counter: Any, *, memo: dict[str, int]) -> list[int]:
    """Token counts of ``docs``, each distinct text counted once and remembered in ``memo``."""
    todo = [d for d in dict.fromkeys(docs) if d not in memo]
    memo.update(zip(todo, counter.count(todo), strict=True))
    return [memo[d] for d in docs]
