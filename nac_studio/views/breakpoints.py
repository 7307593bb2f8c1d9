"""Breakpoints pane: every breakpoint of the file — tick, op pattern, parameter, NaN, Inf, an
expression of the engine's condition language or a line of the model's source — with enable/disable, hit count and edit in
place (the value, the condition, the hit condition and the log message cells: a breakpoint with
a log message is a logpoint, which prints to the Debug Console instead of stopping; a hit
condition such as ``>=5`` or ``%10`` says which of its hits in a run count). Breakpoints live in the debug session as specs, so
they can be set before a run and persist per file; one the engine refuses (a glob that matches
nothing, a bad expression) shows why in its row. Double-click a row whose breakpoint sits on
instructions selects the first of them.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLineEdit, QTableWidget,
                               QTableWidgetItem, QToolButton, QVBoxLayout, QWidget)

from ..debug_session import BREAKPOINT_KINDS
from ..model.document import Selection
from ..icons import icon
from ..qt_document import rebind

COLUMNS = ("On", "#", "Kind", "Where", "Condition", "Hit condition", "Log message", "Hits", "Problem")
COL_ON, COL_ID, COL_KIND, COL_VALUE, COL_COND, COL_HIT, COL_LOG, COL_HITS, COL_ERROR = range(9)
HIT_TIP = ("Which hits in a run stop (or print): 5 or >=5 from the 5th on, >5 after the 5th, ==5 the 5th only, "
           "%5 every 5th; empty: every hit")
_HINTS = {"tick": "tick number, e.g. 42", "op": "op glob, e.g. aten.softmax*", "param": "parameter glob, e.g. fc1.*",
          "nan": "(no value: any NaN in the result)", "inf": "(no value: any Inf in the result)",
          "expr": "condition, e.g. max(abs(x)) > 100",
          "line": "file.py:LINE of your model's code, e.g. model.py:24 (or F9 in the Source pane)"}


class BreakpointsView(QWidget):
    title = "Breakpoints"
    object_name = "breakpoints"
    dock_area = "left"

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self._filling = False
        self.kind = QComboBox(self)
        self.kind.addItems(list(BREAKPOINT_KINDS))
        self.kind.setToolTip("What the breakpoint matches")
        self.value = QLineEdit(self)
        self.value.setClearButtonEnabled(True)
        self.kind.currentTextChanged.connect(self._kind_changed)
        self.value.returnPressed.connect(self.add_from_editor)
        add = QToolButton(self)
        add.setText("Add")
        add.setIcon(icon("breakpoint"))
        add.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        add.setAutoRaise(True)
        add.clicked.connect(lambda _c=False: self.add_from_editor())
        remove = QToolButton(self)
        remove.setIcon(icon("close"))
        remove.setToolTip("Remove the selected breakpoint")
        remove.setAutoRaise(True)
        remove.clicked.connect(lambda _c=False: self.remove_selected())
        top = QHBoxLayout()
        top.setContentsMargins(4, 3, 4, 3)
        top.addWidget(self.kind)
        top.addWidget(self.value, 1)
        top.addWidget(add)
        top.addWidget(remove)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                   | QAbstractItemView.EditTrigger.EditKeyPressed)
        # one line per breakpoint; a long path keeps its end (the file and line) in view
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideLeft)
        hh = self.table.horizontalHeader()
        hh.setStretchLastSection(True)
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeaderItem(COL_VALUE).setToolTip("Where it stops: a tick, an op or parameter glob, "
                                                              "FILE:LINE of your model's code, or an expression")
        fm = self.fontMetrics()
        ch = fm.horizontalAdvance("0")
        for col, w in enumerate((3, 2, 5, 24, 18, 8, 18, 6)):
            self.table.setColumnWidth(col, ch * w + 12)
        # the check box and the breakpoint dot side by side
        self.table.setColumnWidth(COL_ON, max(self.table.columnWidth(COL_ON), 2 * self.style().pixelMetric(
            self.style().PixelMetric.PM_IndicatorWidth) + 24))
        self.table.setColumnWidth(COL_KIND, max(fm.horizontalAdvance(k) for k in ("Kind", *BREAKPOINT_KINDS)) + 16)
        self._where_width = self.table.columnWidth(COL_VALUE)
        self.table.itemChanged.connect(self._item_changed)
        self.table.cellDoubleClicked.connect(self._double_clicked)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        self._kind_changed(self.kind.currentText())
        self.set_document(qdoc)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_where()

    def _fit_where(self) -> None:
        """In a pane too narrow for every column (a docked pane at 1024 px), the Where column
        takes the width the first columns leave, so what each breakpoint is shows without
        scrolling; the optional columns (condition, hit condition, log, ...) are to its right."""
        t = self.table
        lead = sum(t.columnWidth(c) for c in range(COL_VALUE))
        rest = sum(t.columnWidth(c) for c in range(COL_VALUE + 1, t.columnCount() - 1))
        room = t.viewport().width() - lead
        narrowest = 8 * self.fontMetrics().horizontalAdvance("0")
        t.setColumnWidth(COL_VALUE, self._where_width if room >= self._where_width + rest else max(room, narrowest))

    @property
    def session(self):
        return self.qdoc.doc.debug if self.qdoc is not None else None

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, debug=self._on_debug)
        self.qdoc = qdoc
        self._on_debug(None)

    def _kind_changed(self, kind: str) -> None:
        self.value.setPlaceholderText(_HINTS.get(kind, ""))
        self.value.setEnabled(kind not in ("nan", "inf"))

    # -- editing --------------------------------------------------------------------------
    def add_from_editor(self) -> None:
        s = self.session
        if s is None:
            return
        kind, text = self.kind.currentText(), self.value.text().strip()
        if kind not in ("nan", "inf") and not text:
            return
        s.add_breakpoint(kind, text)
        self.value.clear()

    def remove_selected(self) -> None:
        s = self.session
        row = self.table.currentRow()
        if s is None or row < 0:
            return
        item = self.table.item(row, COL_ID)
        if item is not None:
            s.remove_breakpoint(int(item.data(Qt.ItemDataRole.UserRole)))

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace) and self.table.hasFocus():
            self.remove_selected()
            return
        super().keyPressEvent(event)

    def _item_changed(self, item: QTableWidgetItem) -> None:
        s = self.session
        if self._filling or s is None:
            return
        spec_id = int(self.table.item(item.row(), COL_ID).data(Qt.ItemDataRole.UserRole))
        if item.column() == COL_ON:
            s.edit_breakpoint(spec_id, enabled=item.checkState() == Qt.CheckState.Checked)
        elif item.column() == COL_VALUE:
            s.edit_breakpoint(spec_id, value=item.text())
        elif item.column() == COL_COND:
            s.edit_breakpoint(spec_id, condition=item.text())
        elif item.column() == COL_HIT:
            s.edit_breakpoint(spec_id, hit_condition=item.text())
        elif item.column() == COL_LOG:
            s.edit_breakpoint(spec_id, log=item.text())

    def _double_clicked(self, row: int, col: int) -> None:
        s = self.session
        if s is None or col in (COL_VALUE, COL_COND, COL_HIT, COL_LOG, COL_ON):
            return
        spec = s.breakpoint(int(self.table.item(row, COL_ID).data(Qt.ItemDataRole.UserRole)))
        ticks = s.ticks_of(spec) if spec is not None else []
        if ticks:
            self.qdoc.select(Selection("instruction", ticks[0]), source=self)

    # -- document → view ------------------------------------------------------------------
    def _on_debug(self, _source) -> None:
        s = self.session
        specs = list(s.breakpoints) if s is not None else []
        self._filling = True
        try:
            self.table.setRowCount(len(specs))
            for r, spec in enumerate(specs):
                on = QTableWidgetItem()
                on.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsSelectable)
                on.setCheckState(Qt.CheckState.Checked if spec.enabled else Qt.CheckState.Unchecked)
                on.setIcon(icon("breakpoint"))
                self.table.setItem(r, COL_ON, on)
                cells = (str(spec.id), spec.kind, spec.value, spec.condition, spec.hit_condition, spec.log,
                         str(spec.hits), spec.error)
                for col, text in zip((COL_ID, COL_KIND, COL_VALUE, COL_COND, COL_HIT, COL_LOG, COL_HITS, COL_ERROR),
                                     cells):
                    item = QTableWidgetItem(text)
                    flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                    editable = col == COL_VALUE and spec.kind not in ("nan", "inf") or \
                        col == COL_COND and spec.kind in ("tick", "op", "param", "line") or col in (COL_HIT, COL_LOG)
                    if editable:
                        flags |= Qt.ItemFlag.ItemIsEditable
                    item.setFlags(flags)
                    if col == COL_ID:
                        item.setData(Qt.ItemDataRole.UserRole, spec.id)
                    if col == COL_VALUE and text:
                        item.setToolTip(text)
                    if col == COL_HIT:
                        item.setToolTip(HIT_TIP)
                    if col == COL_LOG:
                        item.setToolTip("A logpoint: print this (each {expression} evaluated there) to the "
                                        "Debug Console and go on, instead of stopping")
                    if col == COL_ERROR and text:
                        item.setForeground(QColor("#d0443c"))
                        item.setToolTip(text)
                    self.table.setItem(r, col, item)
        finally:
            self._filling = False
