"""Work around a PySide6 defect that would crash the Studio on CPython 3.11.

PySide6 6.12.0's wheels return ``None`` from void methods (``QWidget.update()``,
``QPainter.drawText()``, ``QAction.setEnabled()`` ...) without taking a reference to it.
CPython 3.12+ makes ``None`` immortal, so nothing happens there; on 3.11 every such call
lowers ``None``'s reference count by one, and after some ten thousand calls (a few
seconds of painting) the interpreter aborts with "Fatal Python error: none_dealloc".

:func:`guard_none_refcount` measures the defect instead of trusting version numbers:
it calls a void method a few times and watches ``sys.getrefcount(None)``. Only when
references are lost does it add 2**40 to ``None``'s count, which makes ``None`` as
immortal as 3.12 makes it (``None`` is never freed anyway; nothing else changes).
"""
from __future__ import annotations

import sys

_GUARDED = False
_HEADROOM = 1 << 40


def leaks_none(probes: int = 64) -> bool:
    """Whether a void PySide6 call drops a reference to ``None`` on this interpreter."""
    from PySide6.QtCore import QObject
    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(probes):
        probe.setObjectName("probe")
    return sys.getrefcount(None) <= before - probes // 2


def guard_none_refcount() -> bool:
    """Apply the workaround if this PySide6/Python pair needs it; returns whether it did.

    Call it once, before the GUI starts (the Studio's ``main()``, its main window and its
    test fixtures do). Safe to call again.
    """
    global _GUARDED
    if _GUARDED or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not leaks_none():
        return False
    import ctypes
    # ob_refcnt is the first field of every object in a release build of CPython 3.11
    ctypes.c_ssize_t.from_address(id(None)).value += _HEADROOM
    _GUARDED = True
    return True
