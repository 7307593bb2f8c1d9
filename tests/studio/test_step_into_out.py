"""Step Into / Step Out / Reverse Continue in the Studio: the same service actions `nac dap`
serves editors (nac_engine.dap.service), through the real main window and its shortcuts."""
from __future__ import annotations

from PySide6.QtCore import Qt

from nac_engine.cli import main
from tests.dap.fixture_models import NESTED
from tests.studio.test_debugger_gui import press, wait_stopped


def test_f11_steps_into_modules_shift_f11_out_and_reverse_continue_goes_back(window, qtbot, tmp_path):
    (tmp_path / "model.py").write_text(NESTED)
    path = tmp_path / "model.nac"
    assert main(["compile", str(tmp_path / "model.py"), "-o", str(path)]) == 0
    qdoc = window.open_and_wait(path)
    nac = qdoc.doc.nac
    names = [nac.instruction_name(i) for i in nac.instructions]
    body_linear = names.index("aten.linear.default")
    press(qtbot, window, Qt.Key.Key_F11)                  # starts (the file records its inputs) and steps in
    wait_stopped(qtbot, window)
    s = qdoc.doc.debug
    assert s.tick == body_linear                          # the first tick of `body`, past its parameter loads
    assert "step into" in s.describe()
    press(qtbot, window, Qt.Key.Key_F11, Qt.KeyboardModifier.ShiftModifier)      # Shift+F11: out of `body`
    wait_stopped(qtbot, window)
    assert s.tick == names.index("aten.relu.default")
    press(qtbot, window, Qt.Key.Key_F11)                  # into head.proj's linear (two levels down)
    wait_stopped(qtbot, window)
    assert names[s.tick] == "aten.linear.default" and s.tick > body_linear
    window.disassembly_view.select_tick(body_linear)
    window.commands.run("debug.toggleBreakpoint")
    window.commands.run("debug.reverseContinue")
    wait_stopped(qtbot, window)
    assert s.tick == body_linear
    assert window.views["variables"] is not None
