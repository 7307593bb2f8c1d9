"""Qt face of a :class:`~nac_studio.document.Document`: the same events as signals.

Views hold a :class:`QtDocument`, connect to its signals and call the plain document's
``select``/``set_tick`` through it. The ``source`` argument is the view that made the
change, so a view can ignore its own echo and avoid feedback loops.
"""
from __future__ import annotations

from typing import Any, Optional

from PySide6.QtCore import QObject, Signal

from .document import Document, Selection
from .tasks import TaskRunner


class QtDocument(QObject):
    selectionChanged = Signal(object)   # source
    tickChanged = Signal(object)        # source

    def __init__(self, doc: Document, tasks: Optional[TaskRunner] = None, parent: Optional[QObject] = None):
        super().__init__(parent)
        self.doc = doc
        self.tasks = tasks if tasks is not None else TaskRunner(parent=self)
        doc.observe(self._on_event)

    def _on_event(self, event: str, _doc: Document, source: Any) -> None:
        if event == "selection":
            self.selectionChanged.emit(source)
        elif event == "tick":
            self.tickChanged.emit(source)

    # shortcuts so views read naturally
    @property
    def nac(self):
        return self.doc.nac

    @property
    def selection(self) -> Optional[Selection]:
        return self.doc.selection

    @property
    def tick(self) -> Optional[int]:
        return self.doc.tick

    def select(self, sel: Optional[Selection], source: Any = None) -> None:
        self.doc.select(sel, source)

    def set_tick(self, tick: Optional[int], source: Any = None) -> None:
        self.doc.set_tick(tick, source)

    def close(self) -> None:
        self.doc.unobserve(self._on_event)
