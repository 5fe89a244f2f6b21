"""Generation steps 1-4 (and step 5 when a user is complete), resumable and provenance-tracked.

Per user, under ``<output_dir>/user_N/`` (the release layout of :mod:`pv4kit.dataset.tree`):

1. ``categories.txt`` and 2. ``chat_topics.txt``: one call each, run together (neither needs the other);
3. ``chats/{i}.txt`` and 4. ``qa/{c}.txt``: one call per topic and per category, run together in one
   bounded pool as soon as the lists exist (questions need only the categories);
5. ``qa.csv``: built by :mod:`pv4kit.dataset.questions` once every question file exists.

Files are written as the reference writes them: a list is parsed with the reference's rule only (a
leading ``digits.`` and spaces removed, blank lines dropped) and joined with ``\\n`` (no trailing newline),
a chat is stripped and written as returned, a question file as returned, and ``qa.csv`` is written only
when it is absent and every chat and question file exists. A reply is asked again (next ``sample_index``,
up to ``max_retries`` times) only when it came back empty; failed requests are retried by
:mod:`pv4kit.llm.client`. Every output is still checked (list counts, the two-line ``Leo:``/``Assistant:``
chat, parseable question blocks) and its problems are recorded. pv4kit's repairs are options, off by default
(:class:`GenerationConfig`: ``repair_lists``, ``repair_chats``, ``reask_malformed``, ``rewrite_stale_qa``);
every repair that acts is reported and recorded in the manifest. The prompts are pv4kit's own, or the
reference's imported from a local checkout (``reference_prompts``, see :mod:`pv4kit.generation.prompt_sets`).
Files are written atomically as responses arrive; ``manifest.json`` records for every file the model,
protocol, reasoning effort, prompt set, version and hash, and a hash of the exact request, so a changed
persona, prompt or model marks the file *stale*: reported, and regenerated with ``regenerate_stale=True``. A
file with no manifest entry (a crash between writing it and the next manifest flush, or a tree made elsewhere)
is adopted when the response cache holds the same output for the current request, and otherwise reported as
*untracked* and kept.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit._io import atomic_write_text, sha256_text
from pv4kit.dataset.formats import format_qa_csv, read_list
from pv4kit.dataset.questions import build_question_table
from pv4kit.dataset.tree import list_personas
from pv4kit.generation.manifest import UserManifest, request_hash, sort_key
from pv4kit.generation.outputs import check_output, normalise_output, parse_list
from pv4kit.generation.prompt_sets import PromptSet, prompt_set
from pv4kit.llm.client import cache_key, complete
from pv4kit.llm.config import LLMConfig, LLMResponse
from pv4kit.llm.store import ResponseStore

__all__ = [
    "GenerationConfig",
    "UserResult",
    "check_output",
    "generate_user",
    "generate_users",
    "normalise_output",
    "parse_list",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """Settings of one generation run.

    Attributes:
        llm: Model for categories, topics and questions (reference: gpt-5.1, effort ``none``).
        chat_llm: Model for chats (reference: gpt-5-mini, effort ``minimal``).
        num_categories: Categories per user (step 1) = question files (step 4).
        num_topics: Topics per user (step 2) = chats (step 3).
        num_questions: Questions requested per category (step 4).
        max_retries: Re-asks of an empty reply (and, with ``reask_malformed``, of a malformed one).
        seed: Seed of step 5's answer shuffle.
        regenerate_stale: Regenerate files whose request (persona, prompt, model, options) changed.
        reference_prompts: A local checkout of the reference repository (or its ``prompts.py``) whose
            prompt functions build the requests; ``None`` uses pv4kit's own prompts.
        repair_lists: Also accept ``1)`` numbering and ``-``/``*``/bullet items in lists (pv4kit repair).
        repair_chats: Turn a literal ``\\n`` before ``Assistant:`` into a line break and drop blank lines
            between the two turns (pv4kit repair).
        reask_malformed: Ask again for a malformed output (wrong list count, chat format, incomplete
            question blocks) up to ``max_retries`` times before keeping it (pv4kit repair).
        rewrite_stale_qa: Rewrite an existing ``qa.csv`` that differs from what the question files give
            (pv4kit repair; the reference keeps an existing ``qa.csv``).
    """

    llm: LLMConfig
    chat_llm: LLMConfig
    num_categories: int = 10
    num_topics: int = 200
    num_questions: int = 15
    max_retries: int = 3
    seed: int = 42
    regenerate_stale: bool = False
    reference_prompts: str | Path | None = None
    repair_lists: bool = False
    repair_chats: bool = False
    reask_malformed: bool = False
    rewrite_stale_qa: bool = False

    def __post_init__(self) -> None:
        for name in ("num_categories", "num_topics", "num_questions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")


# --------------------------------------------------------------------------- one user


@dataclass
class _Item:
    step: str
    rel: str  # path relative to the user dir
    messages: list[dict[str, str]]
    llm: LLMConfig
    n: int
    done: bool = False
    last: tuple[str | None, list[str], LLMResponse] | None = None
    repairs: list[str] = field(default_factory=list)


@dataclass
class UserResult:
    """What happened to one user (one row of :func:`generate_users`' report)."""

    user_id: int
    status: str = "complete"
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calls: int = 0
    cached: int = 0
    questions: int | None = None
    seconds: float = 0.0


def _entry(
    item: _Item,
    content: str,
    problems: list[str],
    resp: LLMResponse,
    attempt: int,
    prompt_set: PromptSet,
    repairs: list[str],
) -> dict[str, Any]:
    return {
        "step": item.step,
        "model": item.llm.model,
        "protocol": item.llm.protocol,
        "reasoning_effort": item.llm.reasoning_effort,
        "temperature": item.llm.temperature,
        "max_output_tokens": item.llm.max_output_tokens,
        "prompt_set": prompt_set.name,
        "prompt_version": prompt_set.version,
        "template_sha256": prompt_set.template_hash(item.step),
        "prompts_sha256": prompt_set.sha256,
        "request_sha256": request_hash(item.messages, item.llm),
        "output_sha256": sha256_text(content),
        "sample_index": attempt,
        "valid": not problems,
        "problems": problems,
        "response_id": resp.response_id,
        "response_model": resp.model,
        "finish_reason": resp.finish_reason,
        "repairs": repairs,
    }


def _normalise(item: _Item, text: str, cfg: GenerationConfig) -> tuple[str | None, list[str], list[str]]:
    return normalise_output(
        item.step, text, n=item.n, repair_lists=cfg.repair_lists, repair_chats=cfg.repair_chats
    )


def _plan(items: list[_Item], ctx: _UserRun) -> list[_Item]:
    """Decide per item: fresh (skip), stale, untracked or to generate; returns the items to generate."""
    todo, unknown = [], []
    for item in items:
        path = ctx.user_dir / item.rel
        if not path.is_file():
            todo.append(item)
            continue
        entry = ctx.manifest.files.get(item.rel)
        if entry is None:
            unknown.append(item)
        elif entry.get("request_sha256") != request_hash(item.messages, item.llm):
            if ctx.cfg.regenerate_stale:
                todo.append(item)
            else:
                ctx.result.stale.append(item.rel)
        elif not entry.get("valid", True):
            ctx.result.malformed.append(item.rel)
    if unknown:
        adopted = _adopt(unknown, ctx.user_dir, ctx.manifest, ctx.cfg, ctx.cache)
        ctx.result.untracked.extend(item.rel for item in unknown if item.rel not in adopted)
    return todo


def _adopt(
    items: list[_Item], user_dir: Path, manifest: UserManifest, cfg: GenerationConfig, cache
) -> set[str]:
    """Record files without a manifest entry whose content the cache reproduces for the current request."""
    if cache is None or not Path(cache).is_file():
        return set()
    keys = {
        (item.rel, a): cache_key(item.messages, item.llm, sample_index=a)
        for item in items
        for a in range(cfg.max_retries + 1)
    }
    store = ResponseStore(cache)
    try:
        hits = store.get_many(list(keys.values()))
    finally:
        store.close()
    adopted = set()
    for item in items:
        on_disk = (user_dir / item.rel).read_text(encoding="utf-8")
        for a in range(cfg.max_retries + 1):
            resp = hits.get(keys[(item.rel, a)])
            if resp is None:
                continue
            content, problems, repairs = _normalise(item, resp.text, cfg)
            if content == on_disk:
                manifest.set(item.rel, _entry(item, content, problems, resp, a, manifest.prompts, repairs))
                adopted.add(item.rel)
                break
    return adopted


@dataclass
class _UserRun:
    """One user's run: where it writes, what it records, how it calls the model."""

    user_dir: Path
    manifest: UserManifest
    cfg: GenerationConfig
    result: UserResult
    cache: str | Path | None
    client: Any
    progress: bool
    user_id: int | None


def _run(items: list[_Item], ctx: _UserRun) -> None:
    """Generate ``items``, asking again for empty replies (and malformed ones with ``reask_malformed``)."""
    pending = list(items)
    prior_problems: dict[str, list[str]] = {}
    for attempt in range(ctx.cfg.max_retries + 1):
        if not pending:
            break
        pending = _attempt(pending, ctx, attempt=attempt, prior_problems=prior_problems)
    for item in items:
        ctx.result.repairs.extend(f"{item.rel}: {r}" for r in item.repairs)
        if item.done and item.last and item.last[1]:
            ctx.result.malformed.append(item.rel)
            logger.warning(
                "user %s: %s kept with problems: %s", ctx.user_id, item.rel, "; ".join(item.last[1])
            )


def _attempt(
    pending: list[_Item], ctx: _UserRun, *, attempt: int, prior_problems: dict[str, list[str]]
) -> list[_Item]:
    """One round of calls for ``pending`` (``sample_index`` ``attempt``); the items to ask again."""
    final = attempt == ctx.cfg.max_retries

    def on_result(i: int, resp: LLMResponse) -> None:
        _take(pending[i], resp, ctx, attempt=attempt, final=final, prior_problems=prior_problems)

    responses = complete(
        [it.messages for it in pending],
        llm=[it.llm for it in pending],
        cache=ctx.cache,
        step=[it.step for it in pending],
        user_id=ctx.user_id,
        sample_index=attempt,
        progress=ctx.progress,
        client=ctx.client,
        on_result=on_result,
    )
    ctx.result.calls += sum(not r.cached for r in responses)
    ctx.result.cached += sum(r.cached for r in responses)
    ctx.manifest.flush()
    retry = [it for it, r in zip(pending, responses, strict=True) if not it.done and r.error is None]
    for it, r in zip(pending, responses, strict=True):
        if r.error is not None:
            ctx.result.errors.append(f"{it.rel}: {r.error}")
    if retry and not final:
        logger.info(
            "user %s: asking again for %d empty or malformed outputs (%s)",
            ctx.user_id,
            len(retry),
            "; ".join(f"{it.rel}: {', '.join(it.last[1])}" for it in retry[:3]),
        )
    return retry


def _take(
    item: _Item,
    resp: LLMResponse,
    ctx: _UserRun,
    *,
    attempt: int,
    final: bool,
    prior_problems: dict[str, list[str]],
) -> None:
    """Write one reply's content (and its manifest entry), or keep it for asking again."""
    if resp.error is not None:
        item.last = (None, [resp.error], resp)
        return
    content, problems, repairs = _normalise(item, resp.text, ctx.cfg)
    item.last = (content, problems, resp)
    # as the reference: an empty reply is asked again, anything else is written as it came
    # (re-asking a malformed one is the reask_malformed repair)
    if content is not None and (not problems or not ctx.cfg.reask_malformed or final):
        if attempt and ctx.cfg.reask_malformed and prior_problems.get(item.rel):
            repairs = [*repairs, f"asked again after: {'; '.join(prior_problems[item.rel])}"]
        entry = _entry(item, content, problems, resp, attempt, ctx.manifest.prompts, repairs)
        ctx.manifest.set(item.rel, entry)
        atomic_write_text(ctx.user_dir / item.rel, content)
        item.done = True
        item.repairs = repairs
    elif content is not None:
        prior_problems[item.rel] = problems


def generate_user(
    persona_path: str | Path,
    user_dir: str | Path,
    *,
    config: GenerationConfig,
    cache: str | Path | None = None,
    client: Any = None,
    progress: bool = True,
    user_id: int | None = None,
) -> UserResult:
    """Run steps 1-5 for one user, completing what is missing.

    Args:
        persona_path: The persona profile ``user_N.txt``.
        user_dir: Output folder ``users/user_N``.
        config: Models and sizes.
        cache: SQLite response cache and usage ledger (see :func:`pv4kit.llm.client.complete`).
        client: Injected OpenAI-like client (tests).
        progress: Show progress bars.
        user_id: Id for logs and the ledger (default: from the file name).

    Returns:
        A :class:`UserResult`; ``status`` is ``complete``, ``incomplete`` (files missing) or ``stale``.
    """
    start = time.monotonic()
    persona_path, user_dir = Path(persona_path), Path(user_dir)
    if user_id is None:
        m = re.match(r"user_(\d+)\.txt$", persona_path.name)
        user_id = int(m.group(1)) if m else None
    persona = persona_path.read_text(encoding="utf-8")
    if not persona.strip():
        raise ValueError(f"{persona_path}: persona file is empty")
    result = UserResult(user_id=user_id if user_id is not None else -1)
    _remove_partial_writes(user_dir)
    ps = prompt_set(config.reference_prompts)
    manifest = UserManifest(user_dir, sha256_text(persona), ps)
    ctx = _UserRun(user_dir, manifest, config, result, cache, client, progress, user_id)
    lists = _list_items(ps, persona, config)
    _run(_plan(lists, ctx), ctx)

    categories = read_list(user_dir / "categories.txt") if (user_dir / "categories.txt").is_file() else None
    topics = read_list(user_dir / "chat_topics.txt") if (user_dir / "chat_topics.txt").is_file() else None
    second = _file_items(ps, persona, config, topics=topics or [], categories=categories or [])
    _remove_extras(user_dir, manifest, "chats", len(topics or []))
    _remove_extras(user_dir, manifest, "qa", len(categories or []))
    _run(_plan(second, ctx), ctx)

    result.missing = [it.rel for it in lists + second if not (user_dir / it.rel).is_file()]
    if categories is None:
        result.missing.append("qa/* (categories.txt missing)")
    if topics is None:
        result.missing.append("chats/* (chat_topics.txt missing)")
    if not result.missing:  # as the reference: only once every chat and question file exists
        result.questions = _write_qa_csv(user_dir, manifest, config, result)
    manifest.flush()
    result.malformed = sorted(set(result.malformed), key=sort_key)
    result.status = "incomplete" if result.missing else ("stale" if result.stale else "complete")
    result.seconds = time.monotonic() - start
    return result


def _list_items(ps: PromptSet, persona: str, config: GenerationConfig) -> list[_Item]:
    """Steps 1 and 2: the categories and the chat topics of one persona."""
    return [
        _Item(
            "categories",
            "categories.txt",
            ps.messages("categories", persona, n=config.num_categories),
            config.llm,
            config.num_categories,
        ),
        _Item(
            "topics",
            "chat_topics.txt",
            ps.messages("topics", persona, n=config.num_topics),
            config.llm,
            config.num_topics,
        ),
    ]


def _file_items(
    ps: PromptSet, persona: str, config: GenerationConfig, *, topics: list[str], categories: list[str]
) -> list[_Item]:
    """Steps 3 and 4: one chat per topic, one question file per category (lists read as stored)."""
    items = [
        _Item("chats", f"chats/{i}.txt", ps.messages("chats", persona, topic=topic), config.chat_llm, 1)
        for i, topic in enumerate(topics)
    ]
    items += [
        _Item(
            "questions",
            f"qa/{c}.txt",
            ps.messages("questions", persona, category=category, n=config.num_questions),
            config.llm,
            config.num_questions,
        )
        for c, category in enumerate(categories)
    ]
    return items


def _remove_partial_writes(user_dir: Path) -> None:
    """Delete temporary files that a killed run left behind (``pv4kit._io.atomic_path`` names)."""
    for folder in (user_dir, user_dir / "chats", user_dir / "qa"):
        if folder.is_dir():
            for tmp in folder.glob(".*.tmp"):
                logger.info("%s: removing a partial write left by an interrupted run", tmp)
                tmp.unlink(missing_ok=True)


def _remove_extras(user_dir: Path, manifest: UserManifest, folder: str, count: int) -> None:
    """Delete ``folder/{k}.txt`` for ``k >= count`` that pv4kit generated (a shorter list was regenerated)."""
    for rel in list(manifest.files):
        m = re.fullmatch(rf"{folder}/(\d+)\.txt", rel)
        if m and int(m.group(1)) >= count:
            (user_dir / rel).unlink(missing_ok=True)
            manifest.set(rel, None)
            logger.info("%s: removed %s (the list now has %d items)", user_dir, rel, count)


def _write_qa_csv(user_dir: Path, manifest: UserManifest, cfg: GenerationConfig, result: UserResult) -> int:
    """Step 5: write ``qa.csv`` when it is absent (an existing one is kept, as the reference keeps it).

    With ``rewrite_stale_qa`` an existing ``qa.csv`` that differs from what the question files give is
    rewritten (reported as a repair); without it the difference is reported as a note. Returns the
    number of rows the question files give.
    """
    table, drops = build_question_table(user_dir, seed=cfg.seed)
    text = format_qa_csv(table)
    target = user_dir / "qa.csv"
    repairs: list[str] = []
    if not target.is_file():
        atomic_write_text(target, text)
    elif target.read_text(encoding="utf-8") != text:
        if cfg.rewrite_stale_qa:
            logger.info("%s: question files changed, rewriting qa.csv", user_dir)
            atomic_write_text(target, text)
            repairs.append("rewritten: it differed from what the question files give")
            result.repairs.append(f"qa.csv: {repairs[-1]}")
        else:
            note = "qa.csv differs from what the question files give; kept (rewrite_stale_qa rewrites it)"
            logger.warning("%s: %s", user_dir, note)
            result.notes.append(note)
    on_disk = target.read_text(encoding="utf-8")
    manifest.set(
        "qa.csv",
        {
            "step": "qa_table",
            "seed": cfg.seed,
            "output_sha256": sha256_text(on_disk),
            "matches_question_files": on_disk == text,
            "questions": len(table),
            "dropped": int((~drops["kept"]).sum()),
            "repairs": repairs,
        },
    )
    return len(table)


# --------------------------------------------------------------------------- many users


def generate_users(
    persona_dir: str | Path,
    output_dir: str | Path,
    *,
    config: GenerationConfig,
    user_start: int | None = None,
    user_end: int | None = None,
    cache: str | Path | None = None,
    client: Any = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run :func:`generate_user` for every persona ``user_N.txt`` with ``user_start <= N <= user_end``.

    Returns:
        One row per user: ``user_id, status, questions, calls, cached, seconds, missing, stale,
        malformed, untracked, errors, repairs, notes`` (the last seven are lists; ``repairs`` names each
        pv4kit repair that acted, ``notes`` what the reference would keep silently).

    Raises:
        FileNotFoundError: When ``persona_dir`` holds no persona in the range.
    """
    persona_dir, output_dir = Path(persona_dir), Path(output_dir)
    prompt_set(config.reference_prompts)  # a bad --reference-prompts fails before any request
    ids = [
        u
        for u in list_personas(persona_dir)
        if (user_start is None or u >= user_start) and (user_end is None or u <= user_end)
    ]
    if not ids:
        raise FileNotFoundError(
            f"{persona_dir}: no user_N.txt persona files with N in [{user_start}, {user_end}]"
        )
    rows = []
    for uid in ids:
        res = generate_user(
            persona_dir / f"user_{uid}.txt",
            output_dir / f"user_{uid}",
            config=config,
            cache=cache,
            client=client,
            progress=progress,
            user_id=uid,
        )
        logger.info(
            "user %d: %s (%d calls, %d cached, %.1fs)", uid, res.status, res.calls, res.cached, res.seconds
        )
        rows.append(res.__dict__.copy())
    columns = [
        "user_id",
        "status",
        "questions",
        "calls",
        "cached",
        "seconds",
        "missing",
        "stale",
        "malformed",
        "untracked",
        "errors",
        "repairs",
        "notes",
    ]
    frame = pd.DataFrame(rows)[columns]
    frame["questions"] = frame["questions"].astype("Int64")
    return frame
