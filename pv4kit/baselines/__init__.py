"""The baselines: answer runs, their methods, prompts, tokens, retrieval, attributes and the hard subset.

Named ``baselines``, not ``answer``: a subpackage ``pv4kit.answer`` would shadow the function of that name.
"""
