"""Debugger runs in the Studio: a freshly compiled file runs under F5 with no input dialog and a
NaN breakpoint stops at the instruction that makes the NaN; a kernel exception stops at its tick
(row, Problems) and the app carries on; Stop during a long Continue returns within 100 ms; the
reference compiler's files ask for inputs."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

import nac_engine
from nac_engine.compiler.external import write_compiled
from nac_studio.debug_session import InputChoice
from tests.studio.test_debugger_gui import MLP, fill_inputs_with_npy, needs_corpus, press, wait_stopped


class LogOfNegative(torch.nn.Module):
    """NaN at a known instruction: log of (2x - 10) for x in [0, 1)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x).relu() * 0 + x * 2
        return torch.log(h - 10).sum(-1)


class RepeatedMatmul(torch.nn.Module):
    """Many heavy instructions sharing one weight: a Continue that takes seconds."""

    def __init__(self, n: int = 200, d: int = 768):
        super().__init__()
        self.n = n
        self.w = torch.nn.Parameter(torch.randn(d, d) / d ** 0.5)

    def forward(self, x):
        for _ in range(self.n):
            x = torch.tanh(x @ self.w)
        return x


def compiled(tmp_path, model, example, name):
    torch.manual_seed(0)
    nac = nac_engine.compile(model.eval(), example)
    path = tmp_path / f"{name}.nac"
    write_compiled(nac, str(path))
    return path


def test_fresh_compile_runs_under_f5_and_nan_breakpoint_stops_at_log(window, qtbot, tmp_path):
    torch.manual_seed(0)
    path = compiled(tmp_path, LogOfNegative(), (torch.rand(2, 4),), "nan")
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    assert not s.needs_inputs(), "the compiler records the input signature"
    log_ticks = [i.index for i in qdoc.nac.instructions if "log" in qdoc.nac.instruction_name(i)]
    assert len(log_ticks) == 1
    bp_view = window.views["breakpoints"]
    bp_view.kind.setCurrentText("nan")
    bp_view.add_from_editor()                      # through the pane, as a user would
    assert [b.kind for b in s.breakpoints] == ["nan"]
    press(qtbot, window, Qt.Key.Key_F5)
    assert window.debug.inputs_dialog is None      # no dialog: the file says what it needs
    wait_stopped(qtbot, window)
    assert s.reason.kind == "breakpoint" and s.tick == log_ticks[0]
    assert s.result().nan_count > 0
    assert np.isfinite(s.result(log_ticks[0] - 1).tensor).all()   # the instruction before is clean
    assert f"tick {log_ticks[0]}" in window.debug.label.text()
    press(qtbot, window, Qt.Key.Key_F5)            # the sum after the log is NaN too: stops there
    wait_stopped(qtbot, window)
    assert s.tick > log_ticks[0] and s.reason.kind in ("breakpoint", "end")


