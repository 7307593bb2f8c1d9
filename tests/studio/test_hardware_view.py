"""The hardware pane: totals and per-instruction cycles equal ``nac sim --json``; Cancel within
100 ms; a hostile TOML is one line in the pane; rows, bars and the axis select ticks."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import nac_engine
from nac_studio.model.document import Selection
from tests.corpus_paths import NAC_FILES
from tests.studio.conftest import wait_idle
from tests.studio.long_stream import long_stream
from tests.cli_fork import run_cli

MODELS = ("mlp", "cnn__v1.6", "bert_tiny")


def _corpus(name):
    found = [p for p in NAC_FILES if p.parent.name == name]
    if not found:
        pytest.skip("corpus absent")
    return found[0]


def _simulate(window, qtbot, path, feeds, preset="edge-32x32", timeout=60000, qdoc=None):
    qdoc = qdoc or window.open_and_wait(path)
    qdoc.doc.simulation.set_feeds(feeds)
    view = window.views["hardware"]
    window.docks["hardware"].show()
    window.docks["hardware"].raise_()
    assert view.load_hardware(preset)
    task = view.simulate()
    assert task is not None, view.error.text()
    qtbot.waitUntil(task.done, timeout=timeout)
    assert task.error is None, task.error
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: qdoc.doc.simulation.run is not None, timeout=30000)
    return qdoc, view


def _feeds(path):
    return [np.load(f) for f in sorted(path.parent.glob("feed_*.npy"))]


@pytest.mark.parametrize("name", MODELS)
def test_totals_and_cycles_equal_nac_sim_json(window, qtbot, name):
    path = _corpus(name)
    qdoc, view = _simulate(window, qtbot, path, _feeds(path))
    res = qdoc.doc.simulation.run.result
    feeds = [a for f in sorted(path.parent.glob("feed_*.npy")) for a in ("--feed", str(f))]
    cli = run_cli(["sim", path, "--hw", "edge-32x32", *feeds, "--json"])
    assert cli.returncode == 0, cli.stderr
    ref = json.loads(cli.stdout)
    mine = res.to_json()
    for key in ("total_cycles", "dram_read_bytes", "dram_write_bytes", "peak_sram_bytes", "utilization",
                "core_cycles", "drain_cycles", "macs", "stall_cycles_by_cause", "dram_bytes_by_kind"):
        assert mine[key] == ref[key], key
    cols = ("tick", "op", "issue_cycle", "start_cycle", "end_cycle", "compute_cycles", "stall_cycles", "stall_cause")
    assert [[r[c] for c in cols] for r in mine["instructions"]] == [[r[c] for c in cols] for r in ref["instructions"]]
    # what the pane shows is that result
    assert f"{ref['total_cycles']:,} cycles" in view.status.text()
    assert f"{ref['total_cycles']:,}" in view.totals.toPlainText()
    shown = {view.table_model.value(r, 0): view.table_model.value(r, 6) for r in view.table_model.rows}
    assert shown == {r["tick"]: r["end_cycle"] - r["issue_cycle"] for r in ref["instructions"]
                     if r["kind"] != "skipped"}


@pytest.mark.timing
def test_cancel_stops_promptly(window, qtbot, tmp_path):
    # long enough that the simulation runs for seconds on a fast machine too: a warm run of 4,000
    # instructions took 0.35 s here and ended before a faster CI machine could cancel it
    path = tmp_path / "long.nac"
    nac_engine.write(long_stream(20000), str(path))
    qdoc = window.open_and_wait(path)
    qdoc.doc.simulation.set_feeds(["4x16"])
    view = window.views["hardware"]
    task = view.simulate()
    progressed = []
    task.progressed.connect(lambda f, _t: progressed.append(f))
    qtbot.waitUntil(lambda: len(progressed) > 3 or task.done(), timeout=60000)
    # a run that ended (or failed) before it could be cancelled says how, instead of a bare timeout
    assert not task.done(), (task.error, progressed)
    with qtbot.waitSignal(task.failed, timeout=2000) as blocker:
        t0 = time.perf_counter()
        view.cancel()
    elapsed = time.perf_counter() - t0
    from nac_studio.tasks import Cancelled
    assert isinstance(blocker.args[0], Cancelled)
    assert elapsed < 1.0, f"cancel took {elapsed * 1000:.0f} ms"     # of a simulation that runs for many seconds
    assert view.status.text() == "Simulation cancelled." and view.simulate_button.isEnabled()
    assert qdoc.doc.simulation.run is None


@pytest.mark.parametrize("text, needle", [
    ("[array]\nrows = -3\n", "array.rows"),
    ("[array]\nrows = 'many'\n", "array.rows"),
    ("name = 'x'\nbogus = " + "[" * 40 + "1" + "]" * 40 + "\n", "nested"),
    ("[array\nrows = 3\n", "toml"),
])
def test_a_hostile_toml_is_one_line_in_the_pane(qapp, qtbot, tmp_path, text, needle):
    from nac_studio.views.hardware import HardwareView
    view = HardwareView(None)
    qtbot.addWidget(view)
    view.show()
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    assert not view.load_hardware(str(bad))
    shown = view.error.text()
    assert view.error.isVisible() and "\n" not in shown and "Traceback" not in shown
    assert needle.lower() in shown.lower(), shown
    assert view.hardware == "edge-32x32"                  # the previous configuration stays
    assert view.load_hardware("server-128x128") and not view.error.isVisible()
    assert view.fields["array.rows"].value() == 128


def test_form_overrides_rows_and_axis_select_ticks(window, qtbot):
    path = _corpus("mlp")
    qdoc = window.open_and_wait(path)
    qdoc.doc.simulation.set_feeds([np.load(path.parent / "feed_0.npy")])
    view = window.views["hardware"]
    view.load_hardware("edge-32x32")
    view.fields["array.rows"].setValue(8)
    view.fields["sram.bytes"].setValue(64)
    assert view.overrides() == {"array.rows": 8, "sram.bytes": 65536}
    task = view.simulate()
    qtbot.waitUntil(task.done, timeout=60000)
    assert task.error is None, task.error
    qtbot.waitUntil(lambda: qdoc.doc.simulation.run is not None, timeout=30000)
    run = qdoc.doc.simulation.run
    assert run.overrides == {"array.rows": 8, "sram.bytes": 65536} and "array.rows=8" in run.label
    from nac_engine.sim import simulate
    ref = simulate(str(path), "edge-32x32", feeds=[np.load(path.parent / "feed_0.npy")],
                   overrides={"array.rows": 8, "sram.bytes": 65536})
    assert run.result.total_cycles == ref.total_cycles
    # a row of the table selects its tick; so does a click on the lanes, in either axis mode
    view.table.sortByColumn(6, view.table.horizontalHeader().sortIndicatorOrder().DescendingOrder)
    idx = view.table.model().index(0, 0)          # the slowest first: the model sorts itself
    view._row_clicked(idx)
    slowest = max((r for r in run.result.instructions if r.kind != "skipped"),
                  key=lambda r: (r.end_cycle - r.issue_cycle, -r.tick))
    assert qdoc.doc.tick == slowest.tick
    view.set_x_mode("ticks")
    view._clicked(3.5, "units", 0.5)
    assert qdoc.doc.selection == Selection("instruction", 3)
    assert view.plot.cursors["units"].value() == pytest.approx(3.5)
    view.set_x_mode("cycles")
    r7 = run.result.instructions[7]
    view._clicked((r7.issue_cycle + r7.end_cycle) / 2, "units", 0.5)
    assert qdoc.doc.tick == 7
    # a second run on another preset can be compared
    view.load_hardware("server-128x128")
    task = view.simulate()
    assert task is not None, view.error.text()
    qtbot.waitUntil(task.done, timeout=60000)
    assert task.error is None, task.error
    qtbot.waitUntil(lambda: len(qdoc.doc.simulation.runs) == 2, timeout=30000)
    # its compute roof (16,384 MAC/cycle) and the ridge are on the roofline plot, not above it
    import math
    roof, bw = view.roofs(qdoc.doc.simulation.run)
    view.tabs.setCurrentWidget(view.roof_host)             # drawn when its tab is shown
    (x0, x1), (y0, y1) = view.roof.viewRange()
    assert y1 >= math.log10(roof) and x1 >= math.log10(roof / bw) and y0 < y1
    st = qdoc.doc.simulation
    st.set_current(st.current, 0)
    from PySide6.QtCore import Qt
    from nac_studio.views.hardware import COLUMNS
    m = view.table_model
    assert m.columnCount() == len(COLUMNS) + 1
    assert m.headerData(len(COLUMNS), Qt.Orientation.Horizontal) == "Δ cycles"
    first = st.runs[0].result.instructions
    for r in m.rows[:10]:
        assert m.value(r, len(COLUMNS)) == (r.end_cycle - r.issue_cycle) - (first[r.tick].end_cycle
                                                                             - first[r.tick].issue_cycle)
    assert "Compared with" in view.totals.toPlainText()
    # ... and its lanes are drawn under this run's, on the same cycle axis (issue 22 §1.11)
    ticks = view.plot.plots["units"].lane_names
    assert ticks[:6] == ["systolic", "vector", "sfu", "mover", "core", "stalls"]
    assert ticks[6:] == ["vs systolic", "vs vector", "vs sfu", "vs mover", "vs core", "vs stalls"]
    busy_b = [r for r in first if r.kind != "skipped" and r.end_cycle > r.start_cycle]
    assert len(view.items["units_b"]) == len(busy_b) > 0 and view.items["divider"].isVisible()
    assert st.runs[0].label in view.plot.plots["units"].titleLabel.text
    st.set_current(st.current, None)                 # comparing nothing: the extra lanes go
    ticks = view.plot.plots["units"].lane_names
    assert len(ticks) == 6 and len(view.items["units_b"]) == 0 and not view.items["divider"].isVisible()


def test_exports(window, qtbot, tmp_path):
    path = _corpus("mlp")
    qdoc, view = _simulate(window, qtbot, path, _feeds(path))
    for what, name in (("trace", "t.json"), ("csv", "t.csv"), ("lanes", "l.png"), ("lanes", "l.svg"),
                       ("roofline", "r.png")):
        view.tabs.setCurrentIndex(2)
        view.export(what, str(tmp_path / name))
        assert (tmp_path / name).stat().st_size > 0, name
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["otherData"]["total_cycles"] == qdoc.doc.simulation.run.result.total_cycles
    assert (tmp_path / "t.csv").read_text().splitlines()[0].startswith("tick,op")
    assert (tmp_path / "l.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (tmp_path / "l.svg").read_bytes()[:400]


def test_an_export_that_cannot_be_written_is_said_not_raised(window, qtbot, tmp_path, monkeypatch):
    """Export CSV / Chrome trace (hardware) and the inspector's .npy to a folder that does not
    exist: each says so in the window; none escapes as an exception (the timeline's export:
    test_timeline)."""
    from PySide6.QtWidgets import QFileDialog, QMessageBox

    from nac_studio.views.tensor_inspector import InspectorPanel
    path = _corpus("mlp")
    qdoc, view = _simulate(window, qtbot, path, _feeds(path))
    target = tmp_path / "gone" / "out"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), "")))
    warned = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: warned.append(a[2])))
    said = []
    window.statusBar().messageChanged.connect(said.append)
    errors = []
    monkeypatch.setattr("sys.excepthook", lambda *exc: errors.append(exc))
    for cmd in ("sim.exportCsv", "sim.exportTrace"):
        window.commands.run(cmd)
        qtbot.waitUntil(lambda: any("Could not write" in m for m in said), timeout=5000)
        said.clear()
        window.statusBar().clearMessage()
    from nac_engine.runtime.debugger import TickResult
    from nac_studio.debug_session import Subject
    from nac_studio.views.tensor_inspector import Loaded
    panel = InspectorPanel(Subject("result", 1))
    qtbot.addWidget(panel)
    arr = np.ones((2, 3), np.float32)
    panel.show_loaded(Loaded("t", arr, TickResult(1, "t", arr), None))
    panel.export_dialog()
    assert warned and "Could not write" in warned[-1]
    assert not errors, errors


def test_lane_names_thin_out_in_a_short_plot(qtbot):
    """Twelve lane names in a plot with room for six would be drawn over each other: every k-th
    is shown; with room for all, all are."""
    from nac_studio.widgets.lanes_plot import LanesPlot
    plot = LanesPlot()
    qtbot.addWidget(plot)
    units = plot.add_plot("units", lanes=[f"lane {i}" for i in range(12)])
    plot.resize(400, 90)
    plot.show()

    def shown():
        return [t for _v, t in units.getAxis("left")._tickLevels[0]]
    qtbot.waitUntil(lambda: 0 < len(shown()) < 12, timeout=3000)
    assert shown()[0] == "lane 0"
    plot.resize(400, 600)
    qtbot.waitUntil(lambda: len(shown()) == 12, timeout=3000)


def test_hardware_and_timeline_lanes_mark_the_execution_point(window, qtbot):
    """Stopped at a tick, both lane panes draw the execution point (a dashed line), the hardware
    pane at that instruction's cycles; selecting another tick moves only the selection cursor,
    stepping moves the execution line, and Stop takes it away."""
    from PySide6.QtCore import Qt
    from tests.studio.test_debugger_gui import MLP_FEED, fill_inputs_with_npy, press, wait_stopped
    from tests.studio.test_timeline import _show
    path = _corpus("mlp")
    qdoc, timeline = _show(window, qtbot, path, [np.load(MLP_FEED)])
    qdoc, view = _simulate(window, qtbot, path, [np.load(MLP_FEED)], qdoc=qdoc)
    window.debug.attach(qdoc)
    window.disassembly_view.select_tick(9)
    press(qtbot, window, Qt.Key.Key_F10, Qt.KeyboardModifier.ControlModifier)      # run to cursor
    fill_inputs_with_npy(qtbot, window, MLP_FEED)
    wait_stopped(qtbot, window)
    assert qdoc.doc.debug.tick == 9 == qdoc.doc.execution_tick
    recs = qdoc.doc.simulation.run.result.instructions

    def exec_x(plot) -> set:
        return {round(line.value(), 3) for line in plot.exec_lines.values() if line.isVisible()}
    assert exec_x(view.plot) == {round((recs[9].issue_cycle + recs[9].end_cycle) / 2, 3)}
    assert exec_x(timeline.plot) == {9.5}
    window.disassembly_view.select_tick(2)                 # the selection cursor moves, execution stays
    assert view.plot.cursors["units"].value() == pytest.approx((recs[2].issue_cycle + recs[2].end_cycle) / 2)
    assert exec_x(view.plot) == {round((recs[9].issue_cycle + recs[9].end_cycle) / 2, 3)}
    window.commands.run("debug.stepOver")
    wait_stopped(qtbot, window)
    assert exec_x(view.plot) == {round((recs[10].issue_cycle + recs[10].end_cycle) / 2, 3)}
    view.set_x_mode("ticks")                               # on the tick axis it is the tick's middle
    assert exec_x(view.plot) == {10.5}
    press(qtbot, window, Qt.Key.Key_F5, Qt.KeyboardModifier.ShiftModifier)         # Stop
    qtbot.waitUntil(lambda: not qdoc.doc.debug.active, timeout=10000)
    assert exec_x(view.plot) == set() and exec_x(timeline.plot) == set()


def test_cycle_axis_labels_are_compact_counts(window, qtbot):
    """The lanes' x axis reads 10M, 20M (or 2.5k, 5.0k) where pyqtgraph would print 1e+07."""
    from nac_studio.widgets.lanes_plot import count_labels
    assert count_labels([0, 1e7, 2e7, 3e7], 1e7) == ["0", "10M", "20M", "30M"]
    assert count_labels([0, 5e5, 1e6], 5e5) == ["0", "0.5M", "1.0M"]
    assert count_labels([0, 2500, 5000], 2500) == ["0", "2.5k", "5.0k"]
    assert count_labels([0, 100, 200], 100) == ["0", "100", "200"]
    assert count_labels([2.5, 3.0], 0.5) == ["2.5", "3.0"]
    qdoc, view = _simulate(window, qtbot, _corpus("bert_tiny"), _feeds(_corpus("bert_tiny")))
    plot = list(view.plot.plots.values())[-1]                 # the plot that shows the x values
    axis = plot.getAxis("bottom")
    lo, hi = plot.viewRange()[0]
    labels = [text for _spacing, ticks in axis.tickValues(lo, hi, 600)
              for text in axis.tickStrings(ticks, axis.scale, _spacing)]
    assert hi > 10_000 and labels and all(t == "0" or t.endswith(("k", "M")) for t in labels), (hi, labels)


