"""Generation steps 1-4 (and step 5 once a user is complete), resumable and provenance-tracked.

Per user, under ``<output_dir>/user_N/``: ``categories.txt``, ``chat_topics.txt``, ``chats/{i}.txt``,
``qa/{c}.txt``, then ``qa.csv``, written as the reference writes them (pv4kit's repairs are options, off by
default). ``manifest.json`` hashes each file's exact request: a changed persona, prompt or model marks the
file *stale*; a file with no entry is adopted when the response cache holds its request, else *untracked*.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pv4kit._io import atomic_write_json, atomic_write_text, provenance, sha256_text
from pv4kit._options import check_number
from pv4kit.dataset.formats import check_chat, format_qa_csv, read_list
from pv4kit.dataset.questions import build_question_table, parse_qa_text
from pv4kit.dataset.tree import list_personas
from pv4kit.generation.prompts import prompt_set
from pv4kit.llm.client import build_request, cache_key, complete
from pv4kit.llm.config import LLMConfig, LLMResponse
from pv4kit.llm.store import ResponseStore
from pv4kit.text import list_items

logger = logging.getLogger(__name__)

#: ``(content, problems, repairs)`` of one model output (:func:`normalise_output`)
_Normalised = tuple[str | None, list[str], list[str]]


def normalise_output(
    step: str, text: str, *, n: int, repair_lists: bool = False, repair_chats: bool = False
) -> _Normalised:
    """``(content, problems, repairs)`` for one model output of ``step``.

    ``content`` is the file as the reference writes it (``None`` for an empty reply, asked again; lists by
    :func:`pv4kit.text.list_items`); ``problems`` is empty for a valid output (``n`` items, a two-line chat,
    ``n`` complete question blocks); ``repairs`` describes each pv4kit repair that changed the content.
    """
    if not text.strip():
        return None, ["empty reply"], []
    repairs: list[str] = []
    if step in ("categories", "topics"):
        items = list_items(text)
        if repair_lists and (repaired := list_items(text, loose=True)) != items:
            repairs.append("list repaired: 1) / bullet numbering removed, empty items dropped")
            items = repaired
        if not items:
            return None, ["no list items"], repairs
        problems = [] if len(items) == n else [f"expected {n} items, got {len(items)}"]
        problems += ["empty list item"] if any(not item for item in items) else []
        return "\n".join(items), problems, repairs
    if step == "chats":
        body = text.strip()
        if repair_chats:
            fixed = body.replace("\\nAssistant:", "\nAssistant:")
            lines = [line.strip() for line in fixed.splitlines() if line.strip()]
            fixed = "\n".join(lines) if len(lines) == 2 else fixed
            if fixed != body:
                repairs.append("chat repaired: literal \\n or blank lines between the two turns")
                body = fixed
        problems = [msg for _, _, msg in check_chat(body)]
        if len(body.splitlines()) != 2 and not problems:
            problems.append(f"expected 2 lines (Leo:, Assistant:), got {len(body.splitlines())}")
        return body, problems, repairs
    blocks = parse_qa_text(text)
    good = [b for b in blocks if b.question and b.letter and all(b.choices)]  # letter: A-E
    if len(good) == n:
        return text, [], []
    return text, [f"expected {n} complete question blocks, got {len(good)} of {len(blocks)} blocks"], []


def request_hash(messages: list[dict[str, str]], llm: LLMConfig) -> str:
    """SHA-256 of what a file was made from: protocol plus the exact request (model, messages, options)."""
    return sha256_text(llm.protocol + "\n" + json.dumps(build_request(messages, llm), sort_keys=True))


def sort_key(rel: str) -> tuple:
    """Order of manifest entries: file paths with their numbers compared as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", rel))


@dataclass
class _Item:
    step: str
    rel: str  # path relative to the user dir
    messages: list[dict[str, str]]
    llm: LLMConfig
    n: int
    done: bool = False
    problems: list[str] = field(default_factory=list)  # of the last reply
    repairs: list[str] = field(default_factory=list)
    malformed_before: list[str] = field(default_factory=list)  # problems of an earlier malformed reply


