"""Measured time beside simulated cycles (issue 22 §1.12): Simulate ▸ Profile on This CPU times
every instruction in the engine host; the hardware pane's Profile tab lists the slowest
instructions and ops with the simulated cycles beside them, its Instructions table and the
disassembly get a measured column, and the graph overlay can colour nodes by measured time."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from nac_studio.views.disassembly import COL_CYCLES, COL_TIME
from tests.resources_path import DEMO
from tests.studio.conftest import wait_idle

CNN = DEMO.with_name("demo_cnn.nac")


def _short(op: str) -> str:
    """How the Profile tab names an op: aten.addmm.default -> addmm, param -> param."""
    parts = op.split(".")
    return parts[-2] if len(parts) >= 3 else op


def test_profile_beside_the_simulation(window, qtbot):
    qdoc = window.open_and_wait(CNN)
    view = window.views["hardware"]
    assert view.load_hardware("edge-32x32")
    task = view.simulate()
    qtbot.waitUntil(task.done, timeout=60000)
    st = qdoc.doc.simulation
    qtbot.waitUntil(lambda: st.run is not None, timeout=30000)
    dis = window.disassembly_view
    assert dis.table.isColumnHidden(COL_TIME) and not dis.table.isColumnHidden(COL_CYCLES)   # simulated only
    window.commands.run("sim.profile")
    qtbot.waitUntil(lambda: st.profile is not None, timeout=60000)
    wait_idle(qtbot, window)
    prof = st.profile
    n = len(qdoc.nac.instructions)
    assert prof.seconds.shape == (n,) and np.all(prof.seconds[~np.isnan(prof.seconds)] > 0)
    assert int(np.isnan(prof.seconds).sum()) == 0          # a branch-free file: every tick ran
    # the Profile tab: the slowest instruction first, with its simulated cycles
    slow_tick, slow_s = prof.slowest(1)[0]
    text = view.profile_view.toPlainText()
    cycles = {r.tick: r.end_cycle - r.issue_cycle for r in st.run.result.instructions}
    assert view.tabs.currentWidget() is view.profile_view
    cells = [c.strip() for c in text.split("Slowest instructions")[1].split("Slowest ops")[0].split("\n") if c.strip()]
    first = cells.index("module") + 1            # the header's last cell; then the slowest row
    from nac_engine.format.source_map import module_paths
    assert cells[first:first + 7] == [f"t{slow_tick}", _short(prof.ops[slow_tick]), f"{slow_s * 1e6:,.1f}",
                                      cells[first + 3], f"{cycles[slow_tick]:,}", cells[first + 5],
                                      module_paths(qdoc.nac)[slow_tick]]        # the module that ran it
    assert "Slowest ops" in text and _short(prof.by_op()[0][0]) in text
    # the Instructions table's measured column
    m = view.table_model
    assert m.headerData(m.columnCount() - 1, Qt.Orientation.Horizontal) == "measured µs"
    row = next(r for r in m.rows if r.tick == slow_tick)
    assert abs(m.value(row, m.columnCount() - 1) - slow_s * 1e6) < 1e-6
    # the disassembly: measured time beside the simulated cycles
    assert not dis.table.isColumnHidden(COL_TIME)
    row = dis.model.row_of_tick(slow_tick)
    assert dis.model.data(dis.model.index(row, COL_TIME)) == f"{slow_s * 1e6:,.1f} µs"
    assert dis.model.data(dis.model.index(row, COL_CYCLES)) == f"{cycles[slow_tick]:,}"
    # a click on the tick in the list selects the instruction
    from PySide6.QtCore import QUrl
    view.profile_view.anchorClicked.emit(QUrl(f"tick:{slow_tick}"))
    assert qdoc.selection.kind == "instruction" and qdoc.selection.key == slow_tick
    # the graph overlay by measured time: the slowest op is the darkest (1.0)
    window.commands.run("sim.overlay.measured_time")
    values = st.overlay_values()
    assert values[slow_tick] == 1.0 and all(0 < v <= 1 for v in values.values())
