"""A MIND Core IR sample in the Studio: opened through MainWindow.open_path (as drag and drop does),
with the graph, structure, hex, problems and IR Text panes populated, NAC-only panes covered, and
Convert to NAC and Open giving a program whose ticks walk the IR lines."""
from __future__ import annotations

import pytest

from nac_studio.model.document import Selection
from nac_studio.peer_views import covered_text
from tests.corpus_paths import CORPUS
from tests.studio.conftest import wait_idle

MIND = CORPUS / "peers" / "mind"
pytestmark = pytest.mark.skipif(not (MIND / "autodiff_output.ir").is_file(), reason="MIND samples absent")


def test_mind_sample_opens_with_graph_structure_and_problems(window, qtbot, tmp_path):
    qdoc = window.open_and_wait(MIND / "autodiff_output.ir")
    doc = qdoc.doc
    assert doc.peer.format == "mind" and doc.problems == []
    # graph: one node per instruction (aliases excluded) + one per output, edges from operands
    g = window.graph.shown
    assert g is not None and g.n_nodes == 14 and g.n_edges == 16
    assert any(n.label.startswith("%3 BinOp(Add)") for n in g.nodes)
    # structure tree: every line of the file
    model = window.structure_view.model
    from PySide6.QtCore import QModelIndex
    assert [c.name for c in doc.peer.root.children] == ["header", "instructions", "outputs"]
    assert model.rowCount(QModelIndex()) == 3
    assert sum(len(c.children) for c in doc.peer.root.children) == len(doc.peer.data.splitlines())   # a span per line
    # IR text pane shows the file, raised
    ir = window.views["ir_text"]
    assert ir.mode == "peer" and ir.text.startswith("# MIND Core IR Example")
    assert "MIND Core IR (spec dialect) · 13 instructions" in window.doc_label.text()
    # NAC-only panes are covered, peer panes are not
    assert "Not available for MIND Core IR" in covered_text(window.views["disassembly"])
    assert covered_text(window.views["hex"]) is None
    # selecting a graph node selects its instruction line everywhere
    node = next(i for i, n in enumerate(g.nodes) if n.label.startswith("%3 "))
    window.select(g.nodes[node].selection())
    assert doc.selection == Selection("span", "instructions/L23 %3")
    assert g.node_for_selection(doc.selection) == node
    assert ir.current_lines() == [23]
    assert window.hex_view.area.highlights()[0][0] == doc.peer.module.instrs[3].offset


def test_mind_problems_are_listed_and_underlined(window, qtbot, tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text('%0 = Input() {name: "x"} : Tensor<f32, [2, 3]>\n'
                   '%1 = Reshape(%0, [2, 4]) : Tensor<f32, [2, 4]>\n'
                   '%2 = Relu(%9) : Tensor<f32, [2, 3]>\n'
                   'outputs: %1\n')
    qdoc = window.open_and_wait(bad)
    codes = sorted(p.code for p in qdoc.doc.problems)
    assert codes == ["E4001", "E4003"]
    assert window.problems_view.model.rowCount() == 2
    ir = window.views["ir_text"]
    starts = sorted(a for a, _b in ir.underlined())
    text = bad.read_text()
    assert starts == [text.index("%1 = Reshape"), text.index("%9")]
    assert not window.commands.get("peer.convertOpen").is_enabled()


def _convert(window, qtbot, monkeypatch, out, asked=None):
    """Debug › Convert to NAC and Open…, answering its save dialog with ``out``; the opened document."""
    from PySide6.QtWidgets import QFileDialog

    def answer(_parent, _title, suggestion, _filter):
        if asked is not None:
            asked.append(suggestion)
        return str(out), ""
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(answer))
    with qtbot.waitSignal(window.documentOpened, timeout=60000) as blocker:
        window.commands.run("peer.convertOpen")
    wait_idle(qtbot, window)
    return blocker.args[0]


def test_convert_writes_where_the_user_says_and_cancel_writes_nothing(window, qtbot, tmp_path, monkeypatch):
    """The converted program is the user's file, named in a save dialog that suggests <stem>.nac
    beside the IR (not a temporary folder left behind in /tmp that no dialog could save from)."""
    import shutil

    from PySide6.QtWidgets import QFileDialog
    src = tmp_path / "ir" / "simple_module.ir"
    src.parent.mkdir()
    shutil.copy(MIND / "simple_module.ir", src)
    window.open_and_wait(src)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a: ("", "")))
    assert window.commands.run("peer.convertOpen") is None          # the dialog cancelled
    wait_idle(qtbot, window)
    assert len(window.docs) == 1 and sorted(p.name for p in src.parent.iterdir()) == ["simple_module.ir"]
    asked = []
    out = tmp_path / "kept" / "mine.nac"
    out.parent.mkdir()
    prog = _convert(window, qtbot, monkeypatch, out, asked)
    assert asked == [str(src.with_suffix(".nac"))]
    assert prog.doc.path == str(out) and out.is_file() and len(prog.doc.nac.instructions) == 6


