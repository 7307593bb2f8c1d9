"""The Inputs dialog's Typed values: an input given as its values (token ids for a file without a
tokenizer, a handful of numbers to reproduce a case), shaped as the file records it."""
from __future__ import annotations

from PySide6.QtCore import Qt

from tests.studio.test_debugger_gui import press, wait_stopped
from tests.studio.test_line_breakpoints import _compiled


def test_the_inputs_dialog_takes_typed_values(window, qtbot, tmp_path):
    """Inputs › Typed values: the values themselves, shaped as the file records them."""
    import numpy as np
    path = _compiled(tmp_path)
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    window.commands.run("debug.inputs")
    dlg = window.debug.inputs_dialog
    qtbot.waitUntil(lambda: dlg is not None and dlg.isVisible(), timeout=5000)
    row = dlg.rows[0]
    row.mode.setCurrentIndex(row.mode.findData("values"))
    assert row.values.isVisible() and not row.path.isVisible()
    row.values.setText("[1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6]")        # flat: takes the recorded 2x6
    dlg.accept()
    press(qtbot, window, Qt.Key.Key_F10)
    wait_stopped(qtbot, window)
    x = s.result(0).tensor
    np.testing.assert_array_equal(x, np.array([[1, 2, 3, 4, 5, 6], [-1, -2, -3, -4, -5, -6]], np.float32))
    assert s.to_json()["inputs"]["0"]["values"].startswith("[1, 2, 3")          # kept with the file


def test_the_inputs_rows_stay_at_the_top_of_a_tall_dialog(window, qtbot, tmp_path):
    path = _compiled(tmp_path)
    window.open_and_wait(path)
    window.commands.run("debug.inputs")
    dlg = window.debug.inputs_dialog
    qtbot.waitUntil(lambda: dlg is not None and dlg.isVisible(), timeout=5000)
    dlg.resize(700, 600)
    qtbot.wait(50)
    row = dlg.rows[0].mode
    assert row.mapTo(dlg, row.rect().topLeft()).y() < 120, "the one row sits under its header, not mid-dialog"
    dlg.reject()
