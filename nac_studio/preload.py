"""Imports the Studio needs later, done on a background thread at start-up.

pyqtgraph (every plot: histograms, timeline, hardware lanes) takes about 0.4 s to import,
most of it enum copying in ``pyqtgraph.Qt``. Imported on first use, that froze the UI on
the first statistics histogram. Importing a module is thread-safe (the import lock makes
a UI-thread ``import pyqtgraph`` wait for the background one instead of starting again),
and pyqtgraph creates no ``QObject`` at import time, so it can load while the window opens.
"""
from __future__ import annotations

import importlib
import threading

#: Modules imported in the background, in order.
BACKGROUND_IMPORTS = ("pyqtgraph",)

_started = False
_thread: threading.Thread | None = None


def start_background_imports() -> None:
    """Start importing :data:`BACKGROUND_IMPORTS` on a daemon thread (once per process)."""
    global _started, _thread
    if _started:
        return
    _started = True

    def work() -> None:
        for name in BACKGROUND_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception:   # noqa: BLE001 - the UI-thread import will report it where it is used
                pass
    _thread = threading.Thread(target=work, name="nac-studio-preload", daemon=True)
    _thread.start()


def wait(timeout: float | None = None) -> bool:
    """Until the background imports are done (tests, benchmarks); True when they are."""
    if _thread is None:
        return True
    _thread.join(timeout)
    return not _thread.is_alive()
