"""Prompt sets of generation steps 1-4: pv4kit's own templates, or the reference's from a local checkout.

pv4kit never ships the reference's prompt text. A user who has a checkout of the reference repository
(``git clone https://github.com/snap-stanford/memorilla``) passes its path; :func:`load_reference_prompts`
imports the four prompt functions of its ``personalizationv4/prompts.py`` straight from that file
(``categories_prompt(persona, num_categories)``, ``topics_prompt(persona, num_topics)``,
``chat_prompt(persona, topic)``, ``questions_prompt(persona, category, num_questions)``), so regenerated
users get the requests the release was generated with: one user message holding the prompt, the persona
and the list items passed exactly as read. The manifest of :mod:`pv4kit.generation.steps` records which set
made each file, with the SHA-256 of the prompts file.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pv4kit._io import sha256_file, sha256_text
from pv4kit.generation import prompts

logger = logging.getLogger(__name__)

Messages = list[dict[str, str]]
STEPS = ("categories", "topics", "chats", "questions")
#: the reference's function per step and the number of positional parameters it takes
REFERENCE_FUNCTIONS = {
    "categories": ("categories_prompt", 2),
    "topics": ("topics_prompt", 2),
    "chats": ("chat_prompt", 2),
    "questions": ("questions_prompt", 3),
}


@dataclass(frozen=True)
class PromptSet:
    """The four prompt builders of one set, with what the manifest records about them.

    Attributes:
        name: ``"pv4kit"`` or ``"reference"``.
        version: Recorded as ``prompt_version`` (``prompts.PROMPT_VERSION``, or ``reference``).
        source: The prompts file a reference set was loaded from (``None`` for pv4kit's).
        sha256: SHA-256 of that file's bytes (pv4kit: of its four templates).
    """

    name: str
    version: str
    source: str | None
    sha256: str
    _build: dict[str, Callable[..., Messages]] = field(repr=False, compare=False, default_factory=dict)

    def messages(
        self, step: str, persona: str, *, n: int = 1, topic: str = "", category: str = ""
    ) -> Messages:
        """The request messages of one file.

        Args:
            step: ``categories``, ``topics``, ``chats`` or ``questions``.
            persona: The persona profile as read from its file.
            n: The count asked for (categories, topics, questions per category).
            topic: The chat topic (``chats``).
            category: The question category (``questions``).
        """
        if step not in self._build:
            raise ValueError(f"step must be one of {STEPS}, got {step!r}")
        return self._build[step](persona, n=n, topic=topic, category=category)

    def template_hash(self, step: str) -> str:
        """SHA-256 identifying one step's template (a reference set: the prompts file's hash)."""
        if self.name == "pv4kit":
            return prompts.template_hash(step)
        return self.sha256

    def record(self) -> dict[str, Any]:
        """The fields the manifest records for this set."""
        return {
            "prompt_set": self.name,
            "prompt_version": self.version,
            "prompts_file": self.source,
            "prompts_sha256": self.sha256,
        }


def pv4kit_prompts() -> PromptSet:
    """pv4kit's own templates (:mod:`pv4kit.generation.prompts`), for users without a reference checkout."""
    build = {
        "categories": lambda persona, n, **_: prompts.categories_messages(persona, n=n),
        "topics": lambda persona, n, **_: prompts.topics_messages(persona, n=n),
        "chats": lambda persona, topic, **_: prompts.chat_messages(persona, topic),
        "questions": lambda persona, n, category, **_: prompts.questions_messages(persona, category, n=n),
    }
    digest = sha256_text("\n".join(prompts.template_hash(s) for s in STEPS))
    return PromptSet("pv4kit", prompts.PROMPT_VERSION, None, digest, build)


def reference_prompts_file(path: str | Path) -> Path:
    """Locate ``personalizationv4/prompts.py`` from a checkout, its ``personalizationv4`` folder or the file.

    Raises:
        FileNotFoundError: When none of those holds the file.
    """
    path = Path(path).expanduser()
    for candidate in (path, path / "prompts.py", path / "personalizationv4" / "prompts.py"):
        if candidate.is_file():
            return candidate.resolve()
    raise FileNotFoundError(
        f"{path}: no reference prompts found; expected a checkout of snap-stanford/memorilla (holding "
        "personalizationv4/prompts.py), its personalizationv4 folder, or the prompts.py file itself"
    )


def load_reference_prompts(path: str | Path) -> PromptSet:
    """Import the reference's prompt functions from a local checkout (nothing is copied into pv4kit).

    Args:
        path: The checkout, its ``personalizationv4`` folder, or ``prompts.py`` itself.

    Returns:
        A :class:`PromptSet` named ``reference`` whose requests are one user message holding the
        reference's prompt for the persona and list item exactly as read.

    Raises:
        FileNotFoundError: When no prompts file is found.
        ValueError: When the file lacks one of the four functions or one takes other parameters.
    """
    file = reference_prompts_file(path)
    digest = sha256_file(file)
    spec = importlib.util.spec_from_file_location(f"_pv4kit_reference_prompts_{digest[:12]}", file)
    if spec is None or spec.loader is None:
        raise ValueError(f"{file}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    functions = {}
    for step, (name, arity) in REFERENCE_FUNCTIONS.items():
        fn = getattr(module, name, None)
        if not callable(fn):
            raise ValueError(f"{file}: no function {name}() (expected the reference's four prompt functions)")
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if len(params) != arity:
            raise ValueError(
                f"{file}: {name}() takes {len(params)} positional parameters "
                f"({', '.join(p.name for p in params)}); the reference's takes {arity}"
            )
        functions[step] = fn

    def user(text: Any, name: str) -> Messages:
        if not isinstance(text, str):
            raise TypeError(
                f"{file}: {name}() returned {type(text).__name__}, expected the prompt text (str)"
            )
        return [{"role": "user", "content": text}]

    build = {
        "categories": lambda persona, n, **_: user(functions["categories"](persona, n), "categories_prompt"),
        "topics": lambda persona, n, **_: user(functions["topics"](persona, n), "topics_prompt"),
        "chats": lambda persona, topic, **_: user(functions["chats"](persona, topic), "chat_prompt"),
        "questions": lambda persona, n, category, **_: user(
            functions["questions"](persona, category, n), "questions_prompt"
        ),
    }
    logger.info("reference prompts: %s (sha256 %s)", file, digest[:12])
    return PromptSet("reference", "reference", str(file), digest, build)


def prompt_set(reference_prompts: str | Path | None = None) -> PromptSet:
    """The reference's prompts when a checkout is given, else pv4kit's own."""
    return pv4kit_prompts() if reference_prompts is None else load_reference_prompts(reference_prompts)
