"""Logpoints and the Debug Console in the Studio: a breakpoint given a log message (in the
Breakpoints pane's cell) prints to the Debug Console each time the run passes it, with its
{expressions} evaluated there, and F5 does not stop at it; a message that does not parse is
refused in its row; the console's input line evaluates an expression at the execution point."""
from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import Qt

from nac_studio.views.breakpoints import COL_LOG
from tests.studio.test_debugger_gui import press, wait_stopped
from tests.studio.test_debugger_runs import compiled


class TwoLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 6)
        self.b = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _log_cell(window, row: int = 0):
    view = window.views["breakpoints"]
    return view.table.item(row, COL_LOG)


def test_a_logpoint_prints_to_the_console_and_f5_runs_through(window, qtbot, tmp_path):
    path = compiled(tmp_path, TwoLinears(), (torch.randn(2, 4),), "two")
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    linears = [i.index for i in qdoc.nac.instructions if qdoc.nac.instruction_name(i) == "aten.linear.default"]
    assert len(linears) == 2
    # before any run, a message that does not parse is said in its row at once
    bad = s.add_breakpoint("tick", str(linears[0]))
    s.edit_breakpoint(bad.id, log="{x[}")
    assert bad.error.startswith("log message: ")
    s.remove_breakpoint(bad.id)
    bp_view = window.views["breakpoints"]
    bp_view.kind.setCurrentText("op")
    bp_view.value.setText("aten.linear*")
    bp_view.add_from_editor()
    _log_cell(window).setText("linear {shape(x)[1]} wide, max {max(abs(x))}, row {x[0, :2]}")  # as an edit in place
    assert s.breakpoints[0].log.startswith("linear {shape(x)[1]}")
    window.docks["debug_console"].show()
    window.docks["debug_console"].raise_()
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "finished", s.describe()             # it did not stop at the logpoints
    console = window.views["debug_console"]
    qtbot.waitUntil(lambda: len(console.lines()) >= 2, timeout=5000)
    lines = console.lines()
    assert lines[0].startswith(f"[tick {linears[0]}] linear 6 wide, max ") and " row f32[2] [" in lines[0]   # the two values
    assert lines[1].startswith(f"[tick {linears[1]}] linear 3 wide, max ")
    assert s.breakpoints[0].hits == 2
    # the input line evaluates at the execution point (here: the end)
    console.input.setText(f"v{linears[1]}[1, :2]")
    qtbot.keyClick(console.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(console.lines()) >= 4, timeout=5000)
    out = s.result(linears[1]).tensor[1, :2]
    assert console.lines()[2] == f"> v{linears[1]}[1, :2]"
    shown = [float(x) for x in console.lines()[3].strip(" []").split()]
    assert shown == pytest.approx(out.tolist(), abs=6e-6), (console.lines()[3], out)
    console.input.setText("v99999")
    qtbot.keyClick(console.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(console.lines()) >= 6, timeout=5000)
    assert console.lines()[5].startswith("  error: ") and "99999" in console.lines()[5]
    # a second run's lines follow a mark; the clear button empties the console
    window.commands.run("debug.stop")
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    qtbot.waitUntil(lambda: len(console.lines()) >= 9, timeout=5000)
    assert console.lines()[6] == "── new run ──" and console.lines()[7].startswith(f"[tick {linears[0]}] linear 6")
    console.clear_button.click()
    assert console.lines() == [] and not s.console
    console.input.setText("1 + 1")
    qtbot.keyClick(console.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(console.lines()) == 2, timeout=5000)
    assert console.lines() == ["> 1 + 1", "  2"]
    # a message that does not parse: refused in the row, the breakpoint is not installed
    _log_cell(window).setText("oops {x[}")
    qtbot.waitUntil(lambda: bool(s.breakpoints[0].error), timeout=5000)
    assert "log message" in s.breakpoints[0].error


def test_the_log_message_is_kept_with_the_files_breakpoints(window, qtbot, tmp_path):
    """Breakpoints persist per file (their JSON form): the log message with them, back when the
    file is opened again."""
    import json

    from nac_studio.debug_session import BreakpointSpec, DebugSession
    spec = BreakpointSpec("op", "aten.linear*", log="max {max(x)}")
    again = BreakpointSpec.from_json(spec.to_json())
    assert again.log == "max {max(x)}" and again.label.endswith("(log)")
    assert "log" not in BreakpointSpec("tick", "3").to_json()
    path = compiled(tmp_path, TwoLinears(), (torch.randn(2, 4),), "two")
    s = window.open_and_wait(path).doc.debug
    b = s.add_breakpoint("op", "aten.linear*")
    s.edit_breakpoint(b.id, log="max {max(x)}")
    saved = json.loads(json.dumps(s.to_json()))
    reopened = DebugSession(s.nac)
    reopened.load_json(saved)
    assert [(x.kind, x.value, x.log) for x in reopened.breakpoints] == [("op", "aten.linear*", "max {max(x)}")]


