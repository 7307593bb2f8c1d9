"""pyqtgraph is imported on the UI thread (the window's plots import it as they are built). Imported
on a background thread beside the window's first widgets it crashed the process now and then (SIGSEGV in
``pyqtgraph.Qt._copy_attrs``: PySide6 creates its classes lazily, and that is not safe from two
threads at once). A fresh process records which thread imports it."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent("""
    import os, sys, tempfile, threading
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    importers = []

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name == "pyqtgraph":
                importers.append(threading.current_thread() is threading.main_thread())
            return None
    sys.meta_path.insert(0, Watch())
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication
    app = QApplication([])
    from nac_studio.main_window import MainWindow
    settings = QSettings(os.path.join(tempfile.mkdtemp(), "s.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings, restore=False, persist=False)
    win.show()
    QTimer.singleShot(1000, app.quit)
    app.exec()
    print(importers)
    sys.stdout.flush()
    os._exit(0)
""")


def test_pyqtgraph_is_imported_once_and_on_the_ui_thread():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[True]"]
