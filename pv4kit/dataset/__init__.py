"""The dataset stage: the raw tree, step 5 (``qa.csv``), validation, step 6 (splits, parquet), load, hub.

Modules, bottom to top (each imports only those before it): :mod:`~pv4kit.dataset.formats` (each file's
text), :mod:`~pv4kit.dataset.tree` (the layout, reading and writing), :mod:`~pv4kit.dataset.qatags` (the tag
check), :mod:`~pv4kit.dataset.questions` (step 5), :mod:`~pv4kit.dataset.validate` (a tree's problems),
:mod:`~pv4kit.dataset.splits` (step 6), :mod:`~pv4kit.dataset.hub` (downloads) and
:mod:`~pv4kit.dataset.load` (``load() -> PV4Data``).
Imports only pv4kit's base modules (``schema``, ``_io``, ...).
"""
