"""The Re-Centering loaders under their old module name: ``from pv4kit.related.recenter_io import ...``.

They live in :mod:`pv4kit.related.recenter.stage1_io`, ``stage2_io`` and ``stage3_io``;
:mod:`pv4kit.related.recenter` offers them with the metrics. pv4kit's own code imports neither face.
"""

from __future__ import annotations

from pv4kit.related._face import face
from pv4kit.related.recenter import records, stage1_io, stage2_io, stage3_io

__all__, __getattr__, __dir__ = face(__name__, (records, stage1_io, stage2_io, stage3_io))
