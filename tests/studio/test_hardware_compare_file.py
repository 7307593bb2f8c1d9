"""The Hardware pane compares the document with a second .nac simulated on the same preset:
per-instruction Δ cycles matched by tick (same length) or by op sequence, totals side by side."""
from __future__ import annotations

from PySide6.QtCore import Qt

from nac_engine.sim.api import simulate
from nac_studio.model.file_comparison import match_instructions
from tests.studio.test_hardware_view import _corpus, _feeds, _simulate
from tests.studio.conftest import wait_idle


def test_compare_mlp_with_its_int8_variant_on_one_preset(window, qtbot):
    a, b = _corpus("mlp"), _corpus("mlp_int8t")
    feeds = _feeds(a)
    qdoc, view = _simulate(window, qtbot, a, feeds)
    mine = qdoc.doc.simulation.run.result
    task = view.compare_file(str(b))
    assert task is not None, view.error.text()
    qtbot.waitUntil(task.done, timeout=60000)
    assert task.error is None, task.error
    wait_idle(qtbot, window)
    cmp = qdoc.doc.simulation.file_comparison
    assert cmp is not None and cmp.mode == "tick" and cmp.inputs == "this file's inputs"
    # the other file's run is what nac sim gives on the same preset and inputs
    ref = simulate(str(b), "edge-32x32", feeds=feeds)
    assert cmp.run.result.total_cycles == ref.total_cycles
    ref_cycles = {r.tick: r.end_cycle - r.issue_cycle for r in ref.instructions}
    # the table's Δ column: this file's cycles minus the other's, per tick
    model = view.table_model
    delta_col = model.columnCount() - 1
    assert model.headerData(delta_col, Qt.Orientation.Horizontal) == "Δ cycles"
    checked = 0
    for r in model.rows:
        assert model.value(r, delta_col) == (r.end_cycle - r.issue_cycle) - ref_cycles[r.tick]
        checked += 1
    assert checked == len([r for r in mine.instructions if r.kind != "skipped"])
    html = view.totals.toHtml()
    assert "mlp_int8t.nac" in html and "by tick" in html
    assert f"{mine.total_cycles:,}" in html and f"{ref.total_cycles:,}" in html
    assert view.compare.currentData() == "file"
    # choosing "none" drops the comparison
    view.compare.setCurrentIndex(0)
    view._compare_chosen()
    assert qdoc.doc.simulation.file_comparison is None
    assert model.columnCount() == delta_col


def test_files_of_different_lengths_match_by_op_sequence():
    mlp, cnn = _corpus("mlp"), _corpus("cnn__v1.6")
    ra = simulate(str(mlp), "edge-32x32", feeds=_feeds(mlp))
    rb = simulate(str(cnn), "edge-32x32", feeds=_feeds(cnn))
    import nac_engine
    na, nb = len(nac_engine.read(str(mlp)).instructions), len(nac_engine.read(str(cnn)).instructions)
    assert na != nb
    mode, pairs = match_instructions(ra.instructions, rb.instructions, na, nb)
    assert mode == "op sequence"
    ops_a = {r.tick: r.op for r in ra.instructions}
    ops_b = {r.tick: r.op for r in rb.instructions}
    assert pairs and all(ops_a[x] == ops_b[y] for x, y in pairs)
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    assert xs == sorted(xs) and ys == sorted(ys)        # in program order on both sides
    # same length: by tick, every instruction paired with itself
    mode, pairs = match_instructions(ra.instructions, ra.instructions, na, na)
    assert mode == "tick" and pairs == [(r.tick, r.tick) for r in ra.instructions if r.kind != "skipped"]
