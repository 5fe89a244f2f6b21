"""Versioned prompt templates for generation steps 1-4.

Written fresh for pv4kit against the dataset card (not copied from the reference). Each builder returns
OpenAI-style messages (one user message, as the reference sent). :data:`PROMPT_VERSION` names the
template set; :func:`template_hash` fingerprints one template so the manifest of
:mod:`pv4kit.generation.steps` can tell when a prompt changed. Unlike the reference, no persona's name,
pronouns
or traits are written into the chat prompt: ``Leo`` is only the fixed speaker tag of the user's turn.

Every template states its count as ``exactly N`` and starts with a ``# Task:`` line; tests rely on both.
"""

from __future__ import annotations

from pv4kit._io import sha256_text

#: bump when any template's wording changes (the manifest records it per file)
PROMPT_VERSION = "pv4kit-gen-1"
USER_TAG = "Leo"

_CATEGORIES = """# Task: question categories

Below is the profile of a fictional person. We are building a multiple-choice benchmark that tests whether
an AI assistant, after many conversations with this person, can predict what they would do or prefer in a
new situation.

List exactly {n} question categories for this person: the {n} most testable dimensions of their life, each
specific to this profile (not a generic heading), distinct from the others, and rich enough to support many
scenario questions with one defensible answer. Draw on dimensions such as work and skills, hobbies and
tastes, relationships, personality and communication style, values and habits, daily routines, health,
money, places, how their preferences changed over time, and the things they keep private or secret.

Each category is 3 to 8 words. Output only a numbered list, one category per line (`1. ...`), with no
heading and no commentary.

<PROFILE>
{persona}
</PROFILE>
"""

_TOPICS = """# Task: chat topics

Below is the profile of a fictional person who talks to an AI assistant over several months.
Write exactly {n} chat topics: each is one sentence describing one message this person sends to the
assistant.

Requirements:
- Cover every facet of the profile: work, family and friends, hobbies, tastes, moods, routines, health,
  money, places, plans, and the private or secret projects.
- Order matters. The first part of the list is an early, skeptical phase: short, guarded, testing requests
  that reveal little. The later part is a reliant phase: the person brings personal decisions, feelings and
  long-running plans to the assistant.
- Some requests are secretly tied to the person's hidden projects, but phrased so the project itself is
  never named or explained (e.g. an innocent-looking practical question that only makes sense given it).
- Each topic is a concrete situation with a detail, not a generic theme; no two topics are near-duplicates.
- Describe what the person asks, never what the assistant should say.

Output only a numbered list, one topic per line (`1. ...`), with no heading and no commentary.

<PROFILE>
{persona}
</PROFILE>
"""

_CHAT = """# Task: one chat

Write one short two-turn chat between a person and an AI assistant. The person is described by the profile
below; the chat is about the topic given.

Rules:
- The person's traits are shown, never stated: their preferences, habits, background and tone come through
  in what they ask and how they ask it (word choice, details they mention, what they take for granted),
  never as self-description such as "as someone who loves X" or "I am a very organised person".
- Write the person's message in the voice this profile implies (their own register, humour or lack of it,
  level of detail). Do not invent traits that contradict the profile, and do not name the person.
- The assistant replies helpfully, briefly and neutrally, without repeating the person's details back.
- "{user_tag}" is a fixed speaker tag for the person whatever their real name or gender.

Output exactly 2 lines and nothing else: the first line starts with "{user_tag}: " and holds the person's
whole message; the second starts with "Assistant: " and holds the whole reply. No blank line, no line
breaks inside a turn, no quotation marks around the turns.

<TOPIC>
{topic}
</TOPIC>

<PROFILE>
{persona}
</PROFILE>
"""

_QUESTIONS = """# Task: multiple-choice questions

Below is the profile of a fictional person; it is the ground truth.
Write exactly {n} multiple-choice questions for the category "{category}". An AI assistant will
later answer them from its past conversations with this person, in free text, without seeing the choices.

Each question:
- places the person in a concrete new scenario and asks what they would most likely do, choose or prefer
  (preference and behaviour, not knowledge or competence), in neutral wording that gives no hint;
- can only be answered by combining two or more facts from the profile;
- has one reference answer that the profile clearly supports and four distractors that a reasonable person
  might genuinely prefer. At least one distractor is the widely recommended best practice that this person
  rejects;
- has five choices matched in length (within 2 words of each other), grammatical structure and
  specificity, so that the answer cannot be spotted from the choices alone;
- puts the reference at a letter of your choice (vary it across questions).

Before writing each question, check it: would a careful reader of the profile pick exactly one choice, and
would a stranger find all five equally plausible? If not, rewrite it.

Use exactly this format for each question, with no other text:

<QUESTION> the scenario and question
<CHOICE_A> choice text
<CHOICE_B> choice text
<CHOICE_C> choice text
<CHOICE_D> choice text
<CHOICE_E> choice text
<CORRECT_CHOICE> one letter A-E
<RATIONALE> which profile facts make the reference right and each distractor wrong for this person
<WORD_COUNTS> A: n | B: n | C: n | D: n | E: n

<PROFILE>
{persona}
</PROFILE>
"""

TEMPLATES: dict[str, str] = {
    "categories": _CATEGORIES,
    "topics": _TOPICS,
    "chats": _CHAT,
    "questions": _QUESTIONS,
}


def template_hash(step: str) -> str:
    """SHA-256 of one step's template text (with :data:`PROMPT_VERSION`)."""
    if step not in TEMPLATES:
        raise ValueError(f"step must be one of {sorted(TEMPLATES)}, got {step!r}")
    return sha256_text(f"{PROMPT_VERSION}\n{TEMPLATES[step]}")


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def categories_messages(persona: str, *, n: int = 10) -> list[dict[str, str]]:
    """Step 1: the persona's ``n`` most testable question categories, as a numbered list."""
    return _user(_CATEGORIES.format(n=n, persona=persona.strip()))


def topics_messages(persona: str, *, n: int = 200) -> list[dict[str, str]]:
    """Step 2: ``n`` one-sentence chat topics (skeptical then reliant; hidden-project requests)."""
    return _user(_TOPICS.format(n=n, persona=persona.strip()))


def chat_messages(persona: str, topic: str, *, user_tag: str = USER_TAG) -> list[dict[str, str]]:
    """Step 3: one two-turn chat (``Leo: ...`` then ``Assistant: ...``) for one topic."""
    return _user(_CHAT.format(topic=topic.strip(), persona=persona.strip(), user_tag=user_tag))


def questions_messages(persona: str, category: str, *, n: int = 15) -> list[dict[str, str]]:
    """Step 4: ``n`` tagged multiple-choice questions for one category (the format step 5 parses)."""
    return _user(_QUESTIONS.format(n=n, category=category.strip(), persona=persona.strip()))
