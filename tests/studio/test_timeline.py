"""The MMAP timeline pane: the checker's live bytes, selection sync both ways, lint markers,
planners against the compiler's report, Save As with Schedule through nac lint, keys, LOD."""
from __future__ import annotations


import numpy as np
import pytest

import nac_engine
from nac_studio.model.document import Selection
from nac_studio.model.memory_timeline import LANES, build_timeline
from nac_studio.model.simulation_state import timeline_from_sizes
from tests.corpus_paths import NAC_FILES
from tests.studio.conftest import wait_idle
from tests.studio.long_stream import long_stream, synthetic_sizes
from tests.cli_fork import run_cli


def _feeds(path):
    return [np.load(f) for f in sorted(path.parent.glob("feed_*.npy"))]


@pytest.mark.skipif(not NAC_FILES, reason="corpus absent")
@pytest.mark.parametrize("path", NAC_FILES, ids=lambda p: p.parent.name)
def test_live_bytes_equal_the_checkers_for_every_corpus_file(path):
    from nac_engine.runtime.mmap_check import trace_memory
    nac = nac_engine.read(str(path))
    feeds = _feeds(path)
    trace = trace_memory(nac, feeds=feeds)
    from nac_engine.compiler.replan import value_nbytes          # what the engine host computes
    sizes, tl = timeline_from_sizes(nac, {str(k): v for k, v in value_nbytes(nac, feeds=feeds).items()})
    assert tl.live_bytes.tolist() == trace.live_bytes.tolist()
    assert (tl.peak, tl.peak_tick) == (trace.peak, trace.peak_tick)
    # every buffer of the trace is one bar with the same lifetime
    bars = {int(v): (int(a), int(e), int(b)) for v, a, e, b in
            zip(tl.buffers.value, tl.buffers.alloc, tl.buffers.end, tl.buffers.nbytes)}
    assert bars == {v: t for v, t in trace.buffers.items() if t[2] > 0 and t[1] > t[0]}
    # no two bars overlap on a row
    for r in range(tl.buffers.rows):
        on = np.nonzero(tl.buffers.row == r)[0]
        order = on[np.argsort(tl.buffers.alloc[on])]
        assert np.all(tl.buffers.alloc[order][1:] >= tl.buffers.end[order][:-1])
    nac.close()


def _show(window, qtbot, path, feeds=None):
    qdoc = window.open_and_wait(path)
    if feeds is not None:
        qdoc.doc.simulation.set_feeds(feeds)
    view = window.views["timeline"]
    window.docks["timeline"].show()
    window.docks["timeline"].raise_()
    view.ensure_computed()
    qtbot.waitUntil(lambda: qdoc.doc.simulation.timeline is not None or bool(qdoc.doc.simulation.timeline_error),
                    timeout=60000)
    wait_idle(qtbot, window)
    assert not qdoc.doc.simulation.timeline_error, qdoc.doc.simulation.timeline_error
    return qdoc, view


@pytest.fixture
def mlp_path():
    found = [p for p in NAC_FILES if p.parent.name == "mlp"]
    if not found:
        pytest.skip("corpus absent")
    return found[0]


def test_tick_selection_syncs_both_ways(window, qtbot, mlp_path):
    qdoc, view = _show(window, qtbot, mlp_path, _feeds(mlp_path))
    tl = qdoc.doc.simulation.timeline
    assert view.plot is not None and len(view.items["buffers"]) == len(tl.buffers)
    # a click in the timeline selects the tick everywhere
    view._clicked(5.4, "buffers", 0.5)
    assert qdoc.doc.selection == Selection("instruction", 5) and qdoc.doc.tick == 5
    hex_sel = window.hex_view.selection_range() if hasattr(window.hex_view, "selection_range") else None
    span = qdoc.doc.span_of(Selection("instruction", 5))
    if hex_sel is not None:
        assert hex_sel[0] == span.offset
    assert window.disassembly_view.qdoc is qdoc
    # another view selects: the timeline's cursor follows
    qdoc.select(Selection("instruction", 8), window.disassembly_view)
    assert view.plot.cursors["lanes"].value() == pytest.approx(8.5)
    assert view.plot.cursors["live"].isVisible()
    # a click outside the program selects nothing
    view._clicked(-3, "lanes", 0.5)
    assert qdoc.doc.tick == 8


