"""The engine host for the Studio's window: :class:`~.connection.HostConnection` with Qt signals.

One host per window (not per document): torch and the kernels are imported once, and the
window's documents share one process whose memory the cap bounds as a whole. If it dies (a
segfault in a kernel, ``kill -9``, the memory cap), each open request's task fails with
:class:`EngineStopped` saying how it ended, :attr:`EngineHost.stopped` tells the window, and the
next request (or :meth:`EngineHost.restart`) starts a fresh host. Nothing the user made lives in
the host (documents, breakpoints, watches and inputs are the Studio's), so a restart loses only
execution state. Every signal here arrives on the UI thread, and nothing here blocks it.
"""
from __future__ import annotations

import asyncio
from typing import Any, Optional

from PySide6.QtCore import QObject, Qt, Signal

from ..tasks import Cancelled
from .connection import EngineStopped, HostConnection, HostError, Request, RequestCancelled

__all__ = ["EngineHost", "HostTask", "EngineStopped", "HostError"]


def _unless_gone(emit):
    """``emit`` for the connection's reader thread: a task deleted with its window before the host
    answered has nobody waiting, and its signal's "source has been deleted" is no error."""
    def call(*args) -> None:
        try:
            emit(*args)
        except RuntimeError:
            pass
    return call


class HostTask(QObject):
    """One request in flight; quacks like :class:`~nac_studio.tasks.Task` (status bar, views).
    A cancelled or superseded request fails with :class:`~nac_studio.tasks.Cancelled`."""
    progressed = Signal(float, str)
    finished = Signal(object)
    failed = Signal(object)
    _settled = Signal()
    _progress = Signal(float, str)

    def __init__(self, request: Request, title: str):
        super().__init__()
        self.request = request
        self.title = title
        self.error: Optional[BaseException] = None
        self.traceback = ""
        self._settled.connect(self._deliver, Qt.ConnectionType.QueuedConnection)
        self._progress.connect(self.progressed, Qt.ConnectionType.QueuedConnection)
        request.on_progress = _unless_gone(self._progress.emit)
        settled = _unless_gone(self._settled.emit)
        request.future.add_done_callback(lambda _f: settled())

    @property
    def future(self):
        return self.request.future

    def cancel(self) -> None:
        self.request.cancel()

    @property
    def is_cancelled(self) -> bool:
        return self.request.cancel_requested

    def done(self) -> bool:
        return self.request.future.done()

    def result(self, timeout: Optional[float] = None) -> Any:
        return self.request.future.result(timeout)

    async def wait(self) -> Any:
        return await asyncio.wrap_future(self.request.future)

    def _deliver(self) -> None:
        exc = self.request.future.exception()
        if exc is None:
            self.finished.emit(self.request.future.result())
            return
        if isinstance(exc, RequestCancelled):
            exc = Cancelled(str(exc))
        self.error = exc
        self.traceback = getattr(exc, "traceback", "")
        self.failed.emit(exc)


class EngineHost(QObject):
    """``EngineHost(parent=None, tasks=None, memory_cap=None, env=None)``; starts on first use.
    ``tasks``: the window's TaskRunner, which shows each request in the status bar while it runs."""
    stopped = Signal(str)              # how it ended
    event = Signal(str, object)        # the host's events other than progress: (name, body)
    _stopped = Signal(str)
    _event = Signal(str, object)

    def __init__(self, parent: Optional[QObject] = None, tasks=None, memory_cap: Optional[int] = None,
                 env: Optional[dict] = None):
        super().__init__(parent)
        self.tasks = tasks
        self.connection = HostConnection(memory_cap, env)
        self._stopped.connect(self.stopped, Qt.ConnectionType.QueuedConnection)
        self._event.connect(self.event, Qt.ConnectionType.QueuedConnection)
        self.connection.on_stopped = self._stopped.emit
        self.connection.on_message = self._on_message

    def _on_message(self, msg: dict) -> None:        # reader thread
        if msg.get("type") == "event" and msg.get("event") != "progressUpdate":
            self._event.emit(msg.get("event", ""), msg.get("body"))

    @property
    def alive(self) -> bool:
        return self.connection.alive

    @property
    def pid(self) -> Optional[int]:
        return self.connection.pid

    @property
    def last_exit(self) -> str:
        return self.connection.last_exit

    def start(self) -> None:
        self.connection.start()

    def restart(self) -> None:
        self.connection.restart()

    def shutdown(self) -> None:
        self.connection.shutdown()

    def request(self, command: str, arguments: Optional[dict] = None, *, title: Optional[str] = None,
                supersede: Any = None, track: bool = True, convert=None) -> HostTask:
        """Send a request; its task's ``finished``/``failed`` arrive on the UI thread, never
        before this returns (connect to them right after the call). ``convert(body)`` makes the
        result off the UI thread (the engine object the view wants)."""
        task = HostTask(self.connection.request(command, arguments, supersede=supersede, convert=convert),
                        title or command)
        task.setParent(self)
        task.finished.connect(task.deleteLater)
        task.failed.connect(task.deleteLater)
        if track and self.tasks is not None:
            self.tasks.track(task)
        return task

    def submit(self, title: str, command: str, arguments: Optional[dict] = None, *, on_done=None, on_error=None,
               convert=None, supersede: Any = None) -> HostTask:
        """``TaskRunner.submit``'s shape for a host request: ``on_done(result)``/``on_error(exc)``
        on the UI thread, connected before anything can arrive."""
        task = self.request(command, arguments, title=title, supersede=supersede, convert=convert)
        if on_done is not None:
            task.finished.connect(on_done)
        if on_error is not None:
            task.failed.connect(on_error)
        return task

    def call(self, command: str, arguments: Optional[dict] = None, timeout: Optional[float] = None) -> Any:
        """Send a request and wait for its body: for worker threads, never the UI thread."""
        return self.connection.call(command, arguments, timeout)