@dataclass
class UserResult:
    """What happened to one user (one row of :func:`generate_users`' report)."""

    user_id: int
    status: str = "complete"
    questions: int | None = None
    calls: int = 0
    cached: int = 0
    seconds: float = 0.0
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _UserRun:
    """One user's steps 1-5 and ``manifest.json``; the fields are :func:`generate_user`'s parameters."""

    persona_path: Path
    user_dir: Path
    llm: LLMConfig
    chat_llm: LLMConfig
    num_categories: int
    num_topics: int
    num_questions: int
    max_retries: int
    seed: int
    regenerate_stale: bool
    reference_prompts: str | Path | None
    repair_lists: bool
    repair_chats: bool
    reask_malformed: bool
    rewrite_stale_qa: bool
    cache: str | Path | None
    client: Any
    progress: bool
    user_id: int | None

    def __post_init__(self) -> None:
        for name in ("num_categories", "num_topics", "num_questions"):
            check_number(getattr(self, name), name, integer=True, ge=1)
        check_number(self.max_retries, "max_retries", integer=True, ge=0)
        self.persona_path, self.user_dir = Path(self.persona_path), Path(self.user_dir)
        if self.user_id is None and (m := re.match(r"user_(\d+)\.txt$", self.persona_path.name)):
            self.user_id = int(m.group(1))
        self.persona = self.persona_path.read_text(encoding="utf-8")
        if not self.persona.strip():
            raise ValueError(f"{self.persona_path}: persona file is empty")
        self.prompts = prompt_set(self.reference_prompts)
        self.result = UserResult(user_id=self.user_id if self.user_id is not None else -1)
        self.header = {**self.prompts.record(), "persona_sha256": sha256_text(self.persona)}
        self.path, self.lock, self.last_flush = self.user_dir / "manifest.json", threading.RLock(), 0.0
        data: dict[str, Any] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except ValueError:
                logger.warning("%s: unreadable manifest, starting a new one", self.path)
        self.files: dict[str, dict[str, Any]] = data.get("files", {})
        self.dirty = any(data.get(k) != v for k, v in self.header.items())
        self._record: dict[str, Any] | None = None

    def generate(self) -> UserResult:
        """Steps 1-4 for what is missing, then step 5 once every chat and question file exists."""
        start, user_dir, result = time.monotonic(), self.user_dir, self.result
        for tmp in [p for pattern in (".*.tmp", "chats/.*.tmp", "qa/.*.tmp") for p in user_dir.glob(pattern)]:
            logger.info("%s: removing a partial write left by an interrupted run", tmp)
            tmp.unlink(missing_ok=True)
        lists = [self.item("categories", "categories.txt", self.num_categories)]
        lists.append(self.item("topics", "chat_topics.txt", self.num_topics))
        self.run(self.plan(lists))
        categories, topics = (
            read_list(user_dir / name) if (user_dir / name).is_file() else None
            for name in ("categories.txt", "chat_topics.txt")
        )
        # steps 3-4: a chat per topic and a question file per category, in one pool
        second = [self.item("chats", f"chats/{i}.txt", 1, topic=t) for i, t in enumerate(topics or [])]
        second += [
            self.item("questions", f"qa/{c}.txt", self.num_questions, category=cat)
            for c, cat in enumerate(categories or [])
        ]
        wanted = {it.rel for it in second}  # files of a longer list, generated before, go
        for rel in [r for r in self.files if re.fullmatch(r"(chats|qa)/\d+\.txt", r) and r not in wanted]:
            (user_dir / rel).unlink(missing_ok=True)
            self.set(rel, None)
            logger.info("%s: removed %s (its list is shorter now)", user_dir, rel)
        self.run(self.plan(second))
        result.missing = [it.rel for it in lists + second if not (user_dir / it.rel).is_file()]
        result.missing += ["qa/* (categories.txt missing)"] if categories is None else []
        result.missing += ["chats/* (chat_topics.txt missing)"] if topics is None else []
        if not result.missing:  # step 5, as the reference: only once every chat and question file exists
            result.questions = self.write_qa_csv()
        self.flush()
        result.malformed = sorted(set(result.malformed), key=sort_key)
        result.status = "incomplete" if result.missing else ("stale" if result.stale else "complete")
        result.seconds = time.monotonic() - start
        return result

    def item(self, step: str, rel: str, n: int, **kw: str) -> _Item:
        llm = self.chat_llm if step == "chats" else self.llm
        return _Item(step, rel, self.prompts.messages(step, self.persona, n=n, **kw), llm, n)

    def set(self, rel: str, entry: dict[str, Any] | None) -> None:
        """Record (``None``: drop) the manifest entry of ``rel``; flushed when a second has passed."""
        with self.lock:
            if entry is None and self.files.pop(rel, None) is not None:
                self.dirty = True
            elif entry is not None and self.files.get(rel) != entry:
                self.files[rel], self.dirty = entry, True
            if time.monotonic() - self.last_flush > 1.0:
                self.flush()

    def flush(self) -> None:
        """Write the manifest now when it changed."""
        with self.lock:
            if not self.dirty:
                return
            if self._record is None:  # one provenance record (and one `git rev-parse`) per user and run
                self._record = provenance(**self.header)
            files = dict(sorted(self.files.items(), key=lambda kv: sort_key(kv[0])))
            atomic_write_json(self.path, {**self._record, "files": files})
            self.last_flush, self.dirty = time.monotonic(), False

    def normalise(self, item: _Item, text: str) -> _Normalised:
        return normalise_output(
            item.step, text, n=item.n, repair_lists=self.repair_lists, repair_chats=self.repair_chats
        )

    def entry(self, item: _Item, resp: LLMResponse, attempt: int, normalised: _Normalised) -> dict[str, Any]:
        """The manifest entry of a file written from ``resp`` (``normalised``: what it became)."""
        (content, problems, repairs), llm, ps = normalised, item.llm, self.prompts
        fields = ("model", "protocol", "reasoning_effort", "temperature", "max_output_tokens")
        entry = {"step": item.step, **{k: getattr(llm, k) for k in fields}, "prompt_set": ps.name}
        entry.update(prompt_version=ps.version, template_sha256=ps.template_hash(item.step))
        entry.update(prompts_sha256=ps.sha256, request_sha256=request_hash(item.messages, llm))
        entry.update(output_sha256=sha256_text(content), sample_index=attempt, valid=not problems)
        entry.update(problems=problems, response_id=resp.response_id, response_model=resp.model)
        return {**entry, "finish_reason": resp.finish_reason, "repairs": repairs}

    def plan(self, items: list[_Item]) -> list[_Item]:
        """Sort ``items`` into fresh (skipped), stale, untracked and to generate; returns the last."""
        todo, unknown = [], []
        for item in items:
            entry = self.files.get(item.rel)
            stale = entry is not None and entry.get("request_sha256") != request_hash(item.messages, item.llm)
            if not (self.user_dir / item.rel).is_file() or (stale and self.regenerate_stale):
                todo.append(item)
            elif entry is None:
                unknown.append(item)
            elif stale:
                self.result.stale.append(item.rel)
            elif not entry.get("valid", True):
                self.result.malformed.append(item.rel)
        if unknown and self.cache is not None and Path(self.cache).is_file():
            self.adopt(unknown)
        self.result.untracked += [item.rel for item in unknown if item.rel not in self.files]
        return todo

    def adopt(self, items: list[_Item]) -> None:
        """Record files without a manifest entry whose content the cache gives for the current request."""
        tries = range(self.max_retries + 1)
        keys = {(it.rel, a): cache_key(it.messages, it.llm, sample_index=a) for it in items for a in tries}
        with contextlib.closing(ResponseStore(self.cache)) as store:
            hits = store.get_many(list(keys.values()))
        for item in items:
            on_disk = (self.user_dir / item.rel).read_text(encoding="utf-8")
            for a in tries:
                if (resp := hits.get(keys[(item.rel, a)])) is None:
                    continue
                normalised = self.normalise(item, resp.text)
                if normalised[0] == on_disk:
                    self.set(item.rel, self.entry(item, resp, a, normalised))
                    break

    def run(self, items: list[_Item]) -> None:
        """Generate ``items``, asking again for empty (with ``reask_malformed``: malformed) replies."""
        pending = list(items)
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            pending = self.attempt(pending, attempt)
        for item in items:
            self.result.repairs.extend(f"{item.rel}: {r}" for r in item.repairs)
            if item.done and item.problems:
                self.result.malformed.append(item.rel)
                logger.warning(
                    "user %s: %s kept with problems: %s", self.user_id, item.rel, "; ".join(item.problems)
                )

    def attempt(self, pending: list[_Item], attempt: int) -> list[_Item]:
        """One round of calls (``sample_index`` ``attempt``); returns the items to ask again."""
        final = attempt == self.max_retries
        responses = complete(
            [it.messages for it in pending],
            llm=[it.llm for it in pending],
            cache=self.cache,
            step=[it.step for it in pending],
            user_id=self.user_id,
            sample_index=attempt,
            progress=self.progress,
            client=self.client,
            on_result=lambda i, resp: self.take(pending[i], resp, attempt, final),
        )
        self.result.calls += sum(not r.cached for r in responses)
        self.result.cached += sum(r.cached for r in responses)
        self.flush()
        pairs = list(zip(pending, responses, strict=True))
        self.result.errors += [f"{it.rel}: {r.error}" for it, r in pairs if r.error]
        retry = [it for it, r in pairs if not it.done and r.error is None]
        if retry and not final:
            why = "; ".join(f"{it.rel}: {', '.join(it.problems)}" for it in retry[:3])
            logger.info(
                "user %s: asking again for %d empty or malformed outputs (%s)", self.user_id, len(retry), why
            )
        return retry

    def take(self, item: _Item, resp: LLMResponse, attempt: int, final: bool) -> None:
        """Write one reply's content (and its manifest entry), or keep it for asking again."""
        if resp.error is not None:
            return
        content, item.problems, repairs = self.normalise(item, resp.text)
        # as the reference: an empty reply is asked again, anything else is written as it came
        if content is None:
            return
        if item.problems and self.reask_malformed and not final:
            item.malformed_before = item.problems
            return
        if item.malformed_before:
            repairs = [*repairs, f"asked again after: {'; '.join(item.malformed_before)}"]
        self.set(item.rel, self.entry(item, resp, attempt, (content, item.problems, repairs)))
        atomic_write_text(self.user_dir / item.rel, content)
        item.done, item.repairs = True, repairs

    def write_qa_csv(self) -> int:
        """Step 5: write ``qa.csv`` when absent (an existing one is kept unless ``rewrite_stale_qa``)."""
        table, drops = build_question_table(self.user_dir, seed=self.seed)
        text, target, repairs = format_qa_csv(table), self.user_dir / "qa.csv", []
        on_disk = target.read_text(encoding="utf-8") if target.is_file() else text
        if on_disk != text and self.rewrite_stale_qa:
            logger.info("%s: question files changed, rewriting qa.csv", self.user_dir)
            repairs.append("rewritten: it differed from what the question files give")
            self.result.repairs.append(f"qa.csv: {repairs[-1]}")
            on_disk = text
        elif on_disk != text:
            note = "qa.csv differs from what the question files give; kept (rewrite_stale_qa rewrites it)"
            logger.warning("%s: %s", self.user_dir, note)
            self.result.notes.append(note)
        if not target.is_file() or repairs:
            atomic_write_text(target, text)
        entry = {"step": "qa_table", "seed": self.seed, "output_sha256": sha256_text(on_disk)}
        entry.update(matches_question_files=on_disk == text, questions=len(table))
        self.set("qa.csv", {**entry, "dropped": int((~drops["kept"]).sum()), "repairs": repairs})
        return len(table)


