"""Diff pane: where do this file's values and a second file's (or PyTorch eager's) part?

Choose a second ``.nac`` (its quantised version, a recompile, the reference compiler's file) or a
factory ``FILE.py:FACTORY``; both run in a TaskRunner worker on the same inputs (the debug
session's chosen inputs when there is one, else the file's recorded input signature) through
:mod:`nac_engine.diff`. The table lists every matched pair with its max abs / relative
error and cosine similarity, the pyqtgraph plot draws the three per tick (log scale, with the
tolerance line; its legend is a line above the plot, never over the curves); clicking a row selects
its tick. ``resultChanged`` tells :mod:`nac_studio.diff_commands` (graph error overlay, First
Divergence) when a document's result changes; after First Divergence the pane shows, side by side,
the debugger's value at the divergent tick and the compared run's value at the matched tick.
The controls take one row, or two when the pane is narrow.
"""
from __future__ import annotations

import math
import os
import weakref
from typing import Optional

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QFileDialog, QGridLayout, QHeaderView, QLabel,
                               QLineEdit, QPushButton, QSplitter, QTableWidget, QTableWidgetItem, QToolButton,
                               QVBoxLayout, QWidget)

from ..model.document import Selection
from ..qt_document import rebind

COLUMNS = ("Tick", "Tick B", "Value", "Op", "Max abs", "Relative", "Cosine")
_CURVES = (("max_abs", "max abs", "#1f77b4"), ("relative", "relative", "#d62728"), ("one_minus_cos", "1 − cosine",
                                                                                     "#2ca02c"))
#: Side-by-side statistics after First Divergence: column title, TickResult attribute.
STAT_COLUMNS = (("Value", None), ("Shape", "shape"), ("dtype", "dtype"), ("Min", "min"), ("Max", "max"),
                ("Mean", "mean"), ("Std", "std"), ("NaN", "nan_count"), ("Inf", "inf_count"), ("Zeros", "zero_count"))


def _fmt(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.3g}"


