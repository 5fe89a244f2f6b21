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

from __future__ import annotations

from pv4kit.related._face import face
from pv4kit.related.personafeedback import judge, load, personas, score

__all__, __getattr__, __dir__ = face(__name__, (personas, load, judge, score))
