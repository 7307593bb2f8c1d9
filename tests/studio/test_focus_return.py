"""Shortcuts keep working after a modal dialog (issue 22 §1.8): closing Go to Tick or the Inputs
dialog hands the keyboard back to the widget that had it, in an active main window, so the next
Ctrl+F10 or F5 reaches the Studio. The keys are sent where the user's next key press goes (the
focused widget) and the window is not re-activated by the test: on the offscreen platform, as
under Xvfb without a window manager, nothing else gives the activation back."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from tests.resources_path import DEMO

CNN = DEMO.with_name("demo_cnn.nac")     # records its inputs: a step starts without asking
from tests.studio.conftest import wait_idle


def _answer_dialog(qtbot, answer) -> None:
    """Answer the modal dialog the next command opens, from the event loop it runs."""
    def later():
        dlg = QApplication.activeModalWidget()
        if dlg is None:
            QTimer.singleShot(50, later)
            return
        answer(dlg)
    QTimer.singleShot(50, later)


def _focus_table(qtbot, window):
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)
    table = window.disassembly_view.table
    table.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is table, timeout=3000)
    return table


def test_run_to_cursor_after_go_to_tick(window, qtbot):
    qdoc = window.open_and_wait(CNN)
    table = _focus_table(qtbot, window)

    def go_to_5(dlg):
        dlg.setIntValue(5)
        dlg.accept()
    _answer_dialog(qtbot, go_to_5)
    window.commands.run("nav.gotoTick")
    assert qdoc.selection.kind == "instruction" and qdoc.selection.key == 5
    qtbot.waitUntil(lambda: QApplication.focusWidget() is table and window.isActiveWindow(), timeout=3000)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_F10, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: qdoc.doc.debug is not None and qdoc.doc.debug.tick == 5
                    and not qdoc.doc.debug.running, timeout=30000)


def test_step_after_the_inputs_dialog(window, qtbot):
    qdoc = window.open_and_wait(CNN)
    table = _focus_table(qtbot, window)
    window.commands.run("debug.inputs")
    dlg = window.debug.inputs_dialog
    qtbot.waitUntil(lambda: dlg is not None and dlg.isVisible(), timeout=5000)
    dlg.accept()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is table and window.isActiveWindow(), timeout=3000)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_F10)     # Step Over reaches the Studio
    s = qdoc.doc.debug
    qtbot.waitUntil(lambda: s.active and s.tick == 0 and not s.running, timeout=30000)
    wait_idle(qtbot, window)
