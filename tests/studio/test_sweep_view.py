"""The Sweep pane: table and Pareto scatter from a sweep, the same rows as the engine's sweep,
JSON from nac sim --sweep, a point opens its configuration in the Hardware pane; the graph overlay
follows the hardware run; nac-studio --dock renders the panes."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from nac_studio.model.simulation_state import pareto_front, sweep_rows_from_json
from tests.corpus_paths import NAC_FILES
from tests.cli_fork import run_cli


def _mlp():
    found = [p for p in NAC_FILES if p.parent.name == "mlp"]
    if not found:
        pytest.skip("corpus absent")
    return found[0]


def test_pareto_front():
    xs = [1, 2, 3, 4, 2, 5]
    ys = [9, 5, 5, 1, 7, 1]
    assert pareto_front(xs, ys) == [0, 1, 3]
    assert pareto_front([], []) == []


def test_sweep_runs_in_the_pane_and_a_point_opens_in_the_hardware_pane(window, qtbot):
    from nac_engine.sim.sweep import sweep
    path = _mlp()
    feeds = [np.load(path.parent / "feed_0.npy")]
    qdoc = window.open_and_wait(path)
    qdoc.doc.simulation.set_feeds(feeds)
    view = window.views["sweep"]
    view.axes.setText("array.rows=8,16,32; dram.bytes_per_cycle=4,16")
    task = view.run()
    assert task is not None, view.status.text()
    qtbot.waitUntil(task.done, timeout=120000)
    assert task.error is None, task.error
    qtbot.waitUntil(lambda: qdoc.doc.simulation.sweep is not None, timeout=5000)
    table = qdoc.doc.simulation.sweep
    ref = sweep(str(path), "edge-32x32", {"array.rows": [8, 16, 32], "dram.bytes_per_cycle": [4, 16]},
                feeds=feeds, workers=1)
    assert [r.as_dict() for r in table.rows] == [r.as_dict() for r in ref]
    assert view.table.rowCount() == 6
    header = [view.table.horizontalHeaderItem(c).text() for c in range(view.table.columnCount())]
    assert header[:3] == ["array.rows", "dram.bytes_per_cycle", "total_cycles"]
    assert "6 point(s)" in view.status.text() and "6 ok" in view.status.text()
    # the scatter: every point, the front ringed
    view.x_key.setCurrentText("array.rows")
    view._draw()
    assert len(view.items["points"].data) == 6
    xs = [r.values["array.rows"] for r in ref]
    ys = [r.total_cycles for r in ref]
    assert sorted(view.front()) == sorted(pareto_front(xs, ys))
    assert len(view.items["best"].data) == len(view.front())
    # a point opens its configuration in the hardware pane, which simulates it
    hw = window.views["hardware"]
    view.open_row(2)
    assert hw.overrides() == {"array.rows": 16} or hw.overrides() == {"array.rows": 16, "dram.bytes_per_cycle": 4.0}
    qtbot.waitUntil(lambda: qdoc.doc.simulation.run is not None, timeout=60000)
    assert qdoc.doc.simulation.run.result.total_cycles == ref[2].total_cycles
    assert not window.docks["hardware"].isHidden()
    # the graph overlay follows the run
    window.simulation.set_overlay("cycles")
    canvas = window.graph.canvas
    assert "hardware" in canvas.overlay_layers()
    window.simulation.set_overlay(None)
    assert "hardware" not in canvas.overlay_layers()


def test_bad_axes_and_json_are_one_line(window, qtbot, tmp_path):
    qdoc = window.open_and_wait(_mlp())
    view = window.views["sweep"]
    view.axes.setText("array.rows=-1,8")
    assert view.run() is None and "array.rows" in view.status.text()
    view.axes.setText("nonsense")
    assert view.run() is None and "expected KEY=V1,V2" in view.status.text()
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    view.load_json(str(bad))
    assert "expected the JSON list" in view.status.text() and qdoc.doc.simulation.sweep is None


def test_loads_nac_sim_sweep_json(window, qtbot, tmp_path):
    path = _mlp()
    out = run_cli(["sim", path, "--feed", path.parent / "feed_0.npy", "--sweep", "sram.bytes=4096,65536", "--json"])
    assert out.returncode == 0, out.stderr
    j = tmp_path / "sweep.json"
    j.write_text(out.stdout)
    qdoc = window.open_and_wait(path)
    view = window.views["sweep"]
    view.load_json(str(j))
    table = qdoc.doc.simulation.sweep
    assert table.axes == {"sram.bytes": [4096, 65536]}
    assert [r.total_cycles for r in table.rows] == [row["total_cycles"] for row in json.loads(out.stdout)]
    assert view.table.rowCount() == 2
    axes, rows = sweep_rows_from_json(json.loads(out.stdout))
    assert rows[0].ok and rows[0].values == {"sram.bytes": 4096}


@pytest.mark.heavy       # a Studio process each, simulating in its own host: ~8 s apiece
@pytest.mark.parametrize("dock, size", [("timeline", "1024x700"), ("hardware", "1600x1000")])
def test_dock_screenshot(tmp_path, dock, size):
    from tests.resources_path import DEMO
    demo = DEMO.with_name("demo_bert_tiny.nac")       # compiled here: it records its input signature
    if not demo.is_file():
        pytest.skip("demo model missing")
    out = tmp_path / f"{dock}.png"
    r = subprocess.run([sys.executable, "-m", "nac_studio", str(demo), "--dock", dock, "--size", size,
                        "--screenshot", str(out)], capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"
    w, h = (int(x) for x in size.split("x"))
    from PySide6.QtGui import QImage
    img = QImage(str(out))
    assert (img.width(), img.height()) == (w, h)
    assert "timeline:" not in r.stderr and "hardware:" not in r.stderr, r.stderr
