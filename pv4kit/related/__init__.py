"""Related benchmarks, evaluated with pv4kit's machinery (not imported by ``import pv4kit``).

``personafeedback`` (load, LLM judge, PV4-style score), ``reward_model`` (Bradley-Terry head), ``pv4_pairs``
(PV4 as pairs for the same judge), ``recenter`` (Re-Centering stages 1-3), ``agreement`` (kappas, alpha).
"""