def test_add_logpoint_on_the_selected_instruction(window, qtbot, tmp_path, monkeypatch):
    """Debug › Add Logpoint… (VS Code's name): the message asked for, a tick breakpoint with it,
    the console raised; F5 prints it and runs to the end."""
    from PySide6.QtWidgets import QInputDialog

    from nac_studio.model.document import Selection
    path = compiled(tmp_path, TwoLinears(), (torch.randn(2, 4),), "two")
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    relu = next(i.index for i in qdoc.nac.instructions if "relu" in qdoc.nac.instruction_name(i))
    qdoc.select(Selection("instruction", relu))
    asked = []
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(
        lambda *a, **k: (asked.append(k.get("text")), ("relu {count_zero(x)} zeros", True))[1]))
    window.commands.run("debug.addLogpoint")
    assert asked == [f"v{relu} max {{max(abs(x))}}"]
    (spec,) = s.breakpoints
    assert (spec.kind, spec.value, spec.log) == ("tick", str(relu), "relu {count_zero(x)} zeros")
    assert window.docks["debug_console"].isVisible()
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "finished"
    console = window.views["debug_console"]
    qtbot.waitUntil(lambda: len(console.lines()) == 1, timeout=5000)
    zeros = int((s.result(relu).tensor == 0).sum())
    assert console.lines() == [f"[tick {relu}] relu {zeros} zeros"]


def test_a_logpoint_is_marked_as_a_diamond(window, qtbot, tmp_path):
    """VS Code's mark: a tick where only logpoints are enabled shows a diamond (gutter icon and
    graph badge ◆); a plain breakpoint on the same tick wins (●)."""
    from nac_studio import debug_marks
    from nac_studio.debug_session import LOGPOINT
    path = compiled(tmp_path, TwoLinears(), (torch.randn(2, 4),), "two")
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    t = next(i.index for i in qdoc.nac.instructions if "relu" in qdoc.nac.instruction_name(i))
    lp = s.add_breakpoint("tick", str(t))
    s.edit_breakpoint(lp.id, log="{x}")
    assert s.breakpoint_ticks() == {t: LOGPOINT}
    marks = debug_marks.DebugMarks(s)
    assert debug_marks.graph_overlays(marks)["debug.breakpoints"][t][2] == "◆"
    diamond = debug_marks.gutter_icon(LOGPOINT, False, False).pixmap(14, 14).toImage()
    dot = debug_marks.gutter_icon(True, False, False).pixmap(14, 14).toImage()
    assert diamond != dot
    s.add_breakpoint("tick", str(t))
    assert s.breakpoint_ticks() == {t: True}
    s.edit_breakpoint(lp.id, enabled=False)
    assert s.breakpoint_ticks() == {t: True}


