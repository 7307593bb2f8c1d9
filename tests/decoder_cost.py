"""Cost measures shared by the decoders' linear-cost tests (NAC sections and peer formats)."""
from __future__ import annotations

import gc
import time
import tracemalloc


def ram_per_file_byte(fn, path) -> float:
    """Peak bytes Python allocates while ``fn(path)`` runs, per byte of the file (a warm-up
    call first: first-use imports and caches are not the decoder's cost)."""
    fn(path)
    gc.collect()
    tracemalloc.start()
    try:
        fn(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / path.stat().st_size


def best_cpu(fn, path, repeat: int = 3) -> float:
    """Least process CPU time of ``repeat`` calls (CPU, not wall: the machine may be shared).

    What was alive before is frozen out of the collector meanwhile: late in a full test run a
    collection the decoder's allocations trigger walks every object the earlier tests left,
    a cost of the test process, not of the input (a mind read measured 0.098 s for 4x against
    0.012 s for 1x there, 0.03-0.05 s alone). The decoder's own objects are still collected."""
    gc.collect()
    gc.freeze()
    try:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.process_time()
            fn(path)
            best = min(best, time.process_time() - t0)
    finally:
        gc.unfreeze()
    return best
