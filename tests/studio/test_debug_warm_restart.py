"""A file's runs after the first start warm, through the Studio: Stop keeps the interpreter
session in the engine host (weights loaded, calls prepared) for the next F5, closing the file
frees it (the service's own tests: tests/dap/test_service.py); the engine's ActionThread lets go
of a finished action's debugger at once."""
from __future__ import annotations

import gc
import time
import weakref

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

import nac_engine
from nac_engine.compiler.external import write_compiled
from nac_engine.format.reader import read
from nac_engine.isa.optable import OP_INPUT
from nac_engine.runtime.debugger import ActionThread, Debugger
from nac_engine.runtime.session import Session
from nac_studio.debug_marks import EXECUTED_STYLE
from nac_studio.debug_session import FINISHED, DebugSession
from tests.studio.test_debugger_gui import press, wait_stopped


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture
def model_path(tmp_path):
    torch.manual_seed(0)
    nac = nac_engine.compile(TwoLayers().eval(), (torch.randn(2, 8),))
    path = tmp_path / "two_layers.nac"
    write_compiled(nac, str(path))
    return path


@pytest.fixture
def weight_reads(monkeypatch):
    """How many parameters the interpreter reads out of the file (Session._param_tensor)."""
    count = {"n": 0}
    original = Session._param_tensor

    def counted(self, p):
        count["n"] += 1
        return original(self, p)
    monkeypatch.setattr(Session, "_param_tensor", counted)
    return count


def wait_for(condition, timeout: float = 2.0) -> bool:
    """Whether ``condition()`` holds within ``timeout`` (far below the worker's 5 s idle time)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def n_params(nac) -> int:
    return len({ins.c[1] for ins in nac.instructions if ins.a == OP_INPUT and ins.b == 1})


def reference(nac, feeds):
    return Session(nac, feeds=feeds).run()


def test_a_session_ended_while_its_action_runs_keeps_the_weights_and_runs_again(tmp_path):
    """Ending during a Continue pauses it in the host and then ends it there (the host's debug
    requests run one at a time), so the weights are kept and the next run is right."""
    from tests.studio.test_debugger_runs import RepeatedMatmul, compiled
    torch.manual_seed(0)
    path = compiled(tmp_path, RepeatedMatmul(n=150, d=256), (torch.randn(1, 256),), "long")
    nac = read(str(path), strict=False)
    s = DebugSession(nac)
    future = s.begin("continue_")
    s.end()                     # e.g. the file closes during a Continue
    future.exception(timeout=60)     # the paused action ends within an instruction
    assert s.weights_kept
    s.run_now("continue_")
    assert s.state == FINISHED and s.debugger.weights_read == 0
    for a, b in zip(s.outputs(), reference(nac, s.feeds())):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    s.close()
    nac.close()


def test_the_worker_lets_go_of_a_finished_action_at_once(model_path):
    nac = read(str(model_path), strict=False)
    actions = ActionThread()
    d = Debugger(nac, feeds=DebugSession(nac).feeds(), actions=actions)
    d.run_in_thread("continue_").result(timeout=60)
    gone = weakref.ref(d)
    del d
    deadline = time.monotonic() + 2.0       # far below the worker's idle time (5 s)
    while gone() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert gone() is None, "the idle worker thread still holds the finished action's debugger"
    assert actions.submit(lambda: 42).result(timeout=10) == 42       # and it still serves new work
    nac.close()


def test_studio_stop_then_f5_reads_no_weight_and_matches_the_first_run(window, qtbot, model_path, monkeypatch):
    from nac_studio import debug_commands
    monkeypatch.setattr(debug_commands, "WHOLE_LAYER_CHANGES", 0)     # a small file takes the Continue path too
    qdoc = window.open_and_wait(model_path)
    s = qdoc.doc.debug
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == FINISHED
    first = [a.copy() for a in s.debugger.outputs]
    press(qtbot, window, Qt.Key.Key_F5, Qt.KeyboardModifier.ShiftModifier)          # Stop
    qtbot.waitUntil(lambda: not s.active, timeout=10000)
    assert s.weights_kept
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == FINISHED and s.debugger.weights_read == 0     # the host's count for this run
    assert all(np.array_equal(a, b) for a, b in zip(first, s.debugger.outputs))
    # the graph took the whole executed range in one replacement of its layer
    graph, canvas = window.graph_view.shown, window.graph_view.canvas
    if graph is not None:
        styles = canvas.overlay_styles()
        executed = {int(graph.node_of_tick[t]) for t in range(s.tick) if graph.node_of_tick[t] >= 0}
        assert executed and all(EXECUTED_STYLE in styles.get(n, []) for n in executed)
    # Restart (Ctrl+Shift+F5) on the running session reads nothing either, and step back is exact
    press(qtbot, window, Qt.Key.Key_F5, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    wait_stopped(qtbot, window)
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    end = s.tick
    press(qtbot, window, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)          # Step Back
    wait_stopped(qtbot, window)
    assert s.tick == end - 1 and s.debugger.weights_read == 0
    window.close_document(qdoc)
    assert not s.weights_kept, "closing the file frees the weights the debugger kept"