def test_unit_lanes_are_named_and_the_sram_plot_readable_at_1024x700(window, qtbot):
    """A short dock: the six unit lanes keep room for their names, the DMA engines' names thin
    out, and the SRAM plot below keeps a readable height (room for every DMA lane name as well
    squeezed it to a few pixels on a server preset's engines)."""
    window.resize(1024, 700)
    window.apply_default_layout()
    path = _corpus("mlp")
    qdoc, view = _simulate(window, qtbot, path, _feeds(path), preset="server-128x128")
    qtbot.wait(100)
    units, sram = view.plot.plots["units"], view.plot.plots["sram"]

    def named(plot):
        return [t for _v, t in plot.getAxis("left")._tickLevels[0]]
    assert named(units) == ["systolic", "vector", "sfu", "mover", "core", "stalls"]
    assert sram.getViewBox().height() >= 40


def test_the_sram_axis_reads_in_the_kib_the_sram_is_set_in(window, qtbot):
    """The SRAM size is set in KiB: its axis ticks in the binary unit of the capacity (pyqtgraph's
    decimal prefix drew a 512 KiB capacity line at "524 kB")."""
    path = _corpus("mlp")
    qdoc, view = _simulate(window, qtbot, path, _feeds(path))
    res = qdoc.doc.simulation.run.result
    axis = view.plot.plots["sram"].getAxis("left")
    top = max(res.sram_capacity, res.peak_sram_bytes)
    unit = {1: "B", 1 << 10: "KiB", 1 << 20: "MiB", 1 << 30: "GiB"}[round(1 / axis.scale)]
    assert axis.labelText == f"SRAM ({unit})" and not axis.autoSIPrefix
    assert 1 <= top * axis.scale < 1024             # the capacity reads as 1..1023 of that unit
    assert res.sram_capacity % 1024 == 0 and float(axis.tickStrings([res.sram_capacity], axis.scale, 1)[0]) \
        == res.sram_capacity * axis.scale
