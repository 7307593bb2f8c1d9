"""A runtime theme switch recolours every icon: graph toolbar, search fields, main toolbar."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSize  # noqa: E402
from PySide6.QtGui import QIcon  # noqa: E402
from PySide6.QtWidgets import QToolButton  # noqa: E402


def _ink_pixels(ic: QIcon) -> list:
    img = ic.pixmap(QSize(16, 16)).toImage()
    return sorted({img.pixelColor(x, y).name() for x in range(img.width()) for y in range(img.height())
                   if img.pixelColor(x, y).alpha() > 200})


def test_theme_switch_changes_icon_pixels(window, demo_path):
    window.open_and_wait(demo_path)
    window.set_theme("light")
    g = window.graph_view
    icons = {"graph toolbar": lambda: g.act_params.icon(), "fit": lambda: g.act_fit.icon(),
             "graph search": lambda: g._search_icon.icon(), "export": lambda: g._export_button.icon(),
             "main toolbar": lambda: window.commands.action("file.open").icon()}
    light = {k: _ink_pixels(f()) for k, f in icons.items()}
    window.set_theme("dark")
    dark = {k: _ink_pixels(f()) for k, f in icons.items()}
    for k in icons:
        assert light[k] and dark[k], k
        assert light[k] != dark[k], f"{k} icon did not change colour"
    window.set_theme("light")
    assert {k: _ink_pixels(f()) for k, f in icons.items()} == light


def _saturated(ic: QIcon, mode: QIcon.Mode) -> int:
    img = ic.pixmap(QSize(16, 16), mode).toImage()
    return sum(1 for x in range(img.width()) for y in range(img.height())
               if img.pixelColor(x, y).alpha() > 200 and img.pixelColor(x, y).hsvSaturationF() > 0.4)


def test_a_disabled_coloured_icon_is_drawn_dim_not_in_its_colour(window):
    """With no file open F5 and Stop are unavailable; their buttons must not keep their green and
    red (they looked ready to run). Enabled, they have their colours."""
    for cid in ("debug.continue", "debug.stop", "debug.restart"):
        action = window.commands.action(cid)
        assert not action.isEnabled(), cid
        ic = action.icon()
        assert _saturated(ic, QIcon.Mode.Normal) > 10, cid
        assert _saturated(ic, QIcon.Mode.Disabled) == 0, cid
    button = next(b for b in window.findChildren(QToolButton) if b.defaultAction() is
                  window.commands.action("debug.continue"))
    shot = button.grab().toImage()
    assert not any(shot.pixelColor(x, y).hsvSaturationF() > 0.4 and shot.pixelColor(x, y).alpha() > 200
                   for x in range(shot.width()) for y in range(shot.height())), "the disabled F5 button is green"
