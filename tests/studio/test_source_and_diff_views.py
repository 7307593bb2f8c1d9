"""The Source pane (tick -> the user's code) and the Diff pane (where two files' values part), through the
real main window: selection, the debugger's execution point, and the First Divergence command."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractSlider

from nac_engine.cli import main
from nac_engine.format import read
from nac_engine.format.source_map import read_source_map
from nac_engine.diff import diff_files
from nac_studio.model.document import Selection
from tests.corpus_paths import CORPUS
from tests.studio.conftest import wait_idle

FACTORY = '''
import torch


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, h):
        return torch.softmax(self.proj(h) * 2.0, -1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.head = Head()

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.head(h)


def make_model():
    torch.manual_seed(0)
    return Net(), (torch.randn(3, 6),)
'''


@pytest.fixture
def compiled(tmp_path) -> Path:
    (tmp_path / "model.py").write_text(FACTORY)
    assert main(["compile", str(tmp_path / "model.py"), "-o", str(tmp_path / "f.nac")]) == 0
    assert main(["compile", str(tmp_path / "model.py"), "-o", str(tmp_path / "q.nac"), "--quant", "int8_tensor"]) == 0
    return tmp_path


def _tick_of(path: Path, op: str) -> int:
    nac = read(str(path))
    return next(i.index for i in nac.instructions if op in nac.instruction_name(i))


def test_source_pane_shows_and_highlights_the_line_of_the_selected_tick(window, qtbot, compiled):
    window.open_and_wait(compiled / "f.nac")
    view = window.views["source"]
    tick = _tick_of(compiled / "f.nac", "softmax")
    entry = read_source_map(read(str(compiled / "f.nac"))).entry(tick)
    window.active.select(Selection("instruction", tick))
    qtbot.waitUntil(lambda: view.shown_entry == entry, timeout=3000)
    assert "head" in view.header.text() and "softmax" in view.header.text()
    assert Path(view.shown_path) == compiled / "model.py"
    assert view.editor.toPlainText() == FACTORY
    assert view.highlighted_line() == entry.line
    assert "torch.softmax" in FACTORY.splitlines()[entry.line - 1]
    # the calls that led there (source map version 2): the model's forward, at its `self.head(h)` line
    call_line = FACTORY.splitlines().index("        return self.head(h)") + 1
    assert f"called from Net.forward :{call_line}" in view.header.text()
    # a parameter has no line of its own: its module, and the line of its first reader (an empty
    # pane before); the return instruction: the line of the value it returns
    nac = read(str(compiled / "f.nac"))
    param = next(i.index for i in nac.instructions if nac.instruction_name(i) == "param")
    reader = nac.users(param)[0]
    window.active.select(Selection("instruction", param))
    qtbot.waitUntil(lambda: view.shown_entry is not None and view.shown_entry.tick == param, timeout=3000)
    body_line = FACTORY.splitlines().index("        h = torch.relu(self.body(x))") + 1
    assert view.highlighted_line() == body_line and "body" in view.header.text()
    assert f"no line of its own; first read by tick {reader}" in view.header.text()
    ret = len(nac.instructions) - 1
    window.active.select(Selection("instruction", ret))
    qtbot.waitUntil(lambda: "returns the value of" in view.header.text(), timeout=3000)
    assert view.highlighted_line() == entry.line          # the softmax's line: what the model returns


def test_source_pane_falls_back_to_the_recorded_line(window, qtbot, compiled):
    (compiled / "model.py").unlink()                 # the user's file is gone: the recorded text remains
    window.open_and_wait(compiled / "f.nac")
    view = window.views["source"]
    tick = _tick_of(compiled / "f.nac", "softmax")
    window.active.select(Selection("instruction", tick))
    qtbot.waitUntil(lambda: view.shown_entry is not None and view.shown_entry.tick == tick, timeout=3000)
    assert view.shown_path is None and "not found" in view.header.text()
    assert view.editor.toPlainText().strip() == "return torch.softmax(self.proj(h) * 2.0, -1)"
    assert view.highlighted_line() == 1


def test_source_pane_finds_the_line_in_a_file_edited_since_the_compile(window, qtbot, compiled):
    """The user edits model.py after compiling (or a library is another release than the compile's):
    the recorded line is found where it is now and said to have moved; a line whose text changed is
    not highlighted, and the header says so with the text recorded at compile time."""
    edited = "# a comment the user added\n\n\n" + FACTORY
    (compiled / "model.py").write_text(edited)
    window.open_and_wait(compiled / "f.nac")
    view = window.views["source"]
    tick = _tick_of(compiled / "f.nac", "softmax")
    entry = read_source_map(read(str(compiled / "f.nac"))).entry(tick)
    window.active.select(Selection("instruction", tick))
    qtbot.waitUntil(lambda: view.shown_entry == entry, timeout=3000)
    assert view.highlighted_line() == entry.line + 3
    assert "torch.softmax" in edited.splitlines()[view.highlighted_line() - 1]
    assert f"model.py:{entry.line + 3} (line {entry.line} at compile time; the file has changed since)" \
        in view.header.text()
    call_line = edited.splitlines().index("        return self.head(h)") + 1      # the callers' lines too
    assert f"called from Net.forward :{call_line}" in view.header.text()
    # the line itself rewritten while the Studio is open: the file is read again, nothing is
    # highlighted, the recorded text is named
    (compiled / "model.py").write_text(FACTORY.replace("torch.softmax(self.proj(h) * 2.0, -1)",
                                                       "torch.softmax(self.proj(h) * 3.0, -1)"))
    window.active.select(Selection("instruction", 0))
    qtbot.waitUntil(lambda: view.shown_entry is not None and view.shown_entry.tick == 0, timeout=3000)
    window.active.select(Selection("instruction", tick))
    qtbot.waitUntil(lambda: view.shown_entry == entry and "changed since the compile" in view.header.text(),
                    timeout=3000)
    assert view.highlighted_line() is None
    assert "return torch.softmax(self.proj(h) * 2.0, -1)" in view.header.text()
    assert view.editor.textCursor().blockNumber() + 1 == entry.line      # scrolled there all the same


def test_source_pane_centres_the_line_when_it_is_raised_and_resized(window, qtbot, compiled):
    """The tick is chosen while the pane is a hidden tab; raising it and giving it room (as the user
    does) shows the line in the middle, with the code above it, until the user scrolls away."""
    padded = "#\n" * 150 + FACTORY + "#\n" * 150
    (compiled / "model.py").write_text(padded)
    window.open_and_wait(compiled / "f.nac")
    view, dock = window.views["source"], window.docks["source"]
    tick = _tick_of(compiled / "f.nac", "softmax")
    window.active.select(Selection("instruction", tick))
    qtbot.waitUntil(lambda: view.shown_entry is not None and view.shown_entry.tick == tick, timeout=3000)
    dock.show()
    dock.raise_()
    for height in (120, int(window.height() * 0.5)):
        window.resizeDocks([dock], [height], Qt.Orientation.Vertical)
        qtbot.wait(100)

    def centred() -> bool:
        rect, h = view.editor.cursorRect(), view.editor.viewport().height()
        return h > 100 and 0.25 * h < rect.center().y() < 0.75 * h
    qtbot.waitUntil(centred, timeout=3000)
    assert "torch.softmax" in padded.splitlines()[view.highlighted_line() - 1]
    # scrolled away by the user: a resize leaves the view where the user put it
    view.editor.verticalScrollBar().triggerAction(QAbstractSlider.SliderAction.SliderToMinimum)
    window.resizeDocks([dock], [int(window.height() * 0.4)], Qt.Orientation.Vertical)
    qtbot.wait(100)
    assert view.editor.verticalScrollBar().value() == 0


def test_source_pane_follows_the_execution_point(window, qtbot, compiled):
    window.open_and_wait(compiled / "f.nac")
    view = window.views["source"]
    relu = _tick_of(compiled / "f.nac", "relu")
    window.active.select(Selection("instruction", 0))
    doc = window.active.doc
    for _ in range(relu + 1):                        # F10 until the execution point is at relu
        window.commands.run("debug.stepOver")
        qtbot.waitUntil(lambda: doc.debug is not None and not doc.debug.running and doc.debug.tick is not None,
                        timeout=20000)
    qtbot.waitUntil(lambda: doc.debug.tick == relu, timeout=20000)
    qtbot.waitUntil(lambda: view.shown_entry is not None and view.shown_entry.tick == relu, timeout=3000)
    assert doc.tick == 0 and "execution point" in view.header.text()
    assert "torch.relu" in FACTORY.splitlines()[view.highlighted_line() - 1]


@pytest.mark.skipif(not (CORPUS / "nac" / "mlp").is_dir(), reason="../shared/corpus is absent")
def test_source_pane_without_a_source_map(window, qtbot):
    window.open_and_wait(CORPUS / "nac" / "mlp" / "mlp.nac")
    view = window.views["source"]
    window.active.select(Selection("instruction", 3))
    qtbot.waitUntil(lambda: "no source map" in view.header.text(), timeout=3000)


def test_diff_pane_table_plot_and_first_divergence_command(window, qtbot, compiled):
    window.open_and_wait(compiled / "f.nac")
    view = window.views["diff"]
    assert not window.commands.get("debug.firstDivergence").is_enabled()
    task = view.run(str(compiled / "q.nac"))
    assert task is not None
    qtbot.waitUntil(lambda: view.result is not None, timeout=60000)
    wait_idle(qtbot, window)
    expected = diff_files(compiled / "f.nac", compiled / "q.nac", tolerance=1e-3)
    assert [(p.tick_a, p.tick_b, p.max_abs) for p in view.rows()] == \
        [(p.tick_a, p.tick_b, p.max_abs) for p in expected.pairs + expected.outputs]
    assert view.table.rowCount() == len(view.rows())
    xs, ys = view.curves["max_abs"].getData()
    assert list(xs) == [p.tick_a for p in expected.pairs]
    # clicking a row selects its tick
    view.table.cellClicked.emit(1, 0)
    assert window.active.doc.tick == expected.pairs[1].tick_a
    # the command selects the first divergence
    window.commands.refresh()
    assert window.commands.get("debug.firstDivergence").is_enabled()
    window.commands.run("debug.firstDivergence")
    assert window.active.doc.tick == expected.first_divergence.tick_a
    assert "First divergence at tick" in view.status.text()


def test_diff_pane_against_eager_and_a_bad_tolerance(window, qtbot, compiled):
    window.open_and_wait(compiled / "f.nac")
    view = window.views["diff"]
    view.tolerance.setText("-1")
    assert view.run(str(compiled / "q.nac")) is None and "tolerance" in view.status.text()
    view.tolerance.setText("1e-4")
    view.run(f"{compiled / 'model.py'}:make_model")
    qtbot.waitUntil(lambda: view.result is not None, timeout=60000)
    assert view.result.method == "source-map" and not view.result.diverged
    assert "No divergence" in view.status.text()
