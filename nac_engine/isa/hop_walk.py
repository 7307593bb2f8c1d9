"""Following a chain of variable-length records 16 at a time, for the start walk of ORCH
bytecode (``isa/mep.py``).

Each record's start depends on the one before, so the chain cannot be vectorised directly. Its
"next start" map can: squaring it four times with numpy gives, per slot, the slot 16 records
ahead, so Python walks one step per 16 records and numpy gathers the 15 in between."""
from __future__ import annotations

from array import array
from typing import Optional

import numpy as np

HOP_LEVELS = 4        # the walk hops 2**4 = 16 records per Python step


def hop_chain(loc: np.ndarray, size: int) -> tuple[Optional[np.ndarray], int]:
    """Walk from slot 0 of ``loc`` (int32, ``size + 1`` entries: each slot's next slot, and
    ``size`` standing for "stopped", mapping to itself) as long as 16 more records follow.

    Returns the visited slots as a (hops, 16) int64 array, row by row in chain order (None when
    fewer than 16 records follow slot 0), and the slot where hopping stopped: the caller takes
    the last few records one at a time from there."""
    hop = loc
    for _ in range(HOP_LEVELS):
        hop = np.take(hop, hop)
    hops = array("i", hop.tobytes())
    landed = array("i")
    i = 0
    while (j := hops[i]) != size:
        landed.append(i)
        i = j
    if not landed:
        return None, i
    step = np.frombuffer(landed, dtype=np.int32)
    between = np.empty((len(step), 1 << HOP_LEVELS), dtype=np.int64)
    between[:, 0] = step
    for k in range(1, 1 << HOP_LEVELS):
        between[:, k] = step = np.take(loc, step)
    return between, i
