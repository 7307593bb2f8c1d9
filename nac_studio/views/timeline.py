"""MMAP timeline pane: where every buffer lives, tick by tick, and how the planners compare.

x is the tick (tick *t* spans ``[t, t+1)``). From top: the lint lane (violations red, hazards
orange, on their ticks), one lane per MMAP command (PRELOAD, SAVE_RESULT, FORWARD, FREE), one
lifetime bar per buffer (weights, inputs, computed values) coloured by its bytes and packed onto
rows, and the live-bytes curve with its peak marked (:mod:`nac_studio.model.memory_timeline`, the
checker's model). With **Planners** on, a fourth plot shows the same program re-planned in
memory by each planner (reference, reference-lookback, min-peak, lookahead N) with their peaks;
**Save As with Schedule** writes a copy whose only change is the MMAP section and lints it.

Keys as in Perfetto (W/S zoom at the mouse, A/D pan, drag selects a range and the summary line
shows its commands, bytes moved, peak and buffers alive); a click selects that tick in the
whole Studio, and the view follows the document's tick and the debugger's execution point.
Sizes come from shape propagation on torch's meta device, in the background; the view asks
for it only once it is on screen (a dock tabbed behind another counts as visible to Qt but is
never painted: its first paint starts the work), and builds its three plots one per event-loop
turn meanwhile (a pyqtgraph plot costs ~50 ms to make; three at once stalled the window).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (QSizePolicy, QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QLabel, QSpinBox, QToolBar,
                               QToolButton, QVBoxLayout, QWidget)

from ..widgets.image_files import could_not_write
from ..model.byte_sizes import human_bytes
from ..model.document import Selection
from ..icons import icon
from ..qt_document import rebind

_LINT_COLORS = ("#d62728", "#ff9f1c")        # error, warning
_LANE_COLOR = {"PRELOAD": "#1f77b4", "SAVE_RESULT": "#9467bd", "FORWARD": "#2ca02c", "FREE": "#7f7f7f"}
_PLANNER_COLORS = ("#444444", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")


#: The plots of the timeline, in order: (key, add_plot options); built one per event-loop turn.
_PLOTS = (("lanes", {"stretch": 2}), ("buffers", {"stretch": 5, "y_mouse": True, "left_label": "buffers"}),
          ("live", {"stretch": 3}))

#: Up to this many ticks a per-tick series is drawn as steps; above, as a line through the tick
#: centres, which pyqtgraph's peak downsampling thins to the pixels in view (it does not thin
#: step curves: 100k steps cost ~50 ms a frame).
STEP_MAX = 20000


def set_series(item, values: np.ndarray) -> None:
    n = int(values.size)
    if n == 0:
        item.setData([], [])
    elif n <= STEP_MAX:
        item.setData(np.arange(n + 1, dtype=np.float64), np.r_[values, values[-1:]].astype(np.float64),
                     stepMode="right")
    else:
        item.setData(np.arange(n, dtype=np.float64) + 0.5, values.astype(np.float64), stepMode=None)
    # after setData, which resets them
    item.setClipToView(True)
    item.setDownsampling(auto=True, method="peak")


class TimelineView(QWidget):
    title = "MMAP Timeline"
    object_name = "timeline"
    dock_area = "bottom"
    usable_height = 380    # px the main window gives the dock when it comes to the front: its four stacked plots (commands, buffers, live memory) need it
    message = Signal(str)

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.plot = None                  # LanesPlot, made on first use (pyqtgraph import)
        self._plot_slices = False         # the next plot slice is queued
        self._compute_on_paint = False    # set while off screen: the first paint starts the computation
        self.task = None                  # the running timeline computation
        self.planner_task = None
        self.items: dict = {}
        self.status = QLabel("", self)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)   # long text never widens the dock
        self.summary = QLabel("", self)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)   # long text never widens the dock
        self.planners_box = QCheckBox("Planners", self)
        self.planners_box.setToolTip("Re-plan the program with every planner and compare resident bytes")
        self.planners_box.toggled.connect(self._planners_toggled)
        self.lookahead = QSpinBox(self)
        self.lookahead.setRange(0, 4096)
        self.lookahead.setValue(8)
        self.lookahead.setPrefix("lookahead ")
        self.lookahead.setToolTip("An extra min-peak planner PRELOADing this many ticks ahead")
        self.lookahead.editingFinished.connect(lambda: self._planners_toggled(self.planners_box.isChecked()))
        self.save_choice = QComboBox(self)
        self.save_choice.setToolTip("The planner whose schedule Save As writes")
        save = QToolButton(self)
        save.setText("Save As with Schedule…")
        save.setToolTip("Write a copy of the file whose only change is the MMAP section (then lint it)")
        save.clicked.connect(lambda _c=False: self.save_dialog())
        fit = QToolButton(self)
        fit.setIcon(icon("fit"))
        fit.setToolTip("Show every tick")
        fit.clicked.connect(lambda _c=False: self.plot.show_all() if self.plot else None)
        export = QToolButton(self)
        export.setIcon(icon("image"))
        export.setToolTip("Export the plots as PNG or SVG")
        export.clicked.connect(lambda _c=False: self.export_dialog())
        # a tool bar: when the dock is narrow its overflow goes behind a » button instead of
        # forcing the dock (and the window) wider
        top = QToolBar(self)
        top.setIconSize(QSize(16, 16))
        for w in (self.planners_box, self.lookahead, self.save_choice, save, fit, export):
            top.addWidget(w)
        self.body = QVBoxLayout()
        self.body.setContentsMargins(0, 0, 0, 0)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        head = QHBoxLayout()
        head.setContentsMargins(4, 0, 0, 0)
        head.addWidget(self.status, 1)
        head.addWidget(top, 0)
        lay.addLayout(head)
        lay.addLayout(self.body, 1)
        lay.addWidget(self.summary)
        self._refresh_planner_choice()
        self.set_document(qdoc)

    # -- document -------------------------------------------------------------------------
    @property
    def state(self):
        return self.qdoc.doc.simulation if self.qdoc is not None else None

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, tick=self._on_tick, debug=self._on_debug, simulation=self._on_simulation,
               problems=self._on_problems)
        self.qdoc = qdoc
        self.summary.setText("")
        self._redraw()
        self._compute_when_on_screen()

    def on_screen(self) -> bool:
        """Shown and not covered (a dock tabbed behind another is "visible" to Qt)."""
        return self.isVisible() and not self.visibleRegion().isEmpty()

    def _compute_when_on_screen(self) -> None:
        if self.qdoc is None:
            return
        if self.on_screen():
            self.ensure_computed()
        else:
            self._compute_on_paint = True

    def showEvent(self, ev) -> None:
        super().showEvent(ev)
        self._compute_when_on_screen()

    def paintEvent(self, ev) -> None:
        super().paintEvent(ev)
        if self._compute_on_paint:
            self._compute_on_paint = False
            QTimer.singleShot(0, self, self.ensure_computed)      # not inside the paint itself

    def ensure_computed(self) -> None:
        """Start the timeline computation for the document unless it is done or running."""
        st = self.state
        if st is None or st.timeline is not None or st.timeline_error or self.task is not None:
            return
        self._compute_on_paint = False
        from ..host.feeds import encode_feeds
        from ..model.simulation_state import InputsUnknown, timeline_from_sizes
        try:
            feeds = st.sim_feeds()
        except InputsUnknown as exc:
            st.set_timeline(None, None, str(exc), self)
            return
        qdoc = self.qdoc
        name = Path(qdoc.doc.path or "file").name
        nac = qdoc.nac
        self.status.setText("Computing value sizes (shapes on the meta device)…")
        # the sizes by the shape pass in the engine host (torch); the timeline from them off the UI thread
        self.task = qdoc.host.submit(f"MMAP timeline of {name}", "nac/valueSizes",
                                     {"path": qdoc.doc.path, "feeds": encode_feeds(feeds)},
                                     convert=lambda sizes: timeline_from_sizes(nac, sizes),
                                     on_done=lambda r, d=qdoc: self._computed(d, r),
                                     on_error=lambda e, d=qdoc: self._failed(d, e))
        self._queue_plot_slice()       # the plots are made while the worker computes

    def _computed(self, qdoc, result) -> None:
        self.task = None
        sizes, timeline = result
        qdoc.doc.simulation.set_timeline(sizes, timeline, "", self)
        if qdoc is self.qdoc and self.planners_box.isChecked():
            self._planners_toggled(True)

    def _failed(self, qdoc, exc) -> None:
        self.task = None
        from ..tasks import Cancelled
        if isinstance(exc, Cancelled):
            if qdoc is self.qdoc:
                self.status.setText("Timeline cancelled. Show the pane again to recompute it.")
            return
        qdoc.doc.simulation.set_timeline(None, None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                                         self)

    def _on_simulation(self, what: str, _source) -> None:
        if what in ("timeline", "planners"):
            self._redraw()
        elif what == "inputs":
            self._redraw()
            self._compute_when_on_screen()

    def _on_problems(self, _source) -> None:
        st = self.state
        if st is not None and st.timeline is not None:
            self._draw_markers(st.timeline)

    def markers(self) -> list:
        """The schedule lint's findings on their ticks: the document's ``mmap`` problems (the
        Problems pane's check, run once on open), else what the timeline computed itself."""
        from ..model.memory_timeline import Marker
        found = self.qdoc.doc.problems_from("mmap") if self.qdoc is not None else []
        out = []
        for p in found:
            sel = getattr(p, "selection", None)
            if sel is not None and sel.kind in ("mmap", "instruction") and isinstance(sel.key, int):
                out.append(Marker(sel.key, p.severity, p.kind, -1, p.reason))
        tl = self.state.timeline if self.state is not None else None
        return out if found or tl is None else list(tl.markers)

    def _draw_markers(self, tl) -> None:
        mk = sorted(self.markers(), key=lambda m: m.severity == "error")    # violations drawn last, on top
        self.items["lint"].set_data([m.tick for m in mk], [m.tick + 1 for m in mk], [0] * len(mk),
                                    [0 if m.severity == "error" else 1 for m in mk],
                                    tooltip=lambda k, mk=mk: f"{'violation' if mk[k].severity == 'error' else 'hazard'}"
                                                             f" {mk[k].kind} on tick {mk[k].tick}:\n{mk[k].message}")
        errors = sum(1 for m in mk if m.severity == "error")
        self._lint_text = f"{errors} violation(s), {len(mk) - errors} hazard(s)"
        self._update_status(tl)

    def _update_status(self, tl) -> None:
        b = tl.buffers
        n = tl.n
        nac = self.qdoc.nac
        where = f" ({nac.instruction_name(nac.instructions[tl.peak_tick])})" if n else ""
        self.status.setText(f"{n:,} ticks · {len(b):,} buffers on {b.rows:,} rows · peak {human_bytes(tl.peak)} "
                            f"at t{tl.peak_tick}{where} · {getattr(self, '_lint_text', '')}"
                            + ("" if tl.has_schedule else " · the file has no MMAP schedule"))

    def _on_tick(self, _source) -> None:
        if self.plot is not None and self.qdoc is not None:
            t = self.qdoc.tick
            self.plot.set_cursor(None if t is None else t + 0.5)

    def _on_debug(self, _source) -> None:
        if self.plot is None or self.qdoc is None:
            return
        t = self.qdoc.doc.execution_tick
        self.plot.set_exec_cursor(None if t is None else t + 0.5)

    # -- drawing --------------------------------------------------------------------------
    def plot_complete(self) -> bool:
        return self.plot is not None and all(key in self.plot.plots for key, _ in _PLOTS)

    def _queue_plot_slice(self) -> None:
        if not self._plot_slices and not self.plot_complete():
            self._plot_slices = True
            QTimer.singleShot(0, self, self._plot_slice)

    def _plot_slice(self) -> None:
        self._plot_slices = False
        if not self.plot_complete():
            self._add_next_plot()
            self._queue_plot_slice()

    def _add_next_plot(self) -> None:
        """One more of :data:`_PLOTS` (the widget itself first)."""
        from ..model.memory_timeline import LANES
        from ..widgets.lanes_plot import LanesPlot, set_bytes_axis
        if self.plot is None:
            plot = LanesPlot(self)
            plot.clicked.connect(self._clicked)
            plot.rangeSelected.connect(self._range_selected)
            self.body.addWidget(plot)
            self.plot = plot
        plot = self.plot
        key, options = next((k, o) for k, o in _PLOTS if k not in plot.plots)
        item = plot.add_plot(key, lanes=("lint",) + LANES if key == "lanes" else (), **options)
        if key == "buffers":
            item.getViewBox().invertY(True)
        elif key == "live":
            set_bytes_axis(item, "live", 0)

    def _ensure_plot(self):
        """Every plot, now (the ones the slices have not made yet)."""
        while not self.plot_complete():
            self._add_next_plot()
        return self.plot

    def _redraw(self) -> None:
        st = self.state
        tl = st.timeline if st is not None else None
        if st is None:
            self.status.setText("")
        elif tl is None:
            self.status.setText(st.timeline_error or "The timeline is computed when this pane is shown.")
        if tl is None:
            if self.plot is not None:
                self._clear_items()
            self._refresh_planner_choice()
            return
        self._draw(tl)
        self._draw_planners(st.planners if self.planners_box.isChecked() else [])
        self._on_tick(None)
        self._on_debug(None)

    def _clear_items(self) -> None:
        import pyqtgraph as pg

        from ..widgets.lanes_plot import RectBatch
        for item in self.items.values():
            if isinstance(item, RectBatch):
                item.set_data([], [], [])
            elif isinstance(item, (pg.PlotDataItem, pg.ScatterPlotItem)):
                item.setData([], [])
            elif isinstance(item, pg.TextItem):
                item.setText("")
        self._draw_planners([])

    def _draw(self, tl) -> None:
        import pyqtgraph as pg

        from ..model.memory_timeline import LANES
        from ..widgets.lanes_plot import RectBatch, ramp_index, set_bytes_axis
        plot = self._ensure_plot()
        if not self.items:
            lanes, bufs, live = plot.plots["lanes"], plot.plots["buffers"], plot.plots["live"]
            self.items["lint"] = RectBatch(_LINT_COLORS, pad=0.05)
            lanes.addItem(self.items["lint"])
            for k, lane in enumerate(LANES):
                item = RectBatch((_LANE_COLOR[lane],), pad=0.18)
                self.items[lane] = item
                lanes.addItem(item)
            self.items["buffers"] = RectBatch()
            bufs.addItem(self.items["buffers"])
            # thin (cosmetic) pens: a wide pen costs ~30 ms a frame on a 10k-point step curve
            self.items["live"] = pg.PlotDataItem(pen=pg.mkPen("#1f77b4", width=1), stepMode="right",
                                                 skipFiniteCheck=True)
            self.items["live"].setClipToView(True)
            self.items["live"].setDownsampling(auto=True, method="peak")
            live.addItem(self.items["live"])
            self.items["peak"] = pg.ScatterPlotItem(size=9, brush=pg.mkBrush("#d62728"), pen=None, symbol="t")
            live.addItem(self.items["peak"])
            self.items["peak_text"] = pg.TextItem(anchor=(0, 0), color="#d62728")
            live.addItem(self.items["peak_text"], ignoreBounds=True)
        for row, lane in enumerate(LANES, start=1):
            ticks, targets = tl.lanes[lane]
            self.items[lane].set_data(ticks, ticks + 1, np.full(ticks.size, row),
                                      tooltip=lambda k, t=ticks, v=targets, lane=lane: self._command_tip(tl, lane,
                                                                                                         int(t[k]),
                                                                                                         int(v[k])))
        b = tl.buffers
        self.items["buffers"].set_data(b.alloc, b.end, b.row, ramp_index(b.nbytes),
                                       labels=lambda k: f"v{int(b.value[k])} {human_bytes(int(b.nbytes[k]))}",
                                       tooltip=lambda k: self._buffer_tip(tl, k))
        n = tl.n
        set_series(self.items["live"], tl.live_bytes)
        self.items["peak"].setData([tl.peak_tick + 0.5], [tl.peak])
        self.items["peak_text"].setText(f"peak {human_bytes(tl.peak)} @ t{tl.peak_tick}")
        self.items["peak_text"].setPos(tl.peak_tick + 0.5, tl.peak)
        plot.plots["buffers"].setYRange(0, min(max(b.rows, 1), 40), padding=0.02)
        plot.plots["buffers"].getViewBox().setLimits(yMin=-0.5, yMax=max(b.rows, 1) + 0.5)
        plot.plots["live"].setYRange(0, max(tl.peak, 1) * 1.15, padding=0)
        set_bytes_axis(plot.plots["live"], "live", tl.peak)
        plot.set_x_limits(0, max(n, 1))
        plot.show_all()
        self._draw_markers(tl)
        self._refresh_planner_choice()

    def _buffer_tip(self, tl, k: int) -> str:
        from ..model.memory_timeline import BUFFER_KINDS
        b = tl.buffers
        v = int(b.value[k])
        doc = self.qdoc.doc
        readers = tl.readers(v)
        shown = ", ".join(f"t{r}" for r in readers[:24]) + (f" … ({len(readers)} in all)" if len(readers) > 24 else "")
        end = int(b.end[k])
        return (f"{doc.value_name(v)} — {BUFFER_KINDS[int(b.kind[k])]}\n{int(b.nbytes[k]):,} bytes\n"
                f"alive after ticks {int(b.alloc[k])}..{end - 1}" + (f" (released at t{end})" if end < tl.n else
                                                                     " (to the end)")
                + f"\nread by: {shown or 'nobody'}")

    def _command_tip(self, tl, lane: str, tick: int, target: int) -> str:
        doc = self.qdoc.doc
        size = tl.sizes.get(target if lane in ("PRELOAD", "FREE") else tick, 0)
        what = {"FORWARD": f"v{tick} → t{target}", "SAVE_RESULT": f"v{target}"}.get(lane, f"v{target}")
        return f"t{tick}: {lane} {what}\n{doc.value_name(target if lane != 'FORWARD' else tick)}\n{size:,} bytes"

    def _draw_planners(self, curves: list) -> None:
        import pyqtgraph as pg
        if self.plot is None:
            return
        plot = self.plot
        if not curves:
            if "planners" in plot.plots:
                plot.plots["planners"].hide()
            return
        if "planners" not in plot.plots:
            p = plot.add_plot("planners", stretch=3, left_label="resident bytes")
            p.addLegend(offset=(-10, 5), labelTextSize="8pt")
            self.items["planner_curves"] = []
        p = plot.plots["planners"]
        p.show()
        for c in self.items["planner_curves"]:
            p.removeItem(c)
        if p.legend is not None:
            p.legend.clear()
        self.items["planner_curves"] = []
        for k, curve in enumerate(curves):
            # added empty, then filled: clip-to-view needs the item inside its view box first
            item = pg.PlotDataItem(stepMode="right", pen=pg.mkPen(_PLANNER_COLORS[k % len(_PLANNER_COLORS)],
                                                                  width=1),
                                   name=f"{curve.label}: peak {human_bytes(curve.peak)} @ t{curve.peak_tick}")
            p.addItem(item)
            item.setClipToView(True)
            item.setDownsampling(auto=True, method="peak")
            set_series(item, curve.live_bytes)
            self.items["planner_curves"].append(item)
        self._refresh_planner_choice()

    def _planners_toggled(self, on: bool) -> None:
        st = self.state
        if not on:
            self._draw_planners([])
            return
        if st is None or st.sizes is None:
            self.ensure_computed()
            return
        if self.planner_task is not None:
            return
        from ..model.simulation_state import compute_planners
        qdoc = self.qdoc
        self.planner_task = qdoc.tasks.submit("Re-planning the MMAP schedule", compute_planners, qdoc.nac, st.sizes,
                                              self.lookahead.value(),
                                              on_done=lambda c, d=qdoc: self._planned(d, c),
                                              on_error=lambda e: self._plan_failed(e))

    def _planned(self, qdoc, curves) -> None:
        self.planner_task = None
        qdoc.doc.simulation.set_planners(curves, self)

    def _plan_failed(self, exc) -> None:
        self.planner_task = None
        self.message.emit(f"Planning failed: {exc}")

    def _refresh_planner_choice(self) -> None:
        current = self.save_choice.currentText()
        self.save_choice.blockSignals(True)
        self.save_choice.clear()
        labels = ["min-peak", "reference", "reference-lookback", f"lookahead {self.lookahead.value()}"]
        self.save_choice.addItems(labels)
        if current in labels:
            self.save_choice.setCurrentText(current)
        self.save_choice.blockSignals(False)

    # -- interaction ------------------------------------------------------------------------
    def _clicked(self, x: float, key: str, y: float) -> None:
        if self.qdoc is None or self.state is None or self.state.timeline is None:
            return
        n = self.state.timeline.n
        tick = int(np.floor(x))
        if 0 <= tick < n:
            self.select_tick(tick)

    def select_tick(self, tick: int) -> None:
        """Make ``tick`` the Studio's current instruction (what a click does)."""
        self.qdoc.select(Selection("instruction", int(tick)), self)

    def _range_selected(self, x0: float, x1: float, finished: bool) -> None:
        st = self.state
        if st is None or st.timeline is None:
            return
        s = self.range_summary(int(np.floor(x0)), int(np.floor(x1)))
        if s is None:
            return
        cmds = ", ".join(f"{k} {v}" for k, v in s.commands.items() if v) or "no commands"
        self.summary.setText(f"  t{s.first}..t{s.last} ({s.last - s.first + 1} ticks): {cmds} · moved "
                             f"{human_bytes(s.bytes_moved)} (preload {human_bytes(s.bytes_preloaded)}, saved "
                             f"{human_bytes(s.bytes_saved)}, forwarded {human_bytes(s.bytes_forwarded)}) · peak "
                             f"{human_bytes(s.peak)} @ t{s.peak_tick} · {s.buffers_alive:,} buffers alive")

    def range_summary(self, first: int, last: int):
        st = self.state
        if st is None or st.timeline is None or st.timeline.n == 0:
            return None
        return st.timeline.summary(first, last)

    # -- saving and exporting ------------------------------------------------------------------
    def planner_named(self, label: str):
        from nac_engine.compiler.replan import parse_planner
        return parse_planner(label)

    def save_with_schedule(self, label: str, path: str):
        """Re-plan with ``label`` and save to ``path`` in the engine host; returns the task. Its
        result is ``{size, violations, hazards}`` (the saved file linted as read back)."""
        st = self.state
        if st is None or st.sizes is None:
            raise RuntimeError("the timeline is not computed yet")
        self.planner_named(label)            # a label that does not parse is refused here, at once
        qdoc = self.qdoc

        def done(result, path=path, label=label):
            self.message.emit(f"Saved {Path(path).name} with the {label} schedule ({result['size']:,} bytes): lint "
                              f"{result['violations']} violation(s), {result['hazards']} hazard(s)")
        return qdoc.host.submit(f"Saving with the {label} schedule", "nac/saveWithSchedule",
                                {"path": qdoc.doc.path, "out": str(path), "planner": label,
                                 "sizes": {str(k): int(v) for k, v in st.sizes.items()}},
                                on_done=done, on_error=lambda e: self.message.emit(f"Save failed: {e}"))

    def save_dialog(self) -> None:
        if self.state is None or self.state.sizes is None:
            self.message.emit("The timeline is still being computed")
            return
        src = Path(self.qdoc.doc.path or "model.nac")
        label = self.save_choice.currentText()
        suggestion = str(src.with_name(f"{src.stem}.{label.replace(' ', '')}.nac"))
        path, _ = QFileDialog.getSaveFileName(self, "Save As with Schedule", suggestion, "NAC models (*.nac)")
        if path:
            self.save_with_schedule(label, path)

    def export(self, path: str) -> None:
        if self.plot is not None:
            self.plot.export(path)

    def export_dialog(self) -> None:
        if self.plot is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export Timeline", "timeline.png", "PNG (*.png);;SVG (*.svg)")
        if path:
            try:
                self.export(path)
            except OSError as e:
                self.message.emit(could_not_write(path, e))
