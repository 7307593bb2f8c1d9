"""Hit conditions in the Studio: the Breakpoints pane's "Hit condition" cell says which hits in a
run stop (``==2``: the second only; ``%2``: every second; ``>=2``: from the second on), as VS
Code's "Hit Count" does; hits count from each run's start; a condition that does not parse is
refused in its row; it is kept with the file."""
from __future__ import annotations

import torch
from PySide6.QtCore import Qt

from nac_studio.views.breakpoints import COL_HIT, COL_HITS
from tests.studio.test_debugger_gui import press, wait_stopped
from tests.studio.test_debugger_runs import compiled


class ThreeLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 6)
        self.b = torch.nn.Linear(6, 5)
        self.c = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def test_a_hit_condition_picks_which_hits_stop(window, qtbot, tmp_path):
    path = compiled(tmp_path, ThreeLinears(), (torch.randn(2, 4),), "three")
    qdoc = window.open_and_wait(path)
    s = qdoc.doc.debug
    linears = [i.index for i in qdoc.nac.instructions if qdoc.nac.instruction_name(i) == "aten.linear.default"]
    assert len(linears) == 3
    view = window.views["breakpoints"]
    view.kind.setCurrentText("op")
    view.value.setText("aten.linear*")
    view.add_from_editor()
    cell = view.table.item(0, COL_HIT)
    assert cell.flags() & Qt.ItemFlag.ItemIsEditable and "every 5th" in cell.toolTip()
    cell.setText("==2")                                          # as an edit in place
    bp = s.breakpoints[0]
    assert bp.hit_condition == "==2" and bp.error == "" and "(hit ==2)" in bp.label
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "stopped" and s.tick == linears[1], s.describe()
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "finished", s.describe()                   # the third hit is not the second
    assert view.table.item(0, COL_HITS).text() == "3"
    # Restart (Ctrl+Shift+F5) runs again from the start to the first breakpoint, as an IDE's does,
    # and the new run counts from its start: the second hit stops again
    press(qtbot, window, Qt.Key.Key_F5, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    wait_stopped(qtbot, window)
    assert s.state == "stopped" and s.tick == linears[1], s.describe()
    assert view.table.item(0, COL_HITS).text() == "2"
    # edited during the run: every hit from the 3rd on (this run has had 2)
    view.table.item(0, COL_HIT).setText(">=3")
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "stopped" and s.tick == linears[2], s.describe()
    # one that does not parse is said in its row, and the breakpoint does not fire
    view.table.item(0, COL_HIT).setText("third")
    qtbot.waitUntil(lambda: "hit condition 'third'" in bp.error, timeout=5000)    # the host's verdict
    qtbot.waitUntil(lambda: "hit condition" in view.table.item(0, view.table.columnCount() - 1).text(), timeout=5000)
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert s.state == "finished", s.describe()
    # kept with the file
    saved = s.to_json()["breakpoints"][0]
    assert saved["hitCondition"] == "third"
    other = type(s)(s.nac)
    other.load_json({"breakpoints": [{**saved, "hitCondition": "%2"}]})
    assert other.breakpoints[0].hit_condition == "%2" and other.breakpoints[0].error == ""
