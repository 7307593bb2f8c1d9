"""How long another thread can keep the GIL from the UI thread (process-wide settings).

Qt calls into Python once per callback — every ``data()`` of a model, every ``paintEvent``
— and PySide releases the GIL between them, so painting one table takes the GIL back
hundreds of times. While a worker runs Python (a layout, the meta-shape pass, a weight's
statistics), each of those takes waits for the worker's switch interval: CPython's 5 ms
default turned a 60 ms repaint into 0.3–0.7 s on GPT-2-size files (measured with
``benchmarks/profile_stalls.py``: long stalls whose UI-thread CPU was a fifth of their
length). At 0.1 ms the wait per hand-over is a fiftieth (0.5 ms still left a 48-layer file's
open at 250 ms while the meta-shape pass ran: ~600 ``data()`` calls a repaint, each waiting);
the workers pay only when the UI thread actually asks (an idle UI thread sleeps without the GIL and forces no switches).

The cyclic garbage collector holds the GIL too: a full (generation 2) collection walks every
object not frozen (``preload`` freezes what start-up imported) — 40–90 ms once a GPT-2
document, its graph and the views are alive, and it ran several times per open. Generation 2
is considered after :data:`GEN2_AFTER` generation-1 collections instead of CPython's 10
(``ui_gc``, which runs every collection on the UI thread, reads the same threshold), so
opening a file rarely runs one; young collections (a few ms) are unchanged, and unreachable
cycles that reach generation 2 wait longer.
"""
from __future__ import annotations

import gc
import sys

#: Seconds a thread runs before it must let a waiting thread (the UI) take the GIL.
UI_SWITCH_INTERVAL_S = 0.0001
#: Generation-1 collections between two looks at generation 2 (CPython's default: 10).
GEN2_AFTER = 100


def configure_for_ui() -> None:
    """Lower the switch interval to :data:`UI_SWITCH_INTERVAL_S` and make full collections
    rarer (:data:`GEN2_AFTER`); neither is undone where a program chose more already."""
    if sys.getswitchinterval() > UI_SWITCH_INTERVAL_S:
        sys.setswitchinterval(UI_SWITCH_INTERVAL_S)
    g0, g1, g2 = gc.get_threshold()
    if g2 < GEN2_AFTER:
        gc.set_threshold(g0, g1, GEN2_AFTER)
