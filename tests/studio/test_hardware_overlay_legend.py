"""The graph's hardware overlay shows its colour scale (metric, units, the run's min and max) on
the canvas, and the scale goes away with the overlay."""
from __future__ import annotations

from nac_studio.simulation_commands import LAYER
from tests.studio.test_hardware_view import _corpus, _feeds, _simulate


def test_overlay_colour_scale_follows_the_overlay(window, qtbot):
    path = _corpus("mlp")
    qdoc, _view = _simulate(window, qtbot, path, _feeds(path))
    canvas = window.graph.canvas
    ops = [r for r in qdoc.doc.simulation.run.result.instructions if r.kind == "op"]
    cycles = [r.end_cycle - r.issue_cycle for r in ops]

    window.commands.run("sim.overlay.cycles")
    legend = window.simulation.legend
    qtbot.waitUntil(legend.isVisible, timeout=5000)
    assert LAYER in canvas.overlay_layers()
    assert legend.parentWidget() is canvas
    s = legend.scale
    assert (s.metric, s.unit) == ("cycles", "cycles")
    assert (s.low, s.high) == (min(cycles), max(cycles))
    assert legend.end_labels() == ("0 cycles", f"{max(cycles):,} cycles")
    assert f"max {max(cycles):,} cycles" in legend.title()
    # the darkest node is the one with the most cycles: the bar's right end is the overlay's 1.0
    values = qdoc.doc.simulation.overlay_values()
    assert max(values.values()) == 1.0

    window.commands.run("sim.overlay.stall_share")
    s = legend.scale
    shares = [100.0 * r.stall_cycles / (r.end_cycle - r.issue_cycle) if r.end_cycle > r.issue_cycle else 0.0
              for r in ops]
    assert (s.metric, s.unit, s.zero, s.full) == ("stall share", "%", 0.0, 100.0)
    assert (s.low, s.high) == (min(shares), max(shares))
    assert legend.isVisible()

    window.commands.run("sim.overlay.utilisation")
    assert legend.scale.unit == "MAC/cycle" and legend.scale.high == legend.scale.full

    window.commands.run("sim.overlay.off")
    assert LAYER not in canvas.overlay_layers()
    assert not legend.isVisible() and legend.scale is None
