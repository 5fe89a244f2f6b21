"""``manifest.json`` of one generated user: what each file was made from, flushed atomically.

For each file of ``users/user_N/`` the manifest records the model, protocol, reasoning effort, prompt set,
version and hash, and :func:`request_hash` of the exact request, so that :mod:`pv4kit.generation.steps`
can tell a fresh file from a stale one (a changed persona, prompt or model) or an untracked one.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

from pv4kit._io import atomic_write_json, provenance, sha256_text
from pv4kit.generation.prompt_sets import PromptSet
from pv4kit.llm.client import build_request
from pv4kit.llm.config import LLMConfig

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
_FLUSH_EVERY_S = 1.0


def request_hash(messages: list[dict[str, str]], llm: LLMConfig) -> str:
    """SHA-256 of what a file was made from: protocol plus the exact request (model, messages, options)."""
    return sha256_text(llm.protocol + "\n" + json.dumps(build_request(messages, llm), sort_keys=True))


class UserManifest:
    """``manifest.json`` of one user, flushed atomically at most once a second and at the end."""

    def __init__(self, user_dir: Path, persona_sha: str, prompt_set: PromptSet) -> None:
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
        self.prompts = prompt_set
        self.dirty = data.get("persona_sha256") != persona_sha or any(
            data.get(k) != v for k, v in prompt_set.record().items()
        )
        self._record: dict[str, Any] | None = None

    def set(self, rel: str, entry: dict[str, Any] | None) -> None:
        """Record (``None``: drop) the entry of the file ``rel``; flushed when a second has passed."""
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
        """Write the manifest now when it changed."""
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        if not self.dirty:
            return
        if self._record is None:  # one provenance record (and one `git rev-parse`) per user and run
            self._record = provenance(**self.prompts.record(), persona_sha256=self.persona_sha)
        record = dict(self._record)
        record["files"] = dict(sorted(self.files.items(), key=lambda kv: sort_key(kv[0])))
        atomic_write_json(self.path, record)
        self.last_flush = time.monotonic()
        self.dirty = False


def sort_key(rel: str) -> tuple:
    """Order of manifest entries: file paths with their numbers compared as numbers."""
    parts = re.split(r"(\d+)", rel)
    return tuple(int(p) if p.isdigit() else p for p in parts)
