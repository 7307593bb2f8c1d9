"""Cyclic garbage is collected on the UI thread, never on a worker (nac_studio/ui_gc.py)."""
from __future__ import annotations

import gc
import threading

from nac_studio import ui_gc


class _Cycle:
    """A reference cycle whose finaliser records the thread that collected it."""
    seen: list = []

    def __init__(self):
        self.me = self

    def __del__(self):
        _Cycle.seen.append(threading.current_thread())


def test_the_window_turns_automatic_collection_off_and_keeps_it_off(window):
    assert ui_gc.collect_on_ui_thread() is not None
    assert not gc.isenabled()


def test_garbage_made_while_a_worker_allocates_is_collected_on_the_ui_thread(window, qtbot):
    _Cycle.seen.clear()
    for _ in range(50):
        _Cycle()                        # unreachable at once: only the cyclic collector frees them

    keep = []

    def allocate():                     # a layout-like worker: far past generation 0's threshold
        for i in range(200_000):
            keep.append([i])
    t = threading.Thread(target=allocate)
    t.start()
    t.join(60)
    assert not _Cycle.seen, "collected on the worker thread"
    qtbot.waitUntil(lambda: len(_Cycle.seen) == 50, timeout=5000)
    assert all(th is threading.main_thread() for th in _Cycle.seen)
    keep.clear()


def test_full_collections_are_rate_limited(qapp, monkeypatch):
    c = ui_gc.UiThreadCollector(full_every_s=3600)
    try:
        c.timer.stop()
        c.threshold = (700, 10, 10)
        counts = {"now": (10, 0, 0)}
        monkeypatch.setattr(ui_gc.gc, "get_count", lambda: counts["now"])
        assert c.due() is None                      # under generation 0's threshold
        counts["now"] = (800, 3, 0)
        assert c.due() == 0
        counts["now"] = (800, 11, 11)
        assert c.due() == 1                         # generation 2 is due, but a full one ran < 1 h ago
        c._last_full -= 7200
        assert c.due() == 2
        c.check()                                   # a real full collection
        assert c.collections == [0, 0, 1]
        assert c.due() == 1                         # and the clock starts again
    finally:
        c.deleteLater()


def test_nothing_is_collected_while_told_to_wait(qapp, monkeypatch):
    """While the start-up imports run (``skip_while``) the timer collects nothing, even past
    every threshold; once they end it collects again."""
    importing = [True]
    c = ui_gc.UiThreadCollector(skip_while=lambda: importing[0])
    try:
        c.timer.stop()
        c.threshold = (700, 10, 10)
        monkeypatch.setattr(ui_gc.gc, "get_count", lambda: (5000, 11, 0))
        ran = []
        monkeypatch.setattr(ui_gc.gc, "collect", lambda gen=2: ran.append(gen) or 0)
        c.check()
        assert ran == [] and c.collections == [0, 0, 0]
        importing[0] = False
        c.check()
        assert ran == [1] and c.collections == [0, 1, 0]
    finally:
        c.deleteLater()


def test_what_the_first_window_finds_alive_is_frozen_out_of_full_collections():
    """A full collection on the UI thread walks every tracked object; the modules, types and the
    window alive once the first window is built live as long as the process, so they are frozen
    (a full collection walking them again took 0.8 s of UI thread in the 2 GB open test)."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path
    code = textwrap.dedent("""
        import gc, os, tempfile
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        from PySide6.QtCore import QSettings
        from PySide6.QtWidgets import QApplication
        app = QApplication([])
        from nac_studio.main_window import MainWindow
        settings = QSettings(os.path.join(tempfile.mkdtemp(), "s.ini"), QSettings.Format.IniFormat)
        win = MainWindow(settings, restore=False, persist=False)
        print(gc.get_freeze_count(), len(gc.get_objects()))
        os._exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    frozen, walked = map(int, out.stdout.split())
    assert frozen > 20_000 and walked < frozen / 10, (frozen, walked)
