"""Generation, steps 1-4: prompts (pv4kit's or the reference's), the resumable run, the files written.

Modules: :mod:`~pv4kit.generation.prompts`, :mod:`~pv4kit.generation.prompt_sets`,
:mod:`~pv4kit.generation.steps` (``generate_users``), :mod:`~pv4kit.generation.outputs` (what a reply
becomes on disk), :mod:`~pv4kit.generation.manifest` (what each file was made from).
Imports ``dataset``, ``llm`` and the base modules.
"""
