"""PersonaFeedback (PersonalAILab/PersonaFeedback): loader, pairwise LLM judge, PV4-style scoring.

The public names of its modules, imported here (``from pv4kit.related import personafeedback as pf``):

* :mod:`~pv4kit.related.personafeedback.personas` -- the two persona layouts, rendering, comparison.
* :mod:`~pv4kit.related.personafeedback.load` -- the tier files joined to the personas
  (:func:`load_personafeedback`, :class:`PersonaFeedbackData`).
* :mod:`~pv4kit.related.personafeedback.judge` -- the pairwise LLM judge with position randomisation.
* :mod:`~pv4kit.related.personafeedback.score` -- PV4's nearest-of-two scoring rule on generations.
* :mod:`~pv4kit.related.personafeedback.calls` -- the LLM calls both make.

pv4kit's own modules import from the defining module.
"""

from __future__ import annotations

from pv4kit.related.personafeedback.judge import (
    JUDGE_PROMPT_VERSION,
    JUDGE_SYSTEM,
    JUDGE_TEMPLATE,
    build_judge_messages,
    judge_accuracy,
    judge_pairs,
    judge_requests,
    parse_judge_reply,
    position_bias,
)
from pv4kit.related.personafeedback.load import (
    HUB_ID,
    PAIR_COLUMNS,
    PAPER_TOTAL,
    SETS,
    TIERS,
    PersonaFeedbackData,
    head_per_group,
    load_personafeedback,
)
from pv4kit.related.personafeedback.personas import (
    LINES_FILE,
    PERSONA_SECTIONS,
    read_personas,
    render_persona,
)
from pv4kit.related.personafeedback.score import (
    GENERATE_PROMPT_VERSION,
    GENERATE_SYSTEM,
    generate_answers,
    generation_messages,
    pv4_score,
    pv4_score_accuracy,
)

__all__ = [
    "GENERATE_PROMPT_VERSION",
    "GENERATE_SYSTEM",
    "HUB_ID",
    "JUDGE_PROMPT_VERSION",
    "JUDGE_SYSTEM",
    "JUDGE_TEMPLATE",
    "LINES_FILE",
    "PAIR_COLUMNS",
    "PAPER_TOTAL",
    "PERSONA_SECTIONS",
    "PersonaFeedbackData",
    "SETS",
    "TIERS",
    "build_judge_messages",
    "generate_answers",
    "generation_messages",
    "head_per_group",
    "judge_accuracy",
    "judge_pairs",
    "judge_requests",
    "load_personafeedback",
    "parse_judge_reply",
    "position_bias",
    "pv4_score",
    "pv4_score_accuracy",
    "read_personas",
    "render_persona",
]
