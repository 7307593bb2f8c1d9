"""Parameter values read or computed only when asked (see :class:`DeferredValues`)."""
from __future__ import annotations

import numpy as np


class DeferredValues:
    """A parameter's stored values that are read or computed only when asked (``load()``): a
    compile's large weights, read one at a time from a checkpoint's shards while the file is
    written, so that a model is never held in memory twice. Not cached: each ``load()`` returns
    a fresh array and its holder drops it after use."""

    def load(self) -> np.ndarray:       # pragma: no cover - every subclass defines it
        raise NotImplementedError


__all__ = ["DeferredValues"]
