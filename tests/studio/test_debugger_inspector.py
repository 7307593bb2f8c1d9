"""Tensor inspector: a quantised parameter's dequantised and stored forms with the engine's
statistics, .npy export (atomic) and copy, pinning from Variables, heatmap slices of N-D
tensors, and a 4096×4096 float32 heatmap that opens and re-slices well under a second."""
from __future__ import annotations

import time

import numpy as np
import pytest
from PySide6.QtGui import QGuiApplication

from nac_engine.runtime.debugger import TickResult
from nac_studio.debug_session import InputChoice, Subject
from nac_studio.model.document import Selection
from nac_studio.views.tensor_inspector import InspectorPanel, Loaded, _histogram
from tests.corpus_paths import CORPUS
from tests.resources_path import DEMO
from tests.studio.test_debugger_gui import MLP, MLP_FEED, needs_corpus, wait_stopped

INT8 = CORPUS / "nac" / "mlp_int8t" / "mlp_int8t.nac"


def loaded_for(arr: np.ndarray) -> Loaded:
    r = TickResult(-1, "t", arr)
    return Loaded("test", arr, r, _histogram(arr))


def test_quantised_param_shows_both_forms_exports_and_copies(window, qtbot, tmp_path):
    if not INT8.is_file():
        pytest.skip("corpus absent")
    qdoc = window.open_and_wait(INT8)
    p = next(p for p in qdoc.nac.params.values() if p.name == "fc2.weight")
    qdoc.select(Selection("param", p.id))
    panel = window.commands.run("debug.inspect")
    qtbot.waitUntil(lambda: panel.loaded is not None and panel.array is not None, timeout=10000)
    assert panel.form.isVisible()
    np.testing.assert_array_equal(panel.array, p.array())
    assert panel.result.max == TickResult(-1, p.name, p.array()).max
    panel.form.setCurrentIndex(1)                    # the stored int8 values
    assert panel.array.dtype == np.int8
    np.testing.assert_array_equal(panel.array, p.raw())
    out_dir = tmp_path / "export"
    out_dir.mkdir()
    out = out_dir / "w.npy"
    panel.export_npy(str(out))
    np.testing.assert_array_equal(np.load(out), p.raw())
    assert [f.name for f in out_dir.iterdir()] == ["w.npy"], "no temp file left behind"
    text = panel.copy_stats()
    assert QGuiApplication.clipboard().text() == text and "min" in text and "NaN 0" in text


def test_variables_double_click_pins_an_inspector_on_that_tick(window, qtbot):
    needs_corpus()
    qdoc = window.open_and_wait(MLP)
    s = window.debug.attach(qdoc)
    s.set_choices({0: InputChoice(mode="npy", path=str(MLP_FEED))})
    window.disassembly_view.select_tick(5)
    window.commands.run("debug.runToCursor")
    wait_stopped(qtbot, window)
    var = window.views["variables"]
    assert var.model.rows[0].tick == 5
    var._on_double_click(var.model.index(0, 1))
    view = window.views["tensor_inspector"]
    assert len(view.panels) == 2 and view.panels[1].subject == Subject("result", 5)
    pinned = view.panels[1]
    qtbot.waitUntil(lambda: pinned.array is not None, timeout=10000)
    window.commands.run("debug.stepOver")           # the pinned panel stays on tick 5
    wait_stopped(qtbot, window)
    np.testing.assert_array_equal(pinned.array, s.debugger.result(5).tensor)
    follower = view.follower
    qtbot.waitUntil(lambda: follower.loaded is not None and follower.loaded.tick == 6, timeout=10000)
    follower.pin_button.click()                     # Pin from the follower: a third panel on tick 6
    assert view.panels[-1].subject == Subject("result", 6)


def test_heatmap_axes_and_sliders_show_the_right_slice(qtbot):
    panel = InspectorPanel(Subject("result", 1))
    qtbot.addWidget(panel)
    arr = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    panel.show_loaded(loaded_for(arr))
    np.testing.assert_array_equal(panel.current_slice(), arr[0, 0])
    panel.set_slice({0: 1, 1: 2})
    np.testing.assert_array_equal(panel.current_slice(), arr[1, 2])
    panel.y_axis.setCurrentIndex(0)                 # rows: axis 0, columns: axis 3; sliders: 1, 2
    panel.set_slice({1: 1, 2: 3})
    np.testing.assert_array_equal(panel.current_slice(), arr[:, 1, 3, :])
    assert panel.values.rowCount() == arr.size and panel.values.columnCount() == 5
    assert panel.values.data(panel.values.index(arr.size - 1, 4)) == f"{arr.size - 1:.7g}"


