"""Qt face of a :class:`~nac_studio.model.document.Document`: the same events as signals.

Views hold a :class:`QtDocument`, connect to its signals and call the plain document's
``select``/``set_tick`` through it. The ``source`` argument is the view that made the
change, so a view can ignore its own echo and avoid feedback loops.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from PySide6.QtCore import QObject, Signal

from .model.document import Document, Selection
from .tasks import TaskRunner


class QtDocument(QObject):
    selectionChanged = Signal(object)   # source
    tickChanged = Signal(object)        # source
    problemsChanged = Signal(object)    # source
    debugChanged = Signal(object)       # source: doc.debug changed (execution point, breakpoints...)
    simulationChanged = Signal(str, object)   # what (timeline|planners|run|sweep|config), source

    def __init__(self, doc: Document, tasks: Optional[TaskRunner] = None, parent: Optional[QObject] = None,
                 host=None):
        super().__init__(parent)
        self.doc = doc
        self.tasks = tasks if tasks is not None else TaskRunner(parent=self)
        self._host = host            # the window's engine host (None: one of its own, made on first use)
        self._own_host = None
        doc.observe(self._on_event)

    @property
    def host(self):
        """The engine host this document's heavy work runs in."""
        if self._host is None:
            from .host.client import EngineHost
            self._host = self._own_host = EngineHost(self, tasks=self.tasks)
        return self._host

    def _on_event(self, event: str, _doc: Document, source: Any) -> None:
        if event == "selection":
            self.selectionChanged.emit(source)
        elif event == "tick":
            self.tickChanged.emit(source)
        elif event == "problems":
            self.problemsChanged.emit(source)
        elif event == "debug":
            self.debugChanged.emit(source)
        elif event == "simulation":
            self.simulationChanged.emit(*source)

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
        if self._own_host is not None:
            self._own_host.shutdown()


def rebind(old: Optional[QtDocument], new: Optional[QtDocument], *,
           selection: Optional[Callable] = None, tick: Optional[Callable] = None,
           problems: Optional[Callable] = None, debug: Optional[Callable] = None,
           simulation: Optional[Callable] = None) -> None:
    """Move a view's slots from ``old`` to ``new`` when the user switches tabs. Disconnecting
    a slot that was never connected (or whose document is gone) is not an error here."""
    pairs = [(name, slot) for name, slot in (("selectionChanged", selection), ("tickChanged", tick),
                                             ("problemsChanged", problems), ("debugChanged", debug),
                                             ("simulationChanged", simulation))
             if slot is not None]
    if old is not None:
        for name, slot in pairs:
            try:
                getattr(old, name).disconnect(slot)
            except (RuntimeError, TypeError):
                pass
    if new is not None:
        for name, slot in pairs:
            getattr(new, name).connect(slot)
