"""Workers step aside while the UI thread paints a heavy frame (Qt-free; threads only).

Why: Qt calls into Python for every model ``data()`` and ``paintEvent`` of a frame, and
PySide releases the GIL between those calls. A worker running Python meanwhile (a graph
layout, the meta-shape pass) competes for every one of them, and CPython's GIL hands over
fairly: with a short switch interval (``gil_policy``) each thread gets about half. The UI
thread's frames then took about twice their own CPU time — measured on the 48-layer file:
a 115 ms stall with 56 ms of UI-thread CPU and 5 ms waiting for a core, the rest waiting
for the GIL (``/proc/self/task/<tid>/schedstat``).

So the UI thread *claims* priority for every frame the window paints
(``paint_gate.FramePriority``) and right before work that ends in a heavy frame (a task's
result arriving, a selection, a theme switch, a file shown), and workers, at their
checkpoints (:func:`yield_to_ui`: every ``TaskContext.check``/``progress``/``cancelled``, the
graph builder's and layout's loops, the background imports between two modules), sleep until
the claim is released (right after the frame is painted) or ends by itself after its
duration — so a worker is never held longer than that per claim, whatever the UI does.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

#: How long one claim keeps workers waiting: the heavy frames measured take 20-80 ms of
#: UI-thread CPU; a claim outliving its frame only delays background work that long.
CLAIM_S = 0.12

#: How often a parked thread with a ``give_up`` condition looks at it.
GIVE_UP_POLL_S = 0.002

_until = 0.0            # time.monotonic() before which workers wait at checkpoints
_ui_thread = threading.main_thread()     # Qt's GUI thread: never made to wait here
_wake = threading.Condition()


def claim(seconds: float = CLAIM_S) -> None:
    """Called on the UI thread: workers pause at their next checkpoint for ``seconds``
    (extends a running claim, never shortens it)."""
    global _until
    _until = max(_until, time.monotonic() + seconds)


def release() -> None:
    """End the claim now (the frame it was for has painted)."""
    global _until
    _until = 0.0
    with _wake:
        _wake.notify_all()


def claimed() -> bool:
    return time.monotonic() < _until


def yield_to_ui(give_up: Optional[Callable[[], bool]] = None) -> None:
    """A worker's checkpoint: return at once unless the UI thread claimed priority, else
    sleep (without the GIL) until the claim ends or is released — or, with ``give_up``,
    as soon as that returns true (polled every :data:`GIVE_UP_POLL_S`)."""
    if _until == 0.0:
        return
    remaining = _until - time.monotonic()
    if remaining <= 0 or threading.current_thread() is _ui_thread:
        return
    with _wake:
        if give_up is None:
            _wake.wait(remaining)
            return
        while remaining > 0 and not give_up():
            _wake.wait(min(remaining, GIVE_UP_POLL_S))
            remaining = _until - time.monotonic()
