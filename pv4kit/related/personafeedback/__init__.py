"""PersonaFeedback (PersonalAILab/PersonaFeedback): loader, pairwise LLM judge, PV4-style scoring.

The names of the old ``pv4kit.related.personafeedback`` module, gathered from where they live:

* :mod:`~pv4kit.related.personafeedback.personas` -- the two persona layouts, rendering, comparison.
* :mod:`~pv4kit.related.personafeedback.load` -- the tier files joined to the personas
  (:func:`load_personafeedback`, :class:`PersonaFeedbackData`).
* :mod:`~pv4kit.related.personafeedback.judge` -- the pairwise LLM judge with position randomisation.
* :mod:`~pv4kit.related.personafeedback.score` -- PV4's nearest-of-two scoring rule on generations.
* :mod:`~pv4kit.related.personafeedback.calls` -- the LLM calls both make.

pv4kit's own modules import from those; this face is for notebooks and users.
"""

from pv4kit.related.personafeedback.judge import (
    JUDGE_PROMPT_VERSION,
    build_judge_messages,
    judge_accuracy,
    judge_pairs,
    judge_requests,
    parse_judge_reply,
    position_bias,
)
from pv4kit.related.personafeedback.load import (
    HUB_ID,
    PAPER_TOTAL,
    PersonaFeedbackData,
    head_per_group,
    load_personafeedback,
)
from pv4kit.related.personafeedback.personas import render_persona
from pv4kit.related.personafeedback.score import (
    generate_answers,
    generation_messages,
    pv4_score,
    pv4_score_accuracy,
)

__all__ = [
    "HUB_ID",
    "JUDGE_PROMPT_VERSION",
    "PAPER_TOTAL",
    "PersonaFeedbackData",
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
    "render_persona",
]
