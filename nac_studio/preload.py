"""Imports the Studio needs later, done on a background thread at start-up.

pyqtgraph (every plot: histograms, timeline, hardware lanes) takes about 0.4 s to import,
most of it enum copying in ``pyqtgraph.Qt``. Imported on first use, that froze the UI on
the first statistics histogram. Importing a module is thread-safe (the import lock makes
a UI-thread ``import pyqtgraph`` wait for the background one instead of starting again),
and pyqtgraph creates no ``QObject`` at import time, so it can load while the window opens.

torch (the meta-shape pass of every opened file, the debugger, the simulator) is imported
here too, in two steps, because importing it holds the GIL — which stalls the UI thread
as surely as running on it. Its native libraries are loaded first through libc's
``dlopen`` called with the GIL released (their static initialisers alone held it 0.2–0.45 s
inside ``import torch._C``); the Python part then runs with the cyclic collector paused
(a full collection walks every object, ~0.2 s once torch's 140,000 are alive, and the
import would trigger several). When the imports are done everything alive is frozen
(``gc.freeze``): modules, classes and the window live as long as the process, and later
full collections walk only what files and views create afterwards. The price: a cycle of
objects frozen then (a document opened in that second) is never collected.

The imports that opening a file triggers later are done here too. The meta-shape pass's first
meta kernel imports ``torch.fx.experimental.symbolic_shapes`` (sympy, 0.4 s) through
``torch._check``, and its first ``add`` imports ``torch._dynamo`` (1.3 s) through the
``_disable_dynamo`` wrapper of ``torch._refs.add``; the layout imports igraph, and the
debugger and shape session import the runtime. Run by the views' workers, those imports held
the GIL right after a file's first frame, in every session's first open. The main window
shows a document that finished decoding during these imports once they are done (bounded,
``main_window.FIRST_FRAME_IMPORT_WAIT_S``): see ``running``. Past that bound the import thread
steps aside, module by module, while the UI thread paints (``_StepAsideFinder``).
"""
from __future__ import annotations

import ctypes
import gc
import importlib
import importlib.util
import os
import sys
import threading

from . import ui_priority

#: Modules imported in the background, in order (see the module's docstring for why each).
BACKGROUND_IMPORTS = ("pyqtgraph", "torch", "torch.fx.experimental.symbolic_shapes", "torch._dynamo", "igraph",
                      "nac_engine.runtime._shape_session", "nac_engine.runtime.debugger", "nac_engine.format.defuse",
                      "nac_engine.format.source_map")
#: Native libraries loaded (GIL released) before a module's import, relative to its package.
NATIVE_LIBRARIES = {"torch": ("lib/libtorch.so",)}

_started = False
_thread: threading.Thread | None = None


def start_background_imports() -> None:
    """Start importing :data:`BACKGROUND_IMPORTS` on a daemon thread (once per process)."""
    global _started, _thread
    if _started:
        return
    _started = True

    def work() -> None:
        collecting = gc.isenabled()
        gc.disable()
        step_aside = _StepAsideFinder()
        sys.meta_path.insert(0, step_aside)
        try:
            for name in BACKGROUND_IMPORTS:
                if name not in sys.modules:
                    load_native_libraries(name)
                try:
                    importlib.import_module(name)
                except Exception:   # noqa: BLE001 - the UI-thread import will report it where it is used
                    pass
        finally:
            sys.meta_path.remove(step_aside)
            if collecting:
                gc.enable()
            gc.freeze()
    _thread = threading.Thread(target=work, name="nac-studio-preload", daemon=True)
    _thread.start()


class _StepAsideFinder:
    """First on ``sys.meta_path`` while the background imports run. It finds nothing; it
    makes the import thread wait, before each module it is about to look for, while the UI
    thread paints a frame (:mod:`ui_priority`): importing torch is 1,500 modules of Python
    that otherwise take the GIL between every two callbacks of that frame.

    Parked there, the thread still holds the import locks of the modules it is inside (the
    package whose ``__init__`` is running). A UI thread importing one of those would wait
    for a thread that waits for it, until the claim ran out; so the park ends at once when
    the UI thread is blocked on a module lock (importlib's ``_blocking_on`` registry, the
    one its own deadlock detection reads).
    """

    def find_spec(self, name, path=None, target=None):
        if threading.current_thread() is _thread:
            ui_priority.yield_to_ui(give_up=_ui_thread_waits_on_an_import)
        return None


def _ui_thread_waits_on_an_import() -> bool:
    blocking = getattr(importlib._bootstrap, "_blocking_on", None)
    if blocking is None:        # not this CPython's layout: never park blind
        return True
    return bool(blocking.get(threading.main_thread().ident))


def load_native_libraries(module: str) -> int:
    """``dlopen`` :data:`NATIVE_LIBRARIES` of ``module`` with the GIL released (a ctypes call
    into libc releases it; ``ctypes.CDLL`` itself and Python's extension import do not), so
    the module's import finds them loaded. Linux only; how many were loaded."""
    paths = NATIVE_LIBRARIES.get(module, ())
    if not paths or not sys.platform.startswith("linux"):
        return 0
    try:
        spec = importlib.util.find_spec(module)
        libc = ctypes.CDLL(None)
    except (ImportError, ValueError, OSError):
        return 0
    if spec is None or not spec.origin:
        return 0
    dlopen = libc.dlopen
    dlopen.restype = ctypes.c_void_p
    dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    root = os.path.dirname(spec.origin)
    loaded = 0
    for rel in paths:
        path = os.path.join(root, rel)
        # RTLD_LOCAL, as the extension's own import would load it; the handle stays open
        if os.path.isfile(path) and dlopen(os.fsencode(path), os.RTLD_LAZY | os.RTLD_LOCAL):
            loaded += 1
    return loaded


def running() -> bool:
    """True while the background imports are still going."""
    return _thread is not None and _thread.is_alive()


def wait(timeout: float | None = None) -> bool:
    """Until the background imports are done (tests, benchmarks); True when they are."""
    if _thread is None:
        return True
    _thread.join(timeout)
    return not _thread.is_alive()
