"""Work around a PySide6 defect that would crash the Studio on CPython 3.11.

pyproject.toml keeps PySide6 below 6.12 for this reason; this guard stays for environments
that already have 6.12.0 installed (a distribution package, a pinned lock file).

PySide6 6.12.0's wheels return the singletons ``None`` and ``True`` without taking a
reference to them: every void method call (``QWidget.update()``, ``QPainter.drawText()``,
``QAction.setEnabled()`` ...) drops one reference to ``None`` and every ``Signal.emit()``
from Python drops one to ``True``. CPython 3.12+ makes these objects immortal, so nothing
happens there; on 3.11 the counts run down and, after some ten thousand calls (seconds
of painting), the interpreter aborts with "Fatal Python error: none_dealloc" (or
"bool_dealloc", often at exit).

:func:`guard_singleton_refcounts` measures the defect instead of trusting version
numbers: it makes a few void calls and emits, and watches ``sys.getrefcount``. Only when
references are lost does it add 2**40 to the counts of ``None``, ``True`` and ``False``,
which makes them as immortal as 3.12 makes them (they are never freed anyway; nothing
else changes).
"""
from __future__ import annotations

import sys

_GUARDED = False
_HEADROOM = 1 << 40
_PROBES = 64


def leaked_singletons() -> list[str]:
    """Names of the singletons a void PySide6 call or a signal emit drops references to."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(_PROBES):
        probe.setObjectName("probe")
        probe.ping.emit()
    leaked = []
    if sys.getrefcount(None) <= none_before - _PROBES // 2:
        leaked.append("None")
    if sys.getrefcount(True) <= true_before - _PROBES // 2:
        leaked.append("True")
    return leaked


def guard_singleton_refcounts() -> bool:
    """Apply the workaround if this PySide6/Python pair needs it; returns whether it did.

    Call it once, before the GUI starts (the Studio's ``main()``, its main window and its
    test fixtures do). Safe to call again.
    """
    global _GUARDED
    if _GUARDED or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not leaked_singletons():
        return False
    import ctypes
    # ob_refcnt is the first field of every object in a release build of CPython 3.11
    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += _HEADROOM
    _GUARDED = True
    return True
