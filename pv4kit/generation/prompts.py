"""The prompts of generation steps 1-4: pv4kit's own versioned templates, or the reference's from a checkout.

pv4kit's templates (``templates/<step>.txt``) follow the dataset card; each builder returns one user
message, as the reference sent. pv4kit never ships the reference's prompt text:
:func:`load_reference_prompts` imports a local checkout's.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pv4kit._io import sha256_file, sha256_text

logger = logging.getLogger(__name__)

Messages = list[dict[str, str]]
#: bump when any template's wording changes (the manifest records it per file)
PROMPT_VERSION = "pv4kit-gen-1"
USER_TAG = "Leo"

#: pv4kit's template of each step, ``templates/<step>.txt`` (fields: n, persona, topic, category, user_tag)
TEMPLATES: dict[str, str] = {
    step: (Path(__file__).parent / "templates" / f"{step}.txt").read_bytes().decode("utf-8")
    for step in ("categories", "topics", "chats", "questions")
}
#: the reference's prompt function of each step, and its positional parameters in order
REFERENCE_FUNCTIONS = {
    "categories": ("categories_prompt", ("persona", "n")),
    "topics": ("topics_prompt", ("persona", "n")),
    "chats": ("chat_prompt", ("persona", "item")),
    "questions": ("questions_prompt", ("persona", "item", "n")),
}


def template_hash(step: str) -> str:
    """SHA-256 of one step's template text (with :data:`PROMPT_VERSION`)."""
    return sha256_text(f"{PROMPT_VERSION}\n{TEMPLATES[step]}")


def _user(text: str) -> Messages:
    return [{"role": "user", "content": text}]


def render(step: str, persona: str, n: int = 1, item: str = "", user_tag: str = USER_TAG) -> Messages:
    """pv4kit's template of ``step`` as one user message; ``item`` is the topic or the category."""
    item, persona = item.strip(), persona.strip()
    return _user(TEMPLATES[step].format(n=n, persona=persona, topic=item, category=item, user_tag=user_tag))


def categories_messages(persona: str, n: int = 10) -> Messages:
    """Step 1: the persona's ``n`` most testable question categories, as a numbered list."""
    return render("categories", persona, n)


def topics_messages(persona: str, n: int = 200) -> Messages:
    """Step 2: ``n`` one-sentence chat topics (skeptical then reliant; hidden-project requests)."""
    return render("topics", persona, n)


def chat_messages(persona: str, topic: str, *, user_tag: str = USER_TAG) -> Messages:
    """Step 3: one two-turn chat (``Leo: ...`` then ``Assistant: ...``) for one topic."""
    return render("chats", persona, item=topic, user_tag=user_tag)


def questions_messages(persona: str, category: str, n: int = 15) -> Messages:
    """Step 4: ``n`` tagged multiple-choice questions for one category (the format step 5 parses)."""
    return render("questions", persona, n, category)


@dataclass(frozen=True)
class PromptSet:
    """The prompts of one set, and what the manifest records about them.

    Attributes:
        name: ``"pv4kit"`` or ``"reference"``.
        version: Recorded as ``prompt_version`` (:data:`PROMPT_VERSION`, or ``reference``).
        source: The prompts file a reference set was loaded from (``None`` for pv4kit's).
        sha256: SHA-256 of that file's bytes (pv4kit: of its four templates).
        functions: The reference's ``{step: function}``, called with its positional arguments and returning
            the prompt text, sent as one user message; ``None``: pv4kit's templates.
    """

    name: str
    version: str
    source: str | None
    sha256: str
    functions: dict[str, Callable[..., Any]] | None = None

    def messages(
        self, step: str, persona: str, *, n: int = 1, topic: str = "", category: str = ""
    ) -> Messages:
        """The request of one file: ``n`` is the count asked for, ``topic``/``category`` the list item."""
        if self.functions is None:
            return render(step, persona, n, topic or category)
        name, params = REFERENCE_FUNCTIONS[step]
        values = {"persona": persona, "n": n, "item": topic or category}
        out = self.functions[step](*(values[p] for p in params))
        if not isinstance(out, str):
            raise TypeError(
                f"{self.source}: {name}() returned {type(out).__name__}, expected the prompt text (str)"
            )
        return _user(out)

    def template_hash(self, step: str) -> str:
        """SHA-256 identifying one step's template (a reference set: the prompts file's hash)."""
        return template_hash(step) if self.functions is None else self.sha256

    def record(self) -> dict[str, Any]:
        """The fields the manifest records for this set."""
        keys = ("prompt_set", "prompt_version", "prompts_file", "prompts_sha256")
        return dict(zip(keys, (self.name, self.version, self.source, self.sha256), strict=True))


def load_reference_prompts(path: str | Path) -> PromptSet:
    """Import the reference's prompt functions from a local checkout as a :class:`PromptSet` ``reference``.

    ``path``: the checkout, its ``personalizationv4`` folder, or ``prompts.py`` itself. Each prompt is sent
    as one user message, exactly as the reference's function renders it.

    Raises:
        FileNotFoundError: When no prompts file is found.
        ValueError: When the file lacks one of the four functions or one takes other parameters.
    """
    path = Path(path).expanduser()
    candidates = (path, path / "prompts.py", path / "personalizationv4" / "prompts.py")
    file = next((c for c in candidates if c.is_file()), None)
    if file is None:
        raise FileNotFoundError(
            f"{path}: no reference prompts found; expected a checkout of snap-stanford/memorilla (holding "
            "personalizationv4/prompts.py), its personalizationv4 folder, or the prompts.py file itself"
        )
    file = file.resolve()
    digest = sha256_file(file)
    spec = importlib.util.spec_from_file_location(f"_pv4kit_reference_prompts_{digest[:12]}", file)
    if spec is None or spec.loader is None:
        raise ValueError(f"{file}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    functions = {}
    for step, (name, arguments) in REFERENCE_FUNCTIONS.items():
        functions[step] = fn = getattr(module, name, None)
        if not callable(fn):
            raise ValueError(f"{file}: no function {name}() (expected the reference's four prompt functions)")
        params = [p.name for p in inspect.signature(fn).parameters.values() if p.kind in kinds]
        if len(params) != len(arguments):
            raise ValueError(
                f"{file}: {name}() takes {len(params)} positional parameters ({', '.join(params)}); the "
                f"reference's takes {len(arguments)}"
            )
    logger.info("reference prompts: %s (sha256 %s)", file, digest[:12])
    return PromptSet("reference", "reference", str(file), digest, functions)


def prompt_set(reference_prompts: str | Path | None = None) -> PromptSet:
    """The reference's prompts when a checkout is given, else pv4kit's own."""
    if reference_prompts is not None:
        return load_reference_prompts(reference_prompts)
    digest = sha256_text("\n".join(template_hash(s) for s in TEMPLATES))
    return PromptSet("pv4kit", PROMPT_VERSION, None, digest)
