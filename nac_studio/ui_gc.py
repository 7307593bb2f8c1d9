"""Python's cyclic garbage collector runs on the UI thread only.

CPython collects on whichever thread happens to allocate past the threshold. In the Studio
that is usually a worker (graph layout, the interpreter, statistics), and the garbage it
finds can hold Qt objects: a closed document's views, a dialog, a signal connection's
closure. Destroying a ``QObject`` from a thread that does not own it is undefined in Qt;
the suite saw it as a segmentation fault of the UI thread inside the event loop while a
layout worker ran, and a CI run hung at the same kind of moment. So automatic collection
is turned off and a timer on the UI thread collects instead.

pyqtgraph ships the same idea (``pyqtgraph.util.garbage_collector.GarbageCollector``); it is
not used because it runs a full (generation 2) collection whenever the generation-2 count
passes its threshold, ignoring CPython's rule that a full collection waits until the
long-lived objects grew by a quarter. With a GPT-2-sized document alive, a full collection
walks millions of objects, so here it runs at most every :data:`FULL_EVERY_S` seconds.

Still needed with the engine in its own process: the window's process keeps threads that
allocate (decoding a file, building the graph and the timeline, the engine host's reader
thread turning answers into objects), and any of them could be the one that reaches the
threshold while a closed view's widgets are garbage. ``skip_while()``, when given, pauses it.
"""
from __future__ import annotations

import gc
import time
from typing import Callable, Optional

from PySide6.QtCore import QCoreApplication, QObject, QTimer

#: How often the UI thread looks at the allocation counts (milliseconds): every
#: :data:`BUSY_INTERVAL_MS` while something allocates, so each young collection has little to
#: walk (a generation-1 collection walks about ten intervals' worth of survivors: 62 ms at
#: 100 ms intervals while a 48-layer file decoded), backing off to :data:`INTERVAL_MS` when idle.
BUSY_INTERVAL_MS = 20
INTERVAL_MS = 200
#: A full collection at most this often (seconds).
FULL_EVERY_S = 30.0

_collector: Optional["UiThreadCollector"] = None


class UiThreadCollector(QObject):
    """Collects generation 0/1 when CPython would, from a timer on the UI thread, and a full
    collection when generation 2 is due and :data:`FULL_EVERY_S` has passed."""

    def __init__(self, parent: Optional[QObject] = None, interval_ms: int = INTERVAL_MS,
                 full_every_s: float = FULL_EVERY_S, skip_while: Optional[Callable[[], bool]] = None):
        super().__init__(parent)
        self.skip_while = skip_while
        self.threshold = gc.get_threshold()
        self.full_every_s = full_every_s
        self._last_full = time.monotonic()
        self.collections = [0, 0, 0]
        gc.disable()
        self.idle_interval_ms = interval_ms
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.check)
        self.timer.start()

    def due(self) -> Optional[int]:
        """The generation to collect now, or None."""
        c0, c1, c2 = gc.get_count()
        t0, t1, t2 = self.threshold
        if c0 <= t0:
            return None
        if c1 <= t1:
            return 0
        if c2 > t2 and time.monotonic() - self._last_full >= self.full_every_s:
            return 2
        return 1

    def check(self) -> None:
        if self.skip_while is not None and self.skip_while():
            return
        gen = self.due()
        if gen is None:
            if self.timer.interval() < self.idle_interval_ms:
                self.timer.setInterval(min(self.idle_interval_ms, 2 * self.timer.interval()))
            return
        if self.timer.interval() != BUSY_INTERVAL_MS:
            self.timer.setInterval(BUSY_INTERVAL_MS)
        gc.collect(gen)
        self.collections[gen] += 1
        if gen == 2:
            self._last_full = time.monotonic()


_frozen = False


def freeze_start_up() -> None:
    """Once per process, when the first window is built: move everything alive then (the
    modules PySide6, pyqtgraph and numpy imported, their types, the window) out of the
    collector's reach. They live as long as the process, and a full collection that walks them
    again every time took 0.8 s of UI thread in the 2 GB open test. Frozen objects are still
    freed by reference counting; only a cycle among them that became garbage would stay."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


def collect_on_ui_thread(skip_while: Optional[Callable[[], bool]] = None) -> Optional[UiThreadCollector]:
    """Install the collector once per process (needs a QCoreApplication; call it on the UI
    thread); ``skip_while``, when given, replaces the installed one's. Returns it, or None
    when there is no application yet."""
    global _collector
    app = QCoreApplication.instance()
    if app is None:
        return None
    if _collector is None:
        _collector = UiThreadCollector(app)
    if skip_while is not None:
        _collector.skip_while = skip_while
    return _collector
