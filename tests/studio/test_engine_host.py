"""The engine host beside the window: the window outlives it. ``kill -9`` during a Continue, a
segfault inside a kernel, and an allocation past the host's memory cap leave the Studio running
with the document open; the status bar and Problems say what happened; Restart Engine (or the
next F5) brings a fresh host with the same breakpoints, watches and inputs. Requests are
cancelled and superseded; the Studio's own process never imports torch for a debug run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

from nac_studio.debug_session import ERROR, FINISHED
from tests.studio.test_debugger_gui import press, wait_stopped
from tests.studio.test_debugger_runs import RepeatedMatmul, compiled


@pytest.fixture
def hooks(monkeypatch):
    """The host's test hooks (set before the window's host starts)."""
    monkeypatch.setenv("NAC_HOST_TEST_HOOKS", "1")


@pytest.fixture
def long_model(tmp_path):
    return compiled(tmp_path, RepeatedMatmul(n=60, d=64), (torch.randn(1, 64),), "long")


def _reference(path, feeds):
    from nac_engine.runtime.session import Session
    return Session(str(path), feeds=feeds).run()


def _engine_problems(qdoc) -> list[str]:
    return [p.reason for p in qdoc.doc.problems if getattr(p, "kind", "") == "engine"]


def _continue_until_running(qtbot, window, s, past: int) -> None:
    """F5 with every instruction slowed (a hook), until the host reports a tick past ``past``."""
    s.extra_arguments = {"tickDelay": 0.02}
    press(qtbot, window, Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: s.running and s.debugger is not None and s.progress()[0] > past, timeout=20000)


def _restart_and_finish(qtbot, window, qdoc, path) -> None:
    s = qdoc.doc.debug
    s.extra_arguments = {}
    window.commands.get("debug.restartEngine").run()
    assert _engine_problems(qdoc) == []
    for spec in list(s.breakpoints):
        s.remove_breakpoint(spec.id)
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == FINISHED
    for a, b in zip(s.outputs(), _reference(path, s.feeds())):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_kill_9_during_a_continue_leaves_the_window_and_restart_brings_it_back(window, qtbot, hooks, long_model):
    qdoc = window.open_and_wait(long_model)
    s = qdoc.doc.debug
    s.add_breakpoint("tick", "3")
    s.add_watch("max(abs(x))")
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.tick == 3
    pid = window.host.pid
    _continue_until_running(qtbot, window, s, past=10)
    os.kill(pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: s.state == ERROR and not s.active, timeout=20000)
    assert "engine stopped: killed by signal 9" in s.error and " at tick " in s.error
    assert any("killed by signal 9" in r for r in _engine_problems(qdoc))
    assert "killed by signal 9" in window.statusBar().currentMessage()
    assert window.docs == [qdoc] and window.isVisible()
    assert s.watches == ["max(abs(x))"] and [b.value for b in s.breakpoints] == ["3"]   # nothing the user made is lost
    _restart_and_finish(qtbot, window, qdoc, long_model)
    assert window.host.pid != pid


def test_a_segfault_inside_a_kernel_is_a_message_not_a_lost_window(window, qtbot, hooks, long_model):
    qdoc = window.open_and_wait(long_model)
    s = qdoc.doc.debug
    s.extra_arguments = {"crashAtTick": 20}       # the host dies inside the run, as a bad kernel would
    press(qtbot, window, Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: s.state == ERROR and not s.active, timeout=30000)
    assert "killed by signal 11 (SIGSEGV)" in s.error and "at tick 2" in s.error
    assert window.docs == [qdoc] and qdoc.nac.instructions      # still open, still decoded
    press(qtbot, window, Qt.Key.Key_F10)                         # the next action starts a fresh host
    wait_stopped(qtbot, window)
    assert s.tick == 0 and _engine_problems(qdoc)
    _restart_and_finish(qtbot, window, qdoc, long_model)


class Broadcast(torch.nn.Module):
    """A kernel whose result is far bigger than its input: 24000 x 24000 float32 (2.3 GB)."""

    def forward(self, x):
        return x.expand(24000, 24000) * 2.0


def test_an_allocation_past_the_memory_cap_fails_the_run_and_the_host_stays(window, qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("NAC_HOST_MEMORY_CAP", "1500M")
    path = compiled(tmp_path, Broadcast(), (torch.randn(1, 24000),), "broadcast")
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window, timeout=60000)
    assert s.state == ERROR and ("allocate" in s.error.lower() or "memory" in s.error.lower()), s.error
    pid = window.host.pid
    assert window.host.alive, "the cap made the allocation fail, not the host"
    press(qtbot, window, Qt.Key.Key_F10, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert window.host.pid == pid and window.docs == [qdoc]


def test_statistics_are_superseded_and_cancelled(window, qtbot, hooks, demo_path):
    window.open_and_wait(demo_path)
    host = window.host
    first = host.request("nac/testHook", {"how": "sleep", "seconds": 5}, supersede="k")
    failed = []
    first.failed.connect(failed.append)
    qtbot.waitUntil(lambda: host.alive, timeout=5000)
    second = host.request("nac/testHook", {"how": "sleep", "seconds": 0.05}, supersede="k")
    done = []
    second.finished.connect(done.append)
    qtbot.waitUntil(lambda: bool(failed and done), timeout=10000)
    assert type(failed[0]).__name__ == "Cancelled" and "superseded" in str(failed[0])
    third = host.request("nac/testHook", {"how": "sleep", "seconds": 5})
    third.failed.connect(failed.append)
    qtbot.wait(100)
    third.cancel()
    qtbot.waitUntil(lambda: len(failed) == 2, timeout=5000)
    assert type(failed[1]).__name__ == "Cancelled"


def test_a_failing_progress_receiver_does_not_end_the_hosts_reader(window, qtbot, hooks, demo_path, capfd):
    """A superseded layout's progress went to a task whose Qt object was already deleted; the
    RuntimeError ended the thread that reads the host's answers, and every later request (the
    next layout, F5) waited for ever. A receiver's error is printed; the answers keep coming."""
    window.open_and_wait(demo_path)
    conn = window.host.connection
    req = conn.request("nac/testHook", {"how": "sleep", "seconds": 0.3})

    def deleted(_frac, _text):
        raise RuntimeError("Signal source has been deleted")
    req.on_progress = deleted
    assert req.future.result(timeout=20) == {"slept": True}
    after = conn.request("nac/testHook", {"how": "sleep", "seconds": 0.05})
    assert after.future.result(timeout=20) == {"slept": True}
    assert "Signal source has been deleted" in capfd.readouterr().err