def test_right_click_on_an_instruction_offers_the_debuggers_actions(window, qtbot, tmp_path):
    """A disassembly row or a graph node: Run to Cursor, Toggle Breakpoint, Add Logpoint…, Inspect
    Tensor, acting on what was clicked (it becomes the selection)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    path = compiled(tmp_path, TwoLinears(), (torch.randn(2, 4),), "two")
    qdoc = window.open_and_wait(path)
    shown = []

    def read_and_close_the_menu(tries=[0]):          # the popup's own event loop runs this
        menu = QApplication.activePopupWidget()
        if menu is None:
            tries[0] += 1
            if tries[0] < 300:                          # no menu at all: the test fails on `shown`
                QTimer.singleShot(10, read_and_close_the_menu)
            return
        shown.append([x.text() for x in menu.actions() if not x.isSeparator()])
        menu.close()
    relu = next(i.index for i in qdoc.nac.instructions if "relu" in qdoc.nac.instruction_name(i))
    view = window.disassembly_view
    rect = view.table.visualRect(view.model.index(view.model.row_of_tick(relu), 1))
    QTimer.singleShot(0, read_and_close_the_menu)
    view.table.customContextMenuRequested.emit(rect.center())
    assert shown[-1][:4] == ["Run to Cursor", "Toggle Breakpoint", "Add Logpoint…", "Inspect Tensor"]
    assert qdoc.doc.tick_of(qdoc.selection) == relu
    window.commands.run("debug.toggleBreakpoint")          # acts on the clicked row
    assert [(b.kind, b.value) for b in qdoc.doc.debug.breakpoints] == [("tick", str(relu))]
    # a graph node (the graph shows ops; pick the first linear's)
    graph = window.graph
    qtbot.waitUntil(lambda: graph.shown is not None and graph.canvas.layout_ is not None, timeout=20000)
    linear = next(i.index for i in qdoc.nac.instructions if qdoc.nac.instruction_name(i) == "aten.linear.default")
    node = next(n for n, nd in enumerate(graph.shown.nodes) if nd.selection().key == linear)
    x, y = graph.canvas.layout_.pos[node]
    graph.canvas.center_on(node)
    qtbot.wait(20)
    QTimer.singleShot(0, read_and_close_the_menu)
    graph.canvas.customContextMenuRequested.emit(graph.canvas.scene_to_screen(float(x), float(y)).toPoint())
    assert shown[-1][:4] == ["Run to Cursor", "Toggle Breakpoint", "Add Logpoint…", "Inspect Tensor"]
    assert qdoc.doc.tick_of(qdoc.selection) == linear


def test_the_input_line_remembers_what_was_evaluated(qtbot):
    """Up and Down walk the expressions evaluated before, as a shell's history does."""
    from nac_studio.views.debug_console import DebugConsoleView
    view = DebugConsoleView()
    qtbot.addWidget(view)
    view._history = ["max(x)", "v3[0, :2]"]
    view.input.setFocus()
    view.show()
    qtbot.waitUntil(view.input.hasFocus, timeout=2000)
    qtbot.keyClick(view.input, Qt.Key.Key_Up)
    assert view.input.text() == "v3[0, :2]"
    qtbot.keyClick(view.input, Qt.Key.Key_Up)
    assert view.input.text() == "max(x)"
    qtbot.keyClick(view.input, Qt.Key.Key_Down)
    qtbot.keyClick(view.input, Qt.Key.Key_Down)
    assert view.input.text() == ""


def test_tab_completes_in_the_console_input(window, qtbot, tmp_path):
    path = compiled(tmp_path, TwoLinears(), (torch.randn(2, 4),), "two")
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    window.docks["debug_console"].show()
    window.docks["debug_console"].raise_()
    console = window.views["debug_console"]
    # before a run: functions and parameter names
    console.input.setFocus()
    console.input.setText("max(ab")
    qtbot.keyClick(console.input, Qt.Key.Key_Tab)
    assert console.input.text() == "max(abs(" and console.input.hasFocus()     # Tab did not move the focus
    qtbot.keyClicks(console.input, "b.w")
    qtbot.keyClick(console.input, Qt.Key.Key_Tab)
    assert console.input.text() == "max(abs(b.weight"
    console.input.setText("max(abs(a")              # a.bias, a.weight, abs(, all(, ...: nothing more in common
    assert "a.bias" in console.completion.complete() and console.input.text() == "max(abs(a"
    console.completer.popup().hide()
    # several: their common start is written in and the list offered; Return takes the chosen one
    console.input.setText("max(abs(a.w")
    qtbot.keyClick(console.input, Qt.Key.Key_Tab)
    assert console.input.text() == "max(abs(a.weight"
    console.input.setText("max(abs(a.")
    qtbot.keyClick(console.input, Qt.Key.Key_Tab)
    assert console.input.text() == "max(abs(a." and console.completer.popup().isVisible()
    popup = console.completer.popup()
    assert [popup.model().index(r, 0).data() for r in range(popup.model().rowCount())] == ["a.bias", "a.weight"]
    qtbot.keyClick(popup, Qt.Key.Key_Down)
    qtbot.keyClick(popup, Qt.Key.Key_Down)
    qtbot.keyClick(popup, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: console.input.text() == "max(abs(a.weight", timeout=2000)
    assert console.input.cursorPosition() == len("max(abs(a.weight")
    # stopped at a tick: its values by the names every pane shows
    linear = next(i.index for i in qdoc.nac.instructions if qdoc.nac.instruction_name(i) == "aten.linear.default")
    s.add_breakpoint("tick", str(linear))
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    console.input.setText("v")
    assert f"v{linear}" in console.completion.complete()
    console.completer.popup().hide()
    # the Watches editor completes the same way
    watches = window.views["watches"]
    window.docks["watches"].show()
    window.docks["watches"].raise_()
    watches.editor.setFocus()
    watches.editor.setText("mean(b.b")
    qtbot.keyClick(watches.editor, Qt.Key.Key_Tab)
    assert watches.editor.text() == "mean(b.bias"
    watches.editor.clear()                       # an empty line: Tab moves the focus on, as anywhere
    qtbot.keyClick(watches.editor, Qt.Key.Key_Tab)
    assert not watches.editor.hasFocus()
