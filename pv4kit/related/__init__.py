"""Related benchmarks from the design documents, loaded and evaluated with pv4kit's machinery.

* :mod:`pv4kit.related.personafeedback` -- PersonaFeedback (PersonalAILab/PersonaFeedback): ``personas``
  (the two layouts), ``load`` (the cases joined to the personas), ``judge`` (pairwise LLM judge with
  position randomisation), ``score`` (PV4-style embedding scoring), ``calls`` (their LLM calls).
* :mod:`pv4kit.related.reward_model` -- Bradley-Terry linear reward head on frozen embeddings.
* :mod:`pv4kit.related.pv4_pairs` -- PV4 questions as (reference, distractor) pairs for the same judge.
* :mod:`pv4kit.related.recenter` -- Re-Centering Humans in LLM Personalization
  (leczhang/recenter-personalization): ``records``, the stage loaders ``stage1_io..stage3_io`` and the
  stage metrics ``stage1..stage3``.
* :mod:`pv4kit.related.agreement` -- Cohen's / Fleiss' kappa, Krippendorff's alpha (scikit-learn,
  statsmodels and ``krippendorff`` behind tidy wrappers).

The two packages import their modules' public names (``rc.load_stage1``); pv4kit's own code imports from the
defining module. ``import pv4kit`` does not import this package.
"""
