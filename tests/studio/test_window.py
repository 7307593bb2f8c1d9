"""Main window behaviour: saved layout and recent files, drag and drop, the task bar with
Cancel, theme switching, keyboard navigation in hex."""
from __future__ import annotations

import os
import threading

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage

from nac_studio.model.document import Selection
from nac_studio.main_window import MainWindow
from nac_studio.tasks import Cancelled
from nac_studio.theme import is_dark

from .conftest import wait_idle


def test_welcome_page_without_a_file(window):
    assert window.active is None
    assert window.stack.currentWidget() is window.welcome
    assert not window.tabs.isVisible()
    assert not window.commands.action("file.close").isEnabled()


def test_layout_recent_files_and_theme_survive_a_restart(window, demo_path, studio_settings, qtbot):
    window.open_and_wait(demo_path)
    assert window.recent_files()[0] == str(demo_path)
    window.docks["structure"].hide()
    window.resize(720, 540)   # within the offscreen screen (800x600): restoreGeometry clamps to it
    window.save_settings()

    again = MainWindow(studio_settings, restore=True)
    qtbot.addWidget(again)
    again.show()
    assert again.docks["structure"].isHidden()
    assert not again.docks["hex"].isHidden()
    assert (again.width(), again.height()) == (720, 540)
    assert [a.objectName() for a in again.recent_menu.actions()] == ["file.recent.0"]
    assert "file.recent.0" in again.commands
    with qtbot.waitSignal(again.documentOpened, timeout=10000):
        again.commands.run("file.recent.0")
    wait_idle(qtbot, again)
    assert again.active.doc.path == str(demo_path)
    # reset layout brings every panel back
    again.commands.run("view.resetLayout")
    assert not again.docks["structure"].isHidden()
    again.set_active(None)
    for qd in list(again.docs):
        again.close_document(qd)
    again.tasks.shutdown(wait=True)


def test_panel_toggles_are_checkable_commands(window):
    act = window.commands.action("view.panel.problems")
    assert act.isCheckable() and act.isChecked()
    window.commands.run("view.panel.problems")
    assert window.docks["problems"].isHidden() and not act.isChecked()
    window.commands.run("view.panel.problems")
    assert not window.docks["problems"].isHidden() and act.isChecked()


def test_dropping_files_opens_them(window, demo_path, corpus_case, qtbot):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(demo_path)), QUrl.fromLocalFile(str(corpus_case("cnn")))])
    event = QDropEvent(QPointF(200, 200), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    qtbot.waitUntil(lambda: len(window.docs) == 2, timeout=10000)
    wait_idle(qtbot, window)
    assert sorted(window.tabs.tabText(i) for i in range(2)) == sorted([demo_path.name, "cnn.nac"])


def test_status_bar_shows_tasks_and_cancels_them(window, qtbot):
    started = threading.Event()

    def slow(ctx):
        started.set()
        for k in range(500):
            ctx.progress(k, 500, f"step {k}")
            ctx.check()
            threading.Event().wait(0.01)
        return "finished"

    errors = []
    task = window.tasks.submit("A slow job", slow, on_error=errors.append)
    qtbot.waitUntil(started.is_set, timeout=5000)
    assert not window.cancel_button.isHidden() and not window.progress.isHidden()
    assert window.task_label.text().startswith("A slow job")
    qtbot.waitUntil(lambda: window.progress.maximum() == 1000 and window.progress.value() > 0, timeout=5000)
    window.cancel_button.click()
    qtbot.waitUntil(task.done, timeout=5000)
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    assert isinstance(errors[0], Cancelled)
    qtbot.waitUntil(lambda: window.cancel_button.isHidden(), timeout=5000)
    assert window.progress.isHidden()


def test_theme_commands_switch_the_palette_and_retint_icons(window, qapp):
    before = window.commands.action("file.open").icon().pixmap(16, 16).toImage()
    try:
        window.commands.run("view.theme.dark")
        assert is_dark(qapp.palette())
        assert window.commands.action("view.theme.dark").isChecked()
        after = window.commands.action("file.open").icon().pixmap(16, 16).toImage()
        assert after != before   # line icons follow the text colour
    finally:
        window.commands.run("view.theme.light")
    assert not is_dark(qapp.palette())


def test_keyboard_in_hex_moves_the_selection_between_records(window, demo_path, qtbot):
    qdoc = window.open_and_wait(demo_path)
    ins = qdoc.nac.instructions[3]
    qdoc.select(Selection("instruction", 3))
    area = window.hex_view.area
    area.setFocus()
    area.set_cursor(ins.offset)
    qtbot.keyClick(area, Qt.Key.Key_Right)        # still inside instr[3]: selection stays
    assert qdoc.selection == Selection("instruction", 3)
    for _ in range(ins.nbytes - 1):
        qtbot.keyClick(area, Qt.Key.Key_Right)    # the first byte of instr[4]
    assert area.cursor_offset == ins.offset + ins.nbytes
    assert qdoc.selection == Selection("instruction", 4)
    qtbot.keyClick(area, Qt.Key.Key_Home, Qt.KeyboardModifier.ControlModifier)
    assert area.cursor_offset == 0 and qdoc.selection.kind in ("span", "section")


def test_go_to_tick_and_problem_navigation_commands(window, demo_path, tmp_path, qtbot, monkeypatch):
    bad = tmp_path / "bad.nac"
    bad.write_bytes(demo_path.read_bytes()[:-30])
    qdoc = window.open_and_wait(bad)
    assert window.commands.action("nav.nextProblem").isEnabled()
    window.commands.run("nav.nextProblem")
    first = qdoc.selection
    assert first.kind == "offset"
    assert first.key in [p.offset for p in qdoc.doc.problems]
    from PySide6.QtWidgets import QInputDialog
    monkeypatch.setattr(QInputDialog, "getInt", staticmethod(lambda *a, **k: (6, True)))
    window.commands.run("nav.gotoTick")
    assert qdoc.selection == Selection("instruction", 6)


def test_graph_commands_drive_the_graph_view(window, demo_path, qtbot, tmp_path):
    window.open_and_wait(demo_path)
    graph = window.graph_view
    window.commands.run("graph.layout.tick")
    assert graph.mode == "tick"
    wait_idle(qtbot, window)
    assert window.commands.action("graph.layout.tick").isChecked()
    assert not window.commands.action("graph.layout.longestPath").isChecked()
    shown = graph.shown.n_nodes
    window.commands.run("graph.weights")   # hide parameter loads
    wait_idle(qtbot, window)
    assert graph.shown.n_nodes < shown and not window.commands.action("graph.weights").isChecked()
    svg = window.export_graph("svg", str(tmp_path / "g.svg"))
    assert svg and (tmp_path / "g.svg").read_text().lstrip().startswith("<")
    png = window.export_graph("png", str(tmp_path / "g.png"))
    assert png and (tmp_path / "g.png").stat().st_size > 1000
    # exports are written whole: a name that is a FIFO is refused at once (Qt's own save opened it
    # and blocked the window until something read the pipe), and the file that was there stays
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    for fmt in ("png", "svg"):
        assert window.export_graph(fmt, str(fifo)) is None
        assert window.statusBar().currentMessage().startswith(f"Could not write {fifo}")
    before = (tmp_path / "g.png").read_bytes()
    window.graph_view.canvas.render_image = lambda max_side: QImage()   # nothing could be drawn
    assert window.export_graph("png", str(tmp_path / "g.png")) is None
    assert (tmp_path / "g.png").read_bytes() == before
