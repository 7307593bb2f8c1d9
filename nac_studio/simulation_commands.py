"""Simulate menu: the timeline, hardware and sweep panes' actions as commands, and the graph
overlay that colours nodes by the current hardware run.

``register_simulation_commands(window)`` declares the commands in the window's registry (menus,
palette and shortcuts come from there) and attaches a :class:`SimulationController`, which
raises the Hardware pane when a sweep point is opened and keeps the graph's ``hardware``
overlay layer (fill colour by cycles, utilisation or stall share on a light-to-dark scale, the
value as a badge) in step with the active document's ``doc.simulation``.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject
from PySide6.QtGui import QColor

from .simulation_overlay_legend import SCALE, OverlayScaleLegend, overlay_scale
from .model.simulation_state import OVERLAY_METRICS

LAYER = "hardware"


def scale_color(x: float) -> QColor:
    k = min(len(SCALE) - 1, max(0, int(round(x * (len(SCALE) - 1)))))
    return QColor(SCALE[k])


class SimulationController(QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.qdoc = None
        self.legend = None      # the overlay's colour scale on the graph canvas (simulation_overlay_legend)
        window.documentChanged.connect(self._active_changed)

    def _active_changed(self, qdoc) -> None:
        if self.qdoc is not None:
            try:
                self.qdoc.simulationChanged.disconnect(self._on_simulation)
            except (RuntimeError, TypeError):
                pass
        self.qdoc = qdoc
        if qdoc is not None:
            qdoc.simulationChanged.connect(self._on_simulation)
        self.update_overlay()

    def _on_simulation(self, what: str, _source) -> None:
        if what == "config":
            self.raise_dock("hardware")
        if what in ("run", "overlay", "profile"):
            self.update_overlay()
        self.window.commands.refresh()

    def raise_dock(self, name: str) -> None:
        dock = self.window.docks.get(name)
        if dock is not None:
            dock.show()
            dock.raise_()

    def update_overlay(self) -> None:
        canvas = getattr(self.window.graph, "canvas", None)
        if canvas is None:
            return
        st = self.qdoc.doc.simulation if self.qdoc is not None else None
        values = st.overlay_values() if st is not None else {}
        if self.legend is None or self.legend.parentWidget() is not canvas:
            self.legend = OverlayScaleLegend(canvas)
        if not values:
            canvas.clear_overlay(LAYER)
            self.legend.set_scale(None)
            return
        canvas.set_node_overlay(LAYER, {t: (scale_color(v), None, f"{v:.0%}") for t, v in values.items()})
        self.legend.set_scale(overlay_scale(st))

    def set_overlay(self, metric: Optional[str]) -> None:
        if self.qdoc is None:
            return
        st = self.qdoc.doc.simulation
        st.set_overlay(metric, self)
        if metric == "measured time" and st.profile is None:
            self.window.show_message("Profile the file first (Simulate ▸ Profile on This CPU); the overlay follows it")
        elif metric not in (None, "measured time") and st.run is None:
            self.window.show_message("Simulate the file in the Hardware pane first; the overlay follows its run")


def register_simulation_commands(window) -> SimulationController:
    c = window.commands
    ctl = SimulationController(window)
    window.simulation = ctl
    views = window.views
    has_doc = lambda: window.active is not None  # noqa: E731

    def sim_state():
        return window.active.doc.simulation if window.active is not None else None

    def run_done():
        st = sim_state()
        return st is not None and st.run is not None

    def timeline_ready():
        st = sim_state()
        return st is not None and st.sizes is not None

    def show(name):
        ctl.raise_dock(name)

    c.add("sim.simulate", "Simulate on Hardware", lambda: (show("hardware"), views["hardware"].simulate()),
          shortcut="Ctrl+Alt+R", menu="Simulate", group="a", enabled=has_doc,
          tip="Simulate the file on the Hardware pane's configuration")
    c.add("sim.profile", "Profile on This CPU", lambda: (show("hardware"), views["hardware"].profile()),
          menu="Simulate", group="a", order=2, enabled=has_doc,
          tip="Time every instruction on this CPU and show the measured time beside the simulated cycles")
    c.add("sim.cancel", "Cancel Simulation", lambda: views["hardware"].cancel(), menu="Simulate", group="a",
          order=1, enabled=lambda: views["hardware"].task is not None)
    c.add("sim.exportTrace", "Export Perfetto Trace…", lambda: views["hardware"]._export_dialog("trace"),
          menu="Simulate", group="b", enabled=run_done)
    c.add("sim.exportCsv", "Export Per-Instruction CSV…", lambda: views["hardware"]._export_dialog("csv"),
          menu="Simulate", group="b", order=1, enabled=run_done)
    c.add("sim.timeline", "Show MMAP Timeline", lambda: show("timeline"), menu="Simulate", group="c",
          enabled=has_doc)
    c.add("sim.planners", "Compare MMAP Planners", lambda: (show("timeline"),
                                                            views["timeline"].planners_box.toggle()),
          menu="Simulate", group="c", order=1, enabled=has_doc, checked=lambda: views["timeline"].planners_box.isChecked())
    c.add("sim.saveWithSchedule", "Save As with Schedule…", lambda: views["timeline"].save_dialog(),
          menu="Simulate", group="c", order=2, enabled=timeline_ready,
          tip="Write a copy whose only change is the MMAP section, planned by the chosen planner")
    c.add("sim.sweep", "Run Design-Space Sweep", lambda: (show("sweep"), views["sweep"].run()), menu="Simulate",
          group="d", enabled=has_doc)
    for order, metric in enumerate(OVERLAY_METRICS):
        c.add(f"sim.overlay.{metric.replace(' ', '_')}", f"Graph Overlay: {metric.capitalize()}",
              lambda m=metric: ctl.set_overlay(m), menu="Simulate/Graph Overlay", group="a", order=order,
              enabled=has_doc, checked=lambda m=metric: (sim_state() is not None and sim_state().overlay == m))
    c.add("sim.overlay.off", "Graph Overlay: Off", lambda: ctl.set_overlay(None), menu="Simulate/Graph Overlay",
          group="b", enabled=has_doc, checked=lambda: sim_state() is None or sim_state().overlay is None)
    return ctl


async def show_dock_for_cli(window, name: str, timeout: float = 120.0) -> bool:
    """``nac-studio FILE --dock NAME``: raise the pane, give it room, and fill it (the timeline
    computes, the hardware pane simulates on its preset). A pane that cannot fill itself (no input
    shapes, say) says why on stderr and in the pane; ``False`` only for an unknown pane."""
    import asyncio
    import sys

    from PySide6.QtCore import Qt
    if name not in window.docks:
        print(f"nac-studio: --dock {name!r}: no such pane (panes: {', '.join(sorted(window.docks))})",
              file=sys.stderr)
        return False
    dock = window.docks[name]
    dock.show()
    dock.raise_()
    window.resizeDocks([dock], [int(window.height() * 0.5)], Qt.Orientation.Vertical)
    view = window.views[name]
    await asyncio.sleep(0.05)
    task = None
    if name == "timeline":
        view.ensure_computed()
        task = view.task
    elif name == "hardware":
        task = view.simulate()
    if task is not None:
        try:
            await asyncio.wait_for(task.wait(), timeout)
        except Exception:    # shown in the pane; the screenshot still shows it
            pass
    if name == "timeline":
        st = window.active.doc.simulation
        if st.timeline_error:
            print(f"nac-studio: timeline: {st.timeline_error}", file=sys.stderr)
    elif name == "hardware" and view.error.text():
        print(f"nac-studio: hardware: {view.error.text()}", file=sys.stderr)
    await asyncio.sleep(0.1)
    return True


__all__ = ["LAYER", "SimulationController", "register_simulation_commands", "scale_color", "show_dock_for_cli"]