def test_a_schedule_violation_is_marked_on_its_tick(window, qtbot, mlp_path, tmp_path):
    from nac_engine.format.mmap_lint import check_schedule
    from nac_engine.format.model import MmapCommand, MmapRecord
    nac = nac_engine.read(str(mlp_path))
    from nac_engine.format import layout as L
    frees = [(r.tick, c.target) for r in nac.mmap for c in r.commands if c.action == L.MMAP_FREE]
    tick, target = frees[0]
    users = nac.def_use().users(target)
    # FREE the value right after it is made, before its readers: use_after_free at the reader
    records = [MmapRecord(r.tick, [c for c in r.commands if not (c.action == L.MMAP_FREE and c.target == target)])
               for r in nac.mmap]
    records = [r for r in records if r.commands]
    records.append(MmapRecord(target + 1, [MmapCommand(L.MMAP_FREE, target)]))
    records.sort(key=lambda r: r.tick)
    bad = tmp_path / "bad.nac"
    from nac_engine.compiler.replan import save_with_schedule
    save_with_schedule(nac, _merge(records), bad)
    report = check_schedule(nac_engine.read(str(bad)))
    assert report.violations, "the edit should make a violation"
    v_ticks = {f.tick for f in report.violations}
    qdoc, view = _show(window, qtbot, bad, _feeds(mlp_path))
    qtbot.waitUntil(lambda: bool(qdoc.doc.problems_from("mmap")), timeout=20000)
    marks = view.markers()
    assert {m.tick for m in marks if m.severity == "error"} == v_ticks
    lint = view.items["lint"]
    red = {int(x) for x, c in zip(lint.x0, lint.color) if c == 0}
    assert red == v_ticks
    assert "violation" in view.status.text()
    k = lint.index_at(min(v_ticks) + 0.5, 0.5)
    assert k is not None and lint.tooltip(k).startswith("violation")
    assert users and min(users) > target


def _merge(records):
    from nac_engine.format.model import MmapRecord
    out = {}
    for r in records:
        out.setdefault(r.tick, []).extend(r.commands)
    return [MmapRecord(t, c) for t, c in sorted(out.items())]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    import torch
    from torch import nn

    from nac_engine.compiler.pipeline import compile_model

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.ln = nn.Linear(16, 48), nn.Linear(48, 16), nn.LayerNorm(16)

        def forward(self, x):
            h = torch.relu(self.a(x))
            y = self.ln(self.b(h) + x)
            return torch.softmax(y @ y.transpose(-1, -2), -1) @ y
    torch.manual_seed(0)
    res = compile_model(Block(), (torch.randn(6, 16),), mmap="reference")
    path = tmp_path_factory.mktemp("tl") / "block.nac"
    nac_engine.write(res.nac, str(path))
    return path, res.report


