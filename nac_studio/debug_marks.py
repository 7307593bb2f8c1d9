"""How the execution point and breakpoints look in the views that are not debugger panes:
the disassembly's gutter (breakpoint dot, current-instruction arrow, error cross), the
graph's overlay (executed nodes shaded, the current one ringed, breakpoint dots) and the hex
view's ranges (the executing instruction's bytes and its MMAP record's).

Everything reads the debug session's public state only (``tick``, ``state``, ``error_tick``,
``breakpoint_ticks()``), so the marks are the same wherever they are drawn.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QIcon, QPainter, QPen, QPixmap, QPolygonF

from .debug_session import LOGPOINT

EXEC_COLOR = QColor("#2e9d4a")       # the execution point (VS Code's "current line" green-yellow family)
BREAK_COLOR = QColor("#d0443c")
ERROR_COLOR = QColor("#d0443c")


class DebugMarks:
    """A snapshot of what to mark: taken on each ``debug`` event, cheap to query per row."""
    __slots__ = ("exec_tick", "error_tick", "error", "breakpoints", "running")

    def __init__(self, session=None):
        self.exec_tick: Optional[int] = None
        self.error_tick: Optional[int] = None
        self.error = ""
        self.breakpoints: dict[int, bool | str] = {}    # tick -> its mark (DebugSession.breakpoint_ticks)
        self.running = False
        if session is None:
            return
        self.breakpoints = session.breakpoint_ticks()
        self.running = session.running
        if session.active and not session.running:
            t = session.tick
            self.exec_tick = t if t is not None and t >= 0 else None
            if session.state == "error":
                self.error_tick = session.error_tick
                self.error = session.error

    @property
    def empty(self) -> bool:
        return self.exec_tick is None and self.error_tick is None and not self.breakpoints


def exec_row_color(dark: bool) -> QColor:
    c = QColor(EXEC_COLOR)
    c.setAlphaF(0.30 if dark else 0.22)
    return c


def error_row_color(dark: bool) -> QColor:
    c = QColor(ERROR_COLOR)
    c.setAlphaF(0.32 if dark else 0.22)
    return c


@lru_cache(maxsize=16)
def gutter_icon(breakpoint, current: bool, error: bool, size: int = 14) -> QIcon:
    """Breakpoint dot (filled: enabled, ring: disabled; a diamond: a logpoint, as in VS Code)
    under the arrow of the current instruction, or a cross where the run failed."""
    pm = QPixmap(size * 2, size * 2)
    pm.setDevicePixelRatio(2.0)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    r = size / 2
    if breakpoint == LOGPOINT:
        p.setPen(QPen(BREAK_COLOR, 1.4))
        p.setBrush(QBrush(BREAK_COLOR))
        d = r * 0.7
        p.drawPolygon(QPolygonF([QPointF(r, r - d), QPointF(r + d, r), QPointF(r, r + d), QPointF(r - d, r)]))
    elif breakpoint is not None:
        p.setPen(QPen(BREAK_COLOR, 1.4))
        p.setBrush(QBrush(BREAK_COLOR) if breakpoint else Qt.BrushStyle.NoBrush)
        p.drawEllipse(QPointF(r, r), r * 0.62, r * 0.62)
    if error:
        p.setPen(QPen(ERROR_COLOR.darker(130), 2.0))
        p.drawLine(QPointF(r * 0.45, r * 0.45), QPointF(r * 1.55, r * 1.55))
        p.drawLine(QPointF(r * 1.55, r * 0.45), QPointF(r * 0.45, r * 1.55))
    elif current:
        p.setPen(QPen(QColor("#1d6b31"), 1.0))
        p.setBrush(QColor("#f2c12e"))
        p.drawPolygon(QPolygonF([QPointF(r * 0.35, r * 0.45), QPointF(r * 1.05, r * 0.45), QPointF(r * 1.05, r * 0.15),
                                 QPointF(r * 1.8, r), QPointF(r * 1.05, r * 1.85), QPointF(r * 1.05, r * 1.55),
                                 QPointF(r * 0.35, r * 1.55)]))
    p.end()
    return QIcon(pm)


#: The graph canvas's overlay layers the debugger owns (``GraphCanvas.set_node_overlay``).
GRAPH_LAYERS = ("debug.executed", "debug.breakpoints", "debug.current")


def graph_overlays(marks: DebugMarks, layers: tuple = GRAPH_LAYERS) -> dict[str, dict]:
    """Overlay layers for the graph canvas (``layers``: which, default all): executed ticks
    shaded, breakpoint dots as badges, the current tick framed in the execution colour (red
    where the run failed)."""
    if marks is None:
        return {name: {} for name in layers}
    make = {"debug.executed": lambda: {t: EXECUTED_STYLE for t in range(_executed_end(marks))},
            "debug.breakpoints": lambda: _breakpoint_layer(marks), "debug.current": lambda: _current_layer(marks)}
    return {name: make[name]() for name in layers}


def graph_overlay_changes(old: DebugMarks, new: DebugMarks) -> dict[str, dict]:
    """From the layers :func:`graph_overlays` gives for ``old`` to those for ``new``, as
    ``GraphCanvas.update_node_overlay`` changes (tick -> style, or ``None`` to remove). Costs what
    moved — a step shades one more tick and moves the current mark — not the length of the file."""
    out: dict[str, dict] = {}
    lo, hi = _executed_end(old), _executed_end(new)
    out["debug.executed"] = {t: EXECUTED_STYLE for t in range(lo, hi)} if hi >= lo else \
        {t: None for t in range(hi, lo)}
    for name, layer in (("debug.breakpoints", _breakpoint_layer), ("debug.current", _current_layer)):
        a, b = layer(old), layer(new)
        out[name] = {t: b.get(t) for t in a.keys() | b.keys() if a.get(t) != b.get(t)}
    return out


EXECUTED_STYLE = (QColor("#cfe8d3"), None, None)


def _current_tick(marks: DebugMarks) -> Optional[int]:
    cur = marks.error_tick if marks.error_tick is not None else marks.exec_tick
    return cur if cur is not None and cur >= 0 else None


def _executed_end(marks: DebugMarks) -> int:
    """Ticks ``0 .. end-1`` are shaded as executed (those before the current one)."""
    return _current_tick(marks) or 0


def _current_layer(marks: DebugMarks) -> dict:
    cur = _current_tick(marks)
    if cur is None:
        return {}
    failed = marks.error_tick is not None
    return {cur: (QColor("#f5c6c2") if failed else QColor("#f6e7a6"), ERROR_COLOR if failed else EXEC_COLOR,
                  "✖" if failed else "▶")}


def _breakpoint_layer(marks: DebugMarks) -> dict:
    return {t: (None, None, "◆" if mark == LOGPOINT else "●" if mark else "○") for t, mark in marks.breakpoints.items()}


def hex_ranges(doc, marks: DebugMarks) -> list[tuple[int, int]]:
    """(offset, length) of the executing instruction and of its tick's MMAP record."""
    t = marks.error_tick if marks.error_tick is not None else marks.exec_tick
    if t is None or doc is None:
        return []
    out = []
    for sel_kind in ("instruction", "mmap"):
        from .model.document import Selection
        span = doc.span_of(Selection(sel_kind, t))
        if span is not None:
            out.append((span.offset, span.length))
    return out