def test_convert_to_nac_and_open_maps_ticks_to_ir_lines(window, qtbot, tmp_path, monkeypatch):
    src = MIND / "simple_module.ir"
    window.open_and_wait(src)
    prog = _convert(window, qtbot, monkeypatch, tmp_path / "program.nac")
    assert prog.doc.nac is not None and len(prog.doc.nac.instructions) == 6
    assert covered_text(window.views["disassembly"]) is None
    ir = window.views["ir_text"]
    assert ir.mode == "source" and ir.text == src.read_text()
    # stepping the program's ticks walks the IR lines: inputs 10-12, the add at 17, the mul at 21
    lines = []
    for t in range(len(prog.doc.nac.instructions)):
        window.select(Selection("instruction", t))
        lines.append(ir.current_lines())
    assert lines == [[10], [11], [12], [17], [21], [25]]


def test_debugger_steps_on_the_converted_program_walk_the_ir_lines(window, qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import Qt
    src = MIND / "simple_module.ir"
    window.open_and_wait(src)
    prog = _convert(window, qtbot, monkeypatch, tmp_path / "program.nac")
    ir = window.views["ir_text"]
    seen = []
    for _ in range(5):
        window.activateWindow()
        table = window.disassembly_view.table
        table.setFocus()
        qtbot.keyClick(table, Qt.Key.Key_F10)      # step (inputs come from the file's input signature)
        qtbot.waitUntil(lambda: prog.doc.debug is not None and not prog.doc.debug.running, timeout=30000)
        wait_idle(qtbot, window)
        seen.append((prog.doc.debug.tick, ir.exec_line))
        assert ir.exec_line in ir.current_lines()
    assert seen == [(0, 10), (1, 11), (2, 12), (3, 17), (4, 21)]
    # the program's value at the last step equals the numpy evaluator fed the inputs the run used
    import numpy as np

    from nac_engine.peers import open_peer
    from nac_engine.peers.mind.evaluator import evaluate
    dbg = prog.doc.debug.debugger
    x = {name: np.asarray(dbg.result(t).tensor) for t, name in enumerate(("a", "b", "c"))}
    _outs, values = evaluate(open_peer(str(src)).module, x, keep_all=True)
    np.testing.assert_allclose(np.asarray(dbg.result(4).tensor), values[4], rtol=1e-6)


def test_open_dialog_filter_lists_the_peer_formats():
    from nac_studio.peer_views import file_filter
    f = file_filter()
    assert f.startswith("Supported files (*.nac ") and "MIND Core IR (*.ir *.mic *.mic2)" in f


def test_breakpoint_on_an_ir_line_stops_there(window, qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextCursor
    src = MIND / "simple_module.ir"
    window.open_and_wait(src)
    prog = _convert(window, qtbot, monkeypatch, tmp_path / "program.nac")
    ir = window.views["ir_text"]
    # a click on IR line 21 (the Mul) selects the tick it became
    block = ir.editor.document().findBlockByNumber(20)
    ir.editor.setTextCursor(QTextCursor(block))
    assert prog.selection == Selection("instruction", 4)

    def press(key):
        window.activateWindow()
        table = window.disassembly_view.table
        table.setFocus()
        qtbot.keyClick(table, key)
    press(Qt.Key.Key_F9)                                   # breakpoint on the selected tick
    s = prog.doc.debug
    assert [(b.kind, b.value) for b in s.breakpoints] == [("tick", "4")]
    press(Qt.Key.Key_F5)                                   # continue: stops at the breakpoint
    qtbot.waitUntil(lambda: s.active and not s.running, timeout=30000)
    wait_idle(qtbot, window)
    assert s.tick == 4 and ir.exec_line == 21


def test_the_ir_text_is_coloured_for_the_theme_even_as_a_hidden_tab(window, qtbot, tmp_path):
    """A theme switch recolours the IR Text pane's MIND colouring, also while the pane is a tab
    not on screen (it asked its own palette, which a hidden widget learns of later)."""
    ir = tmp_path / "net.ir"
    ir.write_bytes(b'%0 = Input() {name: "x"} : Tensor<f32, [2, 3]>\n%1 = Relu(%0) : Tensor<f32, [2, 3]>\n'
                   b'outputs: %1\n')
    window.set_theme("light")
    window.open_and_wait(ir)
    view = window.views["ir_text"]
    number = lambda: next(f.foreground().color().name() for _, f in view.highlighter._rules)   # noqa: E731
    assert number() == "#b35900"
    window.set_theme("dark")
    assert number() == "#f0a45d"
    window.set_theme("light")
