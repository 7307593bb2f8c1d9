"""Problems view: everything the lenient reader and ``verify`` found, one row each.

Activating a row selects ``Selection("offset", p.offset)``, so the hex view, the
structure tree and (for a byte inside an instruction) the disassembly and graph all jump
to the place the problem is about.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QTreeView, QVBoxLayout, QWidget

from ..document import Selection
from ..icons import icon
from ..theme import mono_font

COLUMNS = ("Section", "Offset", "Problem")


class ProblemsModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._rows: list = []

    def set_problems(self, problems: list) -> None:
        self.beginResetModel()
        self._rows = sorted(problems, key=lambda p: (getattr(p, "offset", 0) or 0))
        self.endResetModel()

    def problem(self, row: int):
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        p = self._rows[index.row()]
        col = index.column()
        section = getattr(p, "section", "") or ""
        offset = getattr(p, "offset", None)
        reason = getattr(p, "reason", None) or str(p)
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return section
            if col == 1:
                return f"0x{offset:08X}" if isinstance(offset, int) else ""
            return reason
        if role == Qt.ItemDataRole.UserRole:   # sort key
            return (offset if isinstance(offset, int) else -1) if col == 1 else (section if col == 0 else reason)
        if role == Qt.ItemDataRole.DecorationRole and col == 0:
            return icon("warning" if "belong to no decoded field" not in reason else "error")
        if role == Qt.ItemDataRole.ToolTipRole:
            where = f" at offset {offset} (0x{offset:X})" if isinstance(offset, int) else ""
            return f"{section}{where}:\n{reason}"
        if role == Qt.ItemDataRole.FontRole and col == 1:
            return mono_font(-0.5)
        return None


class ProblemsView(QWidget):
    title = "Problems"
    object_name = "problems"
    countChanged = Signal(int)

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.qdoc = None
        self.model = ProblemsModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter problems")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.summary = QLabel(self)
        self.table = QTreeView(self)
        self.table.setModel(self.proxy)
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        self.table.setAlternatingRowColors(True)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(1, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.header().setStretchLastSection(True)
        self.table.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.table.setColumnWidth(0, 120)
        self.table.setColumnWidth(1, 96)
        self.table.activated.connect(self._go)
        self.table.clicked.connect(self._go)
        top = QHBoxLayout()
        top.setContentsMargins(4, 2, 4, 2)
        top.addWidget(self.filter, 1)
        top.addWidget(self.summary)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        self.set_document(qdoc)

    def set_document(self, qdoc) -> None:
        self.qdoc = qdoc
        problems = list(qdoc.doc.problems) if qdoc is not None else []
        self.model.set_problems(problems)
        n = len(problems)
        if qdoc is None:
            self.summary.setText("")
        else:
            self.summary.setText("No problems" if n == 0 else f"{n:,} problem{'s' if n != 1 else ''}")
        self.countChanged.emit(n)

    def count(self) -> int:
        return self.model.rowCount()

    def _go(self, proxy_index: QModelIndex) -> None:
        if self.qdoc is None or not proxy_index.isValid():
            return
        p = self.model.problem(self.proxy.mapToSource(proxy_index).row())
        offset = getattr(p, "offset", None)
        if isinstance(offset, int):
            self.qdoc.select(Selection("offset", offset), source=self)

    def go_to_row(self, row: int) -> None:
        """Select the problem in (filtered, sorted) row ``row``; used by next/previous problem."""
        n = self.proxy.rowCount()
        if not n:
            return
        idx = self.proxy.index(row % n, 0)
        self.table.setCurrentIndex(idx)
        self._go(idx)

    def step(self, delta: int) -> None:
        cur = self.table.currentIndex()
        row = cur.row() + delta if cur.isValid() else (0 if delta > 0 else -1)
        self.go_to_row(row)