def test_planner_peaks_equal_the_compiler_report_and_save_as_lints_clean(window, qtbot, compiled, tmp_path,
                                                                         monkeypatch):
    path, report = compiled
    import nac_engine.compiler.replan as replan_module
    # the save is the engine host's (encoding a file with its weights is hundreds of MB of
    # copying): the window's own copy of the encoder must not be what runs
    monkeypatch.setattr(replan_module, "save_with_schedule", lambda *a, **k: pytest.fail("saved in the window"))
    qdoc, view = _show(window, qtbot, path)          # the compiler recorded the input signature
    view.lookahead.setValue(2)
    view.planners_box.setChecked(True)
    qtbot.waitUntil(lambda: bool(qdoc.doc.simulation.planners), timeout=20000)
    curves = {c.label: c for c in qdoc.doc.simulation.planners}
    assert set(curves) >= {"file", "reference", "reference-lookback", "min-peak"}
    for mode in ("min-peak", "reference"):
        assert curves[mode].peak == report.mmap[mode]["peak"]
    assert curves["file"].peak == report.mmap["reference"]["peak"]        # compiled with reference
    assert len(view.items["planner_curves"]) == len(curves)
    out = tmp_path / "minpeak.nac"
    task = view.save_with_schedule("min-peak", str(out))
    qtbot.waitUntil(task.done, timeout=60000)      # (a signal waited for after the start can be missed)
    result = task.result()
    assert out.stat().st_size == result["size"] and result["violations"] == 0 and result["hazards"] == 0
    qtbot.waitUntil(lambda: "with the min-peak schedule" in window.statusBar().currentMessage(), timeout=5000)
    assert "lint 0 violation(s), 0 hazard(s)" in window.statusBar().currentMessage()
    r = run_cli(["lint", out, "--hazards"])
    assert r.returncode == 0, r.stdout + r.stderr
    saved, original = nac_engine.read(str(out)), nac_engine.read(str(path))
    assert [i.a for i in saved.instructions] == [i.a for i in original.instructions]
    assert saved.mmap != original.mmap


def test_keys_and_range_summary(window, qtbot, mlp_path):
    from PySide6.QtCore import Qt
    qdoc, view = _show(window, qtbot, mlp_path, _feeds(mlp_path))
    plot = view.plot
    lo, hi = plot.x_range()
    qtbot.keyClick(plot, Qt.Key.Key_W)
    lo2, hi2 = plot.x_range()
    assert hi2 - lo2 < hi - lo
    qtbot.keyClick(plot, Qt.Key.Key_D)
    lo3, hi3 = plot.x_range()
    assert lo3 > lo2 and hi3 - lo3 == pytest.approx(hi2 - lo2)
    qtbot.keyClick(plot, Qt.Key.Key_S)
    assert plot.x_range()[1] - plot.x_range()[0] > hi3 - lo3
    plot._drag(2.2, 6.7, True)
    s = qdoc.doc.simulation.timeline.summary(2, 6)
    assert "t2..t6 (5 ticks)" in view.summary.text()
    tl = qdoc.doc.simulation.timeline
    assert s.peak == int(tl.live_bytes[2:7].max())
    expected = sum(int(((tl.lanes[k][0] >= 2) & (tl.lanes[k][0] <= 6)).sum()) for k in LANES)
    assert sum(s.commands.values()) == expected


def test_batched_drawing_and_level_of_detail(qapp, qtbot):
    """One item per lane; zoomed out on 20k ticks the buffer item paints far fewer cells than bars."""
    from nac_studio.model.document import Document
    from nac_studio.qt_document import QtDocument
    from nac_studio.views.timeline import TimelineView
    nac = long_stream(20000, params_every=10)
    qdoc = QtDocument(Document(nac, "long.nac"))
    view = TimelineView(None)
    qtbot.addWidget(view)
    view.resize(1200, 500)
    view.show()
    view.set_document(qdoc)
    if view.task is not None:
        view.task.cancel()
    tl = build_timeline(nac, synthetic_sizes(nac))
    qdoc.doc.simulation.set_timeline(synthetic_sizes(nac), tl)
    qtbot.waitUntil(lambda: view.plot is not None)
    view.plot.grab()                                   # paint once
    item = view.items["buffers"]
    assert len(item) == len(tl.buffers) > 15000
    assert 0 < item.drawn < len(tl.buffers) / 4
    items = view.plot.plots["lanes"].listDataItems() + view.plot.plots["lanes"].items
    assert sum(1 for x in items if type(x).__name__ == "RectBatch") == len(LANES) + 1
    view.plot.plots["lanes"].setXRange(100, 140, padding=0)
    view.plot.grab()
    assert item.drawn <= 200                            # zoomed in: only what is in view
    qdoc.tasks.shutdown(wait=True)


