"""Variables pane: the values live at the execution point — the current result, what later
instructions still read, and what the MMAP schedule holds in memory at that tick — with shape,
dtype, min/max/mean and NaN/Inf counts. Double-click opens a tensor inspector.

The rows (names, shapes) come at once from the debug session; the statistics are the engine's
``TickResult`` for each tick, computed in the document's background tasks and cached by the
session for the run, so stepping stays fast on large tensors and the numbers are exactly what
``Debugger.result(tick)`` gives.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from ..qt_document import rebind
from ..theme import mono_font
from ..debug_session import Subject

COLUMNS = ("Tick", "Name", "Shape", "min", "max", "mean", "NaN", "Inf", "dtype", "Where")
#: The Variables pane asks for statistics only; a value of more than this many values is not sent
#: with them (a weight's tick would bring a whole embedding into the window's process).
VALUES_SENT_MAX = 1 << 16
_STATS = {3: "min", 4: "max", 5: "mean", 6: "nan_count", 7: "inf_count"}


def _num(v) -> str:
    return "" if v is None else f"{v:.6g}"


class VariablesModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list = []          # debug_session.Variable
        self.stats: dict = {}         # tick -> TickResult

    def set_rows(self, rows: list, stats: dict) -> None:
        self.beginResetModel()
        self.rows, self.stats = list(rows), dict(stats)
        self.endResetModel()

    def set_stats(self, stats: dict) -> None:
        self.stats.update(stats)
        if self.rows:
            self.dataChanged.emit(self.index(0, 3), self.index(len(self.rows) - 1, 7))

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def cell(self, row: int, col: int) -> str:
        v = self.rows[row]
        r = self.stats.get(v.tick)
        if col == 0:
            return str(v.tick)
        if col == 1:
            return v.name
        if col == 9:
            return v.where if v.available else f"{v.where} (evicted)"
        if col == 2:
            return "" if v.shape is None else "×".join(map(str, v.shape)) or "scalar"
        if col == 8:
            return v.dtype or ""
        if r is None:
            return "…" if col == 3 else ""
        value = getattr(r, _STATS[col])
        return str(value) if col >= 6 else _num(value)

    def summary(self, row: int) -> str:
        """The whole row on one line (a row's tooltip: a docked pane shows its first columns only)."""
        cells = {name: self.cell(row, col) for col, name in enumerate(COLUMNS)}
        parts = [f"t{cells['Tick']}  {cells['Name']}", " ".join(x for x in (cells["dtype"], cells["Shape"]) if x)]
        if cells["min"] not in ("", "…"):
            parts.append(f"min {cells['min']}  max {cells['max']}  mean {cells['mean']}  "
                         f"NaN {cells['NaN']}  Inf {cells['Inf']}")
        parts.append(cells["Where"])
        return "\n".join(p for p in parts if p)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self.rows)):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.cell(index.row(), index.column())
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.summary(index.row())
        if role == Qt.ItemDataRole.TextAlignmentRole and (index.column() == 0 or 3 <= index.column() <= 7):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole:
            v = self.rows[index.row()]
            r = self.stats.get(v.tick)
            if index.column() in (6, 7) and r is not None and (r.nan_count if index.column() == 6 else r.inf_count):
                return QColor("#d0443c")
        if role == Qt.ItemDataRole.FontRole and index.row() == 0:
            f = mono_font()
            f.setBold(True)
            return f
        return None


class VariablesView(QWidget):
    title = "Variables"
    object_name = "variables"
    dock_area = "left"
    inspectRequested = Signal(object)     # tensor_inspector.Subject

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self._task = None
        self._gen = 0
        self.model = VariablesModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)
        ch = self.fontMetrics().horizontalAdvance("0")
        for col, w in enumerate((5, 20, 9, 9, 9, 9, 4, 4, 8, 16)):
            self.table.setColumnWidth(col, ch * w)
        self.table.doubleClicked.connect(self._on_double_click)
        self.hint = QLabel("Start (F5) or step (F10) to see the values at the execution point.", self)
        self.hint.setWordWrap(True)
        self.hint.setEnabled(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.hint)
        lay.addWidget(self.table, 1)
        self.set_document(qdoc)

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, debug=self._on_debug)
        self.qdoc = qdoc
        self._on_debug(None)

    def _on_debug(self, _source) -> None:
        s = self.qdoc.doc.debug if self.qdoc is not None else None
        if s is not None and s.running:
            return
        rows = s.variables() if s is not None else []
        self._gen += 1
        cached = {v.tick: s.cached_result(v.tick) for v in rows if s.cached_result(v.tick) is not None} if s else {}
        self.model.set_rows(rows, cached)
        self.hint.setVisible(not rows)
        missing = [v.tick for v in rows if v.tick not in cached and v.available]
        if missing and self.qdoc is not None:
            if self._task is not None and not self._task.done():
                self._task.cancel()
            gen = self._gen

            def work(ctx, ticks=missing, s=s):
                out = {}
                for t in ticks:
                    if ctx.cancelled:
                        break
                    out[t] = s.result(t, VALUES_SENT_MAX)
                return out
            self._task = self.qdoc.tasks.submit("Variable statistics", work,
                                                on_done=lambda st, g=gen: self._stats_done(g, st))

    def _stats_done(self, gen: int, stats: dict) -> None:
        if gen == self._gen:
            self.model.set_stats(stats)

    def _on_double_click(self, index: QModelIndex) -> None:
        if index.isValid():
            v = self.model.rows[index.row()]
            self.inspectRequested.emit(Subject("result", v.tick))