def test_a_new_shape_shows_its_two_largest_axes(qtbot):
    """An attention tensor after a 2-D one is 16 x 64, not the 1 x 12 strip the last axes' choice
    gave; size-1 axes go to sliders."""
    panel = InspectorPanel(Subject("result", 1))
    qtbot.addWidget(panel)
    panel.show_loaded(loaded_for(np.zeros((3, 7), np.float32)))
    assert (panel.y_axis.currentIndex(), panel.x_axis.currentIndex()) == (0, 1)
    attn = np.arange(12 * 16 * 64, dtype=np.float32).reshape(1, 12, 16, 64)
    panel.show_loaded(loaded_for(attn))
    assert (panel.y_axis.currentIndex(), panel.x_axis.currentIndex()) == (2, 3)
    assert panel.current_slice().shape == (16, 64)
    np.testing.assert_array_equal(panel.current_slice(), attn[0, 0])
    # a size-1 axis gets no slider (its only index is 0): the heatmap keeps the room
    assert panel.slider_axes == [1]
    panel.set_slice({1: 5})
    np.testing.assert_array_equal(panel.current_slice(), attn[0, 5])
    panel.show_loaded(loaded_for(np.ones((1, 1, 1, 16), np.float32)))
    assert panel.current_slice().shape == (1, 16) and panel.slider_axes == []
    panel.show_loaded(loaded_for(np.ones((64, 1, 8), np.float32)))
    assert (panel.y_axis.currentIndex(), panel.x_axis.currentIndex()) == (0, 2)


def test_a_1d_value_opens_on_the_line_and_the_next_2d_one_on_the_heatmap(qtbot):
    """A bias or a pooled vector drawn as a one-row heatmap says little: a 1-D value shows on the
    Line tab; the next 2-D value goes back to the heatmap. A tab the user picks is kept."""
    panel = InspectorPanel(Subject("result", 1))
    qtbot.addWidget(panel)
    panel.show_loaded(loaded_for(np.zeros((3, 7), np.float32)))
    assert panel.tabs.currentWidget() is panel.heat_page
    panel.show_loaded(loaded_for(np.arange(2304, dtype=np.float32)))
    assert panel.tabs.currentWidget() is panel.line_page
    panel.show_loaded(loaded_for(np.ones((4, 5), np.float32)))
    assert panel.tabs.currentWidget() is panel.heat_page
    # a vector with size-1 axes around it (BERT's pooled output [1, 16]) is a vector too
    panel.show_loaded(loaded_for(np.arange(16, dtype=np.float32).reshape(1, 16)))
    assert panel.tabs.currentWidget() is panel.line_page and panel.current_slice().shape == (1, 16)
    panel.show_loaded(loaded_for(np.ones((4, 5), np.float32)))
    assert panel.tabs.currentWidget() is panel.heat_page
    # the user's Histogram stays through a 1-D value; their Heatmap for a 1-D value stays for the next
    panel.tabs.setCurrentWidget(panel.hist_page)
    panel.show_loaded(loaded_for(np.arange(8, dtype=np.float32)))
    assert panel.tabs.currentWidget() is panel.hist_page
    panel.tabs.setCurrentWidget(panel.heat_page)
    panel.show_loaded(loaded_for(np.arange(9, dtype=np.float32)))
    assert panel.tabs.currentWidget() is panel.heat_page


