"""How often a busy Python thread hands the GIL to the UI thread (one process-wide setting).

Qt calls into Python once per callback — every ``data()`` of a model, every ``paintEvent``
— and PySide releases the GIL between them, so painting one table takes the GIL back
hundreds of times. While a worker runs Python (a layout, the meta-shape pass, a weight's
statistics), each of those takes waits for the worker's switch interval: CPython's 5 ms
default turned a 60 ms repaint into 0.3–0.7 s on GPT-2-size files (measured with
``benchmarks/profile_stalls.py``: long stalls whose UI-thread CPU was a fifth of their
length). At 0.5 ms the wait per hand-over is a tenth; the workers pay only when the UI
thread actually asks (an idle UI thread sleeps without the GIL and forces no switches).
"""
from __future__ import annotations

import sys

#: Seconds a thread runs before it must let a waiting thread (the UI) take the GIL.
UI_SWITCH_INTERVAL_S = 0.0005


def configure_for_ui() -> None:
    """Lower the switch interval to :data:`UI_SWITCH_INTERVAL_S` (never raises it: a
    program that chose a shorter one keeps it)."""
    if sys.getswitchinterval() > UI_SWITCH_INTERVAL_S:
        sys.setswitchinterval(UI_SWITCH_INTERVAL_S)
