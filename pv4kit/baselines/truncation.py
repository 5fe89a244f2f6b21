"""The reference's front truncation of answer prompts, and how a truncated prompt reaches the server.

The reference tokenises the whole chat prompt and keeps its last ``max_input_tokens`` ids
(:func:`pv4kit.baselines.tokens.truncate_front`): the system turn and the chat header go first, then the
oldest chats; the question at the end survives. A chat endpoint takes messages, not ids, so a cut prompt
cannot be sent as a chat. pv4kit sends it as the reference's engine receives it:

* **vLLM and llama.cpp**: ``POST /v1/completions`` with ``prompt`` = the kept token ids (both servers take a
  list of ints as a prompt and add nothing to it), so the decoder sees exactly the reference's ids;
* **llama-cpp-python** (no token-id prompts): the kept ids decoded to text, sent as a completions prompt
  (the server re-tokenises it; the cut point can merge differently, so it is recorded as ``"text"``);
* **an estimate** (no token ids at all): the messages themselves are cut (system turn first, then the front
  of the user turn) to the estimated budget and sent as a chat, recorded as ``"messages (estimate)"``;
* **other endpoints** (the OpenAI API, the Responses protocol): nothing can carry the cut ids, so pv4kit
  refuses before sending anything and names ``--truncation relevance`` and ``--max-model-len``.

Prompts that fit are sent as chat messages, rendered by the server's own template (with
``chat_template_kwargs={"enable_thinking": false}`` on vLLM), which is the reference's rendering when the
server's template is the decoder's.

pv4kit's own rule, ``truncation="relevance"`` (:func:`relevance_requests`), drops whole documents instead,
the least relevant first, until the counted prompt fits. :func:`context_report` writes what either rule
did as ``context.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pv4kit.baselines.attributes import count_documents
from pv4kit.baselines.prompting import (
    FitResult,
    TokenCounter,
    build_messages,
    fit_documents,
    fixed_prompt_tokens,
)
from pv4kit.baselines.tokens import (
    REFERENCE_CONTEXT_KEYS,
    ChatTokenizer,
    ServerInfo,
    reference_context,
    truncate_front,
)

logger = logging.getLogger(__name__)

#: servers whose completions endpoint takes a prompt of token ids
TOKEN_PROMPT_SERVERS = ("vllm", "llama.cpp")


@dataclass(frozen=True)
class Request:
    """What is sent for one question.

    Attributes:
        messages: The chat messages, or one ``{"role": "user", "content", "prompt_token_ids"}`` message for
            the completions endpoint.
        completions: Whether it goes to ``/v1/completions`` (a cut prompt) rather than the chat endpoint.
        full_tokens: The untruncated prompt length (what ``context.json`` describes).
        prompt_tokens: The length actually sent.
        sent_as: ``"chat"``, ``"token ids"``, ``"text"`` or ``"messages (estimate)"``.
    """

    messages: list[dict[str, Any]]
    completions: bool
    full_tokens: int
    prompt_tokens: int
    sent_as: str

    @property
    def truncated(self) -> bool:
        """Whether the prompt was cut."""
        return self.prompt_tokens < self.full_tokens


def front_requests(
    chats: Sequence[list[dict[str, str]]],
    *,
    tokenizer: ChatTokenizer,
    budget: int,
    server_kind: str,
    protocol: str,
    progress: bool = False,
) -> list[Request]:
    """Tokenise every chat, cut the over-long ones from the front, and say how each is sent.

    Args:
        chats: One message list per question (system turn, user turn).
        tokenizer: The prompt tokenizer (:func:`pv4kit.baselines.tokens.get_chat_tokenizer`).
        budget: ``max_input_tokens`` (:func:`pv4kit.baselines.tokens.reference_budget`).
        server_kind: :attr:`pv4kit.baselines.tokens.ServerInfo.kind` of the endpoint.
        protocol: The run's protocol (``"chat"`` or ``"responses"``).
        progress: A progress bar over the questions.

    Returns:
        One :class:`Request` per chat.

    Raises:
        ValueError: When a prompt must be cut and the endpoint cannot take the cut prompt (before anything
            is sent).
    """
    from tqdm.auto import tqdm

    out: list[Request] = []
    unsendable: list[int] = []
    for chat in tqdm(chats, desc="prompt tokens", disable=not progress, leave=False):
        if not tokenizer.exact:
            full = tokenizer.length(chat)
            if full <= budget:
                out.append(Request(list(chat), False, full, full, "chat"))
                continue
            cut = tokenizer.truncate_messages(chat, budget)  # type: ignore[attr-defined]
            out.append(Request(cut, False, full, tokenizer.length(cut), "messages (estimate)"))
            continue
        ids = tokenizer.encode_chat(chat)
        if len(ids) <= budget:
            out.append(Request(list(chat), False, len(ids), len(ids), "chat"))
            continue
        kept = truncate_front(ids, budget)
        if protocol == "chat" and server_kind in TOKEN_PROMPT_SERVERS:
            message = {"role": "user", "content": "", "prompt_token_ids": kept}
            out.append(Request([message], True, len(ids), len(kept), "token ids"))
        elif protocol == "chat" and server_kind == "llama-cpp-python" and hasattr(tokenizer, "decode"):
            text = tokenizer.decode(kept)  # type: ignore[attr-defined]
            out.append(Request([{"role": "user", "content": text}], True, len(ids), len(kept), "text"))
        else:
            unsendable.append(len(ids))
            out.append(Request(list(chat), False, len(ids), len(ids), "unsendable"))
    if unsendable:
        raise ValueError(
            f"{len(unsendable)} of {len(chats)} prompts are over the budget of {budget} tokens "
            f"(max_model_len - max_new_tokens - margin; the longest has {max(unsendable)}) and the reference "
            f"cuts them from the front, but this endpoint ({server_kind}, protocol {protocol!r}) cannot take "
            "a prompt of token ids (vLLM and llama.cpp can); pass truncation='relevance' (drop the least "
            f"relevant chats) or a max_model_len=N that fits {max(unsendable)} tokens and the answer; "
            "nothing was sent"
        )
    n_cut = sum(r.truncated for r in out)
    if n_cut:
        how = sorted({r.sent_as for r in out if r.truncated})
        logger.warning(
            "%d of %d prompts are over %d tokens and were cut from the front (sent as %s)",
            n_cut,
            len(out),
            budget,
            ", ".join(how),
        )
    return out


def relevance_requests(
    questions: Sequence[str],
    documents: Sequence[list[str]],
    priorities: Sequence[list[int] | None],
    *,
    system: str | None,
    counter: TokenCounter,
    budget: int,
) -> tuple[list[Request], list[FitResult]]:
    """pv4kit's rule: whole documents dropped, lowest priority first, until each prompt fits ``budget``.

    Args:
        questions: One question per prompt.
        documents: Each prompt's documents in display order.
        priorities: Each prompt's positions into its documents, most relevant first (``None``: display
            order; see :func:`pv4kit.baselines.prompting.fit_documents`).
        system: The system prompt.
        counter: How to count tokens (each distinct document is counted once).
        budget: Largest prompt in tokens.

    Returns:
        One chat :class:`Request` and one :class:`~pv4kit.baselines.prompting.FitResult` per prompt.
    """
    memo: dict[str, int] = {}
    sep_tokens = max(1, counter.count(["\n\n"])[0])
    requests, fitted = [], []
    for q, docs, priority in zip(questions, documents, priorities, strict=True):
        fit = fit_documents(
            count_documents(docs, counter, memo=memo),
            fixed_tokens=fixed_prompt_tokens(q, system=system, counter=counter),
            budget=budget,
            priority=priority,
            separator_tokens=sep_tokens,
        )
        fitted.append(fit)
        msgs = build_messages(q, [docs[i] for i in fit.kept], system=system)
        requests.append(Request(msgs, False, fit.full_tokens, fit.prompt_tokens, "chat"))
    return requests, fitted


def context_report(
    requests: Sequence[Request],
    fitted: Sequence[FitResult],
    *,
    max_model_len: int,
    max_input_tokens: int,
    truncation: str,
    counter: str,
    exact: bool,
    server: ServerInfo | None = None,
) -> dict[str, Any]:
    """The ``context.json`` record: the reference's keys, units and rounding, then pv4kit's under ``pv4kit``.

    The reference's figures describe the **untruncated** prompt lengths (each request's ``full_tokens``;
    ``fit_rate`` in percent, see :func:`pv4kit.baselines.tokens.reference_context`). ``pv4kit`` holds how they
    were counted (``counter``, ``exact``: false for the chars/4 estimate), the truncation rule, how the cut
    prompts were sent, the sent lengths, and for ``truncation="relevance"`` the chats dropped (``fitted``)
    and the prompts still over budget.
    """
    out = reference_context(
        [r.full_tokens for r in requests], max_model_len=max_model_len, max_input_tokens=max_input_tokens
    )
    assert tuple(out) == REFERENCE_CONTEXT_KEYS
    sent = np.asarray([r.prompt_tokens for r in requests], dtype=np.int64)
    how: dict[str, int] = {}
    for r in requests:
        how[r.sent_as] = how.get(r.sent_as, 0) + 1
    out["pv4kit"] = {
        "token_counter": counter,
        "exact": bool(exact),
        "truncation": truncation,
        "sent_as": how,
        "mean_sent_prompt_tokens": round(float(sent.mean()), 1),
        "max_sent_prompt_tokens": int(sent.max()),
        "documents_dropped": int(sum(len(f.dropped) for f in fitted)),
        "num_over_budget": int(sum(not f.fits for f in fitted)),
        "server_kind": server.kind if server else None,
        "server_max_model_len": server.max_model_len if server else None,
    }
    return out
