"""Related benchmarks from the design documents, evaluated with pv4kit's machinery.

* :mod:`pv4kit.related.personafeedback`: PersonaFeedback (PersonalAILab/PersonaFeedback): load, pairwise
  LLM judge, PV4-style scoring.
* :mod:`pv4kit.related.reward_model`: Bradley-Terry linear reward head on frozen embeddings.
* :mod:`pv4kit.related.pv4_pairs`: PV4 questions as (reference, distractor) pairs for the same judge.
* :mod:`pv4kit.related.recenter`: Re-Centering Humans in LLM Personalization
  (leczhang/recenter-personalization): stage 1-3 loaders and metrics.
* :mod:`pv4kit.related.agreement`: Cohen's / Fleiss' kappa, Krippendorff's alpha.

``import pv4kit`` does not import this package.
"""
