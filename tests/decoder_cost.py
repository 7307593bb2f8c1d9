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


def growth(small_fn, small_path, big_fn, big_path, bound, rounds: int = 8) -> tuple[float, float]:
    """(CPU of the 1x input, CPU of the 4x one), each the least over up to ``rounds`` rounds of
    :func:`best_cpu`, stopping once ``bound(small, big)`` holds. CPU time still grows when the
    other test worker contends for the cache and memory bus (a linear PROC read measured 6.8x
    once in CI, 3.8-4.0x alone; a tensors read 7.9x in the heavy tier of a CI run on a 2-core
    machine whose other worker ran for three rounds, 2.3x alone): another round gives the pair
    a quieter moment, and a linear cost usually passes in the first, while a cost that really
    grows faster than the input fails every round (a quadratic one is 16x)."""
    small = big = float("inf")
    for _ in range(rounds):
        small = min(small, best_cpu(small_fn, small_path))
        big = min(big, best_cpu(big_fn, big_path))
        if bound(small, big):
            break
    return small, big