def generate_user(
    persona_path: str | Path,
    user_dir: str | Path,
    *,
    llm: LLMConfig,
    chat_llm: LLMConfig,
    num_categories: int = 10,
    num_topics: int = 200,
    num_questions: int = 15,
    max_retries: int = 3,
    seed: int = 42,
    regenerate_stale: bool = False,
    reference_prompts: str | Path | None = None,
    repair_lists: bool = False,
    repair_chats: bool = False,
    reask_malformed: bool = False,
    rewrite_stale_qa: bool = False,
    cache: str | Path | None = None,
    client: Any = None,
    progress: bool = True,
    user_id: int | None = None,
) -> UserResult:
    """Run steps 1-5 for one user, completing what is missing (keywords as :func:`generate_users`).

    ``user_id`` names the user in logs and the ledger (default: from the file name); ``status`` of the
    :class:`UserResult` is ``complete``, ``incomplete`` (files missing) or ``stale``.
    """
    return _UserRun(**locals()).generate()


def generate_users(
    persona_dir: str | Path,
    output_dir: str | Path,
    *,
    llm: LLMConfig,
    chat_llm: LLMConfig,
    num_categories: int = 10,
    num_topics: int = 200,
    num_questions: int = 15,
    max_retries: int = 3,
    seed: int = 42,
    regenerate_stale: bool = False,
    reference_prompts: str | Path | None = None,
    repair_lists: bool = False,
    repair_chats: bool = False,
    reask_malformed: bool = False,
    rewrite_stale_qa: bool = False,
    user_start: int | None = None,
    user_end: int | None = None,
    cache: str | Path | None = None,
    client: Any = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run steps 1-5 (:func:`generate_user`) for each ``user_N.txt`` with ``user_start <= N <= user_end``.

    Args:
        persona_dir: The folder of persona profiles ``user_N.txt``.
        output_dir: The users folder; each user is written to ``user_N/``.
        llm: Model of categories, topics and questions (the reference's: gpt-5.1, effort ``none``);
            see :func:`~pv4kit.generation.defaults.generation_llm_configs`.
        chat_llm: Model of the chats (the reference's: gpt-5-mini, effort ``minimal``).
        num_categories: Categories per user (step 1) = question files (step 4).
        num_topics: Topics per user (step 2) = chats (step 3).
        num_questions: Questions requested per category (step 4).
        max_retries: Re-asks of an empty reply (and, with ``reask_malformed``, of a malformed one).
        seed: Seed of step 5's answer shuffle.
        regenerate_stale: Regenerate files whose request (persona, prompt, model, options) changed.
        reference_prompts: A local checkout of the reference (or its ``prompts.py``) whose prompt functions
            build the requests; ``None``: pv4kit's own prompts.
        repair_lists: Also accept ``1)`` numbering and ``-``/``*``/bullet items in lists (pv4kit repair).
        repair_chats: Turn a literal ``\\n`` before ``Assistant:`` into a line break and drop blank lines
            between the turns (pv4kit repair).
        reask_malformed: Ask again for a malformed output up to ``max_retries`` times (pv4kit repair).
        rewrite_stale_qa: Rewrite an existing ``qa.csv`` that differs from what the question files give
            (pv4kit repair; the reference keeps it).
        user_start: First user id (inclusive).
        user_end: Last user id (inclusive).
        cache: SQLite response cache and usage ledger (see :func:`pv4kit.llm.client.complete`).
        client: Injected OpenAI-like client (tests).
        progress: Show progress bars.

    Returns one row per user: ``user_id, status, questions, calls, cached, seconds, missing, stale, malformed,
    untracked, errors, repairs, notes`` (the last seven are lists; ``repairs`` names each pv4kit repair that
    acted, ``notes`` what the reference would keep silently).

    Raises:
        FileNotFoundError: When ``persona_dir`` holds no persona in the range.
    """
    options = dict(locals())  # every keyword but the folders and the user range goes to generate_user
    for name in ("persona_dir", "output_dir", "user_start", "user_end"):
        del options[name]
    persona_dir, output_dir = Path(persona_dir), Path(output_dir)
    prompt_set(reference_prompts)  # a bad reference_prompts fails before any request
    last = math.inf if user_end is None else user_end
    ids = [u for u in list_personas(persona_dir) if (user_start or 0) <= u <= last]
    if not ids:
        raise FileNotFoundError(
            f"{persona_dir}: no user_N.txt persona files with N in [{user_start}, {user_end}]"
        )
    rows = []
    for uid in ids:
        res = generate_user(
            persona_dir / f"user_{uid}.txt", output_dir / f"user_{uid}", **options, user_id=uid
        )
        logger.info(
            "user %d: %s (%d calls, %d cached, %.1fs)", uid, res.status, res.calls, res.cached, res.seconds
        )
        rows.append(res.__dict__.copy())
    return pd.DataFrame(rows).astype({"questions": "Int64"})
