"""Line breakpoints in the Studio: F9 on a line of the Source pane stops the run at the ticks that
line of the model's code made (as a line breakpoint in an editor does through `nac dap`); the
line is tinted; the Breakpoints pane takes ``file.py:LINE`` too; a line that made no instruction
is refused in its row; the file edited since the compile keeps each breakpoint on its code."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor

from nac_engine.cli import main
from nac_engine.format.source_map import read_source_map
from tests.dap.fixture_models import NESTED, marker_line
from tests.studio.test_debugger_gui import press, wait_stopped


def _compiled(tmp_path, text=NESTED):
    (tmp_path / "model.py").write_text(text)
    assert main(["compile", str(tmp_path / "model.py"), "-o", str(tmp_path / "model.nac")]) == 0
    return tmp_path / "model.nac"


def _source_pane(window):
    window.docks["source"].show()
    window.docks["source"].raise_()
    return window.views["source"]


def _f9_on_line(qtbot, view, line: int) -> None:
    view.editor.setFocus()
    view.editor.setTextCursor(QTextCursor(view.editor.document().findBlockByNumber(line - 1)))
    qtbot.keyClick(view.editor, Qt.Key.Key_F9)


def test_f9_in_the_source_pane_stops_at_that_lines_ticks(window, qtbot, tmp_path):
    path = _compiled(tmp_path)
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    smap = read_source_map(qdoc.nac)
    body, log = marker_line(NESTED, "body"), marker_line(NESTED, "log")
    body_ticks = [e.tick for e in smap.entries if e.file and e.file.endswith("model.py") and e.line == body]
    assert body_ticks
    view = _source_pane(window)
    from nac_studio.model.document import Selection
    qdoc.select(Selection("instruction", body_ticks[0]))        # the pane shows model.py
    qtbot.waitUntil(lambda: view.shown_path is not None, timeout=5000)
    _f9_on_line(qtbot, view, log)
    spec = s.breakpoints[-1]
    assert spec.kind == "line" and spec.value.endswith(f"model.py:{log}") and spec.error == ""
    assert "Breakpoint set on " in window.statusBar().currentMessage()
    assert view._bp_lines == {log: True}                        # tinted
    log_ticks = s.ticks_of(spec)
    assert log_ticks and all(smap.entry(t).line == log for t in log_ticks)
    assert set(log_ticks) <= set(s.breakpoint_ticks())          # the disassembly and graph marks too
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "stopped" and s.tick == log_ticks[0], s.describe()
    assert view.highlighted_line() == log and f"breakpoint #{spec.id} line " in s.describe()
    # F9 again on the line removes it; the run goes to the end
    _f9_on_line(qtbot, view, log)
    assert not any(b.kind == "line" for b in s.breakpoints) and view._bp_lines == {}
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "finished"
    # typed in the Breakpoints pane; a line that made nothing says so in its row
    bp_view = window.views["breakpoints"]
    bp_view.kind.setCurrentText("line")
    bp_view.value.setText(f"model.py:{body}")
    bp_view.add_from_editor()
    assert s.breakpoints[-1].error == "" and s.ticks_of(s.breakpoints[-1]) == body_ticks
    blank = next(i for i, ln in enumerate(NESTED.splitlines(), 1) if not ln.strip())
    bad = s.add_breakpoint("line", f"model.py:{blank}")
    qtbot.waitUntil(lambda: "no instruction" in bad.error, timeout=5000)      # the host's word (a run is live)
    # kept with the file, and back after a reopen (checked before any run there)
    window.close_document(qdoc)
    qdoc = window.open_and_wait(path)
    kept = [b for b in qdoc.doc.debug.breakpoints if b.kind == "line"]
    assert [b.value for b in kept] == [f"model.py:{body}", f"model.py:{blank}"]
    assert kept[0].error == "" and "no instruction" in kept[1].error


def test_a_source_edited_since_the_compile_keeps_the_breakpoint_on_its_code(window, qtbot, tmp_path):
    path = _compiled(tmp_path)
    edited = "# two lines the user added\n\n" + NESTED
    (tmp_path / "model.py").write_text(edited)
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    softmax_now = marker_line(edited, "softmax")
    spec = s.add_breakpoint("line", f"model.py:{softmax_now}")       # the line as the file reads now
    ticks = s.ticks_of(spec)
    smap = read_source_map(qdoc.nac)
    assert ticks and all(smap.entry(t).line == marker_line(NESTED, "softmax") for t in ticks)
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "stopped" and s.tick == ticks[0], s.describe()
    view = _source_pane(window)
    qtbot.waitUntil(lambda: view.highlighted_line() == softmax_now, timeout=5000)
    assert view._bp_lines == {softmax_now: True}


def test_run_to_a_source_line_and_the_source_context_menu(window, qtbot, tmp_path):
    from PySide6.QtCore import QPoint, QTimer
    from PySide6.QtWidgets import QApplication
    path = _compiled(tmp_path)
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    smap = read_source_map(qdoc.nac)
    body, softmax = marker_line(NESTED, "body"), marker_line(NESTED, "softmax")
    from nac_studio.model.document import Selection
    view = _source_pane(window)
    first_body = min(e.tick for e in smap.entries if e.file and e.line == body)
    qdoc.select(Selection("instruction", first_body))
    qtbot.waitUntil(lambda: view.shown_path is not None, timeout=5000)
    # Ctrl+F10 on a line of the Source pane: the run goes to the first tick that line made
    view.editor.setFocus()
    view.editor.setTextCursor(QTextCursor(view.editor.document().findBlockByNumber(body - 1)))
    qtbot.keyClick(view.editor, Qt.Key.Key_F10, Qt.KeyboardModifier.ControlModifier)
    wait_stopped(qtbot, window)
    assert s.tick == first_body, s.describe()
    # the context menu offers the same on the clicked line
    seen = {}

    def read_menu():
        menu = QApplication.activePopupWidget()
        if menu is None:
            QTimer.singleShot(20, read_menu)
            return
        seen["items"] = [a.text() for a in menu.actions() if a.text()]
        run = next(a for a in menu.actions() if a.text().startswith("Run to Line"))
        menu.close()
        run.trigger()
    QTimer.singleShot(50, read_menu)
    block = view.editor.document().findBlockByNumber(softmax - 1)
    where = view.editor.cursorRect(QTextCursor(block)).center()
    view.editor.customContextMenuRequested.emit(QPoint(where.x(), where.y()))
    assert f"Run to Line {softmax}" in seen["items"] and f"Toggle Breakpoint on Line {softmax}" in seen["items"]
    wait_stopped(qtbot, window)
    softmax_ticks = sorted(e.tick for e in smap.entries if e.file and e.line == softmax)
    assert s.tick == softmax_ticks[0], s.describe()
    # a line that made nothing says so
    view.editor.setFocus()
    view.editor.setTextCursor(QTextCursor(view.editor.document().findBlockByNumber(0)))
    qtbot.keyClick(view.editor, Qt.Key.Key_F10, Qt.KeyboardModifier.ControlModifier)
    assert "made no instruction of this model" in window.statusBar().currentMessage()


def test_a_logpoint_on_a_source_line(window, qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    from nac_studio.model.document import Selection
    path = _compiled(tmp_path)
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    smap = read_source_map(qdoc.nac)
    log = marker_line(NESTED, "log")
    view = _source_pane(window)
    qdoc.select(Selection("instruction", min(e.tick for e in smap.entries if e.file and e.line == log)))
    qtbot.waitUntil(lambda: view.shown_path is not None, timeout=5000)
    view.editor.setFocus()
    view.editor.setTextCursor(QTextCursor(view.editor.document().findBlockByNumber(log - 1)))
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *a, **k: ("nan {count_nan(x)}", True)))
    window.commands.run("debug.addLogpoint")
    (spec,) = s.breakpoints
    assert spec.kind == "line" and spec.value.endswith(f"model.py:{log}") and spec.log == "nan {count_nan(x)}"
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "finished"
    console = window.views["debug_console"]
    ticks = s.ticks_of(spec)
    qtbot.waitUntil(lambda: len(console.lines()) == len(ticks), timeout=5000)
    assert [ln.split("]")[0] for ln in console.lines()] == [f"[tick {t}" for t in ticks]
    import numpy as np
    assert console.lines()[-1].endswith(f"nan {int(np.isnan(s.result(ticks[-1]).tensor).sum())}")



def test_the_gutter_numbers_lines_marks_breakpoints_and_a_click_toggles_one(window, qtbot, tmp_path):
    """As an IDE's gutter: line numbers, a dot on a line with a breakpoint, an arrow at the
    execution point; a click sets a breakpoint on that line and a second click removes it."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QColor
    from nac_studio.model.document import Selection
    from nac_studio.widgets.code_editor import BREAKPOINT_ON
    path = _compiled(tmp_path)
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    smap = read_source_map(qdoc.nac)
    body, log = marker_line(NESTED, "body"), marker_line(NESTED, "log")
    body_ticks = [e.tick for e in smap.entries if e.file and e.file.endswith("model.py") and e.line == body]
    view = _source_pane(window)
    qdoc.select(Selection("instruction", body_ticks[0]))
    qtbot.waitUntil(lambda: view.shown_path is not None, timeout=5000)
    editor = view.editor
    assert editor.gutter.isVisible() and editor.viewportMargins().left() == editor.gutter.width() > 0
    block = editor.document().findBlockByNumber(log - 1)
    editor.centerCursor()
    editor.setTextCursor(QTextCursor(block))
    editor.centerCursor()
    y = int(editor.blockBoundingGeometry(block).translated(editor.contentOffset()).center().y())
    assert editor.line_at(y) == log
    qtbot.mouseClick(editor.gutter, Qt.MouseButton.LeftButton, pos=QPoint(6, y))
    spec = s.breakpoints[-1]
    assert spec.kind == "line" and spec.value.endswith(f"model.py:{log}") and spec.error == ""
    assert "Breakpoint set on " in window.statusBar().currentMessage()
    qtbot.waitUntil(lambda: editor.marks == {log: True}, timeout=3000)
    # what the gutter paints: the dot on that line's row, the number beside it
    image = editor.gutter.grab().toImage()
    dot_y = y * image.height() // editor.gutter.height()
    reds = [image.pixelColor(x, dot_y) for x in range(image.width() // 3)]
    assert any(abs(c.red() - BREAKPOINT_ON.red()) < 30 and c.green() < 120 for c in reds), reds
    assert editor.execution_line is None                      # no run: no arrow
    # hovering the gutter says what the line made (where a breakpoint there would stop)
    log_ticks = s.ticks_of(spec)
    tip = editor.line_tip(log)
    assert tip.startswith(f"Line {log} made {len(log_ticks)} instruction") and f"v{log_ticks[0]}" in tip
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "stopped" and editor.execution_line == log
    window.commands.run("debug.stop")
    qtbot.waitUntil(lambda: editor.execution_line is None, timeout=3000)
    y = int(editor.blockBoundingGeometry(block).translated(editor.contentOffset()).center().y())  # scrolled since
    dot_y = y * image.height() // editor.gutter.height()
    qtbot.mouseClick(editor.gutter, Qt.MouseButton.LeftButton, pos=QPoint(6, y))
    assert not any(b.kind == "line" for b in s.breakpoints) and editor.marks == {}
    assert QColor(editor.gutter.grab().toImage().pixelColor(8, dot_y)).red() != BREAKPOINT_ON.red()
    # a line that made no instruction: the breakpoint is kept, refused (an editor's unverified
    # breakpoint), as a ring the next click removes
    blank = next(i for i, ln in enumerate(NESTED.splitlines(), 1) if not ln.strip() and i > log)
    block = editor.document().findBlockByNumber(blank - 1)
    yb = int(editor.blockBoundingGeometry(block).translated(editor.contentOffset()).center().y())
    if editor.line_at(yb) != blank:                     # scrolled out of view: bring it in
        editor.setTextCursor(QTextCursor(block))
        editor.centerCursor()
        yb = int(editor.blockBoundingGeometry(block).translated(editor.contentOffset()).center().y())
    assert editor.line_tip(blank) == f"Line {blank} made no instruction of this model"
    qtbot.mouseClick(editor.gutter, Qt.MouseButton.LeftButton, pos=QPoint(6, yb))
    refused = s.breakpoints[-1]
    qtbot.waitUntil(lambda: "no instruction" in refused.error, timeout=5000)
    qtbot.waitUntil(lambda: editor.marks == {blank: None}, timeout=3000)
    assert blank not in view._bp_lines or view._bp_lines[blank] is None     # no red tint on it
    qtbot.mouseClick(editor.gutter, Qt.MouseButton.LeftButton, pos=QPoint(6, yb))
    assert not any(b.kind == "line" for b in s.breakpoints)


def test_a_source_pane_deleted_right_after_it_scrolled_raises_nothing(qapp, qtbot, tmp_path):
    """The pane centres its line again on the next turn of the event loop; a pane (a window)
    deleted before that turn must not have the call land on its deleted editor."""
    from PySide6.QtCore import QCoreApplication, QEvent
    from nac_engine.format.reader import read
    from nac_studio.model.document import Document, Selection
    from nac_studio.qt_document import QtDocument
    from nac_studio.views.source import SourceView
    path = _compiled(tmp_path)
    qdoc = QtDocument(Document(read(str(path)), str(path)))
    view = SourceView(qdoc)
    view.show()
    body = marker_line(NESTED, "body")
    tick = next(e.tick for e in read_source_map(qdoc.nac).entries if e.file and e.line == body)
    qdoc.select(Selection("instruction", tick))
    assert view.highlighted_line() == body
    view.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    qtbot.wait(50)          # the deferred centring's turn: pytest-qt fails the test on an error there


def test_the_models_code_is_coloured_for_the_theme(window, qtbot, tmp_path):
    """The Source pane's Python colouring follows a theme switch (the light palette's purple
    keywords were hard to read on the dark one)."""
    from nac_studio.model.document import Selection
    path = _compiled(tmp_path)
    qdoc = window.open_and_wait(path)
    view = _source_pane(window)
    body = marker_line(NESTED, "body")
    tick = next(e.tick for e in read_source_map(qdoc.nac).entries if e.file and e.line == body)
    qdoc.select(Selection("instruction", tick))
    qtbot.waitUntil(lambda: view.shown_path is not None, timeout=5000)
    line = next(i for i, ln in enumerate(NESTED.splitlines()) if ln.lstrip().startswith("return "))

    def keyword_colour() -> str:
        view.editor.viewport().repaint()                 # its highlighter is made when first painted
        qtbot.waitUntil(lambda: bool(view.editor.document().findBlockByNumber(line).layout().formats()),
                        timeout=3000)
        block = view.editor.document().findBlockByNumber(line)
        start = block.text().index("return")
        formats = block.layout().formats()            # kept alive while read
        return next(f.format.foreground().color().name() for f in formats if f.start <= start < f.start + f.length)
    window.set_theme("light")
    assert keyword_colour() == "#8f3fb0"
    def line_alpha() -> int:
        selections = view.editor.extraSelections()          # kept alive while read
        return selections[-1].format.background().color().alpha()
    light_line = line_alpha()
    window.set_theme("dark")
    qtbot.waitUntil(lambda: keyword_colour() == "#d29bff", timeout=3000)
    # the highlighted line fainter on the dark theme: the light text over it stays readable
    assert line_alpha() < light_line
    window.set_theme("light")
