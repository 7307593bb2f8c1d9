"""A value of the engine's expression language (a watch's, the Debug Console's answer) as one line
of text: numbers to 7 significant digits, a short integer vector as a list (``shape(x)`` reads
``[1, 12, 16, 64]``), other arrays as numpy prints them, cut after a dozen values."""
from __future__ import annotations

import numpy as np

#: Values shown of a longer array or list before the rest is counted.
SHOWN = 12


def format_value(v) -> str:
    if isinstance(v, float):
        return f"{v:.7g}"
    if isinstance(v, np.ndarray):
        if v.ndim == 1 and v.dtype.kind in "iub" and v.size <= SHOWN:
            return "[" + ", ".join(str(x) for x in v.tolist()) + "]"
        return np.array2string(v, precision=5, threshold=SHOWN, max_line_width=200)
    if isinstance(v, (list, tuple)) and len(v) > SHOWN:
        return f"[{', '.join(format_value(x) for x in v[:SHOWN])}, … ({len(v)} values)]"
    return repr(v) if not isinstance(v, str) else v
