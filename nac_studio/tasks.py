"""Background work for the UI: run a function off the UI thread with progress and cancel.

Why not plain ``QThread`` per job: the Studio's event loop is qasync's, so a task is a
``concurrent.futures`` future that coroutines can ``await`` (:meth:`Task.wait`) and that
plain Qt code can watch through signals. Results and progress come back to the UI thread
through queued signals, so callbacks may touch widgets.

The function receives a :class:`TaskContext`; it reports ``ctx.progress(done, total)``
and checks ``ctx.cancelled`` (or calls ``ctx.check()``, which raises :class:`Cancelled`)
at points where stopping is safe. Cancel is cooperative: nothing is killed mid-write.
"""
from __future__ import annotations

import asyncio
import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Optional

from PySide6.QtCore import QObject, Signal


class Cancelled(Exception):
    """Raised inside a task when the user cancelled it."""


class TaskContext:
    def __init__(self, task: "Task"):
        self._task = task

    @property
    def cancelled(self) -> bool:
        return self._task._cancel.is_set()

    def check(self) -> None:
        if self._task._cancel.is_set():
            raise Cancelled()

    def progress(self, done: float, total: float = 1.0, text: Optional[str] = None) -> None:
        frac = 0.0 if total <= 0 else max(0.0, min(1.0, done / total))
        try:
            self._task.progressed.emit(frac, text or "")
        except RuntimeError:
            pass        # the task ended and its Qt object is gone (superseded): nobody shows it


class Task(QObject):
    """One background job. Signals arrive on the UI thread."""
    progressed = Signal(float, str)     # fraction 0..1, optional text
    finished = Signal(object)           # the function's return value
    failed = Signal(object)             # the exception (Cancelled when cancelled)

    def __init__(self, title: str):
        super().__init__()
        self.title = title
        self.future: Future = Future()
        self._cancel = threading.Event()
        self.error: Optional[BaseException] = None
        self.traceback: str = ""

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def is_cancelled(self) -> bool:
        return self._cancel.is_set()

    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout: Optional[float] = None) -> Any:
        return self.future.result(timeout)

    async def wait(self) -> Any:
        """Await from a coroutine on the qasync loop."""
        return await asyncio.wrap_future(self.future)


class TaskRunner(QObject):
    """Runs tasks on a small thread pool and tracks the active ones for the status bar."""
    started = Signal(object)    # Task
    ended = Signal(object)      # Task

    def __init__(self, max_workers: int = 2, parent: Optional[QObject] = None):
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="nac-studio")
        self.active: list[Task] = []

    def submit(self, title: str, fn: Callable[..., Any], *args: Any,
               on_done: Optional[Callable[[Any], None]] = None,
               on_error: Optional[Callable[[BaseException], None]] = None) -> Task:
        """Run ``fn(ctx, *args)`` in the background; ``on_done``/``on_error`` run on the UI thread."""
        task = Task(title)
        task.setParent(self)   # keeps the QObject alive until it ends
        if on_done is not None:
            task.finished.connect(on_done)
        if on_error is not None:
            task.failed.connect(on_error)
        task.finished.connect(lambda _r, t=task: self._end(t))
        task.failed.connect(lambda _e, t=task: self._end(t))
        # Deleted once it ended (as the engine host's tasks are): its connections hold closures
        # over the task itself, so a task kept as the runner's child, or merely not deleted,
        # lived for ever with its result and its callbacks' captures: every opened Document,
        # closed or not, with its decoded file. Who still holds it keeps the Python side
        # (done(), result(), wait()); its signals have fired.
        task.finished.connect(task.deleteLater)
        task.failed.connect(task.deleteLater)
        self.active.append(task)
        self.started.emit(task)

        def body():
            try:
                if task.is_cancelled:
                    raise Cancelled()
                value = fn(TaskContext(task), *args)
            except BaseException as exc:   # delivered to the UI, never lost in a thread
                task.error = exc
                task.traceback = traceback.format_exc()
                task.future.set_exception(exc)
                task.failed.emit(exc)
                return
            task.future.set_result(value)
            task.finished.emit(value)

        self._pool.submit(body)
        return task

    def track(self, task) -> None:
        """Show a task started elsewhere (an engine host request) like one of ours: in
        ``active`` (status bar, ``is_idle``) until it finishes or fails."""
        self.active.append(task)
        task.finished.connect(lambda _r, t=task: self._end(t))
        task.failed.connect(lambda _e, t=task: self._end(t))
        self.started.emit(task)

    def _end(self, task: Task) -> None:
        if task in self.active:
            self.active.remove(task)
        self.ended.emit(task)

    def cancel_all(self) -> None:
        for t in list(self.active):
            t.cancel()

    def shutdown(self, wait: bool = True) -> None:
        self.cancel_all()
        self._pool.shutdown(wait=wait, cancel_futures=True)
