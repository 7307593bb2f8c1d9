"""A model with its own torch.library operator: it compiles (the op stays an op of the file);
running it says which code to load; with that code loaded — `nac run --import`, `nac dap`'s
launch ``imports``, the Studio's Debug › Load Operator Code… (kept per file) — it runs and
equals eager. The code is imported once per process (torch refuses a second registration)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.studio.test_debugger_gui import press, wait_stopped

OPS = '''import torch

@torch.library.custom_op("nactest::scale_shift", mutates_args=())
def scale_shift(x: torch.Tensor, s: float) -> torch.Tensor:
    return x * s + 1.0

@scale_shift.register_fake
def _(x, s):
    return torch.empty_like(x)
'''
MODEL = '''import torch
import ops   # registers nactest::scale_shift


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.ops.nactest.scale_shift(self.fc(x), 0.5)


def make_model():
    torch.manual_seed(0)
    return M(), (torch.randn(2, 4),)
'''


# every test here runs `nac compile`/`nac run` processes or a fresh engine host that imports the
# operator code (7-17 s apiece): the heavy tier, which .ci/run runs
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("custom_op")
    (d / "ops.py").write_text(OPS)
    (d / "model.py").write_text(MODEL)
    r = subprocess.run([sys.executable, "-m", "nac_engine.cli", "compile", str(d / "model.py"), "-o", str(d / "m.nac")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "nac: note: the model calls custom operator(s) nactest::scale_shift" in r.stderr
    return d


def _cli(*argv) -> subprocess.CompletedProcess:
    # a process of its own: this one may have the op registered by an earlier test
    return subprocess.run([sys.executable, "-m", "nac_engine.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=300)


def test_nac_run_says_what_to_load_and_runs_with_it(model_dir, tmp_path):
    r = _cli("run", model_dir / "m.nac")
    assert r.returncode == 2 and "no kernel for op 'nactest.scale_shift.default': a custom operator" in r.stderr
    assert "--import FILE.py on the command line" in r.stderr
    r = _cli("run", model_dir / "m.nac", "--import", model_dir / "ops.py", "--import", model_dir / "ops.py",
             "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    code = ("import sys, json, torch, numpy as np; sys.path.insert(0, sys.argv[1]); import model;"
            "from nac_engine.format.input_signature import signature_inputs; import nac_engine;"
            "x = signature_inputs(nac_engine.read(sys.argv[1] + '/m.nac'))['x'];"
            "m, _ = model.make_model(); print(json.dumps(m(torch.from_numpy(x)).detach().numpy().tolist()))")
    eager = subprocess.run([sys.executable, "-c", code, str(model_dir)], capture_output=True, text=True, timeout=300)
    np.testing.assert_allclose(np.load(tmp_path / "output_0.npy"), np.array(eval(eager.stdout)), rtol=1e-6)   # noqa: S307 (our own JSON)
    r = _cli("run", model_dir / "m.nac", "--import", model_dir / "nosuch.py")
    assert r.returncode == 2 and "--import" in r.stderr and "no such file" in r.stderr


def test_the_studio_loads_the_operator_code_kept_with_the_file(window, qtbot, model_dir):
    qdoc = window.open_and_wait(model_dir / "m.nac")
    s = qdoc.doc.debug
    window.commands.run("debug.restartEngine")          # a host that has never imported the op
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window, timeout=60000)
    assert s.state == "error" and "Load Operator Code" in s.error, s.error
    window.debug.load_operator_code(str(model_dir / "ops.py"))      # as the command's file dialog gives it
    assert s.imports == [str(model_dir / "ops.py")] and s.to_json()["imports"] == s.imports
    qtbot.waitUntil(lambda: "ops.py imported" in window.statusBar().currentMessage(), timeout=30000)
    # imported at once: a simulation (shapes need the op) works before any run
    view = window.views["hardware"]
    window.docks["hardware"].show()
    window.docks["hardware"].raise_()
    assert view.load_hardware("edge-32x32")
    task = view.simulate()
    qtbot.waitUntil(task.done, timeout=60000)
    assert task.error is None, task.error
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window, timeout=60000)
    assert s.state == "finished", s.describe()
    # the kept file has gone since: the run cannot start, and the window says why (not "no run")
    window.commands.run("debug.stop")
    s.imports.append(str(model_dir / "moved_away.py"))
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window, timeout=60000)
    assert s.state == "error" and s.error_tick is None
    assert s.describe().startswith("Error: the run could not start: ") and "moved_away.py: no such file" in s.error


def _simulate(qtbot, window):
    view = window.views["hardware"]
    window.docks["hardware"].show()
    window.docks["hardware"].raise_()
    assert view.load_hardware("edge-32x32")
    task = view.simulate()
    qtbot.waitUntil(task.done, timeout=60000)
    return task.error


def test_a_fresh_engine_host_gets_the_operator_code_back(window, qtbot, model_dir):
    """After the host dies and Restart Engine, and when the file is reopened in a fresh host,
    a simulation (which needs the op's shapes) works before any run."""
    ops = str(model_dir / "ops.py")
    qdoc = window.open_and_wait(model_dir / "m.nac")
    window.debug.load_operator_code(ops)
    qtbot.waitUntil(lambda: "ops.py imported" in window.statusBar().currentMessage(), timeout=30000)
    os.kill(window.host.pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: "engine stopped" in window.statusBar().currentMessage(), timeout=30000)
    window.commands.run("debug.restartEngine")
    assert _simulate(qtbot, window) is None
    # reopened with what was kept for the file, in a host that has never seen the code
    window.close_document(qdoc)
    window.host.connection.operator_code.clear()
    window.commands.run("debug.restartEngine")
    qdoc = window.open_and_wait(model_dir / "m.nac")
    assert qdoc.doc.debug.imports == [ops]
    assert _simulate(qtbot, window) is None
