"""Default dock layout: the central graph keeps its share, unknown docks are tabbed in,
the compact preset at 1024×700 keeps Hex's every column."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtWidgets import QLabel, QWidget  # noqa: E402

from nac_studio import dock_layout, main_window  # noqa: E402


def _settle(qtbot, win, w, h, preset=None):
    win.resize(w, h)
    qtbot.wait(20)
    win.apply_default_layout(preset)
    qtbot.wait(50)


def _central_share(win) -> float:
    c = win.centralWidget()
    return c.width() * c.height() / (win.width() * win.height())


class _ExtraView(QWidget):
    """Stands for a pane added later (breakpoints, timeline...): only a class in VIEW_CLASSES."""
    title = "Extra"
    object_name = "extra"

    def __init__(self, qdoc=None, parent=None):
        super().__init__(parent)
        QLabel("extra pane", self)

    def set_document(self, qdoc) -> None:
        pass


class _ExtraRight(_ExtraView):
    title = "Extra right"
    object_name = "extra_right"
    dock_area = "right"


@pytest.fixture
def make_window(qtbot, studio_settings, monkeypatch):
    def make(extra=()):
        monkeypatch.setattr(main_window, "VIEW_CLASSES", main_window.VIEW_CLASSES + tuple(extra))
        win = main_window.MainWindow(studio_settings, restore=False, persist=False)
        qtbot.addWidget(win)
        win.show()
        qtbot.waitExposed(win)
        return win
    return make


def test_wide_preset_gives_the_graph_45_percent(qtbot, make_window, demo_path):
    win = make_window()
    _settle(qtbot, win, 1600, 1000)
    assert win.layout_preset == "wide"
    assert _central_share(win) >= 0.45
    for name in ("structure", "problems", "properties", "disassembly", "hex"):
        dock = win.docks[name]
        assert dock.isVisible() and not dock.visibleRegion().isEmpty(), name
    for dock in win.docks.values():     # docks added by other views: tabbed in, on screen when raised
        assert dock.isVisible() and not dock.isFloating()
    # Hex shows all its columns beside Disassembly
    assert win.docks["hex"].width() >= win.hex_view.preferred_width() - 4


def test_unknown_docks_are_tabbed_not_split(qtbot, make_window):
    win = make_window([_ExtraView, _ExtraRight])
    _settle(qtbot, win, 1600, 1000)
    assert _central_share(win) >= 0.45
    tabbed = win.tabifiedDockWidgets(win.docks["disassembly"])
    assert win.docks["extra"] in tabbed
    assert win.dockWidgetArea(win.docks["extra_right"]) == main_window.Qt.DockWidgetArea.RightDockWidgetArea
    assert win.docks["extra_right"] in win.tabifiedDockWidgets(win.docks["properties"])
    # the known docks are on top of their tab groups
    assert not win.docks["disassembly"].visibleRegion().isEmpty()
    assert not win.docks["properties"].visibleRegion().isEmpty()


def test_compact_preset_at_1024x700(qtbot, make_window):
    win = make_window([_ExtraView])
    _settle(qtbot, win, 1024, 700)
    assert win.layout_preset == "compact" == dock_layout.preset_for(win.size())
    central = win.centralWidget()     # the graph's place (the welcome page until a file opens)
    assert central.width() >= 0.6 * win.width() and central.height() >= 0.5 * win.height()
    win.docks["hex"].raise_()
    qtbot.wait(30)
    assert not win.docks["hex"].visibleRegion().isEmpty()
    assert win.docks["hex"].width() >= win.hex_view.preferred_width()
    assert win.docks["extra"] in win.tabifiedDockWidgets(win.docks["disassembly"])


def test_layout_commands(qtbot, make_window):
    win = make_window()
    _settle(qtbot, win, 1600, 1000)
    win.commands.run("view.compactLayout")
    assert win.layout_preset == "compact"
    win.commands.run("view.resetLayout")
    assert win.layout_preset == "wide"


@pytest.mark.parametrize("size", [(1600, 1000), (1024, 700)])
@pytest.mark.parametrize("name", ["timeline", "hardware"])
def test_lane_panes_come_to_the_front_at_a_readable_height(qtbot, make_window, size, name):
    """Issue 22 §1.7: the timeline and the hardware view stack lanes and plots that overlap below
    a few hundred pixels; the bottom strip of the default layout is shorter. Brought to the front
    (a click on their tab) they get a readable height, at most half the window."""
    win = make_window()
    _settle(qtbot, win, *size)
    dock = win.docks[name]
    assert dock.height() < win.views[name].usable_height - 40       # the default strip: too short
    dock.raise_()
    want = min(win.views[name].usable_height, size[1] // 2) - 40      # (the dock's title bar)
    qtbot.waitUntil(lambda: dock.height() >= want, timeout=3000)
    assert dock.height() <= size[1] // 2 + 1
