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

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

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