def test_progress_of_a_deleted_task_is_dropped(qtbot):
    from shiboken6 import delete
    from nac_studio.tasks import Task, TaskContext
    task = Task("superseded")
    ctx = TaskContext(task)
    delete(task)
    ctx.progress(0.5)                     # no RuntimeError: nobody shows it any more


def test_the_studio_process_runs_a_model_without_importing_torch(tmp_path):
    """A fresh process: open the demo BERT, run it to the end, read a result and a weight's
    statistics through the debug session and the host; torch was never imported here."""
    from tests.resources_path import DEMO
    DEMO = DEMO.parent / "demo_bert_tiny.nac"
    code = f"""
import sys
from nac_engine.format.reader import read
from nac_studio.debug_session import DebugSession
nac = read({str(DEMO)!r})
s = DebugSession(nac)
s.add_watch("max(abs(x))")
s.run_now("continue_")
assert s.state == "finished", s.describe()
r = s.result(s.tick - 1)
stats = s.connection.call("nac/statistics", {{"path": {str(DEMO)!r}, "param": next(iter(nac.params))}})
assert stats["count"] > 0 and r.tensor is not None
s.close()
print("torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_the_window_never_imports_torch_while_running_simulating_and_showing_every_pane(tmp_path):
    """The acceptance check of the engine host: a fresh process with the real main window opens a
    GPT-2-shaped model (built with the codec, weights included), runs it to the end, steps back,
    inspects, computes statistics, simulates, shows the timeline, sweeps and shows every pane; torch
    is imported by the engine host only."""
    from nac_engine import write
    from nac_engine.sim.topology import transformer_program
    from nac_engine.format.input_signature import InputSpec, set_input_signature
    nac, inputs = transformer_program(layers=2, d_model=32, heads=2, seq=8, vocab=50, with_data=True)
    set_input_signature(nac, [InputSpec(name, tuple(spec.shape), spec.dtype, "input",
                                        0 if spec.dtype == "int64" else None, 7 if spec.dtype == "int64" else None)
                              for name, spec in inputs.items()])
    path = tmp_path / "gpt2_like.nac"
    path.write_bytes(write(nac))
    script = os.path.join(os.path.dirname(__file__), "no_torch_session.py")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(__file__)))] + sys.path)}
    out = subprocess.run([sys.executable, script, str(path)], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "torch imported: False sweep: True" in out.stdout, out.stdout + out.stderr[-2000:]


def test_the_host_removes_its_shared_memory_directory_when_the_studio_goes_away():
    """A Studio that ends without shutting its host down (a crash, a test process ending) closes the
    host's stdin; the host then exits and takes its /dev/shm directory with it."""
    import time

    from nac_studio.host.connection import HostConnection
    conn = HostConnection()
    assert conn.call("nac/statistics", {"path": str(__import__("tests.resources_path", fromlist=["DEMO"]).DEMO),
                                        "param": 1}, timeout=60)["count"] > 0
    directory, proc = conn.array_dir, conn.proc
    assert os.path.isdir(directory)
    proc.stdin.close()                                   # the Studio is gone: no disconnect, no shutdown
    proc.wait(30)
    deadline = time.monotonic() + 10
    while os.path.isdir(directory) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.isdir(directory)
    conn._closing = True                                 # what the window's shutdown would have marked


def test_the_engine_stopped_message_names_the_signal_and_for_sigbus_the_likely_cause():
    """A run reads aligned weights over the file's mapping (issue 25 §2b): a file truncated by
    another program mid-run ends the host with SIGBUS, and the message says what to do."""
    import signal
    from nac_studio.host.connection import describe_exit
    assert describe_exit(-signal.SIGKILL) == "engine stopped: killed by signal 9 (SIGKILL)"
    bus = describe_exit(-signal.SIGBUS)
    assert "SIGBUS" in bus and "truncated on disk" in bus


def test_an_answer_to_a_task_deleted_with_its_window_is_no_error(qapp, caplog):
    """The host answers (or reports progress) on its reader thread after the window that asked went
    away: nobody waits, and nothing is logged as an error."""
    import logging

    import shiboken6

    from nac_studio.host.client import HostTask
    from nac_studio.host.connection import Request
    request = Request(connection=None, seq=1, command="nac/stats")
    task = HostTask(request, "statistics")
    shiboken6.delete(task)                      # its C++ side gone, as when the window closed
    with caplog.at_level(logging.ERROR):
        request.on_progress(0.5, "")
        request.future.set_result({"ok": True})
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
