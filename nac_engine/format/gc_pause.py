"""The cyclic garbage collector paused while a decoder builds many small objects.

A decode allocates tens of thousands of acyclic records (constants, MMAP records, spans); every
700 allocations the collector runs, and its older generations walk every object alive in the
process (in the Studio: torch's and Qt's too), which made a 65k-constant table cost nearly twice
its parsing. Pausing it for the decode defers that work to one later collection. Nested and
concurrent pauses (the Studio decodes in workers) are counted: the collector comes back when the
last one ends, and only if it was running when the first began.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def collector_paused():
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