def test_kernel_exception_stops_at_its_tick_and_the_app_lives_on(window, qtbot, tmp_path):
    needs_corpus()
    bad = tmp_path / "bad.npy"
    np.save(bad, np.ones((2, 5), np.float32))     # the MLP's first Linear wants 8 features
    qdoc = window.open_and_wait(MLP)
    press(qtbot, window, Qt.Key.Key_F5)
    fill_inputs_with_npy(qtbot, window, bad)
    wait_stopped(qtbot, window)
    s = qdoc.doc.debug
    linear = next(i.index for i in qdoc.nac.instructions if "linear" in qdoc.nac.instruction_name(i)
                  or "addmm" in qdoc.nac.instruction_name(i) or "matmul" in qdoc.nac.instruction_name(i))
    assert s.state == "error" and s.error_tick == linear
    model = window.disassembly_view.model
    assert model.error_tick == linear
    tip = model.data(model.index(model.row_of_tick(linear), 0), Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith("The run stopped here") and "cannot be multiplied" in tip
    found = qdoc.doc.problems_from("debug")
    assert len(found) == 1 and f"tick {linear}" in found[0].reason
    assert found[0].selection.key == linear
    assert "Error at tick" in window.debug.label.text()
    # the app carries on: new inputs and a clean run
    s.set_choices({0: InputChoice(mode="npy", path=str(MLP.parent / "feed_0.npy"))})
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "finished" and not qdoc.doc.problems_from("debug")


def test_stop_during_continue_returns_within_100ms(window, qtbot, tmp_path):
    torch.manual_seed(0)
    path = compiled(tmp_path, RepeatedMatmul(), (torch.randn(768, 768),), "long")
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    window.commands.run("debug.continue")
    assert s.running
    qtbot.waitUntil(lambda: s.progress()[0] > 30, timeout=20000)      # well into the run
    qtbot.wait(200)        # repaints the start of the run caused (docks raised) are done
    assert s.running, "the run should still be going (make the model longer if this fails)"
    done = []
    window.debug.actionDone.connect(lambda _q: done.append(time.perf_counter()))
    t0 = time.perf_counter()
    window.commands.run("debug.stop")
    qtbot.waitUntil(lambda: bool(done), timeout=5000)
    # control is back when the UI thread has taken the stopped run (state, status bar, views
    # told); repaints that follow are the views' own cost
    took = done[0] - t0
    assert not s.running and took < 0.1, f"Stop took {took * 1000:.0f} ms"
    qtbot.waitUntil(lambda: not s.active, timeout=2000)               # Stop ends the session
    # Pause (F6) keeps the session at the tick it reached
    window.commands.run("debug.continue")
    qtbot.waitUntil(lambda: s.progress()[0] > 20, timeout=20000)
    window.commands.run("debug.pause")
    qtbot.waitUntil(lambda: not s.running, timeout=5000)
    assert s.active and s.reason.kind == "cancelled" and 0 < s.tick < len(qdoc.nac.instructions) - 1
    # closing the file while a Continue runs stops the run first; the app carries on
    paused_at = s.tick
    window.commands.run("debug.continue")
    qtbot.waitUntil(lambda: s.progress()[0] > paused_at + 5, timeout=20000)
    window.close_document(qdoc)
    assert not s.active and window.docs == []
    qtbot.wait(300)                   # the worker's late completion finds the session ended
    assert window.active is None


def test_reference_compiler_file_asks_for_inputs(window, qtbot):
    needs_corpus()
    qdoc = window.open_and_wait(MLP)
    assert qdoc.doc.debug.needs_inputs()
    window.commands.run("debug.continue")
    dlg = window.debug.inputs_dialog
    assert dlg is not None and [r.slot.name for r in dlg.rows] == ["x"]
    row = dlg.rows[0]
    row.mode.setCurrentIndex(row.mode.findData("random"))
    row.shape.setText("")                           # no shape and no signature: the dialog refuses
    dlg.accept()
    assert dlg.isVisible() and "shape" in dlg.error.text()
    row.shape.setText("2x8")
    dlg.accept()
    wait_stopped(qtbot, window)
    assert qdoc.doc.debug.state == "finished"


def test_inputs_dialog_tokenises_text_for_a_file_with_a_tokenizer(window, qtbot):
    bert = Path(__file__).resolve().parents[2] / "nac_studio" / "demos" / "demo_bert_tiny.nac"
    if not bert.is_file():
        pytest.skip("demo BERT missing")
    qdoc = window.open_and_wait(bert)
    s = qdoc.doc.debug
    tok = s.tokenizer
    assert tok is not None, "the demo BERT embeds its tokenizer"
    window.commands.run("debug.inputs")
    dlg = window.debug.inputs_dialog
    row = next(r for r in dlg.rows if r.slot.name == "input_ids")
    i = row.mode.findData("text")
    assert i >= 0, "text mode is offered when the file embeds a tokenizer"
    row.mode.setCurrentIndex(i)
    row.text.setText("hello world")
    ids = tok.encode("hello world").ids
    assert row.ids.text().startswith(f"{len(ids)} ids: [{', '.join(map(str, ids))}")
    mask = next(r for r in dlg.rows if r.slot.name == "attention_mask")
    mask.mode.setCurrentIndex(mask.mode.findData("ones"))
    dlg.accept()
    assert not dlg.isVisible()
    feeds = s.feeds()
    fed = feeds[[sl.name for sl in s.slots].index("input_ids")]
    length = row.slot.shape[1]                    # compiled for a fixed length: padded with [PAD]
    assert fed.shape == (1, length)
    np.testing.assert_array_equal(fed[0, :len(ids)], ids)
    assert (fed[0, len(ids):] == tok.token_to_id("[PAD]")).all()
    window.commands.run("debug.continue")
    wait_stopped(qtbot, window)
    assert s.state == "finished", s.error