class DiffView(QWidget):
    title = "Diff"
    object_name = "diff"
    dock_area = "bottom"
    message = Signal(str)
    resultChanged = Signal(object)       # the QtDocument whose diff result was set or cleared

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.result = None
        self.task = None
        self._results = weakref.WeakKeyDictionary()     # document -> its last DiffResult
        self._inputs = weakref.WeakKeyDictionary()      # document -> (input choices, confirmed) the diff ran with
        self.other = QLineEdit(self)
        self.other.setPlaceholderText("second .nac file, or FILE.py:FACTORY or a Hugging Face directory for PyTorch eager")
        self.other.returnPressed.connect(self.run)
        browse = QToolButton(self)
        browse.setText("…")
        browse.setToolTip("Choose the second .nac file")
        browse.clicked.connect(lambda _c=False: self.browse())
        self.tolerance = QLineEdit("1e-3", self)
        self.tolerance.setMaximumWidth(self.fontMetrics().horizontalAdvance("0") * 9)
        self.tolerance.setToolTip("Divergence tolerance")
        self.metric_box = QComboBox(self)         # not "metric": QWidget.metric() is a virtual Qt calls
        self.metric_box.addItems(["max_abs", "relative", "cosine"])
        self.metric_box.setToolTip("What the tolerance applies to (cosine: 1 − cosine similarity)")
        self.run_button = QPushButton("Compare", self)
        self.run_button.clicked.connect(lambda _c=False: self.run())
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(lambda _c=False: self.cancel())
        self.clear_button = QPushButton("Clear", self)
        self.clear_button.setToolTip("Forget this file's diff (the table, the plot and the graph overlay)")
        self.clear_button.clicked.connect(lambda _c=False: self.clear())
        self._browse = browse
        self._tol_label = QLabel("tol", self)
        self.top = QGridLayout()
        self.top.setContentsMargins(4, 3, 4, 3)
        self.top.setHorizontalSpacing(4)
        self.top.setVerticalSpacing(2)
        self._wide = None
        self._arrange_controls(True)
        self.status = QLabel("", self)
        self.status.setContentsMargins(6, 0, 6, 2)
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)   # compact rows
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)      # module paths: both ends say something
        head = self.table.horizontalHeader()
        head.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        head.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        head.setSectionResizeMode(3, QHeaderView.ResizeMode.Interactive)
        head.setMinimumSectionSize(self.fontMetrics().horizontalAdvance("Tick B") + 12)
        self.table.setColumnWidth(3, self.fontMetrics().horizontalAdvance("aten.linear.default") + 12)
        self.table.cellClicked.connect(lambda row, _col: self.select_row(row))
        self.compare_table = QTableWidget(0, len(STAT_COLUMNS), self)
        self.compare_table.setObjectName("diffComparison")
        self.compare_table.setHorizontalHeaderLabels([c for c, _ in STAT_COLUMNS])
        self.compare_table.verticalHeader().hide()
        self.compare_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.compare_table.setWordWrap(False)
        self.compare_table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.compare_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.compare_table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.compare_table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.compare_table.hide()
        self.compare_note = QLabel("", self)
        self.compare_note.setContentsMargins(6, 0, 6, 2)
        self.compare_note.setWordWrap(True)
        self.compare_note.hide()
        self.comparison: Optional[tuple] = None       # (TickResult in A, TickResult in B or None, pair) shown
        import pyqtgraph as pg
        self.plot = pg.PlotWidget(self)
        self.plot.setBackground(None)
        self.plot.setLogMode(y=True)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.getPlotItem().setContentsMargins(0, 0, 2, 0)   # no "tick" axis title: room for the curves
        self.plot.getPlotItem().getAxis("left").setWidth(self.fontMetrics().horizontalAdvance("10⁻¹⁰") + 8)
        # the legend is a line of text above the plot: pyqtgraph's in-plot legend covers the curves in a
        # short pane
        self.legend = QLabel("  ".join(f"<span style='color:{c}'>━</span>&nbsp;{label}" for _k, label, c in _CURVES)
                             + "  <span style='color:#888'>╌</span>&nbsp;tolerance", self)
        self.legend.setToolTip("Errors per tick (x: tick of this file), log scale")
        self.legend.setObjectName("diffPlotLegend")
        self.legend.setWordWrap(True)     # wraps in a narrow pane instead of holding the window wide
        self.legend.setContentsMargins(6, 0, 6, 0)
        small = self.legend.font()
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.9))
        self.legend.setFont(small)
        self.curves = {key: self.plot.plot([], [], name=label, pen=pg.mkPen(color, width=1.5), symbol="o",
                                           symbolSize=4, symbolBrush=color, symbolPen=None)
                       for key, label, color in _CURVES}
        self._plot_empty = True     # the curves hold no points (each file's open shows "no result")
        self.tolerance_line = pg.InfiniteLine(angle=0, pen=pg.mkPen("#888", style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.tolerance_line)
        self.divergence_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("#d62728", width=1))
        self.plot.addItem(self.divergence_line)
        self.divergence_line.hide()
        self.plot.scene().sigMouseClicked.connect(self._plot_clicked)
        plot_box = QWidget(self)
        plot_lay = QVBoxLayout(plot_box)
        plot_lay.setContentsMargins(0, 0, 0, 0)
        plot_lay.setSpacing(0)
        plot_lay.addWidget(self.legend)
        plot_lay.addWidget(self.plot, 1)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.table)
        split.addWidget(plot_box)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setChildrenCollapsible(False)
        self.plot.setMinimumWidth(160)
        self.splitter = split
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(self.top)
        lay.addWidget(self.status)
        lay.addWidget(self.compare_note)
        lay.addWidget(self.compare_table)
        lay.addWidget(split, 1)
        # an explicit minimum: the one-row controls' sum must not hold the pane (and the window) wide;
        # below it resizeEvent moves them onto two rows
        self.setMinimumWidth(320)
        self.set_document(qdoc)

    # -- controls ---------------------------------------------------------------------------
    def _arrange_controls(self, wide: bool) -> None:
        """One row of controls, or (narrow) the file field on its own row above the rest."""
        if wide == self._wide:
            return
        self._wide = wide
        for w in (self.other, self._browse, self._tol_label, self.tolerance, self.metric_box, self.run_button,
                  self.cancel_button, self.clear_button):
            self.top.removeWidget(w)
        for col in range(9):
            self.top.setColumnStretch(col, 0)
        if wide:
            row = [(self.other, 1), (self._browse, 0), (self._tol_label, 0), (self.tolerance, 0), (self.metric_box, 0),
                   (self.run_button, 0), (self.cancel_button, 0), (self.clear_button, 0)]
            for col, (w, stretch) in enumerate(row):
                self.top.addWidget(w, 0, col)
                self.top.setColumnStretch(col, stretch)
        else:
            self.top.addWidget(self.other, 0, 0, 1, 6)
            self.top.addWidget(self._browse, 0, 6)
            for col, w in enumerate((self._tol_label, self.tolerance, self.metric_box, self.run_button,
                                     self.cancel_button, self.clear_button)):
                self.top.addWidget(w, 1, col)
            self.top.setColumnStretch(5, 1)

    def controls_wide_enough(self, width: int) -> bool:
        need = 180 + sum(w.sizeHint().width() + 4 for w in (self._browse, self._tol_label, self.tolerance, self.metric_box,
                                                             self.run_button, self.cancel_button, self.clear_button))
        return width >= need

    def resizeEvent(self, event) -> None:
        self._arrange_controls(self.controls_wide_enough(event.size().width()))
        super().resizeEvent(event)

    # -- document ---------------------------------------------------------------------------
    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, tick=self._on_tick)
        self.qdoc = qdoc
        self.show_result(self._results.get(qdoc.doc) if qdoc is not None else None)

    def result_for(self, qdoc):
        """The last diff result of ``qdoc`` (``None`` when it has none)."""
        return self._results.get(qdoc.doc) if qdoc is not None else None

    def inputs_used(self, qdoc) -> Optional[tuple]:
        """(input choices, confirmed) of ``qdoc``'s debug session when its last diff ran (``None``:
        the diff drew the file's input signature itself)."""
        return self._inputs.get(qdoc.doc) if qdoc is not None else None

    def clear(self, qdoc=None) -> None:
        """Forget ``qdoc``'s diff (default: the shown document's)."""
        qdoc = qdoc or self.qdoc
        if qdoc is None:
            return
        self._results.pop(qdoc.doc, None)
        self._inputs.pop(qdoc.doc, None)
        if qdoc is self.qdoc:
            self.show_result(None)
        self.resultChanged.emit(qdoc)

    def browse(self) -> None:
        start = os.path.dirname(self.qdoc.doc.path) if self.qdoc is not None and self.qdoc.doc.path else ""
        path, _ = QFileDialog.getOpenFileName(self, "Compare with", start, "NAC models (*.nac);;Python (*.py)")
        if path:
            self.other.setText(path if path.endswith(".nac") else f"{path}:make_model")

    # -- running ----------------------------------------------------------------------------
    def _feeds(self):
        """The debug session's chosen inputs when there is one (None: the file's signature decides)."""
        debug = getattr(self.qdoc.doc, "debug", None)
        if debug is None or not hasattr(debug, "feeds"):
            return None
        if getattr(debug, "needs_inputs", lambda: False)():
            return None
        return debug.feeds()

    def run(self, other: Optional[str] = None):
        """Compare the document with ``other`` (default: the path in the field) in the background."""
        if self.qdoc is None:
            return None
        if other is not None:
            self.other.setText(other)
        target = self.other.text().strip()
        try:
            tolerance = float(self.tolerance.text())
            if not (tolerance >= 0 and math.isfinite(tolerance)):
                raise ValueError
        except ValueError:
            self.status.setText("The tolerance must be a number ≥ 0.")
            return None
        if not target:
            self.status.setText("Choose a second .nac file, a FILE.py:FACTORY or a Hugging Face directory.")
            return None
        try:
            feeds = self._feeds()
        except Exception as e:      # noqa: BLE001 - an input the user chose cannot be built: say why
            self.status.setText(f"Inputs: {e}")
            return None
        if self.task is not None:
            self.task.cancel()
        qdoc = self.qdoc
        debug = getattr(qdoc.doc, "debug", None)
        used = None if feeds is None or debug is None else \
            ({k: type(c).from_json(c.to_json()) for k, c in debug.choices.items()}, debug.inputs_confirmed)
        self.status.setText(f"Comparing with {os.path.basename(target)}…")
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        # the handlers go to submit, connected before the worker starts: a quick diff (a small model, torch
        # warm) could otherwise finish before a connect() made afterwards, and its result would be lost
        cell: list = []
        from nac_engine.diff import DiffResult

        from ..host.feeds import encode_feeds
        task = qdoc.host.submit(f"Diff with {os.path.basename(target)}", "nac/diff",
                                {"path": qdoc.doc.path, "other": target, "feeds": encode_feeds(feeds),
                                 "tolerance": tolerance, "metric": self.metric_box.currentText()},
                                convert=DiffResult.from_data,
                                on_done=lambda r, d=qdoc, u=used: self._done(d, cell[0], r, u),
                                on_error=lambda e, d=qdoc: self._failed(d, cell[0], e))
        cell.append(task)
        self.task = task
        return task

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()

    def _done(self, qdoc, task, result, used=None) -> None:
        self._results[qdoc.doc] = result
        if used is None:
            self._inputs.pop(qdoc.doc, None)
        else:
            self._inputs[qdoc.doc] = used
        if task is self.task:
            self.task = None
            self.run_button.setEnabled(True)
            self.cancel_button.setEnabled(False)
        if qdoc is self.qdoc:
            self.show_result(result)
        self.resultChanged.emit(qdoc)

    def _failed(self, qdoc, task, exc) -> None:
        from ..tasks import Cancelled
        if task is self.task:
            self.task = None
            self.run_button.setEnabled(True)
            self.cancel_button.setEnabled(False)
        if qdoc is not self.qdoc:
            return
        if isinstance(exc, Cancelled):
            self.status.setText("Cancelled.")
            return
        from nac_engine.runtime.errors import MissingInputError
        text = " ".join(str(exc).split())
        if isinstance(exc, MissingInputError):
            text = "This file records no input signature: set its inputs first (Debug › Inputs…), then compare. " \
                   + text
        self.status.setText(f"Diff failed: {text[:400]}")

    # -- showing ----------------------------------------------------------------------------
    def rows(self) -> list:
        """The result's pairs in table order (matched values, then outputs)."""
        return [] if self.result is None else list(self.result.pairs) + list(self.result.outputs)

    def show_result(self, result) -> None:
        self.result = result
        self.show_comparison(None, None, None)
        rows = self.rows()
        # with structural matching the label is the op name: the Op column would repeat it
        self.table.setColumnHidden(3, bool(rows) and all(p.label == p.op_a for p in rows if p.op_a != "output"))
        self.table.setRowCount(len(rows))
        bad = QColor(214, 39, 40, 60)
        for r, p in enumerate(rows):
            cells = (str(p.tick_a), "" if p.tick_b is None else str(p.tick_b), p.label, p.op_a,
                     _fmt(p.max_abs), _fmt(p.relative), "" if p.cosine is None else f"{p.cosine:.6f}")
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c in (0, 1, 4, 5, 6):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if p.diverges:
                    item.setBackground(bad)
                if p.note:
                    item.setToolTip(p.note)
                self.table.setItem(r, c, item)
        self._plot(result)
        if result is None:
            self.status.setText("Compare this file with a second one (or PyTorch eager) on the same inputs.")
            return
        first = result.first_divergence
        head = (f"{result.a_name} vs {result.b_name}: {len(result.pairs)} matched values ({result.method}), "
                f"{result.metric} tolerance {result.tolerance:g}. ")
        head += "No divergence." if first is None else \
            f"First divergence at tick {first.tick_a} ({first.label}): {_fmt(first.metric(result.metric))}."
        self.status.setText(head + ("  " + " ".join(result.notes) if result.notes else ""))

    def _plot(self, result) -> None:
        if result is None and self._plot_empty:
            return
        self._plot_empty = result is None
        pairs = [] if result is None else [p for p in result.pairs if p.max_abs is not None]
        ticks = [p.tick_a for p in pairs]
        floor = 1e-12                   # log scale: an exact match is drawn at the floor
        series = {"max_abs": [max(p.max_abs, floor) for p in pairs],
                  "relative": [max(p.relative, floor) if math.isfinite(p.relative) else 1e12 for p in pairs],
                  "one_minus_cos": [max(1.0 - p.cosine, floor) for p in pairs]}
        for key, curve in self.curves.items():
            curve.setData(ticks, [min(v, 1e12) for v in series[key]])
        if result is not None:
            self.tolerance_line.setValue(math.log10(max(result.tolerance, floor)))
        first = result.first_divergence if result is not None else None
        self.divergence_line.setVisible(first is not None)
        if first is not None:
            self.divergence_line.setValue(first.tick_a)

    # -- selecting --------------------------------------------------------------------------
    def select_row(self, row: int) -> None:
        rows = self.rows()
        if self.qdoc is not None and 0 <= row < len(rows):
            self.qdoc.select(Selection("instruction", rows[row].tick_a), self)

    def has_divergence(self) -> bool:
        return self.result is not None and self.result.first_divergence is not None

    def select_first_divergence(self) -> Optional[int]:
        """Select the first pair over the tolerance (part of the "First Divergence" command); its tick."""
        if not self.has_divergence():
            return None
        first = self.result.first_divergence
        row = self.rows().index(first)
        self.table.selectRow(row)
        self.select_row(row)
        return first.tick_a

    # -- the divergent tick, both sides ------------------------------------------------------
    def show_comparison_pending(self, pair) -> None:
        self.show_comparison(None, None, pair, f"Running this file to tick {pair.tick_a}…")

    def show_comparison(self, a, b, pair, note: str = "", label_b: str = "") -> None:
        """The debugger's value at the divergent tick (``a``, a TickResult) beside the compared run's
        at the matched tick (``b``); ``pair`` None hides the panel, ``note`` says why one is missing."""
        self.comparison = None if pair is None or a is None else (a, b, pair)
        self.compare_note.setVisible(pair is not None and bool(note))
        self.compare_note.setText(note)
        self.compare_table.setVisible(self.comparison is not None)
        if self.comparison is None:
            self.compare_table.setRowCount(0)
            return
        name_a = self.result.a_name if self.result is not None else "A"
        rows = [(f"{name_a} tick {a.tick} (debugger)", a),
                (label_b or (self.result.b_name if self.result is not None else "B"), b)]
        self.compare_table.setRowCount(len(rows))
        for r, (label, res) in enumerate(rows):
            for c, (_title, attr) in enumerate(STAT_COLUMNS):
                if attr is None:
                    text = label
                elif res is None:
                    text = "not kept" if c == 1 else ""
                else:
                    v = getattr(res, attr)
                    text = "" if v is None else (str(list(v)) if attr == "shape" else
                                                 f"{v:.6g}" if isinstance(v, float) else str(v))
                item = QTableWidgetItem(text)
                if c >= 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.compare_table.setItem(r, c, item)
        h = self.compare_table.horizontalHeader().sizeHint().height() + \
            sum(self.compare_table.rowHeight(r) for r in range(len(rows))) + 2 * self.compare_table.frameWidth()
        self.compare_table.setFixedHeight(h)

    def _on_tick(self, source) -> None:
        if source is self or self.result is None or self.qdoc is None:
            return
        tick = self.qdoc.tick
        for r, p in enumerate(self.rows()):
            if p.tick_a == tick:
                self.table.blockSignals(True)
                self.table.selectRow(r)
                self.table.blockSignals(False)
                return

    def _plot_clicked(self, event) -> None:
        pairs = [] if self.result is None else self.result.pairs
        if not pairs:
            return
        x = self.plot.getPlotItem().vb.mapSceneToView(event.scenePos()).x()
        best = min(range(len(pairs)), key=lambda i: abs(pairs[i].tick_a - x))
        self.table.selectRow(best)
        self.select_row(best)