def test_nan_and_inf_cells_stand_out_with_a_legend(qtbot):
    """Debugging numerics: NaN cells were drawn as holes (the view's black background) and ±Inf
    in the colour map's end colours, like the largest and smallest finite values. They are
    drawn in colours of their own over the map, named with this slice's counts."""
    import warnings

    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QImage

    from nac_studio.widgets.heatmap import NONFINITE_COLOURS
    panel = InspectorPanel(Subject("result", 1))
    qtbot.addWidget(panel)
    panel.resize(500, 500)
    panel.show()
    arr = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    arr[1, :] = np.nan
    arr[3, 2] = np.inf
    arr[:, 7] = -np.inf
    panel.show_loaded(loaded_for(arr))
    heat = panel._image
    assert heat.nonfinite == {"NaN": 7, "+Inf": 1, "−Inf": 6}
    marks = heat.marks.image                        # columns × rows, RGBA
    assert tuple(marks[0, 1, :3]) == NONFINITE_COLOURS["NaN"] and tuple(marks[2, 3, :3]) == NONFINITE_COLOURS["+Inf"]
    assert tuple(marks[7, 4, :3]) == NONFINITE_COLOURS["−Inf"] and marks[0, 0, 3] == 0     # finite: not covered
    legend = panel.nonfinite_note
    assert legend.isVisible() and "NaN 7" in legend.text() and "+Inf 1" in legend.text() and "of 48 values" in legend.text()
    # drawn: the pixels of a NaN cell (row 1, column 3) are magenta on screen
    qtbot.wait(50)
    img: QImage = heat.grab().toImage()
    centre = heat.mapFromScene(heat.getView().mapViewToScene(QPointF(3.5, 1.5)))
    c = img.pixelColor(centre.x(), centre.y())
    assert (c.red(), c.green(), c.blue()) == NONFINITE_COLOURS["NaN"]
    # the Values tab: those cells in the same colours
    from PySide6.QtCore import Qt
    vals = panel.values
    nan_row, finite_row = 1 * 8 + 0, 0
    assert vals.data(vals.index(nan_row, 2)) == "nan"
    bg = vals.data(vals.index(nan_row, 2), Qt.ItemDataRole.BackgroundRole)
    assert (bg.red(), bg.green(), bg.blue()) == NONFINITE_COLOURS["NaN"]
    assert vals.data(vals.index(finite_row, 2), Qt.ItemDataRole.BackgroundRole) is None
    # a slice of NaN only: said so, and no "All-NaN slice" warning from the level histogram
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        panel.show_loaded(loaded_for(np.full((4, 4), np.nan, np.float32)))
    assert "every value of this slice (16) is NaN" in legend.text()
    panel.show_loaded(loaded_for(np.ones((4, 4), np.float32)))
    assert not legend.isVisible() and not heat.marks.isVisible()
    # the Line tab: the line breaks at NaN/±Inf (with one of them in it nothing was drawn, and
    # -Inf in the view's range maths hid the line) and each kind is marked and named
    row = np.array([1.0, np.inf, -np.inf, 2.0, np.nan, 3.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        panel.show_loaded(loaded_for(row))
        panel.tabs.setCurrentWidget(panel.line_page)
        qtbot.wait(50)
    items = panel._line_plot.plotItem.listDataItems()
    line = items[0].getData()[1]
    np.testing.assert_array_equal(np.isnan(line), [False, True, True, False, True, False])
    assert sorted(i.name() for i in items[1:]) == ["+Inf (1)", "NaN (1)", "−Inf (1)"]
    (_x0, _x1), (y0, y1) = panel._line_plot.plotItem.viewRange()
    assert -1 < y0 <= 1 and 3 <= y1 < 5                   # the finite values' range


def test_complex_values_are_drawn_as_their_magnitude(qtbot):
    """A complex tensor (an FFT's, a rotary embedding's): the statistics are of |z|; the heatmap
    drew the real part on |z|'s colour levels (with numpy's ComplexWarning), and there was no
    histogram. All three now show |z|."""
    import warnings
    panel = InspectorPanel(Subject("result", 1))
    qtbot.addWidget(panel)
    z = (np.arange(12, dtype=np.float32) - 6).reshape(3, 4) * np.complex64(1j) + 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        panel.show_loaded(loaded_for(z))
        panel.tabs.setCurrentWidget(panel.hist_page)
        qtbot.wait(20)
    np.testing.assert_allclose(panel._image.image.image, np.abs(z).T, rtol=1e-6)
    assert "complex64  (of |z|)" in panel.stats.text()
    counts, edges = _histogram(z)
    assert counts.sum() == z.size and edges[0] == pytest.approx(3.0) and edges[-1] == pytest.approx(np.abs(z).max())


@pytest.mark.timing
def test_4096_square_heatmap_opens_and_reslices_fast(qtbot):
    panel = InspectorPanel(Subject("result", 1))
    qtbot.addWidget(panel)
    panel.resize(900, 700)
    panel.show()
    rng = np.random.default_rng(0)
    big = rng.standard_normal((2, 4096, 4096), dtype=np.float32)
    loaded = loaded_for(big)                         # statistics: off the UI thread in the app
    t = time.perf_counter()
    panel.show_loaded(loaded)
    panel.repaint()
    opened = time.perf_counter() - t
    t = time.perf_counter()
    panel.set_slice({0: 1})
    panel.repaint()
    resliced = time.perf_counter() - t
    np.testing.assert_array_equal(panel.current_slice(), big[1])
    # bounds that hold on a loaded 2-core machine: a 64 MiB slice drawn cell by cell takes minutes
    assert opened < 3.0 and resliced < 3.0, (opened, resliced)


def test_a_result_still_loading_is_never_shown_as_the_current_one(window, qtbot, monkeypatch):
    """Issue 22 §1.6: after a step, until the new tick's values arrive the panel still shows the
    previous tick's, and says so (its title names both ticks, its statistics are greyed); the new
    tick's values then replace them."""
    import threading

    from nac_studio.views import tensor_inspector
    qdoc = window.open_and_wait(DEMO.with_name("demo_cnn.nac"))
    window.disassembly_view.select_tick(2)
    window.commands.run("debug.runToCursor")
    wait_stopped(qtbot, window)
    panel = window.views["tensor_inspector"].follower
    qtbot.waitUntil(lambda: panel.loaded is not None and panel.loaded.tick == 2, timeout=20000)
    gate = threading.Event()
    real = tensor_inspector.load_subject

    def slow(*a, **kw):                     # the engine host taking its time over the new tick
        gate.wait(30)
        return real(*a, **kw)
    monkeypatch.setattr(tensor_inspector, "load_subject", slow)
    monkeypatch.setattr(type(qdoc.doc.debug), "cached_result", lambda self, tick: None)
    window.commands.run("debug.stepOver")
    s = qdoc.doc.debug
    qtbot.waitUntil(lambda: s.tick == 3 and not s.running, timeout=20000)
    qtbot.waitUntil(lambda: "t3 loading" in panel.title.text(), timeout=10000)
    assert panel.loaded.tick == 2 and panel.title.text().startswith("t2")
    assert not panel.stats.isEnabled()
    gate.set()
    qtbot.waitUntil(lambda: panel.loaded.tick == 3, timeout=20000)
    assert "loading" not in panel.title.text() and panel.stats.isEnabled()


def test_with_no_value_the_inspector_shows_its_note_not_an_empty_plot(qtbot):
    panel = InspectorPanel(Subject("result"))
    qtbot.addWidget(panel)
    panel.resize(300, 600)
    panel.show()
    panel.show_loaded(Loaded("before tick 0", None, None, None, note="Nothing has executed yet (F10 steps)"))
    assert panel.tabs.isHidden() and panel.stats.text() == "Nothing has executed yet (F10 steps)"
    # the note sits under the title, not spread down the panel
    assert panel.stats.geometry().bottom() < panel.height() // 3
    panel.show_loaded(loaded_for(np.arange(12, dtype=np.float32).reshape(3, 4)))
    assert not panel.tabs.isHidden() and panel.tabs.height() > panel.height() // 2


def test_the_followers_heatmap_is_drawn_on_screen(window, qtbot):
    """What the user sees: after a stop the inspector's heatmap shows the values (many colours),
    not a blank view (a heatmap built before its panel had a size once stayed black)."""
    from PySide6.QtCore import Qt as _Qt
    from tests.studio.test_debugger_gui import press
    window.resize(1600, 1000)
    qdoc = window.open_and_wait(DEMO.with_name("demo_bert_tiny.nac"))
    s = qdoc.doc.debug
    s.add_breakpoint("op", "aten.linear*")
    press(qtbot, window, _Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    insp = window.views["tensor_inspector"].follower
    window.docks["tensor_inspector"].show()
    window.docks["tensor_inspector"].raise_()
    qtbot.waitUntil(lambda: insp._image is not None and insp.array is not None, timeout=10000)
    qtbot.wait(200)
    img = insp._image.grab().toImage()
    colours = {img.pixel(x, y) for x in range(0, img.width(), 5) for y in range(0, img.height(), 5)}
    assert img.width() > 50 and len(colours) > 30, (img.width(), img.height(), len(colours))
