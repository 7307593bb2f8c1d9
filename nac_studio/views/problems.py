"""Problems view: everything the lenient reader, ``verify`` and the MMAP schedule check
found, one row each.

Decode problems and schedule violations are errors; schedule hazards (same-tick races)
are warnings, drawn with their own icon and muted text, and can be hidden. Activating a
row selects what the problem is about (``Selection("offset", p.offset)`` for a decode
problem; the tick's MMAP record, or its instruction, for a schedule finding), so the hex
view, the structure tree, the disassembly and the graph all jump there. The schedule check
finishes after the file is on screen; the list refreshes when the document announces new
problems.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QFontMetrics, QGuiApplication, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QSizePolicy,
                               QToolButton, QTreeView, QVBoxLayout, QWidget)

from ..model.document import selection_for_problem, severity_of
from ..icons import icon
from ..qt_document import rebind
from ..theme import mono_font

COLUMNS = ("Section", "Offset", "Problem")
ROLE_SEVERITY = Qt.ItemDataRole.UserRole + 1
_SEVERITY_WORDS = {"error": "Error", "warning": "Warning (a hazard: may be harmless, worth a look)"}


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
        severity = severity_of(p)
        if role == ROLE_SEVERITY:
            return severity
        if role == Qt.ItemDataRole.DecorationRole and col == 0:
            return icon(severity)
        if role == Qt.ItemDataRole.ForegroundRole and severity == "warning":
            return QGuiApplication.palette().color(QPalette.ColorRole.PlaceholderText)
        if role == Qt.ItemDataRole.ToolTipRole:
            where = f" at offset 0x{offset:08X} ({offset})" if isinstance(offset, int) else ""
            return f"{_SEVERITY_WORDS[severity]} — {section}{where}:\n{reason}"
        if role == Qt.ItemDataRole.FontRole and col == 1:
            return mono_font(-0.5)
        return None

    def row_of(self, problem) -> int:
        return next((r for r, p in enumerate(self._rows) if p is problem), -1)


class ProblemsFilter(QSortFilterProxyModel):
    """The text filter plus "hide warnings"."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._warnings = True

    def set_show_warnings(self, show: bool) -> None:
        if hasattr(self, "beginFilterChange"):   # Qt 6.10+ (invalidateFilter is deprecated there)
            self.beginFilterChange()
            self._warnings = show
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self._warnings = show
            self.invalidateFilter()

    def filterAcceptsRow(self, row: int, parent: QModelIndex) -> bool:
        if not self._warnings:
            idx = self.sourceModel().index(row, 0, parent)
            if self.sourceModel().data(idx, ROLE_SEVERITY) == "warning":
                return False
        return super().filterAcceptsRow(row, parent)


class ProblemsView(QWidget):
    title = "Problems"
    object_name = "problems"
    countChanged = Signal(int)

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.qdoc = None
        self.model = ProblemsModel(self)
        self.proxy = ProblemsFilter(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter problems")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.summary = QLabel(self)
        self.warnings_button = QToolButton(self)
        self.warnings_button.setIcon(icon("warning"))
        self.warnings_button.setCheckable(True)
        self.warnings_button.setChecked(True)
        self.warnings_button.setAutoRaise(True)
        self.warnings_button.setToolTip("Show warnings (MMAP hazards: same-tick races)")
        self.warnings_button.toggled.connect(self.proxy.set_show_warnings)
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
        # the dock is narrow: section and offset get what they need, the text the rest
        fm = self.table.fontMetrics()
        self.table.setColumnWidth(0, fm.horizontalAdvance("Section") + 44)
        self.table.setColumnWidth(1, QFontMetrics(mono_font(-0.5)).horizontalAdvance("0x00000000") + 16)
        self.table.activated.connect(self._go)
        self.table.clicked.connect(self._go)
        # the selected problem in full, wrapped: the table's Problem column elides long reasons
        self.details = QLabel(self)
        self.details.setObjectName("problemDetails")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.setContentsMargins(6, 3, 6, 3)
        self.details.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.details.hide()
        self.table.selectionModel().currentChanged.connect(self._show_details)
        top = QHBoxLayout()
        top.setContentsMargins(4, 2, 4, 2)
        top.addWidget(self.filter, 1)
        top.addWidget(self.warnings_button)
        top.addWidget(self.summary)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.details)
        self.set_document(qdoc)

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, problems=self._on_problems)
        self.qdoc = qdoc
        self._refresh()

    def _on_problems(self, _source) -> None:
        """New findings arrived (the schedule check): keep the row the user is on."""
        cur = self.table.currentIndex()
        current = self.model.problem(self.proxy.mapToSource(cur).row()) if cur.isValid() else None
        self._refresh()
        row = self.model.row_of(current) if current is not None else -1
        if row >= 0:
            self.table.setCurrentIndex(self.proxy.mapFromSource(self.model.index(row, 0)))

    def _refresh(self) -> None:
        qdoc = self.qdoc
        problems = list(qdoc.doc.problems) if qdoc is not None else []
        self.model.set_problems(problems)
        self._show_details(QModelIndex())
        n = len(problems)
        warnings = sum(1 for p in problems if severity_of(p) == "warning")
        errors = n - warnings
        self.warnings_button.setVisible(bool(warnings))
        if qdoc is None:
            self.summary.setText("")
        elif n == 0:
            self.summary.setText("No problems")
        else:
            parts = [f"{errors:,} error{'s' if errors != 1 else ''}"] if errors else []
            if warnings:
                parts.append(f"{warnings:,} warning{'s' if warnings != 1 else ''}")
            self.summary.setText(" · ".join(parts))
        self.countChanged.emit(n)

    def count(self) -> int:
        return self.model.rowCount()

    def _show_details(self, current: QModelIndex, _previous: QModelIndex = QModelIndex()) -> None:
        p = self.model.problem(self.proxy.mapToSource(current).row()) if current.isValid() else None
        if p is None:
            self.details.clear()
            self.details.hide()
            return
        self.details.setText(self.model.data(self.model.index(self.model.row_of(p), 2), Qt.ItemDataRole.ToolTipRole))
        self.details.show()

    def _go(self, proxy_index: QModelIndex) -> None:
        if self.qdoc is None or not proxy_index.isValid():
            return
        p = self.model.problem(self.proxy.mapToSource(proxy_index).row())
        sel = selection_for_problem(p)
        if sel is not None:
            self.qdoc.select(sel, source=self)

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
