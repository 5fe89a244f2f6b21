"""Generation steps 1-4 (and step 5 when a user is complete), resumable and provenance-tracked.

Per user, under ``<output_dir>/user_N/`` (the release layout of :mod:`pv4kit.raw`):

1. ``categories.txt`` and 2. ``chat_topics.txt``: one call each, run together (neither needs the other);
3. ``chats/{i}.txt`` and 4. ``qa/{c}.txt``: one call per topic and per category, run together in one
   bounded pool as soon as the lists exist (questions need only the categories);
5. ``qa.csv``: built by :mod:`pv4kit.questions` once every question file exists.

Every output is checked as it arrives (list counts, the two-line ``Leo:``/``Assistant:`` chat format,
parseable question blocks); a malformed one is asked again with the next ``sample_index`` (a new cache key)
up to ``max_retries`` times, then kept and reported. Files are written atomically as responses arrive;
``manifest.json`` records for every file the model, protocol, reasoning effort, prompt version, template
hash and a hash of the exact request, so a changed persona, prompt or model marks the file *stale*:
reported, and regenerated with ``regenerate_stale=True``. A file with no manifest entry (a crash between
writing it and the next manifest flush, or a tree made elsewhere) is adopted when the response cache holds
the same output for the current request, and otherwise reported as *untracked* and kept.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit import prompts
from pv4kit._io import atomic_write_json, atomic_write_text, provenance, sha256_text
from pv4kit.llm import LLMConfig, LLMResponse, build_request, cache_key, complete

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
_NUMBER_RE = re.compile(r"^\s*(?:\d+\s*[.)]|[-*\u2022])\s*")
_FLUSH_EVERY_S = 1.0


@dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """Settings of one generation run.

    Attributes:
        llm: Model for categories, topics and questions (reference: gpt-5.1, effort ``none``).
        chat_llm: Model for chats (reference: gpt-5-mini, effort ``minimal``).
        num_categories: Categories per user (step 1) = question files (step 4).
        num_topics: Topics per user (step 2) = chats (step 3).
        num_questions: Questions requested per category (step 4).
        max_retries: Re-asks of a malformed output before it is kept and reported.
        seed: Seed of step 5's answer shuffle.
        regenerate_stale: Regenerate files whose request (persona, prompt, model, options) changed.
    """

    llm: LLMConfig
    chat_llm: LLMConfig
    num_categories: int = 10
    num_topics: int = 200
    num_questions: int = 15
    max_retries: int = 3
    seed: int = 42
    regenerate_stale: bool = False

    def __post_init__(self) -> None:
        for name in ("num_categories", "num_topics", "num_questions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")


# --------------------------------------------------------------------------- output checks (pure)


def parse_list(text: str) -> list[str]:
    """Items of a numbered (or bulleted) list: blank lines dropped, numbering removed, stripped."""
    items = [_NUMBER_RE.sub("", line).strip() for line in text.splitlines() if line.strip()]
    return [item for item in items if item]


def check_output(step: str, text: str, *, n: int) -> tuple[str | None, list[str]]:
    """Check and normalise one model output.

    Args:
        step: ``categories``, ``topics``, ``chats`` or ``questions``.
        text: The model's output.
        n: Expected count (list items or questions; ignored for chats).

    Returns:
        ``(content, problems)``: the file content to write (``None`` when there is nothing usable)
        and a list of problems (empty when the output is valid).
    """
    if step in ("categories", "topics"):
        items = parse_list(text)
        if not items:
            return None, ["no list items"]
        problems = [] if len(items) == n else [f"expected {n} items, got {len(items)}"]
        return "\n".join(items[:n]) + "\n", problems
    if step == "chats":
        from pv4kit.raw import check_chat

        body = text.strip().replace("\\nAssistant:", "\nAssistant:")
        if not body:
            return None, ["empty chat"]
        lines = [line.strip() for line in body.splitlines() if line.strip()]
        if len(lines) == 2:
            body = "\n".join(lines)
        problems = [msg for _, _, msg in check_chat(body)]
        if len(lines) != 2 and not problems:
            problems.append(f"expected 2 lines (Leo:, Assistant:), got {len(lines)}")
        return body, problems
    if step == "questions":
        from pv4kit.questions import parse_qa_text

        if not text.strip():
            return None, ["empty output"]
        blocks = parse_qa_text(text)
        good = [
            b
            for b in blocks
            if b.question and b.letter and all(b.choices) and b.choices["ABCDE".index(b.letter)]
        ]
        problems = []
        if len(good) != n:
            problems.append(f"expected {n} complete question blocks, got {len(good)} of {len(blocks)} blocks")
        return text, problems
    raise ValueError(f"step must be categories, topics, chats or questions, got {step!r}")


def request_hash(messages: list[dict[str, str]], llm: LLMConfig) -> str:
    """SHA-256 of what a file was made from: protocol plus the exact request (model, messages, options)."""
    import json

    return sha256_text(llm.protocol + "\n" + json.dumps(build_request(messages, llm), sort_keys=True))


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
    calls: int = 0
    cached: int = 0
    questions: int | None = None
    seconds: float = 0.0


class _Manifest:
    """``manifest.json`` of one user, flushed atomically at most once a second and at the end."""

    def __init__(self, user_dir: Path, persona_sha: str) -> None:
        import json

        self.path = user_dir / MANIFEST
        self.lock = threading.Lock()
        self.last_flush = 0.0
        data: dict[str, Any] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except ValueError:
                logger.warning("%s: unreadable manifest, starting a new one", self.path)
        self.files: dict[str, dict[str, Any]] = data.get("files", {})
        self.persona_sha = persona_sha
        self.dirty = (
            data.get("persona_sha256") != persona_sha or data.get("prompt_version") != prompts.PROMPT_VERSION
        )
        self._record: dict[str, Any] | None = None

    def set(self, rel: str, entry: dict[str, Any] | None) -> None:
        with self.lock:
            if entry is None:
                if self.files.pop(rel, None) is not None:
                    self.dirty = True
            elif self.files.get(rel) != entry:
                self.files[rel] = entry
                self.dirty = True
            if time.monotonic() - self.last_flush > _FLUSH_EVERY_S:
                self._flush()

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        if not self.dirty:
            return
        if self._record is None:  # one provenance record (and one `git rev-parse`) per user and run
            self._record = provenance(prompt_version=prompts.PROMPT_VERSION, persona_sha256=self.persona_sha)
        record = dict(self._record)
        record["files"] = dict(sorted(self.files.items(), key=lambda kv: _sort_key(kv[0])))
        atomic_write_json(self.path, record)
        self.last_flush = time.monotonic()
        self.dirty = False


def _sort_key(rel: str) -> tuple:
    parts = re.split(r"(\d+)", rel)
    return tuple(int(p) if p.isdigit() else p for p in parts)


def _entry(item: _Item, content: str, problems: list[str], resp: LLMResponse, attempt: int) -> dict[str, Any]:
    return {
        "step": item.step,
        "model": item.llm.model,
        "protocol": item.llm.protocol,
        "reasoning_effort": item.llm.reasoning_effort,
        "temperature": item.llm.temperature,
        "max_output_tokens": item.llm.max_output_tokens,
        "prompt_version": prompts.PROMPT_VERSION,
        "template_sha256": prompts.template_hash(item.step),
        "request_sha256": request_hash(item.messages, item.llm),
        "output_sha256": sha256_text(content),
        "sample_index": attempt,
        "valid": not problems,
        "problems": problems,
        "response_id": resp.response_id,
        "response_model": resp.model,
        "finish_reason": resp.finish_reason,
    }


def _plan(
    items: list[_Item], user_dir: Path, manifest: _Manifest, cfg: GenerationConfig, cache, result
) -> list:
    """Decide per item: fresh (skip), stale, untracked or to generate; returns the items to generate."""
    todo, unknown = [], []
    for item in items:
        path = user_dir / item.rel
        if not path.is_file():
            todo.append(item)
            continue
        entry = manifest.files.get(item.rel)
        if entry is None:
            unknown.append(item)
        elif entry.get("request_sha256") != request_hash(item.messages, item.llm):
            if cfg.regenerate_stale:
                todo.append(item)
            else:
                result.stale.append(item.rel)
        elif not entry.get("valid", True):
            result.malformed.append(item.rel)
    if unknown:
        adopted = _adopt(unknown, user_dir, manifest, cfg, cache)
        result.untracked.extend(item.rel for item in unknown if item.rel not in adopted)
    return todo


def _adopt(items: list[_Item], user_dir: Path, manifest: _Manifest, cfg: GenerationConfig, cache) -> set[str]:
    """Record files without a manifest entry whose content the cache reproduces for the current request."""
    if cache is None or not Path(cache).is_file():
        return set()
    from pv4kit.llm import _Store

    keys = {
        (item.rel, a): cache_key(item.messages, item.llm, sample_index=a)
        for item in items
        for a in range(cfg.max_retries + 1)
    }
    store = _Store(cache)
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
            content, problems = check_output(item.step, resp.text, n=item.n)
            if content == on_disk:
                manifest.set(item.rel, _entry(item, content, problems, resp, a))
                adopted.add(item.rel)
                break
    return adopted


def _run(items, user_dir, manifest, cfg, result, *, cache, client, progress, user_id) -> None:
    """Generate ``items`` with re-asks of malformed outputs; files are written as responses arrive."""
    pending = list(items)
    for attempt in range(cfg.max_retries + 1):
        if not pending:
            break
        final = attempt == cfg.max_retries

        def on_result(i: int, resp: LLMResponse, batch=pending, final=final, attempt=attempt) -> None:
            item = batch[i]
            if resp.error is not None:
                item.last = (None, [resp.error], resp)
                return
            content, problems = check_output(item.step, resp.text, n=item.n)
            item.last = (content, problems, resp)
            if content is not None and (not problems or final):
                manifest.set(item.rel, _entry(item, content, problems, resp, attempt))
                atomic_write_text(user_dir / item.rel, content)
                item.done = True

        responses = complete(
            [it.messages for it in pending],
            config=[it.llm for it in pending],
            cache=cache,
            step=[it.step for it in pending],
            user_id=user_id,
            sample_index=attempt,
            progress=progress,
            client=client,
            on_result=on_result,
        )
        result.calls += sum(not r.cached for r in responses)
        result.cached += sum(r.cached for r in responses)
        manifest.flush()
        retry = [it for it, r in zip(pending, responses, strict=True) if not it.done and r.error is None]
        for it, r in zip(pending, responses, strict=True):
            if r.error is not None:
                result.errors.append(f"{it.rel}: {r.error}")
        if retry and not final:
            logger.info(
                "user %s: asking again for %d malformed outputs (%s)",
                user_id,
                len(retry),
                "; ".join(f"{it.rel}: {', '.join(it.last[1])}" for it in retry[:3]),
            )
        pending = retry
    for item in items:
        if item.done and item.last and item.last[1]:
            result.malformed.append(item.rel)
            logger.warning(
                "user %s: %s kept after %d attempts: %s",
                user_id,
                item.rel,
                cfg.max_retries + 1,
                "; ".join(item.last[1]),
            )


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
        cache: SQLite response cache and usage ledger (see :func:`pv4kit.llm.complete`).
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
    manifest = _Manifest(user_dir, sha256_text(persona))
    kw = dict(cache=cache, client=client, progress=progress, user_id=user_id)

    lists = [
        _Item(
            "categories",
            "categories.txt",
            prompts.categories_messages(persona, n=config.num_categories),
            config.llm,
            config.num_categories,
        ),
        _Item(
            "topics",
            "chat_topics.txt",
            prompts.topics_messages(persona, n=config.num_topics),
            config.llm,
            config.num_topics,
        ),
    ]
    _run(_plan(lists, user_dir, manifest, config, cache, result), user_dir, manifest, config, result, **kw)

    from pv4kit.raw import read_list

    second: list[_Item] = []
    categories = read_list(user_dir / "categories.txt") if (user_dir / "categories.txt").is_file() else None
    topics = read_list(user_dir / "chat_topics.txt") if (user_dir / "chat_topics.txt").is_file() else None
    for i, topic in enumerate(topics or []):
        second.append(
            _Item("chats", f"chats/{i}.txt", prompts.chat_messages(persona, topic), config.chat_llm, 1)
        )
    for c, category in enumerate(categories or []):
        second.append(
            _Item(
                "questions",
                f"qa/{c}.txt",
                prompts.questions_messages(persona, category, n=config.num_questions),
                config.llm,
                config.num_questions,
            )
        )
    _remove_extras(user_dir, manifest, "chats", len(topics or []))
    _remove_extras(user_dir, manifest, "qa", len(categories or []))
    _run(_plan(second, user_dir, manifest, config, cache, result), user_dir, manifest, config, result, **kw)

    expected = [it.rel for it in lists + second]
    result.missing = [rel for rel in expected if not (user_dir / rel).is_file()]
    if categories is None:
        result.missing.append("qa/* (categories.txt missing)")
    if topics is None:
        result.missing.append("chats/* (chat_topics.txt missing)")
    if categories is not None and not any(rel.startswith("qa/") for rel in result.missing):
        result.questions = _write_qa_csv(user_dir, manifest, config.seed)
    manifest.flush()
    result.malformed = sorted(set(result.malformed), key=_sort_key)
    result.status = "incomplete" if result.missing else ("stale" if result.stale else "complete")
    result.seconds = time.monotonic() - start
    return result


def _remove_partial_writes(user_dir: Path) -> None:
    """Delete temporary files that a killed run left behind (``pv4kit._io.atomic_path`` names)."""
    for folder in (user_dir, user_dir / "chats", user_dir / "qa"):
        if folder.is_dir():
            for tmp in folder.glob(".*.tmp"):
                logger.info("%s: removing a partial write left by an interrupted run", tmp)
                tmp.unlink(missing_ok=True)


def _remove_extras(user_dir: Path, manifest: _Manifest, folder: str, count: int) -> None:
    """Delete ``folder/{k}.txt`` for ``k >= count`` that pv4kit generated (a shorter list was regenerated)."""
    for rel in list(manifest.files):
        m = re.fullmatch(rf"{folder}/(\d+)\.txt", rel)
        if m and int(m.group(1)) >= count:
            (user_dir / rel).unlink(missing_ok=True)
            manifest.set(rel, None)
            logger.info("%s: removed %s (the list now has %d items)", user_dir, rel, count)


def _write_qa_csv(user_dir: Path, manifest: _Manifest, seed: int) -> int:
    """Step 5: (re)write ``qa.csv`` when it differs from what the question files give; returns rows."""
    from pv4kit.questions import build_question_table, format_qa_csv

    table, drops = build_question_table(user_dir, seed=seed)
    text = format_qa_csv(table)
    target = user_dir / "qa.csv"
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        if target.is_file():
            logger.info("%s: question files changed, rewriting qa.csv", user_dir)
        atomic_write_text(target, text)
    manifest.set(
        "qa.csv",
        {
            "step": "qa_table",
            "seed": seed,
            "output_sha256": sha256_text(text),
            "questions": len(table),
            "dropped": len(drops),
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
        malformed, untracked, errors`` (the last five are lists).

    Raises:
        FileNotFoundError: When ``persona_dir`` holds no persona in the range.
    """
    from pv4kit.raw import list_personas

    persona_dir, output_dir = Path(persona_dir), Path(output_dir)
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
    ]
    frame = pd.DataFrame(rows)[columns]
    frame["questions"] = frame["questions"].astype("Int64")
    return frame
