"""Generation, steps 1-4: prompts (pv4kit's or the reference's), the resumable run, the files written.

Modules: :mod:`~pv4kit.generation.prompts`, :mod:`~pv4kit.generation.defaults` (models, cost estimate),
:mod:`~pv4kit.generation.steps` (``generate_users``, the manifest, what a reply becomes on disk).
"""
