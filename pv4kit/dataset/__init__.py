"""The dataset stage: the raw tree, step 5 (``qa.csv``), validation, step 6 (splits, parquet), load, hub.

Modules: :mod:`~pv4kit.dataset.raw` (the tree), :mod:`~pv4kit.dataset.questions` (step 5),
:mod:`~pv4kit.dataset.qatags` (the tag check), :mod:`~pv4kit.dataset.splits` (step 6),
:mod:`~pv4kit.dataset.load` (``load() -> PV4Data``), :mod:`~pv4kit.dataset.hub` (downloads).
Imports only pv4kit's base modules (``schema``, ``_io``, ...).
"""
