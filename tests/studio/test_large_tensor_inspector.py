"""The tensor inspector on a parameter too large to hold (issue 25 §2): nothing of it crosses to the
Studio whole. The heatmap shows the whole slice at a stride that fits the screen and says so, and
shows exact values once zoomed in; statistics and the histogram arrive from the engine host in
chunks; the values table is read a page at a time."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nac_engine
from nac_studio.model.document import Selection
from nac_studio.host.handlers import INSPECT_WHOLE_MAX
from nac_studio.views.large_tensor import heat_window, stride_for, stride_note
from tests.studio.test_debugger_gui import MLP, needs_corpus

ROWS, COLS = 4200, 1024          # 4.3 M values: above what is sent whole


@pytest.fixture(scope="module")
def big_linear(tmp_path_factory):
    assert ROWS * COLS > INSPECT_WHOLE_MAX
    torch.manual_seed(0)
    model = torch.nn.Linear(COLS, ROWS, bias=False)
    path = tmp_path_factory.mktemp("big") / "big_linear.nac"
    nac_engine.write(nac_engine.compile(model, (torch.randn(1, COLS),)), path)
    return path


def test_windows_and_strides():
    assert stride_for(4200) == 5 and stride_for(1024) == 1 and stride_for(1025) == 2
    window, steps = heat_window((7, 4200, 1024), 1, 2, {0: 3}, (0, 4200), (0, 1024))
    assert window == [3, [0, 4200, 5], [0, 1024, 1]] and steps == (5, 1)
    assert stride_note((5, 1), 1, 2) == "every 5th row shown — zoom in for exact values"
    assert stride_note((1, 1), 0, 1) == "exact values"
    assert stride_note((2, 3), 0, 1) == "every 2nd row and every 3rd column shown — zoom in for exact values"


def test_a_large_parameter_is_inspected_in_windows(window, qtbot, big_linear):
    qdoc = window.open_and_wait(big_linear)
    p = next(p for p in qdoc.nac.params.values() if p.name.endswith("weight"))
    want = p.array()
    assert want.shape == (ROWS, COLS)
    qdoc.select(Selection("param", p.id))
    panel = window.commands.run("debug.inspect")
    qtbot.waitUntil(lambda: panel.large is not None and panel.window is not None, timeout=30000)
    assert panel.array is None, "the values are not held in the Studio's process"
    values, win, steps = panel.window
    assert steps == (5, 1) and win == [[0, ROWS, 5], [0, COLS, 1]]
    np.testing.assert_array_equal(values, want[::5])
    assert panel.heat_note.text() == "every 5th row shown — zoom in for exact values"

    # statistics and the histogram, in chunks from the host: numpy's figures over the whole tensor
    qtbot.waitUntil(lambda: panel.large_stats is not None, timeout=30000)
    s = panel.large_stats
    assert s["min"] == float(want.min()) and s["max"] == float(want.max())
    assert s["mean"] == pytest.approx(float(want.astype(np.float64).mean()), rel=1e-9, abs=1e-12)
    assert s["std"] == pytest.approx(float(want.astype(np.float64).std()), rel=1e-6)
    assert int(np.asarray(s["hist"][0]).sum()) == want.size
    assert "min" in panel.stats.text() and "NaN 0" in panel.stats.text()

    # zoomed in on 400 × 200 values: the exact ones
    panel._image.getView().setRange(xRange=(100, 300), yRange=(1000, 1400), padding=0)
    qtbot.waitUntil(lambda: panel.window is not None and panel.window[2] == (1, 1), timeout=30000)
    values, win, _ = panel.window
    (y0, y1, _), (x0, x1, _) = win
    assert y0 <= 1000 and 1400 <= y1 and x0 <= 100 and 300 <= x1
    np.testing.assert_array_equal(values, want[y0:y1, x0:x1])
    assert panel.heat_note.text() == "exact values"

    # the values table: a page at a time
    panel.tabs.setCurrentWidget(panel.table)
    model = panel.table.model()
    assert model is panel.paged and model.rowCount() == want.size
    row = 3_000_123
    cell = model.index(row, 2)
    first = model.data(cell)
    qtbot.waitUntil(lambda: model.page_loaded(row), timeout=30000)
    assert first in ("…", f"{want.flat[row]:.7g}")
    assert model.data(cell) == f"{want.flat[row]:.7g}"
    assert model.data(model.index(row, 0)) == str(row // COLS)


def test_a_small_parameter_is_still_sent_whole(window, qtbot):
    needs_corpus()
    qdoc = window.open_and_wait(MLP)
    p = max(qdoc.nac.params.values(), key=lambda p: p.array().size)
    qdoc.select(Selection("param", p.id))
    panel = window.commands.run("debug.inspect")
    qtbot.waitUntil(lambda: panel.loaded is not None and panel.array is not None, timeout=10000)
    assert panel.large is None and panel.table.model() is panel.values and not panel.heat_note.isVisible()
    np.testing.assert_array_equal(panel.array, p.array())


def test_a_large_weights_tick_is_listed_and_inspected_without_its_values_crossing(window, qtbot, big_linear):
    """Stopped where the weight is live: the Variables pane gets its statistics only, and an
    inspector on the weight's tick reads it in windows, as on the parameter itself."""
    from nac_engine.isa.optable import OP_INPUT
    from nac_studio.debug_session import Subject
    qdoc = window.open_and_wait(big_linear)
    tick = next(i.index for i in qdoc.nac.instructions if i.a == OP_INPUT and i.b == 1)
    s = qdoc.doc.debug
    window.debug.run_to(tick)
    qtbot.waitUntil(lambda: s.tick == tick and not s.running, timeout=60000)
    variables = window.views["variables"]
    qtbot.waitUntil(lambda: s.cached_result(tick) is not None, timeout=60000)
    r = s.cached_result(tick)
    want = qdoc.nac.params[qdoc.nac.instructions[tick].c[1]].array()
    assert r.tensor is None and r.shape == want.shape and r.max == float(want.max())
    # the pane shows the statistics when their answer reaches it (a queued signal after the cache fills)
    qtbot.waitUntil(lambda: variables.model.cell(next(i for i, v in enumerate(variables.model.rows)
                                                      if v.tick == tick), 4) != "", timeout=30000)
    panel = window.views["tensor_inspector"].inspect(Subject("result", tick))
    qtbot.waitUntil(lambda: panel.window is not None, timeout=30000)
    assert panel.large is not None and panel.array is None and panel.loaded.tick == tick


def test_statistics_progress_reads_as_a_percentage(qtbot):
    """The host's progress arrives as a fraction (0..1); the panel says it in per cent."""
    from nac_studio.debug_session import Subject
    from nac_studio.views.large_tensor import LargeTensor
    from nac_studio.views.tensor_inspector import InspectorPanel
    panel = InspectorPanel(Subject("param", 1))
    qtbot.addWidget(panel)
    panel.large = LargeTensor("x.nac", 1, "w", (32000, 4096), np.dtype("<f2"))
    panel.stats.setText("shape [32000, 4096]\nstatistics: reading…")
    panel._stats_progress(panel.large, 0.42)
    assert panel.stats.text().endswith("statistics: reading… 42%")
