"""Design-space sweep pane: a grid of hardware configurations, as a table and a scatter plot.

Give axes (``array.rows=16,32,64; dram.bytes_per_cycle=8,16``) on top of a preset and **Run**:
:func:`nac_engine.sim.sweep.sweep` propagates shapes once and simulates every point in local
processes, or on Dask when a scheduler is given (``local:N`` or ``tcp://HOST:PORT``, as
``nac sim --scheduler``). **Load JSON…** shows what ``nac sim --sweep ... --json`` printed.
The scatter plots total cycles against a chosen key (or the SRAM peak) with the Pareto front
(nothing else is both faster and smaller) drawn and its points ringed; clicking a point or a row
opens that configuration in the hardware pane, which simulates it. Failed points are listed
with their configuration and error.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from nac_engine.files import open_regular

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QSizePolicy, QAbstractItemView, QComboBox, QFileDialog, QLabel, QLineEdit, QSplitter,
                               QTableWidget, QTableWidgetItem, QToolBar, QToolButton, QVBoxLayout, QWidget)

from ..qt_document import rebind

METRICS = ("total_cycles", "time_s", "stall_cycles", "dram_read_bytes", "dram_write_bytes", "peak_sram_bytes",
           "spills", "mac_utilization")


class _NumberItem(QTableWidgetItem):
    """Sorts by value, not text."""

    def __init__(self, value):
        text = "" if value is None else (f"{value:,}" if isinstance(value, int) and not isinstance(value, bool)
                                         else (f"{value:.4g}" if isinstance(value, float) else str(value)))
        super().__init__(text)
        self.value = value
        if isinstance(value, (int, float)):
            self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other):
        a, b = self.value, getattr(other, "value", None)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a < b
        return str(a) < str(b)


class SweepView(QWidget):
    title = "Sweep"
    object_name = "sweep"
    dock_area = "bottom"
    message = Signal(str)

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.task = None
        self.plot = None
        self.items: dict = {}
        from nac_engine.sim.config import preset_names
        self.preset = QComboBox(self)
        self.preset.addItems(preset_names())
        self.preset.setCurrentText("edge-32x32")
        self.axes = QLineEdit("array.rows=8,16,32,64; dram.bytes_per_cycle=8,16,32", self)
        self.axes.setToolTip("KEY=V1,V2,... separated by ';' (a grid over every key)")
        self.scheduler = QLineEdit(self)
        self.scheduler.setPlaceholderText("local processes (or local:N, tcp://host:8786)")
        self.scheduler.setToolTip("Where the points run: empty = local processes; local:N = a Dask LocalCluster; "
                                  "tcp://HOST:PORT = an existing Dask scheduler")
        self.run_button = QToolButton(self)
        self.run_button.setText("Run Sweep")
        self.run_button.clicked.connect(lambda _c=False: self.run())
        load = QToolButton(self)
        load.setText("Load JSON…")
        load.setToolTip("Show the output of nac sim --sweep ... --json")
        load.clicked.connect(lambda _c=False: self.load_dialog())
        self.x_key = QComboBox(self)
        self.x_key.setToolTip("The scatter's x axis")
        self.x_key.activated.connect(lambda _i: self._draw())
        self.axes.setMinimumWidth(260)
        self.scheduler.setMinimumWidth(160)
        bar = QToolBar(self)       # overflow behind » when narrow, never a wider window
        for w in (self.preset, self.axes, self.scheduler, self.run_button, load, QLabel(" x:", self), self.x_key):
            bar.addWidget(w)
        self.status = QLabel("", self)
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)   # long text never widens the dock
        self.table = QTableWidget(0, 0, self)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSortingEnabled(True)
        self.table.verticalHeader().hide()
        self.table.cellClicked.connect(lambda row, _c: self.open_row(self._row_index(row)))
        self.split = QSplitter(Qt.Orientation.Horizontal, self)
        self.split.addWidget(self.table)
        self.plot_host = QWidget(self.split)
        QVBoxLayout(self.plot_host).setContentsMargins(0, 0, 0, 0)
        self.split.setSizes([500, 500])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(bar)
        lay.addWidget(self.status)
        lay.addWidget(self.split, 1)
        self.set_document(qdoc)

    @property
    def state(self):
        return self.qdoc.doc.simulation if self.qdoc is not None else None

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, simulation=self._on_simulation)
        self.qdoc = qdoc
        self._show()

    def _on_simulation(self, what: str, _source) -> None:
        if what == "sweep":
            self._show()

    # -- running ----------------------------------------------------------------------------
    def parse_axes(self, text: str) -> dict:
        from nac_engine.sim.sweep import grid, parse_axis
        axes = dict(parse_axis(part.strip()) for part in text.split(";") if part.strip())
        if not axes:
            raise ValueError("give at least one KEY=V1,V2,...")
        grid(axes)
        return axes

    def run(self):
        st = self.state
        if st is None:
            return None
        from nac_engine.sim.config import HardwareConfigError, load_hardware
        from nac_engine.sim.sweep import grid, parse_scheduler

        from ..model.simulation_state import InputsUnknown, SweepTable, hardware_argument, sweep_result
        hardware = self.preset.currentText()
        scheduler = self.scheduler.text().strip() or None
        try:
            axes = self.parse_axes(self.axes.text())
            base = load_hardware(hardware)
            for values in grid(axes):
                load_hardware(base, values)
            if scheduler:
                parse_scheduler(scheduler)
            feeds = st.sim_feeds()
        except (HardwareConfigError, InputsUnknown, ValueError) as exc:
            self.status.setText(f"<span style='color:#c62828'>{_escape(str(exc).splitlines()[0])}</span>")
            return None
        qdoc = self.qdoc
        n = 1
        for v in axes.values():
            n *= len(v)
        self.status.setText(f"Sweeping {n} point(s) on {hardware}" + (f" via {scheduler}" if scheduler else "") + "…")
        self.run_button.setEnabled(False)

        def done(result, qdoc=qdoc):
            rows, seconds = result
            self.task = None
            self.run_button.setEnabled(True)
            qdoc.doc.simulation.set_sweep(SweepTable(hardware, axes, rows, scheduler, seconds), self)

        def failed(exc):
            self.task = None
            self.run_button.setEnabled(True)
            self.status.setText(f"<span style='color:#c62828'>{_escape(type(exc).__name__)}: "
                                f"{_escape(str(exc).splitlines()[0] if str(exc) else '')}</span>")
        from ..host.feeds import encode_feeds
        self.task = qdoc.host.submit(f"Sweeping {n} configurations", "nac/sweep",
                                     {"path": qdoc.doc.path, "hardware": hardware_argument(hardware), "axes": axes,
                                      "feeds": encode_feeds(feeds), "scheduler": scheduler},
                                     convert=sweep_result, on_done=done, on_error=failed)
        return self.task

    def load_json(self, path: str) -> None:
        from ..model.simulation_state import SweepTable, sweep_rows_from_json
        try:
            with open_regular(path) as fh:
                raw = fh.read((64 << 20) + 1)
            if len(raw) > 64 << 20:
                raise ValueError("larger than 64 MiB")
            axes, rows = sweep_rows_from_json(json.loads(raw))
        except (OSError, ValueError) as exc:
            self.status.setText(f"<span style='color:#c62828'>{_escape(Path(path).name)}: "
                                f"{_escape(str(exc).splitlines()[0])}</span>")
            return
        self.state.set_sweep(SweepTable(self.preset.currentText(), axes, rows), self)

    def load_dialog(self) -> None:
        if self.state is None:
            return
        path, _ = QFileDialog.getOpenFileName(self, "Sweep results", "", "JSON (*.json);;All files (*)")
        if path:
            self.load_json(path)

    # -- showing ----------------------------------------------------------------------------
    def _show(self) -> None:
        st = self.state
        table = st.sweep if st is not None else None
        self.table.setSortingEnabled(False)
        if table is None:
            self.table.setRowCount(0)
            self.table.setColumnCount(0)
            if st is not None and not self.task:
                self.status.setText("Give axes and run a sweep, or load nac sim --sweep --json output.")
            self._draw()
            return
        keys = table.keys()
        cols = keys + list(METRICS) + ["error"]
        self.table.setColumnCount(len(cols))
        self.table.setHorizontalHeaderLabels(cols)
        self.table.setRowCount(len(table.rows))
        for r, row in enumerate(table.rows):
            d = row.as_dict()
            for c, key in enumerate(cols):
                item = _NumberItem(d.get(key))
                item.setData(Qt.ItemDataRole.UserRole, r)
                self.table.setItem(r, c, item)
        self.table.setSortingEnabled(True)
        self.table.resizeColumnsToContents()
        current = self.x_key.currentText()
        self.x_key.clear()
        self.x_key.addItems(keys + ["peak_sram_bytes"])
        if current in keys + ["peak_sram_bytes"]:
            self.x_key.setCurrentText(current)
        failed = [row for row in table.rows if not row.ok]
        ok = len(table.rows) - len(failed)
        text = (f"{len(table.rows)} point(s) on {Path(str(table.hardware)).stem}"
                + (f" via {table.scheduler}" if table.scheduler else "")
                + (f" in {table.seconds:.1f} s" if table.seconds else "") + f"; {ok} ok")
        if failed:
            text += "; failed: " + "; ".join(
                ", ".join(f"{k}={v}" for k, v in row.values.items()) + f" ({row.error})" for row in failed[:5])
        self.status.setText(_escape(text))
        self._draw()

    def front(self) -> list[int]:
        """Row indices on the Pareto front of (x key, total cycles)."""
        from ..model.simulation_state import pareto_front
        table = self.state.sweep if self.state is not None else None
        key = self.x_key.currentText()
        if table is None or not key:
            return []
        ok = [i for i, r in enumerate(table.rows) if r.ok and isinstance(r.as_dict().get(key), (int, float))]
        xs = [float(table.rows[i].as_dict()[key]) for i in ok]
        ys = [float(table.rows[i].total_cycles) for i in ok]
        return [ok[k] for k in pareto_front(xs, ys)]

    def _draw(self) -> None:
        import pyqtgraph as pg
        table = self.state.sweep if self.state is not None else None
        if self.plot is None:
            if table is None:
                return
            self.plot = pg.PlotWidget(self.plot_host)
            self.plot.setBackground(None)
            self.plot.setLabel("left", "total cycles")
            self.plot_host.layout().addWidget(self.plot)
            self.items["front"] = self.plot.plot([], [], pen=pg.mkPen("#d62728", width=1.5))
            self.items["points"] = pg.ScatterPlotItem(size=9, pen=None, brush=pg.mkBrush(31, 119, 180, 190))
            self.items["points"].sigClicked.connect(lambda _i, pts, *_: pts and self.open_row(int(pts[0].data())))
            self.plot.addItem(self.items["points"])
            self.items["best"] = pg.ScatterPlotItem(size=15, pen=pg.mkPen("#d62728", width=2), brush=None)
            self.plot.addItem(self.items["best"])
        key = self.x_key.currentText()
        if table is None or not key:
            for k in ("points", "best", "front"):
                self.items[k].setData([], [])
            return
        self.plot.setLabel("bottom", key)
        ok = [(i, r) for i, r in enumerate(table.rows) if r.ok and isinstance(r.as_dict().get(key), (int, float))]
        self.items["points"].setData([dict(pos=(float(r.as_dict()[key]), float(r.total_cycles)), data=i)
                                      for i, r in ok])
        front = self.front()
        fx = [float(table.rows[i].as_dict()[key]) for i in front]
        fy = [float(table.rows[i].total_cycles) for i in front]
        self.items["best"].setData(fx, fy)
        self.items["front"].setData(fx, fy)

    def _row_index(self, table_row: int) -> int:
        item = self.table.item(table_row, 0)
        return int(item.data(Qt.ItemDataRole.UserRole)) if item is not None else table_row

    def open_row(self, index: int) -> None:
        """Open the configuration of sweep row ``index`` in the hardware pane (which simulates it)."""
        st = self.state
        if st is None or st.sweep is None or not (0 <= index < len(st.sweep.rows)):
            return
        row = st.sweep.rows[index]
        st.request_config(st.sweep.hardware, row.values, self)
        self.message.emit("Opened " + ", ".join(f"{k}={v}" for k, v in row.values.items()) + " in the Hardware pane")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
