"""Run inputs as they cross to the engine host: each is an array (a value), None (the file's
stored constant), an ``InputSpec`` (a shape and dtype only: the simulator's shape pass) or the
text of one (``"4x16:int64"``). Arrays travel as files (``arrays``); a spec as
``{"$spec": {"shape": [...], "dtype": "..."}}``; text as text."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np


def encode_feeds(feeds: Optional[list]) -> Optional[list]:
    if feeds is None:
        return None
    out = []
    for v in feeds:
        if v is None or isinstance(v, (np.ndarray, str)):
            out.append(v)
        elif hasattr(v, "shape") and hasattr(v, "dtype") and not hasattr(v, "__array__"):
            out.append({"$spec": {"shape": [int(d) for d in v.shape], "dtype": str(v.dtype)}})
        else:
            out.append(np.asarray(v))
    return out


def decode_feeds(feeds: Optional[list]) -> Optional[list]:
    if feeds is None:
        return None
    from nac_engine.runtime.input_spec import InputSpec
    out: list[Any] = []
    for v in feeds:
        if isinstance(v, dict) and isinstance(v.get("$spec"), dict):
            spec = v["$spec"]
            out.append(InputSpec(tuple(int(d) for d in spec.get("shape") or ()), str(spec.get("dtype", "float32"))))
        else:
            out.append(v)
    return out
