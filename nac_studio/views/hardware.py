"""Hardware-utilisation pane: what a chosen accelerator does with the file, cycle by cycle.

Pick a preset or a TOML file, adjust a few keys (array size, dataflow, SRAM, DMA engines, DRAM
bandwidth) and **Simulate**: :func:`nac_engine.sim.simulate` runs in the background with
progress and Cancel (checked between two instructions). Inputs come from the debugger's Inputs
dialog when set, else the file's input signature (:class:`~nac_studio.model.simulation_state.SimulationState`).

Shown: lanes per unit (systolic, vector, SFU, mover, core), the stalls coloured by cause, one
lane per DMA engine, and SRAM occupancy against its capacity, on one x axis that toggles between
cycles and ticks; a totals panel; a sortable per-instruction table; a roofline of the
instructions against the configuration's compute and bandwidth roofs; and, against an earlier
run (another preset, or other keys), the per-instruction deltas. Clicking a bar, a row or a
point selects its tick in the whole Studio. Export: the Perfetto trace, the CSV, PNG/SVG.
A malformed TOML file is one line in red, never a traceback.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (QSizePolicy, QAbstractItemView, QComboBox, QDoubleSpinBox, QFileDialog, QHBoxLayout, QLabel,
                               QMenu, QSpinBox, QSplitter, QTableView, QTabWidget, QTextBrowser, QToolBar, QToolButton,
                               QVBoxLayout, QWidget)

from nac_engine.sim.config import preset_names

from ..widgets.image_files import could_not_write
from ..model.document import Selection
from ..icons import icon
from ..qt_document import rebind

UNIT_LANES = ("systolic", "vector", "sfu", "mover", "core")
STALL_COLORS = {"preload_late": "#d62728", "dma_busy": "#ff7f0e", "on_demand": "#9467bd", "sram_full": "#8c564b"}
_STALLS = tuple(STALL_COLORS)
_UNIT_COLOR = {"systolic": "#1f77b4", "vector": "#2ca02c", "sfu": "#17becf", "mover": "#bcbd22", "core": "#7f7f7f"}
_DMA_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")     # preload, on_demand, spill r/w, writeback
_DMA_KINDS = ("preload", "on_demand", "spill_read", "spill_write", "writeback")
#: The keys the form edits: (dotted key, label, kind, lo, hi).
FORM_KEYS = (("array.rows", "rows", "int", 1, 65536), ("array.cols", "cols", "int", 1, 65536),
             ("array.dataflow", "dataflow", "enum", None, None), ("sram.bytes", "SRAM KiB", "kib", 1, 1 << 24),
             ("dma.engines", "DMA", "int", 1, 64), ("dram.bytes_per_cycle", "DRAM B/cycle", "float", 0.01, 1e6))
COLUMNS = ("tick", "op", "unit", "issue", "start", "end", "cycles", "compute", "stall", "stall cause", "MACs",
           "out bytes")


def _dig(raw: dict, key: str) -> Any:
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


_PROFILE_HINT = ("<p>Profile (in the toolbar, or Simulate ▸ Profile on This CPU) runs the file on this CPU and "
                 "times every instruction; the slowest are listed here, beside the simulated cycles.</p>")


def _profile_result(body: dict):
    from nac_engine.runtime.profile import Profile
    return Profile.from_data(body)


def profile_html(prof, sim=None, sim_label: str = "", top: int = 15, modules: Optional[dict] = None) -> str:
    """The Profile tab: the run's measured time, the slowest instructions (with the simulated
    cycles of the same instructions when a simulation ran, and the module that ran each:
    ``modules``, tick -> module path) and the slowest ops."""
    import html
    measured = float(sum(v for v in prof.seconds.tolist() if v == v)) or 1e-12
    cycles = sim.cycles_by_tick() if sim else {}
    head = (f"<p>Measured on this CPU: median run <b>{prof.total_seconds * 1e3:,.2f} ms</b> "
            f"({prof.repeat} timed runs after a warm-up)"
            + (f"; simulated on {html.escape(sim_label)}: <b>{sim.time_s * 1e6:,.1f} µs</b> "
               f"({sim.total_cycles:,} cycles)" if sim else "; simulate the file to see its cycles beside")
            + ".</p>")
    def cell(text, right=False):
        return f"<td nowrap{' align=right' if right else ''}>{text}</td>"

    def short(op):          # aten.addmm.default -> addmm (the lanes' names; the full one is in Instructions)
        parts = op.split(".")
        return html.escape(parts[-2] if len(parts) >= 3 else op)
    cols = "<tr><th align=left>tick</th><th align=left>op</th><th align=right>measured µs</th><th align=right>share</th>" \
           + ("<th align=right>cycles</th><th align=right>sim. µs</th>" if sim else "") \
           + ("<th align=left>module</th>" if modules else "") + "</tr>"
    rows = []
    for t, sec in prof.slowest(top):
        c = cycles.get(t)
        sim_cells = (cell(f"{c:,}", True) + cell(f"{c / sim.clock_hz * 1e6:,.2f}", True) if c is not None
                     else cell("-", True) * 2) if sim else ""
        rows.append("<tr>" + cell(f"<a href='tick:{t}'>t{t}</a>") + cell(short(prof.ops[t]))
                    + cell(f"{sec * 1e6:,.1f}", True) + cell(f"{sec / measured:.1%}", True) + sim_cells
                    + (cell(html.escape(modules.get(t, ""))) if modules else "") + "</tr>")
    ops = "".join("<tr>" + cell(short(op)) + cell(n, True) + cell(f"{sec * 1e6:,.1f}", True)
                  + cell(f"{sec / measured:.1%}", True) + "</tr>" for op, sec, n in prof.by_op()[:top])
    return (head + "<p><b>Slowest instructions</b></p><table cellspacing=0 cellpadding=2>" + cols + "".join(rows)
            + "</table><p><b>Slowest ops</b> (all their instructions)</p><table cellspacing=0 cellpadding=2>"
            "<tr><th align=left>op</th><th align=right>count</th><th align=right>measured µs</th>"
            "<th align=right>share</th></tr>" + ops + "</table>")


class InstructionModel(QAbstractTableModel):
    """The per-instruction table (sorting by the numbers, not their text)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list = []
        self.other: dict = {}          # tick -> cycles in the run compared against
        self.measured: dict = {}       # tick -> seconds measured by a Profile run on this CPU
        self._sort = (-1, Qt.SortOrder.AscendingOrder)     # the header's (column, order); -1: as simulated

    def set_rows(self, records: list, other: Optional[dict] = None, measured: Optional[dict] = None) -> None:
        self.beginResetModel()
        self.rows = [r for r in records if r.kind != "skipped"]
        self.other = other or {}
        self.measured = measured or {}
        self._apply_sort()
        self.endResetModel()

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        """The header's sort, done here on the values (a sort proxy asks ``data`` for each
        comparison: 30 ms for GPT-2's 2,300 rows at every simulation, a Python sort 2 ms)."""
        self._sort = (column, order)
        self.beginResetModel()
        self._apply_sort()
        self.endResetModel()

    def _apply_sort(self) -> None:
        column, order = self._sort
        if not 0 <= column < self.columnCount():
            return

        def key(r):
            v = self.value(r, column)
            return float("inf") if isinstance(v, float) and v != v else v        # NaN (not measured) last
        self.rows.sort(key=key, reverse=order == Qt.SortOrder.DescendingOrder)

    def extra_columns(self) -> list[str]:
        """After COLUMNS: Δ cycles when comparing, the measured time when profiled."""
        return (["Δ cycles"] if self.other else []) + (["measured µs"] if self.measured else [])

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(COLUMNS) + len(self.extra_columns())

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section] if section < len(COLUMNS) else self.extra_columns()[section - len(COLUMNS)]
        return None

    def value(self, r, col: int):
        if col == 0:
            return r.tick
        if col == 1:
            return r.op
        if col == 2:
            return r.unit
        if col == 3:
            return r.issue_cycle
        if col == 4:
            return r.start_cycle
        if col == 5:
            return r.end_cycle
        if col == 6:
            return r.end_cycle - r.issue_cycle
        if col == 7:
            return r.compute_cycles
        if col == 8:
            return r.stall_cycles
        if col == 9:
            return r.stall_cause or ""
        if col == 10:
            return r.macs
        if col == 11:
            return r.out_bytes
        if self.extra_columns()[col - len(COLUMNS)] == "measured µs":
            seconds = self.measured.get(r.tick)
            return seconds * 1e6 if seconds is not None else float("nan")
        other = self.other.get(r.tick)
        return (r.end_cycle - r.issue_cycle) - other if other is not None else 0

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        v = self.value(r, index.column())
        if role == Qt.ItemDataRole.DisplayRole:
            if isinstance(v, float):
                return "" if v != v else f"{v:,.1f}"
            if isinstance(v, int) and index.column() not in (0,):
                return f"{v:+,}" if index.column() == len(COLUMNS) else f"{v:,}"
            return str(v)
        if role == Qt.ItemDataRole.UserRole:
            return v
        if role == Qt.ItemDataRole.TextAlignmentRole and isinstance(v, (int, float)):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class HardwareView(QWidget):
    title = "Hardware"
    object_name = "hardware"
    dock_area = "bottom"
    usable_height = 420    # px the main window gives the dock when it comes to the front: unit, stall and DMA lanes (twelve when comparing) and the SRAM plot need it
    message = Signal(str)

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.task = None
        self.plot = None
        self.roof = None
        self.items: dict = {}
        self.hardware: Any = "edge-32x32"        # preset name or TOML path
        self.base = None                         # the loaded HardwareConfig (before the form's keys)
        self.x_mode = "cycles"
        # -- controls
        self.preset = QComboBox(self)
        self.preset.addItems(preset_names())
        self.preset.setCurrentText("edge-32x32")
        self.preset.setToolTip("Hardware preset (nac_engine/sim/presets)")
        self.preset.activated.connect(lambda _i: self.load_hardware(self.preset.currentText()))
        toml = QToolButton(self)
        toml.setText("TOML…")
        toml.setToolTip("Load a hardware description from a TOML file")
        toml.clicked.connect(lambda _c=False: self.toml_dialog())
        self.fields: dict[str, QWidget] = {}
        # tool bars: when the dock is narrow their overflow goes behind a » button instead of
        # forcing the dock (and the window) wider
        bar = QToolBar(self)
        bar.setIconSize(QSize(16, 16))
        bar.addWidget(self.preset)
        bar.addWidget(toml)
        form: list = []            # added after the run controls: on a narrow dock the keys overflow behind »
        for key, label, kind, lo, hi in FORM_KEYS:
            if kind == "enum":
                w = QComboBox(self)
                w.addItems(["os", "ws", "is"])
            elif kind == "float":
                w = QDoubleSpinBox(self)
                w.setRange(lo, hi)
                w.setDecimals(2)
            else:
                w = QSpinBox(self)
                w.setRange(lo, hi)
            w.setToolTip(key)
            self.fields[key] = w
            form += [QLabel(label, self), w]

        self.simulate_button = QToolButton(self)
        self.simulate_button.setText("Simulate")
        self.simulate_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.simulate_button.clicked.connect(lambda _c=False: self.simulate())
        self.cancel_button = QToolButton(self)
        self.cancel_button.setIcon(icon("cancel"))
        self.cancel_button.setToolTip("Cancel the simulation")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(lambda _c=False: self.cancel())
        self.axis = QComboBox(self)
        self.axis.addItems(["cycles", "ticks"])
        self.axis.setToolTip("x axis: cycles of the clock, or ticks (instructions)")
        self.axis.activated.connect(lambda _i: self.set_x_mode(self.axis.currentText()))
        self.compare = QComboBox(self)
        self.compare.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.compare.setMinimumContentsLength(14)
        self.compare.setToolTip("Compare with an earlier run: per-instruction deltas")
        self.compare.activated.connect(lambda _i: self._compare_chosen())
        self.compare_file_button = QToolButton(self)
        self.compare_file_button.setText("File…")
        self.compare_file_button.setToolTip("Compare with another .nac simulated on this configuration")
        self.compare_file_button.clicked.connect(lambda _c=False: self.compare_file_dialog())
        self.file_task = None
        export = QToolButton(self)
        export.setIcon(icon("image"))
        export.setToolTip("Export")
        export.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(export)
        menu.addAction("Perfetto trace (.json)…", lambda: self._export_dialog("trace"))
        menu.addAction("Per-instruction CSV…", lambda: self._export_dialog("csv"))
        menu.addAction("Lanes as PNG/SVG…", lambda: self._export_dialog("lanes"))
        menu.addAction("Roofline as PNG/SVG…", lambda: self._export_dialog("roofline"))
        export.setMenu(menu)
        self.profile_button = QToolButton(self)
        self.profile_button.setText("Profile")
        self.profile_button.setToolTip("Time every instruction on this CPU (a warm-up, then 3 runs; median), "
                                       "shown beside the simulated cycles")
        self.profile_button.clicked.connect(lambda _c=False: self.profile())
        for w in (self.simulate_button, self.cancel_button, self.axis, self.compare, self.compare_file_button, export,
                  self.profile_button):
            bar.addWidget(w)
        bar.addSeparator()
        for w in form:
            bar.addWidget(w)
        self.status = QLabel("", self)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)   # long text never widens the dock
        self.error = QLabel("", self)
        self.error.setStyleSheet("color: #c62828;")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)   # long text never widens the dock
        self.error.hide()
        self.legend = QLabel("  ".join(f"<span style='color:{c}'>■</span> {k}" for k, c in STALL_COLORS.items()),
                             self)
        self.legend.setToolTip("Stall causes")
        # one line at its natural width when there is room; clipped (whole on hover) in a narrow pane
        # instead of holding the dock (and the window) wide
        self.legend.setMinimumWidth(1)
        # -- results
        self.split = QSplitter(Qt.Orientation.Horizontal, self)
        self.left = QWidget(self.split)
        self.left_lay = QVBoxLayout(self.left)
        self.left_lay.setContentsMargins(0, 0, 0, 0)
        self.tabs = QTabWidget(self.split)
        self.totals = QTextBrowser(self.tabs)
        self.totals.setOpenLinks(False)
        self.table_model = InstructionModel(self)
        self.table = QTableView(self.tabs)
        self.table.setModel(self.table_model)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        self.table.clicked.connect(self._row_clicked)
        self.roof_host = QWidget(self.tabs)
        QVBoxLayout(self.roof_host).setContentsMargins(0, 0, 0, 0)
        # the Profile run: measured time per instruction on this CPU, the slowest listed
        self.profile_view = QTextBrowser(self.tabs)
        self.profile_view.setOpenLinks(False)
        self.profile_view.anchorClicked.connect(self._profile_link)
        self.profile_view.setHtml(_PROFILE_HINT)
        self.profile_task = None
        for w in (self.totals, self.table, self.roof_host, self.profile_view):
            w.setMinimumHeight(24)      # the dock may be short; the window must not grow for it
        self.tabs.addTab(self.totals, "Totals")
        self.tabs.addTab(self.table, "Instructions")
        self.tabs.addTab(self.roof_host, "Roofline")
        self.tabs.addTab(self.profile_view, "Profile")
        # the roofline is drawn when its tab is shown (its plot's first build is ~20 ms a
        # simulation need not wait for)
        self._roof_run = self._roof_drawn = None
        self.tabs.currentChanged.connect(lambda _i: self._roofline_if_shown())
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(bar)
        row = QHBoxLayout()
        row.setContentsMargins(6, 0, 6, 0)
        row.addWidget(self.status, 1)
        row.addWidget(self.legend)
        lay.addLayout(row)
        lay.addWidget(self.error)
        lay.addWidget(self.split, 1)
        self.load_hardware("edge-32x32")
        self.set_document(qdoc)

    # -- document ---------------------------------------------------------------------------
    @property
    def state(self):
        return self.qdoc.doc.simulation if self.qdoc is not None else None

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, tick=self._on_tick, debug=self._on_debug, simulation=self._on_simulation)
        self.qdoc = qdoc
        self._show_run()
        self._show_profile()

    def _on_simulation(self, what: str, _source) -> None:
        if what == "profile":
            self._show_profile()
        if what in ("run", "profile"):
            self._show_run()
        elif what == "config" and self.state is not None and self.state.requested is not None:
            hardware, overrides = self.state.requested
            self.load_hardware(hardware, overrides)
            self.simulate()

    def _on_tick(self, _source) -> None:
        if self.plot is None or self.qdoc is None or self.state is None or self.state.run is None:
            return
        t = self.qdoc.tick
        self.plot.set_cursor(None if t is None else self._tick_x(t))

    def _on_debug(self, _source) -> None:
        """The execution point's instruction, a dashed line on the lanes (as on the timeline)."""
        if self.plot is None or self.qdoc is None or self.state is None or self.state.run is None:
            return
        t = self.qdoc.doc.execution_tick
        self.plot.set_exec_cursor(None if t is None else self._tick_x(t))

    # -- configuration ----------------------------------------------------------------------
    def load_hardware(self, hardware: Any, overrides: Optional[dict] = None) -> bool:
        """Load a preset or TOML file into the form (its error, if any, shown in one line)."""
        from nac_engine.sim.config import HardwareConfigError, load_hardware
        try:
            cfg = load_hardware(hardware, overrides or None)
        except (HardwareConfigError, OSError, ValueError) as exc:
            name = Path(str(hardware)).name
            self.show_error(str(exc) if str(exc).startswith(name) else f"{name}: {exc}")
            return False
        self.hardware = hardware
        self.base = load_hardware(hardware)
        self.show_error("")
        if isinstance(hardware, str) and hardware in preset_names():
            self.preset.setCurrentText(hardware)
        raw = cfg.to_dict()
        for key, _label, kind, _lo, _hi in FORM_KEYS:
            v = _dig(raw, key)
            w = self.fields[key]
            if v is None:
                continue
            if kind == "enum":
                w.setCurrentText(str(v))
            elif kind == "kib":
                w.setValue(max(1, int(v) // 1024))
            else:
                w.setValue(v)
        return True

    def overrides(self) -> dict:
        """The form's keys that differ from the loaded preset/TOML."""
        raw = self.base.to_dict() if self.base is not None else {}
        out = {}
        for key, _label, kind, _lo, _hi in FORM_KEYS:
            w = self.fields[key]
            v = w.currentText() if kind == "enum" else (w.value() * 1024 if kind == "kib" else w.value())
            base = _dig(raw, key)
            if kind == "kib" and base is not None and int(base) // 1024 == w.value():
                continue
            if base is None or (v != base and not (kind == "float" and abs(float(v) - float(base)) < 5e-3)):
                out[key] = int(v) if kind in ("int", "kib") else v
        return out

    def show_error(self, text: str) -> None:
        self.error.setText(text.splitlines()[0] if text else "")
        self.error.setVisible(bool(text))

    def toml_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Hardware description", "", "TOML (*.toml);;All files (*)")
        if path:
            self.load_hardware(path)

    # -- running ----------------------------------------------------------------------------
    def simulate(self):
        """Simulate the document on the form's configuration in the background; returns the task."""
        st = self.state
        if st is None:
            return None
        from nac_engine.sim.config import HardwareConfigError, load_hardware

        from ..host.feeds import encode_feeds
        from ..model.simulation_state import InputsUnknown, hardware_argument, simulation_result
        overrides = self.overrides()
        try:
            load_hardware(self.hardware, overrides or None)
            feeds = st.sim_feeds()
        except (HardwareConfigError, InputsUnknown, OSError, ValueError) as exc:
            self.show_error(str(exc))
            return None
        if self.task is not None:
            self.task.cancel()
        self.show_error("")
        qdoc = self.qdoc
        hardware = self.hardware
        label = Path(str(hardware)).stem + (" (" + ", ".join(f"{k}={v}" for k, v in overrides.items()) + ")"
                                            if overrides else "")
        self.status.setText(f"Simulating on {label}…")
        self.cancel_button.setEnabled(True)
        self.simulate_button.setEnabled(False)
        # the callbacks go in with the submission: connected afterwards, a quick run could end first
        holder: list = []
        task = qdoc.host.submit(f"Simulating on {label}", "nac/simulate",
                                {"path": qdoc.doc.path, "hardware": hardware_argument(hardware), "overrides": overrides,
                                 "feeds": encode_feeds(feeds)}, convert=simulation_result,
                                on_done=lambda r, d=qdoc, lb=label, ov=overrides, hw=hardware:
                                self._done(d, holder[0], r, lb, hw, ov),
                                on_error=lambda e, d=qdoc: self._failed(d, holder[0], e))
        holder.append(task)
        self.task = task
        return task

    # -- the Profile run ----------------------------------------------------------------------
    def profile(self, repeat: int = 3):
        """Time every instruction on this CPU in the engine host; returns the task."""
        st = self.state
        if st is None or not self.qdoc.doc.path:
            return None
        from ..host.feeds import encode_feeds
        from ..model.simulation_state import InputsUnknown
        try:
            feeds = st.sim_feeds()
        except InputsUnknown as exc:
            self.show_error(str(exc))
            return None
        if self.profile_task is not None:
            self.profile_task.cancel()
        self.show_error("")
        qdoc = self.qdoc
        self.profile_button.setEnabled(False)
        self.profile_view.setHtml("<p>Timing every instruction on this CPU…</p>")
        holder: list = []
        task = qdoc.host.submit(f"Profiling {Path(qdoc.doc.path).name}", "nac/profile",
                                {"path": qdoc.doc.path, "feeds": encode_feeds(feeds), "repeat": repeat},
                                convert=_profile_result,
                                on_done=lambda prof, d=qdoc: self._profiled(d, holder[0], prof),
                                on_error=lambda e, d=qdoc: self._profile_failed(d, holder[0], e))
        holder.append(task)
        self.profile_task = task
        return task

    def _profile_idle(self, task) -> None:
        if task is self.profile_task:
            self.profile_task = None
            self.profile_button.setEnabled(True)

    def _profiled(self, qdoc, task, prof) -> None:
        self._profile_idle(task)
        qdoc.doc.simulation.set_profile(prof, self)
        if qdoc is self.qdoc:
            self._show_profile()
            self.tabs.setCurrentWidget(self.profile_view)

    def _profile_failed(self, qdoc, task, exc) -> None:
        from ..tasks import Cancelled
        self._profile_idle(task)
        if qdoc is self.qdoc and not isinstance(exc, Cancelled):
            self.show_error(f"Profile: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            self._show_profile()

    def _show_profile(self) -> None:
        st = self.state
        prof = st.profile if st is not None else None
        if prof is None:
            self.profile_view.setHtml(_PROFILE_HINT)
            return
        from nac_engine.format.source_map import module_paths
        self.profile_view.setHtml(profile_html(prof, st.run.result if st.run is not None else None,
                                               st.run.label if st.run is not None else "",
                                               modules=module_paths(self.qdoc.nac) if self.qdoc is not None else None))

    def _profile_link(self, url) -> None:
        text = url.toString()
        if text.startswith("tick:") and self.qdoc is not None:
            from ..model.document import Selection
            self.qdoc.select(Selection("instruction", int(text[5:])), source=self)

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.status.setText("Cancelling…")

    def _idle(self, task) -> None:
        if task is self.task:
            self.task = None
            self.cancel_button.setEnabled(False)
            self.simulate_button.setEnabled(True)

    def _done(self, qdoc, task, result, label, hardware, overrides) -> None:
        from ..model.simulation_state import SimRun
        self._idle(task)
        res, seconds = result
        qdoc.doc.simulation.add_run(SimRun(label, hardware, dict(overrides), res, seconds), self)
        if qdoc is self.qdoc:
            self._refresh_compare()

    def _failed(self, qdoc, task, exc) -> None:
        from ..tasks import Cancelled
        self._idle(task)
        if qdoc is not self.qdoc:
            return
        if isinstance(exc, Cancelled):
            self.status.setText("Simulation cancelled.")
        else:
            self.show_error(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            self.status.setText("")

    # -- drawing ----------------------------------------------------------------------------
    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.plot is None:
            # the lanes' plots are built (hidden) once the pane is on screen, not in the turn
            # that draws the first simulation: that turn then only draws (~40 ms less of a stall)
            QTimer.singleShot(0, self, lambda: self.plot is None and self._ensure_plot().hide())

    def _ensure_plot(self):
        if self.plot is not None:
            return self.plot
        from ..widgets.lanes_plot import LanesPlot, set_bytes_axis
        plot = LanesPlot(self.left)
        plot.add_plot("units", stretch=4, lanes=UNIT_LANES + ("stalls",))
        plot.add_plot("dma", stretch=2)
        plot.add_plot("sram", stretch=3, left_label="SRAM")
        set_bytes_axis(plot.plots["sram"], "SRAM", 0)
        plot.clicked.connect(self._clicked)
        self.left_lay.addWidget(plot)
        self.plot = plot
        total = max(self.split.width(), 600)
        self.split.setSizes([int(total * 0.64), total - int(total * 0.64)])
        return plot

    def _refresh_compare(self) -> None:
        st = self.state
        self.compare.blockSignals(True)
        self.compare.clear()
        self.compare.addItem("compare: none", None)
        cmp = self._file_comparison()
        if cmp is not None:
            self.compare.addItem(f"compare: {cmp.name}", "file")
            self.compare.setCurrentIndex(1)
        if st is not None:
            for k, run in enumerate(st.runs):
                if k != st.current:
                    self.compare.addItem(f"compare: #{k + 1} {run.label}", k)
            if st.compare_with is not None:
                i = self.compare.findData(st.compare_with)
                if i >= 0:
                    self.compare.setCurrentIndex(i)
        self.compare.blockSignals(False)

    def _compare_chosen(self) -> None:
        st = self.state
        if st is not None:
            st.file_comparison = None      # choosing anything else drops the file comparison
            data = self.compare.currentData()
            st.set_current(st.current, None if data == "file" else data, self)

    def _show_run(self) -> None:
        st = self.state
        run = st.run if st is not None else None
        self._refresh_compare()
        if run is None:
            self.status.setText("" if st is None else "Choose a configuration and press Simulate.")
            self.table_model.set_rows([])
            self.totals.setHtml("")
            return
        res = run.result
        other = st.other
        other_cycles = ({r.tick: r.end_cycle - r.issue_cycle for r in other.result.instructions}
                        if other is not None else None)
        cmp = self._file_comparison()
        if cmp is not None:
            from ..model.file_comparison import totals_side_by_side_html
            other_cycles = cmp.other_cycles()
        self.table_model.set_rows(res.instructions, other_cycles, st.measured())
        self.totals.setHtml(self.totals_html(run, other) if cmp is None else
                            totals_side_by_side_html(Path(self.qdoc.doc.path or "this file").name, run, cmp))
        self.status.setText(f"{run.label}: {res.total_cycles:,} cycles = {res.time_s * 1e6:,.2f} µs at "
                            f"{res.clock_hz / 1e6:g} MHz · simulated in {run.seconds:.2f} s")
        self._draw(res, other.result if other is not None else None, other.label if other is not None else "")
        self._roof_run = run
        self._roofline_if_shown()
        self._on_tick(None)
        self._on_debug(None)

    # -- comparing with another file -----------------------------------------------------------
    def _file_comparison(self):
        """The document's file comparison when it was matched against the run shown now."""
        st = self.state
        cmp = st.file_comparison if st is not None else None
        return cmp if cmp is not None and st.run is not None and cmp.against is st.run else None

    def compare_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Compare with a NAC file", "", "NAC (*.nac);;All files (*)")
        if path:
            self.compare_file(path)

    def compare_file(self, path: str):
        """Simulate ``path`` in the background on the configuration of the run shown (this file is
        simulated first) and show it against that run; returns the task."""
        st = self.state
        if st is None or st.run is None:
            self.show_error("Simulate this file first; the other file runs on the same configuration")
            return None
        from ..model.file_comparison import comparison_from_host
        from ..host.feeds import encode_feeds
        from ..model.simulation_state import hardware_argument
        from ..model.simulation_state import InputsUnknown
        run = st.run
        try:
            feeds = st.sim_feeds()
        except InputsUnknown as exc:
            self.show_error(str(exc))
            return None
        if self.file_task is not None:
            self.file_task.cancel()
        self.show_error("")
        qdoc = self.qdoc
        config = run.label
        self.status.setText(f"Simulating {Path(path).name} on {config}…")
        holder: list = []
        count = len(qdoc.nac.instructions)
        task = qdoc.host.submit(f"Simulating {Path(path).name} on {config}", "nac/simulateFile",
                                {"path": str(path), "hardware": hardware_argument(run.hardware),
                                 "overrides": run.overrides, "feeds": encode_feeds(feeds)},
                                convert=lambda body, p=str(path), r=run: comparison_from_host(p, body, r, config, count),
                                on_done=lambda c, d=qdoc, r=run: self._file_done(d, holder[0], c, r),
                                on_error=lambda e, d=qdoc: self._file_failed(d, holder[0], e))
        holder.append(task)
        self.file_task = task
        return task

    def _file_done(self, qdoc, task, cmp, against) -> None:
        if task is self.file_task:
            self.file_task = None
        cmp.against = against
        st = qdoc.doc.simulation
        st.file_comparison = cmp
        st.set_current(st.current, None, self)      # "run" changed: every view of it redraws

    def _file_failed(self, qdoc, task, exc) -> None:
        from ..tasks import Cancelled
        if task is self.file_task:
            self.file_task = None
        if qdoc is self.qdoc:
            self.status.setText("")
            self.show_error("Comparison cancelled" if isinstance(exc, Cancelled) else
                            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    def _ticks_of_cycles(self, res):
        recs = [r for r in res.instructions]
        starts = np.asarray([r.issue_cycle for r in recs], dtype=np.float64)
        ticks = np.asarray([r.tick for r in recs], dtype=np.float64)
        ends = np.asarray([r.end_cycle for r in recs], dtype=np.float64)
        # a cycle maps into its instruction's tick, linearly from issue to end
        xp = np.r_[starts, ends[-1:]] if len(recs) else np.zeros(1)
        fp = np.r_[ticks, ticks[-1:] + 1] if len(recs) else np.zeros(1)
        order = np.argsort(xp, kind="stable")
        return xp[order], fp[order]

    def _x(self, cycles):
        c = np.asarray(cycles, dtype=np.float64)
        if self.x_mode == "cycles" or self.items.get("map") is None:
            return c
        xp, fp = self.items["map"]
        return np.interp(c, xp, fp)

    def _tick_x(self, tick: int) -> float:
        run = self.state.run if self.state is not None else None
        if run is None:
            return float(tick)
        if self.x_mode == "ticks":
            return tick + 0.5
        recs = run.result.instructions
        if 0 <= tick < len(recs):
            r = recs[tick]
            return (r.issue_cycle + r.end_cycle) / 2
        return 0.0

    def set_x_mode(self, mode: str) -> None:
        self.x_mode = mode
        self.axis.setCurrentText(mode)
        if self.state is not None and self.state.run is not None:
            other = self.state.other
            self._draw(self.state.run.result, other.result if other is not None else None,
                       other.label if other is not None else "")
            self._on_tick(None)
            self._on_debug(None)

    def _draw(self, res, other=None, other_label: str = "") -> None:
        """``res``'s lanes; with ``other`` (a run compared against, e.g. another preset) its unit
        and stall lanes too, below a divider, on the same cycle axis: where each configuration
        spends its time, side by side rather than as two totals."""
        import pyqtgraph as pg

        from ..widgets.lanes_plot import RectBatch, set_bytes_axis
        plot = self._ensure_plot()
        plot.show()                       # (built hidden when the pane first showed)
        units, dma, sram = plot.plots["units"], plot.plots["dma"], plot.plots["sram"]
        if "units" not in self.items:
            self.items["units"] = RectBatch([_UNIT_COLOR[u] for u in UNIT_LANES], pad=0.15)
            self.items["stalls"] = RectBatch([STALL_COLORS[k] for k in _STALLS], pad=0.15)
            units.addItem(self.items["units"])
            units.addItem(self.items["stalls"])
            self.items["dma"] = RectBatch(_DMA_COLORS, pad=0.15)
            dma.addItem(self.items["dma"])
            self.items["sram"] = pg.PlotDataItem(pen=pg.mkPen("#1f77b4", width=1), stepMode="right",
                                                 skipFiniteCheck=True)
            self.items["sram"].setClipToView(True)
            self.items["sram"].setDownsampling(auto=True, method="peak")
            sram.addItem(self.items["sram"])
            self.items["cap"] = pg.InfiniteLine(angle=0, movable=False, label="capacity",
                                                pen=pg.mkPen("#d62728", style=Qt.PenStyle.DashLine),
                                                labelOpts={"position": 0.05, "color": "#d62728"})
            sram.addItem(self.items["cap"], ignoreBounds=True)
            self.items["units_b"] = RectBatch([_UNIT_COLOR[u] for u in UNIT_LANES], pad=0.15)
            self.items["stalls_b"] = RectBatch([STALL_COLORS[k] for k in _STALLS], pad=0.15)
            self.items["divider"] = pg.InfiniteLine(pos=len(UNIT_LANES) + 1, angle=0, movable=False,
                                                    pen=pg.mkPen("#888888", width=1))
            for key in ("units_b", "stalls_b"):
                units.addItem(self.items[key])
            units.addItem(self.items["divider"], ignoreBounds=True)
        self.items["map"] = self._ticks_of_cycles(res)
        lanes = UNIT_LANES + ("stalls",)
        self._unit_lanes(res, self.items["units"], self.items["stalls"], 0)
        self.items["units_b"].set_data([], [], [], [])
        self.items["stalls_b"].set_data([], [], [], [])
        self.items["divider"].setVisible(other is not None)
        if other is not None:
            # the compared run's lanes, named "vs <lane>"; its own name is in the lane below them
            self._unit_lanes(other, self.items["units_b"], self.items["stalls_b"], len(lanes))
            lanes = lanes + tuple(f"vs {u}" for u in lanes)
        plot.set_lanes(units, lanes, named=len(UNIT_LANES) + 1)      # the run's own lanes; a compared run's thin out
        # twelve lanes need the room of six: the unit plot's share of the height doubles
        plot.ci.layout.setRowStretchFactor(0, 8 if other is not None else 4)
        units.setTitle(f"lanes below the line: {other_label}" if other is not None else None, size="9pt")
        engines = sorted({t.engine for t in res.transfers})
        plot.set_lanes(dma, [f"DMA {e}" for e in engines] or ["DMA"])
        plot.ci.layout.setRowStretchFactor(1, 2 if len(engines) <= 2 else 4)   # a server's 8 engines
        tr = res.transfers
        self.items["dma"].set_data(self._x([t.start_cycle for t in tr]), self._x([t.end_cycle for t in tr]),
                                   [engines.index(t.engine) for t in tr],
                                   [_DMA_KINDS.index(t.kind) if t.kind in _DMA_KINDS else 0 for t in tr],
                                   tooltip=lambda k, tr=tr: (f"{tr[k].kind} v{tr[k].value} ({tr[k].src} → {tr[k].dst})"
                                                             f"\n{tr[k].bytes:,} bytes, cycles {tr[k].start_cycle:,}.."
                                                             f"{tr[k].end_cycle:,}\nissued at t{tr[k].tick}, queued "
                                                             f"{tr[k].queue_cycles:,} cycles"))
        sx = self._x(list(res.sram_cycles) + [res.total_cycles])
        sy = np.asarray(list(res.sram_bytes) + list(res.sram_bytes[-1:]), dtype=np.float64)
        self.items["sram"].setData(sx, sy[:sx.size] if sy.size >= sx.size else np.r_[sy, sy[-1:]])
        self.items["cap"].setValue(res.sram_capacity)
        sram.setYRange(0, max(res.sram_capacity, res.peak_sram_bytes) * 1.1, padding=0)
        set_bytes_axis(sram, "SRAM", max(res.sram_capacity, res.peak_sram_bytes))
        hi = float(self._x([res.total_cycles])[0]) if self.x_mode == "cycles" else float(len(res.instructions))
        if other is not None and self.x_mode == "cycles":
            hi = max(hi, float(other.total_cycles))
        plot.set_x_limits(0, max(hi, 1))
        plot.show_all()

    def _unit_lanes(self, res, units, stalls, first_lane: int) -> None:
        """``res``'s busy instructions on their unit's lane and its stalls on the stall lane, from
        lane ``first_lane`` down."""
        recs = [r for r in res.instructions if r.kind != "skipped"]
        lane_of = {u: k for k, u in enumerate(UNIT_LANES)}
        busy = [r for r in recs if r.end_cycle > r.start_cycle]
        # the compared run keeps its own cycles (the tick map is this run's, not its)
        x = self._x if first_lane == 0 else (lambda c: np.asarray(c, dtype=np.float64))
        x0 = x([r.start_cycle for r in busy])
        x1 = x([r.end_cycle for r in busy])
        if self.x_mode == "ticks":      # each instruction fills its own tick
            x0 = np.asarray([r.tick for r in busy], dtype=np.float64)
            x1 = x0 + 1
        units.set_data(x0, x1, [first_lane + lane_of.get(r.unit, 4) for r in busy],
                       [lane_of.get(r.unit, 4) for r in busy],
                       labels=lambda k, b=busy: f"v{b[k].tick} {b[k].op.split('.')[-2] if '.' in b[k].op else b[k].op}",
                       tooltip=lambda k, b=busy: self._instr_tip(b[k]))
        stalled = [r for r in recs if r.stall_cycles > 0]
        cause = [max(r.stall_breakdown, key=r.stall_breakdown.get) if r.stall_breakdown else "preload_late"
                 for r in stalled]
        s0 = x([r.issue_cycle for r in stalled])
        s1 = x([r.issue_cycle + r.stall_cycles for r in stalled])
        if self.x_mode == "ticks" and first_lane:      # (this run's map places its own stalls)
            s0 = np.asarray([r.tick for r in stalled], dtype=np.float64)
            s1 = s0 + 1
        stalls.set_data(s0, s1, [first_lane + len(UNIT_LANES)] * len(stalled),
                        [_STALLS.index(c) if c in _STALLS else 0 for c in cause],
                        tooltip=lambda k, s=stalled: self._instr_tip(s[k]))

    def _instr_tip(self, r) -> str:
        lines = [f"t{r.tick}: {r.op} on {r.unit} ({r.op_class})",
                 f"cycles {r.issue_cycle:,} → {r.start_cycle:,} → {r.end_cycle:,} (compute {r.compute_cycles:,})"]
        if r.stall_cycles:
            lines.append(f"stall {r.stall_cycles:,}: " + ", ".join(f"{k} {v:,}" for k, v in r.stall_breakdown.items())
                         + (f" — {r.stall_cause}" if r.stall_cause else ""))
        if r.macs:
            lines.append(f"{r.macs:,} MACs")
        lines.append(f"out {r.out_bytes:,} B, route {r.route}")
        return "\n".join(lines)

    def totals_html(self, run, other=None) -> str:
        res = run.result

        def delta(a, b):
            return f" <span style='color:#888'>({a - b:+,})</span>" if b is not None else ""
        o = other.result if other is not None else None
        rows = [("Configuration", run.label), ("Total cycles", f"{res.total_cycles:,}"
                                               + delta(res.total_cycles, o.total_cycles if o else None)),
                ("Time", f"{res.time_s * 1e6:,.3f} µs at {res.clock_hz / 1e6:g} MHz"),
                ("Core / DMA drain", f"{res.core_cycles:,} / {res.drain_cycles:,} cycles"),
                ("MACs", f"{res.macs:,}")]
        rows += [(f"Utilisation {u}", f"{v:.1%}") for u, v in res.utilization.items()]
        rows += [("DRAM → SRAM", f"{res.dram_read_bytes:,} B"), ("SRAM → DRAM", f"{res.dram_write_bytes:,} B")]
        rows += [(f"  {k}", f"{v:,} B") for k, v in res.dram_bytes_by_kind.items() if v]
        rows += [("SRAM peak", f"{res.peak_sram_bytes:,} of {res.sram_capacity:,} B"),
                 ("Spills", str(len(res.spills))),
                 ("Stall cycles", f"{res.stall_cycles:,}" + delta(res.stall_cycles, o.stall_cycles if o else None))]
        rows += [(f"<span style='color:{STALL_COLORS.get(k, '#000')}'>■</span> {k}", f"{v:,}")
                 for k, v in res.stall_cycles_by_cause.items()]
        if other is not None:
            rows.append(("Compared with", other.label))
        return "<table cellspacing=2>" + "".join(f"<tr><td>{a}</td><td align=right>{b}</td></tr>" for a, b in rows) \
            + "</table>"

    def _roofline_if_shown(self, force: bool = False) -> None:
        run = self._roof_run
        if run is not None and run is not self._roof_drawn and (force or self.tabs.currentWidget() is self.roof_host):
            self._draw_roofline(run)

    def _draw_roofline(self, run) -> None:
        self._roof_drawn = run
        import pyqtgraph as pg
        if self.roof is None:
            self.roof = pg.PlotWidget(self.roof_host)
            self.roof.setBackground(None)
            self.roof.setLogMode(x=True, y=True)
            self.roof.setLabel("bottom", "arithmetic intensity (MAC/byte)")
            self.roof.setLabel("left", "achieved MAC/cycle")
            self.roof_host.layout().addWidget(self.roof)
            self.items["roof_pts"] = pg.ScatterPlotItem(size=7, pen=None, brush=pg.mkBrush(31, 119, 180, 170))
            self.items["roof_pts"].sigClicked.connect(self._roof_clicked)
            self.roof.addItem(self.items["roof_pts"])
            self.items["roof_lines"] = self.roof.plot([], [], pen=pg.mkPen("#d62728", width=1.5))
        pts = self.roofline_points(run)
        self.items["roof_pts"].setData([dict(pos=(np.log10(ai), np.log10(tp)), data=t) for t, ai, tp in pts])
        compute_roof, bw = self.roofs(run)
        if pts:
            # the ridge (where bandwidth meets compute) and the compute roof stay on the plot even
            # when every instruction is far below them (server-128x128: 16,384 MAC/cycle)
            ridge = compute_roof / bw if bw > 0 else max(p[1] for p in pts)
            lo = np.log10(min(p[1] for p in pts)) - 0.5
            hi = max(np.log10(max(p[1] for p in pts)), np.log10(ridge)) + 0.5
            ais = np.logspace(lo, hi, 64)
            self.items["roof_lines"].setData(ais, np.minimum(compute_roof, bw * ais))
            y_lo = min(np.log10(max(p[2], 1e-12)) for p in pts) - 0.5
            self.roof.setXRange(lo, hi, padding=0)
            self.roof.setYRange(min(y_lo, np.log10(bw * 10 ** lo)), np.log10(compute_roof) + 0.3, padding=0)

    def roofs(self, run) -> tuple[float, float]:
        """(MAC/cycle of the array, DRAM bytes/cycle) of the configuration the run used."""
        from nac_engine.sim.config import load_hardware
        cfg = load_hardware(run.hardware, run.overrides or None)
        return float(cfg.array.rows * cfg.array.cols), float(cfg.dram.bytes_per_cycle)

    @staticmethod
    def roofline_points(run) -> list[tuple[int, float, float]]:
        """(tick, MACs per byte moved, MACs per cycle) of every instruction that does MACs."""
        out = []
        for r in run.result.instructions:
            moved = r.sram_read_bytes + r.sram_write_bytes or r.out_bytes
            cycles = r.end_cycle - r.start_cycle
            if r.macs > 0 and moved > 0 and cycles > 0:
                out.append((r.tick, r.macs / moved, r.macs / cycles))
        return out

    # -- interaction ------------------------------------------------------------------------
    def select_tick(self, tick: int) -> None:
        if self.qdoc is not None and 0 <= tick < len(self.qdoc.nac.instructions):
            self.qdoc.select(Selection("instruction", int(tick)), self)

    def _clicked(self, x: float, key: str, y: float) -> None:
        run = self.state.run if self.state is not None else None
        if run is None:
            return
        if self.x_mode == "ticks":
            self.select_tick(int(np.floor(x)))
            return
        recs = [r for r in run.result.instructions if r.kind != "skipped"]
        starts = np.asarray([r.issue_cycle for r in recs])
        k = int(np.searchsorted(starts, x, "right")) - 1
        if 0 <= k < len(recs):
            self.select_tick(recs[k].tick)

    def _row_clicked(self, index) -> None:
        r = self.table_model.rows[index.row()]
        self.select_tick(r.tick)

    def _roof_clicked(self, _item, points, *_):
        if len(points):
            self.select_tick(int(points[0].data()))

    # -- export -----------------------------------------------------------------------------
    def export(self, what: str, path: str) -> None:
        from nac_engine.format.writer import atomic_write
        run = self.state.run if self.state is not None else None
        if run is None:
            raise RuntimeError("nothing simulated yet")
        if what == "trace":
            from nac_engine.sim.trace import write_trace
            write_trace(run.result, path)
        elif what == "csv":
            atomic_write(path, run.result.to_csv().encode("utf-8"))
        elif what == "lanes" and self.plot is not None:
            self.plot.export(path)
        elif what == "roofline":
            self._roofline_if_shown(force=True)       # (drawn when its tab shows: maybe not yet)
            if self.roof is not None:
                from ..widgets.lanes_plot import export_scene
                export_scene(self.roof.scene(), path)
        self.message.emit(f"Exported {Path(path).name}")

    def _export_dialog(self, what: str) -> None:
        if self.state is None or self.state.run is None:
            return
        filt = {"trace": "Chrome trace (*.json)", "csv": "CSV (*.csv)"}.get(what, "PNG (*.png);;SVG (*.svg)")
        default = {"trace": "trace.json", "csv": "instructions.csv"}.get(what, f"{what}.png")
        path, _ = QFileDialog.getSaveFileName(self, "Export", default, filt)
        if path:
            try:
                self.export(what, path)
            except OSError as e:
                self.message.emit(could_not_write(path, e))
