"""A runtime theme switch recolours every icon: graph toolbar, search fields, main toolbar."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSize  # noqa: E402
from PySide6.QtGui import QIcon  # noqa: E402


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
