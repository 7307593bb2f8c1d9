"""The Studio's window fits the screen it opens on (issue 22 §1.3): on a 1024×700 screen with
fresh settings it opens no larger than the screen with the compact dock layout, and a geometry
saved with a larger monitor (or one no longer attached) is brought back onto the screen. Each
case runs the real main window in a child process whose offscreen screen has the given size
(a process has one screen set, fixed when Qt starts)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from PySide6.QtCore import QRect

from nac_studio.main_window import fitted_geometry

REPO = Path(__file__).resolve().parents[2]

_CHILD = textwrap.dedent("""
    import faulthandler, json, os, sys
    faulthandler.enable()
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication
    app = QApplication([])
    from nac_studio.main_window import MainWindow
    settings = QSettings(sys.argv[1], QSettings.Format.IniFormat)
    if sys.argv[2] != "fresh":      # a window saved at 1600x1000 on a monitor right of this one
        saver = MainWindow(settings, restore=False, persist=True)
        saver.resize(1600, 1000)
        saver.move(2100, 40)
        saver.save_settings()
        saver.deleteLater()
    win = MainWindow(settings, restore=sys.argv[2] != "fresh", persist=False, fit_screen=True)
    win.show()
    app.processEvents()
    screen = win.screen().availableGeometry()
    geo = win.geometry()
    # the docks on show (one tabbed behind another is parked outside the window by Qt)
    shown = [d for d in win.docks.values() if not d.visibleRegion().isEmpty()]
    docks = [d.objectName() for d in shown if not win.rect().contains(d.geometry())]
    assert shown
    print(json.dumps({"screen": [screen.x(), screen.y(), screen.width(), screen.height()],
                      "window": [geo.x(), geo.y(), geo.width(), geo.height()],
                      "preset": win.layout_preset, "docks_outside": docks}), flush=True)
    # the answer is out: leave without tearing the window and the application down (their order at
    # interpreter exit is not this test's subject; the Studio itself deletes the window first)
    os._exit(0)
""")


def _open_on_screen(tmp_path, width: int, height: int, mode: str) -> dict:
    config = tmp_path / "screen.json"
    config.write_text(json.dumps({"synchronousWindowSystemEvents": False, "windowFrameMargins": False,
                                  "screens": [{"name": "S", "x": 0, "y": 0, "width": width, "height": height,
                                               "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={config}")
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "settings.ini"), mode], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _inside(window: list, screen: list) -> bool:
    x, y, w, h = window
    sx, sy, sw, sh = screen
    return sx <= x and sy <= y and x + w <= sx + sw and y + h <= sy + sh


def test_fresh_settings_on_a_small_screen_open_a_window_that_fits(tmp_path):
    got = _open_on_screen(tmp_path, 1024, 700, "fresh")
    assert got["screen"] == [0, 0, 1024, 700]
    assert _inside(got["window"], got["screen"]), got
    assert got["preset"] == "compact" and got["docks_outside"] == [], got


def test_a_large_screen_keeps_the_default_size_and_wide_layout(tmp_path):
    got = _open_on_screen(tmp_path, 1920, 1200, "fresh")
    assert got["window"][2:] == [1600, 1000] and got["preset"] == "wide", got


def test_a_geometry_saved_on_another_monitor_comes_back_onto_the_screen(tmp_path):
    got = _open_on_screen(tmp_path, 1024, 700, "saved")
    assert _inside(got["window"], got["screen"]), got


def test_fitted_geometry_shrinks_and_moves_only_what_does_not_fit():
    screen = QRect(0, 30, 1024, 670)              # a panel at the top
    assert fitted_geometry(QRect(10, 40, 800, 600), screen) == QRect(10, 40, 800, 600)
    assert fitted_geometry(QRect(0, 0, 1600, 1000), screen) == QRect(0, 30, 1024, 670)
    assert fitted_geometry(QRect(2100, 40, 800, 600), screen) == QRect(224, 40, 800, 600)
