"""Run something once a window has painted its next frame.

Opening a file hands every view the new document and each view starts its background work
(graph layout, the meta-shape pass, the schedule check). Started at once, those workers run
Python while the window paints the document for the first time, and that paint calls into
Python hundreds of times (every model ``data()``, every ``paintEvent``), each time waiting
for a worker to hand the GIL back: the first frame of GPT-2 took two to three times its own
CPU time. So the main window holds the new tasks (:meth:`TaskRunner.hold`) and starts them
right after that frame: the frame paints uncontended, the work starts a frame later.
"""
from __future__ import annotations

from typing import Callable

import shiboken6
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

from . import ui_priority

#: Run anyway after this long when no frame comes (a hidden or minimised window paints none).
FALLBACK_MS = 250


class _AfterNextPaint(QObject):
    def __init__(self, window: QWidget, fn: Callable[[], None], fallback_ms: int):
        super().__init__(window)
        self.window = window
        self.fn = fn
        self.done = False
        window.installEventFilter(self)
        QTimer.singleShot(fallback_ms, self, self.fire)

    def eventFilter(self, obj, event) -> bool:
        # the top-level window receives UpdateRequest and then paints every dirty child in
        # that same event; a zero timer posted now runs after it
        if obj is self.window and event.type() == QEvent.Type.UpdateRequest and not self.done:
            QTimer.singleShot(0, self, self.fire)
        return False

    def fire(self) -> None:
        if self.done:
            return
        self.done = True
        self.window.removeEventFilter(self)
        try:
            self.fn()
        finally:
            self.deleteLater()


def after_next_paint(window: QWidget, fn: Callable[[], None], fallback_ms: int = FALLBACK_MS) -> None:
    """Call ``fn`` on the UI thread once ``window`` has painted its next frame (or after
    ``fallback_ms`` without one). ``fn`` is called exactly once."""
    _AfterNextPaint(window, fn, fallback_ms)


class FramePriority(QObject):
    """Claims the UI thread's priority (:mod:`ui_priority`) for every frame ``window`` paints
    and ends the claim right after it: the paint's hundreds of Python callbacks then run
    without a worker taking the GIL between them, and background work resumes as soon as
    the frame is on screen instead of waiting out the claim's whole duration."""

    def __init__(self, window: QWidget):
        super().__init__(window)
        self.window = window
        window.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        # UpdateRequest: the window is about to paint every dirty child, in this event
        if obj is self.window and event.type() == QEvent.Type.UpdateRequest:
            ui_priority.claim()
            QTimer.singleShot(0, self, ui_priority.release)    # runs after this frame's paint
        return False


def repaint_in_stages(window: QWidget, stages: list[list[QWidget]]) -> None:
    """Spread the next repaint of ``window`` over several frames: the window paints without
    the widgets of ``stages`` first, then each stage's widgets paint in a frame of their own.

    Call it right before a change that dirties everything (a theme switch, a file's first
    frame): one frame that repaints every visible pane of a 1600×1000 window took 60-110 ms
    of UI-thread CPU, a stall of its own; in stages each frame is a fraction of that and the window keeps
    answering input between them. A stage is let go after the previous frame, or after
    :data:`FALLBACK_MS` when no frame comes, so no widget stays frozen.
    """
    for group in stages:
        for w in group:
            w.setUpdatesEnabled(False)

    def let_go(k: int) -> None:
        for w in stages[k]:
            if shiboken6.isValid(w):
                w.setUpdatesEnabled(True)      # and schedules its repaint
        if k + 1 < len(stages):
            after_next_paint(window, lambda: let_go(k + 1))

    if stages:
        after_next_paint(window, lambda: let_go(0))
