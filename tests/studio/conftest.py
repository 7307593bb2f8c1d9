"""Fixtures for the Studio's GUI tests (pytest-qt, offscreen).

``QT_QPA_PLATFORM`` must be set before anything imports Qt, hence at the top of this
file. Windows get their settings from a throwaway INI file so tests never read or write
the user's saved layout or recent files.
"""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path  # noqa: E402

from nac_studio.qt_compat import guard_singleton_refcounts  # noqa: E402

guard_singleton_refcounts()   # PySide6 6.12 on CPython 3.11 drops None/True references (see qt_compat)

import pytest  # noqa: E402

from tests.resources_path import DEMO  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _studio_theme(qapp):
    """Fusion + the light palette: the same pixels on every machine."""
    from nac_studio.theme import apply_theme
    from nac_studio.ui_gc import collect_on_ui_thread
    apply_theme(qapp, "light")
    collect_on_ui_thread()     # as the Studio does: no Qt object is collected on a worker thread
    yield


@pytest.fixture
def demo_path() -> Path:
    if not DEMO.is_file():
        pytest.skip(f"demo model missing at {DEMO}")
    return DEMO


@pytest.fixture
def two_layer_model(tmp_path) -> Path:
    """A small compiled model that records its inputs (F5/F10 start without asking for them)."""
    import torch

    import nac_engine
    from nac_engine.compiler.external import write_compiled
    from tests.studio.test_debug_warm_restart import TwoLayers
    torch.manual_seed(0)
    path = tmp_path / "two_layers.nac"
    write_compiled(nac_engine.compile(TwoLayers().eval(), (torch.randn(2, 8),)), str(path))
    return path


@pytest.fixture
def studio_settings(tmp_path):
    from PySide6.QtCore import QSettings
    return QSettings(str(tmp_path / "studio.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def qdoc_for(qapp):
    """``qdoc_for(path)`` → a QtDocument (closed at teardown)."""
    from nac_studio.model.document import Document
    from nac_studio.qt_document import QtDocument
    made = []

    def make(path):
        qd = QtDocument(Document.open(str(path)))
        made.append(qd)
        return qd
    yield make
    for qd in made:
        qd.tasks.shutdown(wait=True)
        qd.close()
        qd.doc.nac.close()


@pytest.fixture
def window(qtbot, studio_settings):
    """A main window with throwaway settings; ``window.open_and_wait(path)`` opens a file."""
    from nac_studio.main_window import MainWindow
    win = MainWindow(studio_settings, restore=False, persist=True)
    qtbot.addWidget(win)
    win.show()

    def open_and_wait(path, timeout=20000):
        with qtbot.waitSignal(win.documentOpened, timeout=timeout) as blocker:
            win.open_path(str(path))
        wait_idle(qtbot, win, timeout)
        return blocker.args[0]
    win.open_and_wait = open_and_wait
    yield win
    win.set_active(None)
    for qd in list(win.docs):
        win.close_document(qd)
    _end_tasks(qtbot, win.tasks)


def _end_tasks(qtbot, runner, timeout_ms: int = 30000) -> None:
    """Cancel what still runs and wait for it with the event loop turning, as the Studio
    itself does: a blocking join on the UI thread could wait forever on a task whose last
    step is handed to that very thread. A task that outlives the bound fails the test by name."""
    runner.cancel_all()
    try:
        qtbot.waitUntil(lambda: not any(not t.done() for t in runner.active), timeout=timeout_ms)
    except Exception:
        stuck = [t.title for t in runner.active if not t.done()]
        runner.shutdown(wait=False)
        raise AssertionError(f"background tasks still running {timeout_ms} ms after the window closed: {stuck}")
    runner.shutdown(wait=False)


def wait_idle(qtbot, win, timeout=20000) -> None:
    """Until no file is opening and no background task runs (graph layout included)."""
    qtbot.waitUntil(win.is_idle, timeout=timeout)
    qtbot.wait(30)
    qtbot.waitUntil(win.is_idle, timeout=timeout)
