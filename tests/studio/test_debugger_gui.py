"""Debugging in the Studio through the real main window: shortcuts, the Inputs dialog, the
Variables pane and the tensor inspector against ``Debugger.result``, step back, breakpoints
that persist, Stop during Continue, a kernel error that stops at its tick."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from nac_engine.runtime.debugger import Debugger
from nac_studio.model.document import Selection
from nac_studio.views.breakpoints import COL_HITS
from tests.corpus_paths import CORPUS
from tests.studio.conftest import wait_idle

MLP = CORPUS / "nac" / "mlp" / "mlp.nac"
MLP_FEED = CORPUS / "nac" / "mlp" / "feed_0.npy"


def needs_corpus():
    if not MLP.is_file():
        pytest.skip("corpus absent")


def press(qtbot, window, key, mod=Qt.KeyboardModifier.NoModifier):
    """A key press where a user would make it: on the focused disassembly table."""
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)    # a dialog that just closed hands focus back
    table = window.disassembly_view.table
    table.setFocus()
    qtbot.keyClick(table, key, mod)


def wait_stopped(qtbot, window, timeout=20000):
    qtbot.waitUntil(lambda: window.active.doc.debug is not None and not window.active.doc.debug.running,
                    timeout=timeout)
    wait_idle(qtbot, window, timeout)


def fill_inputs_with_npy(qtbot, window, path):
    dlg = window.debug.inputs_dialog
    assert dlg is not None and dlg.isVisible(), "F5 on a file without an input signature asks for inputs"
    row = dlg.rows[0]
    row.mode.setCurrentIndex(row.mode.findData("npy"))
    row.path.setText(str(path))
    dlg.accept()


def test_mlp_step_with_shortcuts_matches_debugger(window, qtbot):
    needs_corpus()
    qdoc = window.open_and_wait(MLP)
    window.disassembly_view.select_tick(7)
    selected = qdoc.selection
    assert selected == Selection("instruction", 7)
    press(qtbot, window, Qt.Key.Key_F10)          # first step: the dialog asks (no signature in the file)
    fill_inputs_with_npy(qtbot, window, MLP_FEED)
    wait_stopped(qtbot, window)
    s = qdoc.doc.debug
    assert s.tick == 0
    ref = Debugger(str(MLP), feeds=[np.load(MLP_FEED)])
    for _ in range(3):
        press(qtbot, window, Qt.Key.Key_F10)
        wait_stopped(qtbot, window)
    assert s.tick == 3
    ref.run_to(3)
    expected = ref.result(3)
    # the inspector's follower shows exactly the engine's result for tick 3
    insp = window.views["tensor_inspector"].follower
    qtbot.waitUntil(lambda: insp.loaded is not None and insp.loaded.tick == 3, timeout=10000)
    np.testing.assert_array_equal(insp.array, expected.tensor)
    assert insp.result.min == expected.min and insp.result.max == expected.max
    assert insp.result.mean == expected.mean and insp.result.std == expected.std
    assert f"{expected.max:.6g}" in insp.stats.text()
    # the Variables pane: first row is the current result, with the engine's statistics
    var = window.views["variables"]
    qtbot.waitUntil(lambda: var.model.rows and var.model.stats.get(3) is not None, timeout=10000)
    assert var.model.rows[0].tick == 3
    assert var.model.cell(0, 3) == f"{expected.min:.6g}" and var.model.cell(0, 4) == f"{expected.max:.6g}"
    assert var.model.cell(0, 5) == f"{expected.mean:.6g}"
    assert var.model.cell(0, 6) == str(expected.nan_count) and var.model.cell(0, 7) == str(expected.inf_count)
    assert var.model.cell(0, 2) == "×".join(map(str, expected.shape))
    assert var.model.cell(0, 8) == expected.dtype
    # the whole row as its tooltip (a docked pane shows its first columns only)
    tip = var.model.data(var.model.index(0, 1), Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith(f"t3  {var.model.cell(0, 1)}\n{expected.dtype} ") and f"max {expected.max:.6g}" in tip
    # the selection did not move with the execution point (two cursors); every view marks it
    assert qdoc.selection == selected
    assert_marks_at(window, qdoc, 3)


def test_step_back_restores_every_view(window, qtbot):
    needs_corpus()
    qdoc = window.open_and_wait(MLP)
    s = window.debug.attach(qdoc)
    s.set_choices({0: __import__("nac_studio.debug_session", fromlist=["InputChoice"]).InputChoice(
        mode="npy", path=str(MLP_FEED))})
    for _ in range(5):
        press(qtbot, window, Qt.Key.Key_F10)
        wait_stopped(qtbot, window)
    insp = window.views["tensor_inspector"].follower
    var = window.views["variables"]
    qtbot.waitUntil(lambda: insp.loaded is not None and insp.loaded.tick == 4, timeout=10000)
    at4 = (insp.array.copy(), [v.tick for v in var.model.rows])
    press(qtbot, window, Qt.Key.Key_F10)
    wait_stopped(qtbot, window)
    qtbot.waitUntil(lambda: insp.loaded.tick == 5, timeout=10000)
    press(qtbot, window, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)    # Shift+F10: step back
    wait_stopped(qtbot, window)
    assert s.tick == 4
    qtbot.waitUntil(lambda: insp.loaded.tick == 4, timeout=10000)
    np.testing.assert_array_equal(insp.array, at4[0])
    assert [v.tick for v in var.model.rows] == at4[1]
    assert window.disassembly_view.model.exec_tick == 4
    assert_marks_at(window, qdoc, 4)


def assert_marks_at(window, qdoc, tick):
    """Disassembly row, graph overlay and hex bytes all show the execution point ``tick``."""
    from nac_studio import debug_marks
    assert window.disassembly_view.model.exec_tick == tick
    graph = window.graph_view.shown
    node = int(graph.node_of_tick[tick])
    styles = window.graph_view.canvas.overlay_styles().get(node, [])
    assert any(o is not None and o.name() == debug_marks.EXEC_COLOR.name() for _f, o, _b in styles)
    spans = [qdoc.doc.span_of(Selection(k, tick)) for k in ("instruction", "mmap")]
    want = sorted((sp.offset, sp.offset + sp.length) for sp in spans if sp is not None)
    assert sorted(window.hex_view.area.exec_ranges()) == want and want


def test_breakpoint_f9_stops_and_survives_reopen(window, qtbot, studio_settings):
    needs_corpus()
    qdoc = window.open_and_wait(MLP)
    window.disassembly_view.select_tick(6)
    press(qtbot, window, Qt.Key.Key_F9)
    s = qdoc.doc.debug
    assert [(b.kind, b.value) for b in s.breakpoints] == [("tick", "6")]
    assert window.disassembly_view.model.breakpoints == {6: True}
    s.add_watch("max(abs(x))")
    s.add_watch("mean(no_such.weight)")             # an error, shown inline in its row
    press(qtbot, window, Qt.Key.Key_F5)
    fill_inputs_with_npy(qtbot, window, MLP_FEED)
    wait_stopped(qtbot, window)
    assert s.tick == 6 and s.reason.kind == "breakpoint"
    assert "breakpoint" in window.debug.label.text()
    bp_view = window.views["breakpoints"]
    assert bp_view.table.item(0, COL_HITS).text() == "1"        # hit count
    watches = window.views["watches"]
    ref = Debugger(str(MLP), feeds=[np.load(MLP_FEED)])
    ref.run_to(6)
    assert watches.rows()[0][1] == f"{float(np.abs(ref.result(6).tensor).max()):.7g}"
    assert watches.rows()[1][1].startswith("error:") and "no_such.weight" in watches.rows()[1][1]
    # close and reopen: the breakpoint, the watch and the input choice come back
    window.close_document(qdoc)
    qdoc2 = window.open_and_wait(MLP)
    s2 = qdoc2.doc.debug
    assert [(b.kind, b.value) for b in s2.breakpoints] == [("tick", "6")]
    assert s2.watches == ["max(abs(x))", "mean(no_such.weight)"] and not s2.needs_inputs()
    # the panes show what came back before any run (the Breakpoints pane was empty until a stop)
    assert bp_view.table.rowCount() == 1 and bp_view.table.item(0, 3).text() == "6"
    assert [r[0] for r in window.views["watches"].rows()] == ["max(abs(x))", "mean(no_such.weight)"]
    press(qtbot, window, Qt.Key.Key_F5)            # no dialog this time: the choices were remembered
    wait_stopped(qtbot, window)
    assert s2.tick == 6


def test_run_to_cursor_and_stop(window, qtbot):
    needs_corpus()
    qdoc = window.open_and_wait(MLP)
    window.debug.attach(qdoc)
    window.disassembly_view.select_tick(9)
    press(qtbot, window, Qt.Key.Key_F10, Qt.KeyboardModifier.ControlModifier)   # Ctrl+F10
    fill_inputs_with_npy(qtbot, window, MLP_FEED)
    wait_stopped(qtbot, window)
    s = qdoc.doc.debug
    assert s.tick == 9
    assert qdoc.doc.tick_of(qdoc.selection) == 9
    window.disassembly_view.select_tick(2)                # moving the selection does not move execution
    assert s.tick == 9
    press(qtbot, window, Qt.Key.Key_F5, Qt.KeyboardModifier.ShiftModifier)      # Shift+F5: stop
    assert not s.active and window.disassembly_view.model.exec_tick is None


@pytest.mark.heavy       # a Studio process running the model in its own host: ~9 s
def test_cli_run_to_inspect_screenshot(tmp_path):
    """``nac-studio FILE --run-to TICK --inspect vN --input x=FEED --screenshot``: the debugger
    state rendered and the process exits cleanly; bad arguments are one-line errors."""
    import os
    import subprocess
    import sys
    needs_corpus()
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "dbg.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"))
    cmd = [sys.executable, "-m", "nac_studio", str(MLP), "--run-to", "6", "--inspect", "v4",
           "--input", f"x={MLP_FEED}", "--screenshot", str(out)]
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.is_file() and out.stat().st_size > 30_000
    # a file without a signature and no --input: says what to give, exit 1
    proc = subprocess.run(cmd[:6] + ["--screenshot", str(tmp_path / "x.png")], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 1 and "--input NAME=FILE.npy" in proc.stderr and "Traceback" not in proc.stderr


def test_gutter_click_toggles_a_breakpoint(window, qtbot):
    needs_corpus()
    qdoc = window.open_and_wait(MLP)
    view = window.disassembly_view
    rect = view.table.visualRect(view.model.index(view.model.row_of_tick(4), 0))
    qtbot.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.topLeft() + QPoint(5, 4))
    assert [(b.kind, b.value) for b in qdoc.doc.debug.breakpoints] == [("tick", "4")]
    assert view.model.breakpoints == {4: True}
    icon = view.model.data(view.model.index(view.model.row_of_tick(4), 0), Qt.ItemDataRole.DecorationRole)
    assert icon is not None and not icon.isNull()
    qtbot.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.topLeft() + QPoint(5, 4))
    assert qdoc.doc.debug.breakpoints == [] and view.model.breakpoints == {}


def test_typed_text_sets_the_attention_mask_to_its_tokens(window, qtbot):
    """Text typed for input_ids in the Inputs dialog fills the attention mask to match (1 for the
    tokens, 0 for the padding), not with random values, and the run uses it."""
    from tests.resources_path import DEMO
    qdoc = window.open_and_wait(DEMO.parent / "demo_bert_tiny.nac")
    window.commands.run("debug.inputs")
    dlg = window.debug.inputs_dialog
    row = dlg.rows[0]
    row.mode.setCurrentIndex(row.mode.findData("text"))
    row.text.setText("the cat sat")
    dlg.accept()
    s = qdoc.doc.debug
    ids, mask = s.feeds()
    real = int((ids[0] != 0).sum())                  # [CLS] the cat sat [SEP], then [PAD]
    assert real == 5 and mask.tolist() == [[1] * real + [0] * (16 - real)]
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "finished"
    mask_tick = next(t for t, name in qdoc.nac.input_name_map.items() if name == "attention_mask")
    np.testing.assert_array_equal(s.result(mask_tick).tensor, mask)      # what the run in the host read


def test_after_continue_to_the_end_the_inspector_shows_the_output(window, qtbot):
    """The run ends on its return instruction; the inspector that follows the execution point shows
    the value it returns (it said "no tensor: None")."""
    from nac_engine.isa.optable import OP_OUTPUT
    from tests.resources_path import DEMO
    qdoc = window.open_and_wait(DEMO.parent / "demo_bert_tiny.nac")
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    s = qdoc.doc.debug
    assert s.state == "finished"
    ret = qdoc.nac.instructions[s.tick]
    assert ret.a == OP_OUTPUT
    follower = window.views["tensor_inspector"].follower
    qtbot.waitUntil(lambda: follower.loaded is not None and follower.loaded.tick == s.tick, timeout=20000)
    assert follower.loaded.array is not None, follower.loaded.note
    first = ret.producers()[0]
    np.testing.assert_array_equal(follower.loaded.array, s.outputs()[0])
    assert f"returns v{first}" in follower.loaded.title
    # the file records what forward returned them as: every view says so
    assert "(last_hidden_state)" in follower.loaded.title
    assert "(pooler_output)" in follower.loaded.note
    qdoc.select(Selection("instruction", s.tick))
    props = window.properties_view.model
    assert props.value("Arguments", "output 0 (last_hidden_state)") == qdoc.doc.value_name(first)
    assert props.value("Arguments", "output 1 (pooler_output)") is not None
    from nac_studio.model.graph_model import build_graph
    node = next(nd for nd in build_graph(qdoc.nac).nodes if nd.kind == "output")
    assert node.detail.endswith("last_hidden_state, pooler_output"), node.detail


def test_cli_input_takes_the_label_it_lists_for_an_unnamed_input(tmp_path):
    """bert_tiny's buffers have no names; the error lists them as ``input @2``, and
    ``--input "input @2=FEED"`` is then accepted."""
    import os
    import subprocess
    import sys
    needs_corpus()
    case = CORPUS / "nac" / "bert_tiny"
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"))
    names = ["input_ids", "attention_mask", "input @2", "input @6"]
    cmd = [sys.executable, "-m", "nac_studio", str(case / "bert_tiny.nac"), "--run-to", "3",
           "--screenshot", str(tmp_path / "b.png")]
    for name, k in zip(names, range(4)):
        cmd += ["--input", f"{name}={case / f'feed_{k}.npy'}"]
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_hex_view_scrolls_to_each_stop(window, qtbot):
    """A stop brings the executed instruction's bytes into the hex view (it stayed where the user
    had scrolled), as the disassembly brings its row."""
    from tests.resources_path import DEMO
    qdoc = window.open_and_wait(DEMO.parent / "demo_bert_tiny.nac")
    window.docks["hex"].show()
    window.docks["hex"].raise_()
    area = window.hex_view.area
    area.ensure_visible(area.size_bytes - 1)             # the user looks at the end of the weights
    s = qdoc.doc.debug
    for _ in range(2):
        window.commands.run("debug.stepOver")          # F10 (a key on the table would move the selection)
        wait_stopped(qtbot, window)
    offset = qdoc.nac.instructions[s.tick].offset
    row, first = offset // 16, area.first_row()
    assert first <= row < first + area.visible_rows(), (row, first, area.visible_rows())


def test_a_layout_that_arrives_after_a_stop_shows_the_execution_point(window, qtbot):
    """A big model's graph can be laid out after the run has already stopped (the layout and
    the run are separate host requests): the layout then opens on the execution point, not
    at the top of the graph."""
    from tests.resources_path import DEMO
    qdoc = window.open_and_wait(DEMO.parent / "demo_bert_tiny.nac")
    last = len(qdoc.nac.instructions) - 3
    window.disassembly_view.select_tick(last)
    window.commands.run("debug.runToCursor")
    wait_stopped(qtbot, window)
    assert qdoc.doc.execution_tick == last
    window.disassembly_view.select_tick(0)          # the selection is elsewhere (the top)
    graph = window.graph_view
    graph.canvas.setFixedHeight(160)                # a short pane: the top view cannot show both
    graph.forget(qdoc)
    with qtbot.waitSignal(graph.layoutReady, timeout=30000):
        graph.set_document(qdoc)                    # a fresh layout, as for a file just opened
    node = int(graph.shown.node_of_tick[last])
    x, y, w, h = graph.layout_.rect(node)
    from PySide6.QtCore import QRectF
    assert graph.canvas.visible_scene_rect().intersects(QRectF(x, y, w, h))
    top = int(graph.shown.node_of_tick[0])
    x, y, w, h = graph.layout_.rect(top)
    assert not graph.canvas.visible_scene_rect().intersects(QRectF(x, y, w, h))