def test_a_timeline_tabbed_behind_another_pane_does_no_work_until_raised(window, qtbot, mlp_path):
    """Opening a file with the timeline tabbed behind Disassembly (the default layout) starts no
    shape pass and builds no pyqtgraph plot; raising the tab does both, the plots one per
    event-loop turn."""
    window.resize(1600, 1000)
    window.apply_default_layout()
    qtbot.wait(50)
    view = window.views["timeline"]
    qdoc = window.open_and_wait(mlp_path)
    qdoc.doc.simulation.set_feeds(_feeds(mlp_path))      # the corpus file records no input shapes
    qtbot.wait(100)
    wait_idle(qtbot, window)
    assert view.isVisible() and not view.on_screen()        # Qt calls it visible; nothing of it is on screen
    assert view.plot is None and view.task is None
    assert qdoc.doc.simulation.timeline is None
    window.docks["timeline"].raise_()
    qtbot.waitUntil(lambda: qdoc.doc.simulation.timeline is not None, timeout=60000)
    qtbot.waitUntil(view.plot_complete, timeout=10000)
    wait_idle(qtbot, window)
    assert view.items["live"].yData is not None and len(view.items["live"].yData) == qdoc.doc.simulation.timeline.n + 1


def test_every_command_lane_is_named_at_1024x700(window, qtbot, mlp_path):
    """In a 1024x700 window the timeline's plots share a short dock: the lane plot keeps room for
    every lane's name (lint and the four MMAP commands) and the buffer and live-bytes plots below
    it give up the height, instead of every other lane going unnamed."""
    window.resize(1024, 700)
    window.apply_default_layout()
    qdoc, view = _show(window, qtbot, mlp_path, _feeds(mlp_path))
    qtbot.waitUntil(view.plot_complete, timeout=10000)
    lanes = view.plot.plots["lanes"]

    def named():
        return [t for _v, t in lanes.getAxis("left")._tickLevels[0]]
    qtbot.wait(100)                        # the dock settles at its height; the names follow it
    assert named() == ["lint", "PRELOAD", "SAVE_RESULT", "FORWARD", "FREE"]
    assert window.docks["timeline"].height() <= 700 // 2 + 1


def test_an_export_that_cannot_be_written_is_said_not_raised(window, qtbot, mlp_path, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog
    qdoc, view = _show(window, qtbot, mlp_path, _feeds(mlp_path))
    qtbot.waitUntil(view.plot_complete, timeout=10000)
    target = tmp_path / "gone" / "timeline.png"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), "")))
    errors = []
    monkeypatch.setattr("sys.excepthook", lambda *exc: errors.append(exc))
    view.export_dialog()
    assert window.statusBar().currentMessage().startswith(f"Could not write {target}")
    assert not errors and not target.exists()


def test_the_live_axis_reads_in_the_unit_of_the_peak_beside_it(window, qtbot, mlp_path):
    """The live-bytes axis and the peak written on it use one binary unit (pyqtgraph's automatic
    prefix is decimal: a "150.3 MiB" peak stood above the "150" tick of an axis in MB)."""
    from nac_studio.model.byte_sizes import binary_unit, human_bytes
    qdoc, view = _show(window, qtbot, mlp_path, _feeds(mlp_path))
    qtbot.waitUntil(view.plot_complete, timeout=10000)
    tl = qdoc.doc.simulation.timeline
    unit, scale = binary_unit(tl.peak)
    axis = view.plot.plots["live"].getAxis("left")
    assert unit == "KiB" and human_bytes(tl.peak).endswith(" KiB") and view.items["peak_text"].textItem.toPlainText() \
        == f"peak {human_bytes(tl.peak)} @ t{tl.peak_tick}"
    assert axis.labelText == "live (KiB)" and axis.scale == 1 / 1024 and not axis.autoSIPrefix
    # the tick labels are in KiB: the peak's tick value, written by the axis, is the peak in KiB
    assert float(axis.tickStrings([tl.peak], axis.scale, 1)[0]) == pytest.approx(tl.peak / 1024, abs=1)
    assert [binary_unit(n)[0] for n in (10, 5 << 20, 3 << 30)] == ["B", "MiB", "GiB"]
