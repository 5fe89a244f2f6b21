"""The dataset stage: the raw tree, step 5 (``qa.csv``), validation, step 6 (splits, parquet), load, hub.

Modules, bottom to top: ``formats`` (each file's text), ``tree`` (the layout), ``qatags`` (the tag check),
``questions`` (step 5), ``validate``, ``splits`` (step 6), ``hub`` and ``load`` (``load() -> PV4Data``).
"""
