"""The default arrangement of the main window's docks, for any set of docks.

Two presets, chosen from the window size:

* **wide** (from :data:`WIDE_MIN` on, e.g. 1600×1000): Structure over Problems on the
  left, Properties on the right, Disassembly beside Hex along the bottom. Sizes are
  chosen so the central area (file tabs + graph, later the debugger's views) keeps at
  least :data:`CENTRAL_SHARE` of the window.
* **compact** (smaller, e.g. 1024×700): one tabbed column on the left (Structure,
  Properties, Problems) and one tabbed strip along the bottom (Disassembly, Hex, ...)
  spanning the whole width, so Hex shows every column, ASCII included, when raised.

Docks this module does not know by name go where their view class asks
(``dock_area = "left" | "right" | "bottom"``, default bottom) and are **tabbed** onto the
first dock already there, never split off: adding panes (debugger, timeline, hardware)
never shrinks the central graph. A new view only has to be appended to
``main_window.VIEW_CLASSES``.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar

#: Below this width or height the compact preset is used.
WIDE_MIN = QSize(1300, 820)
#: The central widget's minimum share of the window area in the wide preset.
CENTRAL_SHARE = 0.45

_AREAS = {"left": Qt.DockWidgetArea.LeftDockWidgetArea, "right": Qt.DockWidgetArea.RightDockWidgetArea,
          "bottom": Qt.DockWidgetArea.BottomDockWidgetArea, "top": Qt.DockWidgetArea.TopDockWidgetArea}

#: Where the known docks go in each preset: area -> groups; a group is split from the
#: previous one in that area, the names inside a group are tabbed together (first raised).
_WIDE = {"left": [["structure"], ["problems"]], "right": [["properties"]],
         "bottom": [["disassembly"], ["hex"]]}
_COMPACT = {"left": [["structure", "properties", "problems"]], "right": [],
            "bottom": [["disassembly", "hex"]]}


def preset_for(size: QSize) -> str:
    """``"wide"`` or ``"compact"`` for a window of ``size``."""
    return "wide" if size.width() >= WIDE_MIN.width() and size.height() >= WIDE_MIN.height() else "compact"


def dock_area_of(dock: QDockWidget) -> str:
    """The area a view asks for (``dock_area`` on its class), bottom by default."""
    area = getattr(type(dock.widget()), "dock_area", "bottom")
    return area if area in _AREAS else "bottom"


def apply_layout(win: QMainWindow, docks: dict[str, QDockWidget], preset: str, size: QSize,
                 hex_width: Callable[[], int] = lambda: 0) -> dict[str, list[list[str]]]:
    """Arrange ``docks`` (object name -> dock) in ``win`` with ``preset``; returns the plan
    used (area -> groups of names), for tests and for the caller's own sizing.
    ``hex_width()``: the width that shows all of Hex's columns (asked again once shown:
    fonts and the theme may change it)."""
    plan = {area: [list(g) for g in groups] for area, groups in (_WIDE if preset == "wide" else _COMPACT).items()}
    known = {name for groups in plan.values() for g in groups for name in g}
    for groups in plan.values():       # a known name this window does not have
        for g in groups:
            g[:] = [n for n in g if n in docks]
    for name, dock in docks.items():
        if name in known:
            continue
        area = dock_area_of(dock)
        if preset == "compact" and area in ("right", "top"):
            area = "left"              # compact keeps one side column: the graph needs the width
        groups = plan.setdefault(area, [])
        if groups and groups[0]:
            groups[0].append(name)     # tabbed onto the area's first group: no new split
        else:
            groups.insert(0, [name])
    for area in plan:
        plan[area] = [g for g in plan[area] if g]

    for dock in docks.values():
        win.removeDockWidget(dock)
    # the bottom strip spans the whole width: Disassembly keeps its columns beside Hex
    win.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.BottomDockWidgetArea)
    win.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.BottomDockWidgetArea)
    for area, groups in plan.items():
        prev = None
        for group in groups:
            first = docks[group[0]]
            if prev is None:
                win.addDockWidget(_AREAS[area], first)
            else:
                orient = Qt.Orientation.Horizontal if area in ("bottom", "top") else Qt.Orientation.Vertical
                win.splitDockWidget(prev, first, orient)
            prev = first
    for groups in plan.values():      # tabs after every split: splitting a tabbed dock moves its tabs
        for group in groups:
            for name in group[1:]:
                win.tabifyDockWidget(docks[group[0]], docks[name])
    for dock in docks.values():
        dock.setFloating(False)
        dock.show()
    heads = [docks[g[0]] for groups in plan.values() for g in groups if len(g) > 1]
    for dock in heads:
        dock.raise_()
    # the tab bars are built when the layout is next processed: raise again then
    QTimer.singleShot(0, lambda: [d.raise_() for d in heads])
    _size(win, docks, plan, preset, size, hex_width)
    # a window not shown yet distributes the areas again by size hints when it first lays
    # out (a wide pane tabbed in would squeeze Hex): size once more after that
    QTimer.singleShot(0, lambda: _size(win, docks, plan, preset, win.size(), hex_width))
    return plan


def _size(win: QMainWindow, docks: dict, plan: dict, preset: str, size: QSize, hex_width: Callable) -> None:
    w, h = size.width(), size.height()
    heads = lambda area: [docks[g[0]] for g in plan.get(area, [])]   # noqa: E731
    left, right, bottom = heads("left"), heads("right"), heads("bottom")
    if preset == "wide":
        side_l = max(220, int(w * 0.15))
        side_r = max(260, int(w * 0.18))
        strip = max(180, int(h * 0.23))
        if left and right:
            win.resizeDocks([left[0], right[0]], [side_l, side_r], Qt.Orientation.Horizontal)
        elif left or right:
            win.resizeDocks([(left or right)[0]], [side_l], Qt.Orientation.Horizontal)
        if bottom:
            win.resizeDocks([bottom[0]], [strip], Qt.Orientation.Vertical)
            hw = hex_width()
            if len(bottom) > 1 and hw:
                win.resizeDocks(bottom[:2], [max(300, w - hw), hw], Qt.Orientation.Horizontal)
        if len(left) > 1:
            col = h - strip - 90
            win.resizeDocks(left[:2], [int(col * 0.62), col - int(col * 0.62)], Qt.Orientation.Vertical)
        _untruncate_tabs(win)
    else:
        if left:
            win.resizeDocks([left[0]], [max(230, int(w * 0.25))], Qt.Orientation.Horizontal)
        if right:
            win.resizeDocks([right[0]], [max(230, int(w * 0.22))], Qt.Orientation.Horizontal)
        if bottom:
            win.resizeDocks([bottom[0]], [max(170, int(h * 0.27))], Qt.Orientation.Vertical)
    _untruncate_tabs(win)


def _untruncate_tabs(win: QMainWindow) -> None:
    """Tabbed docks show whole titles and scroll (Qt's default elides them to "S…", "Va…")."""
    for bar in win.findChildren(QTabBar):
        if bar.parent() is win:
            bar.setElideMode(Qt.TextElideMode.ElideNone)
            bar.setUsesScrollButtons(True)
            bar.setExpanding(False)
