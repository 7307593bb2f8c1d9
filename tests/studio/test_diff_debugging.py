"""Differential debugging in the Studio, through the real main window and its command registry: the
graph's error overlay follows the Diff pane's result, First Divergence stops the debugger at the
first divergent tick on the diff's inputs and shows both runs' values there, and the pane stays
legible at 1024x700. Corpus: the reference compiler's float MLP against its INT8 version."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nac_engine.format import read
from nac_engine.runtime.debugger import TickResult
from nac_engine.diff import diff_files, run_values
from nac_studio import diff_overlay
from nac_studio.debug_session import InputChoice
from tests.corpus_paths import CORPUS
from tests.studio.conftest import wait_idle
from tests.studio.test_debugger_gui import wait_stopped

MLP = CORPUS / "nac" / "mlp" / "mlp.nac"
MLP_FEED = CORPUS / "nac" / "mlp" / "feed_0.npy"
MLP_INT8 = CORPUS / "nac" / "mlp_int8t" / "mlp_int8t.nac"
OTHER = CORPUS / "nac" / "cnn" / "cnn.nac"


@pytest.fixture
def diffed(window, qtbot):
    """The corpus MLP open with its feed as input, diffed against its INT8 version."""
    if not (MLP.is_file() and MLP_INT8.is_file()):
        pytest.skip("corpus MLP files missing")
    qdoc = window.open_and_wait(MLP)
    s = window.debug.attach(qdoc)
    s.set_choices({0: InputChoice(mode="npy", path=str(MLP_FEED))})
    view = window.views["diff"]
    assert view.run(str(MLP_INT8)) is not None
    qtbot.waitUntil(lambda: view.result is not None or view.task is None, timeout=180000)   # a loaded 2-core machine
    assert view.result is not None, view.status.text()
    wait_idle(qtbot, window)
    expected = diff_files(MLP, MLP_INT8, None, [np.load(MLP_FEED)], tolerance=1e-3)
    return qdoc, view, expected


def test_error_overlay_colours_each_matched_node_by_its_error(window, qtbot, diffed):
    qdoc, view, expected = diffed
    canvas = window.graph_view.canvas
    assert diff_overlay.LAYER in canvas.overlay_layers()
    styles = diff_overlay.overlay_styles(view.result)
    # exactly the matched values are coloured, each by its own error, the first divergence badged
    assert set(styles) == {p.tick_a for p in expected.pairs}
    for p in expected.pairs:
        fill, outline, badge = styles[p.tick_a]
        assert fill == diff_overlay.error_color(p.max_abs)
        assert (outline is not None) == p.diverges
        assert (badge == "≠") == (p.tick_a == expected.first_divergence.tick_a)
    graph = window.graph_view.shown
    drawn = canvas.overlay_styles()
    for t, style in styles.items():
        assert style in drawn[int(graph.node_of_tick[t])]
    # an unmatched node (the input, the weights) carries no diff style
    matched_nodes = {int(graph.node_of_tick[t]) for t in styles}
    for i, node_styles in drawn.items():
        if i not in matched_nodes:
            assert not any(st in styles.values() for st in node_styles)
    assert window.graph_view.shown.node_of_tick[0] not in matched_nodes
    # the colour bar names the metric and the tolerance
    legend = window.diff.legend
    assert legend.isVisible() and legend.title() == "log10 max abs error  (tol 1e-03)"
    assert legend.geometry().bottom() <= canvas.height()


def test_error_scale_runs_green_to_red_on_log10():
    assert diff_overlay.scale_position(0.0) == 0.0
    assert diff_overlay.scale_position(1e-8) == 0.0 and diff_overlay.scale_position(1.0) == 1.0
    assert diff_overlay.scale_position(1e-4) == pytest.approx(0.5)
    low, high = diff_overlay.error_color(1e-9), diff_overlay.error_color(10.0)
    assert low.green() > low.red() and high.red() > high.green()
    positions = [diff_overlay.scale_position(10.0 ** k) for k in range(-9, 2)]
    assert positions == sorted(positions)
    assert diff_overlay.error_color(None) is None
    assert diff_overlay.error_color(math.nan).name() == diff_overlay.NOT_FINITE.name()


def test_overlay_toggle_clear_and_document_switch(window, qtbot, diffed):
    qdoc, view, _ = diffed
    canvas = window.graph_view.canvas
    cmd = window.commands.get("graph.diffErrorOverlay")
    assert cmd.is_checked()
    window.commands.run("graph.diffErrorOverlay")             # off
    assert diff_overlay.LAYER not in canvas.overlay_layers() and not window.diff.legend.isVisible()
    assert not cmd.is_checked()
    window.commands.run("graph.diffErrorOverlay")             # on again: the same result comes back
    assert diff_overlay.LAYER in canvas.overlay_layers() and window.diff.legend.isVisible()
    # another document: no diff of its own, so no overlay; coming back restores this one's
    if OTHER.is_file():
        window.open_and_wait(OTHER)
        assert diff_overlay.LAYER not in canvas.overlay_layers() and not window.diff.legend.isVisible()
        assert view.result is None
        window.set_active(qdoc)
        wait_idle(qtbot, window)
        assert diff_overlay.LAYER in canvas.overlay_layers()
    # Clear forgets the diff: overlay, legend and First Divergence go
    view.clear_button.click()
    assert view.result is None and view.result_for(qdoc) is None
    assert diff_overlay.LAYER not in canvas.overlay_layers() and not window.diff.legend.isVisible()
    window.commands.refresh()
    assert not window.commands.get("debug.firstDivergence").is_enabled()


def test_reload_drops_the_overlay(window, qtbot, diffed):
    """File › Reload opens the file again as a new document: the old diff no longer describes it."""
    _qdoc, view, _ = diffed
    canvas = window.graph_view.canvas
    assert diff_overlay.LAYER in canvas.overlay_layers()
    with qtbot.waitSignal(window.documentOpened, timeout=20000):
        window.reload_active()
    wait_idle(qtbot, window)
    assert view.result is None
    assert diff_overlay.LAYER not in canvas.overlay_layers() and not window.diff.legend.isVisible()


def test_first_divergence_stops_the_debugger_and_shows_both_values(window, qtbot, diffed):
    qdoc, view, expected = diffed
    first = expected.first_divergence
    s = qdoc.doc.debug
    window.commands.refresh()
    assert window.commands.get("debug.firstDivergence").is_enabled()
    window.commands.run("debug.firstDivergence")
    wait_stopped(qtbot, window)
    qtbot.waitUntil(lambda: view.comparison is not None, timeout=20000)
    # the debugger stopped at the first divergent tick; the views follow the execution point
    assert s.state == "stopped" and s.tick == first.tick_a
    assert window.active.doc.tick == first.tick_a
    assert window.views["variables"].model.rows[0].tick == first.tick_a
    follower = window.views["tensor_inspector"].follower
    qtbot.waitUntil(lambda: follower.loaded is not None and follower.loaded.tick == first.tick_a, timeout=10000)
    # the debugger ran on the diff's inputs: its value is the diff's value in A, bit for bit
    kept_a, kept_b = view.result.values_of(view.result.first_divergence)
    np.testing.assert_array_equal(s.debugger.result(first.tick_a).tensor, np.asarray(kept_a))     # the engine host sends values as arrays
    # both sides, side by side: A from the debugger, B = an independent run of the INT8 file at the matched tick
    a, b, pair = view.comparison
    assert pair.tick_a == first.tick_a and a.tick == first.tick_a
    ref_a = s.debugger.result(first.tick_a)
    values_b, _ = run_values(read(str(MLP_INT8)), None, [np.load(MLP_FEED)], {first.tick_b})
    ref_b = TickResult(first.tick_b, first.op_b, values_b[first.tick_b])
    for attr in ("shape", "dtype", "min", "max", "mean", "std", "nan_count", "inf_count", "zero_count"):
        assert getattr(a, attr) == getattr(ref_a, attr), attr
        assert getattr(b, attr) == getattr(ref_b, attr), attr
    assert a.max != b.max                    # they do differ there: that is the divergence
    table = view.compare_table
    assert view.compare_table.isVisible() and table.rowCount() == 2
    assert table.item(0, 0).text().startswith(f"mlp.nac tick {first.tick_a}")
    assert table.item(1, 0).text() == f"mlp_int8t.nac tick {first.tick_b}"
    assert table.item(0, 4).text() == f"{ref_a.max:.6g}" and table.item(1, 4).text() == f"{ref_b.max:.6g}"
    # a new diff drops the comparison
    view.show_result(view.result)
    assert view.comparison is None and not table.isVisible()


def test_first_divergence_sets_back_the_inputs_the_diff_used(window, qtbot, diffed):
    qdoc, view, expected = diffed
    s = qdoc.doc.debug
    s.set_choices({0: InputChoice(mode="random", shape=[2, 8], dtype="float32", seed=7)})   # changed after the diff
    window.commands.run("debug.firstDivergence")
    wait_stopped(qtbot, window)
    qtbot.waitUntil(lambda: view.comparison is not None or view.compare_note.text().startswith("the"),
                    timeout=20000)
    assert view.comparison is not None, view.compare_note.text()
    assert s.choice(s.slots[0]).mode == "npy"
    kept_a, _ = view.result.values_of(view.result.first_divergence)
    np.testing.assert_array_equal(s.debugger.result(expected.first_divergence.tick_a).tensor, np.asarray(kept_a))     # the engine host sends values as arrays


def test_diff_pane_at_1024x700_legend_outside_columns_sized_controls_wrap(window, qtbot, diffed):
    _qdoc, view, _ = diffed
    window.resize(1024, 700)
    window.apply_default_layout()
    dock = window.docks["diff"]
    dock.show()
    dock.raise_()
    qtbot.wait(50)
    # the plot has no legend item inside it (it covered the curves); the legend is a label above it
    assert view.plot.getPlotItem().legend is None
    assert view.legend.isVisible() and view.legend.geometry().bottom() <= view.plot.geometry().top()
    # every column of the table is on screen without scrolling sideways
    head = view.table.horizontalHeader()
    visible = [c for c in range(view.table.columnCount()) if not view.table.isColumnHidden(c)]
    assert sum(head.sectionSize(c) for c in visible) <= view.table.viewport().width() + 1
    assert view.table.isColumnHidden(3)               # structure matching: the Op column repeated Value
    # controls: one row when there is room (the docked pane at 1024 wide), never clipped
    assert view._wide == view.controls_wide_enough(view.width())
    for w in (view.other, view.run_button, view.clear_button, view.metric_box):
        g = w.geometry()
        assert g.left() >= 0 and g.right() <= view.width(), w


def test_diff_pane_controls_wrap_onto_two_rows_when_narrow(qtbot):
    from nac_studio.views.diff import DiffView
    view = DiffView(None)
    qtbot.addWidget(view)
    view.show()
    for width in (1000, 420):
        view.resize(width, 300)
        qtbot.waitUntil(lambda w=width: view.width() == w, timeout=2000)
        qtbot.wait(20)
        assert view._wide == view.controls_wide_enough(width)
        for w in (view.other, view.run_button, view.clear_button, view.metric_box, view.cancel_button):
            g = w.geometry()
            assert g.left() >= 0 and g.right() <= view.width(), (width, w)
    assert not view._wide
    assert view.run_button.geometry().top() > view.other.geometry().bottom()
    view.resize(1000, 300)
    qtbot.waitUntil(lambda: view._wide and view.run_button.geometry().top() < view.other.geometry().bottom(),
                    timeout=2000)
