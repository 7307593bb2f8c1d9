"""pyqtgraph, imported on a background thread at start-up.

pyqtgraph (every plot: histograms, timeline, hardware lanes) takes about 0.4 s to import, most
of it enum copying in ``pyqtgraph.Qt``. Imported on first use, that froze the UI on the first
histogram. Importing a module is thread-safe (the import lock makes a UI-thread ``import
pyqtgraph`` wait for the background one instead of starting again), and pyqtgraph creates no
``QObject`` at import time, so it can load while the window opens. When it is done, what it
made is frozen (``gc.freeze``): modules live as long as the process, and later collections need
not walk them.

torch is not imported here, nor anywhere in the Studio's process: the engine host imports it
(``nac_studio.host``), and the window warms that process up at start-up.
"""
from __future__ import annotations

import gc
import importlib
import sys
import threading

#: Modules imported in the background.
BACKGROUND_IMPORTS = ("pyqtgraph",)

_thread: threading.Thread | None = None


def start_background_imports() -> None:
    """Start importing :data:`BACKGROUND_IMPORTS` on a daemon thread (once per process)."""
    global _thread
    if _thread is not None:
        return

    def work() -> None:
        for name in BACKGROUND_IMPORTS:
            if name not in sys.modules:
                try:
                    importlib.import_module(name)
                except Exception:   # noqa: BLE001 - the UI-thread import will report it where it is used
                    pass
        gc.freeze()
    _thread = threading.Thread(target=work, name="nac-studio-preload", daemon=True)
    _thread.start()


def running() -> bool:
    """True while the background imports are still going."""
    return _thread is not None and _thread.is_alive()


def wait(timeout: float | None = None) -> bool:
    """Until the background imports are done (tests, benchmarks); True when they are."""
    if _thread is None:
        return True
    _thread.join(timeout)
    return not _thread.is_alive()
