"""Watches pane: expressions of the engine's condition language (``max(abs(v12))``,
``mean(fc1.weight)``, ``x`` = the current result) re-evaluated by the Debugger at every stop;
an expression that fails shows its error inline in its row. Watches persist per file."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLineEdit, QTableWidget,
                               QTableWidgetItem, QToolButton, QVBoxLayout, QWidget)

from ..icons import icon
from ..model.value_text import format_value
from ..qt_document import rebind
from ..widgets.expression_completer import ExpressionCompleter

COLUMNS = ("Expression", "Value")


class WatchesView(QWidget):
    title = "Watches"
    object_name = "watches"
    dock_area = "left"

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.editor = QLineEdit(self)
        self.editor.setPlaceholderText("Add a watch: max(abs(x)), mean(fc1.weight), t12 …")
        self.editor.setClearButtonEnabled(True)
        self.editor.returnPressed.connect(self.add_from_editor)
        self.completion = ExpressionCompleter(self.editor, lambda: self.session)     # Tab
        remove = QToolButton(self)
        remove.setIcon(icon("close"))
        remove.setToolTip("Remove the selected watch")
        remove.setAutoRaise(True)
        remove.clicked.connect(lambda _c=False: self.remove_selected())
        top = QHBoxLayout()
        top.setContentsMargins(4, 3, 4, 3)
        top.addWidget(self.editor, 1)
        top.addWidget(remove)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.setColumnWidth(0, self.fontMetrics().horizontalAdvance("0") * 28)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        self.set_document(qdoc)

    @property
    def session(self):
        return self.qdoc.doc.debug if self.qdoc is not None else None

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, debug=self._on_debug)
        self.qdoc = qdoc
        self._on_debug(None)

    def add_from_editor(self) -> None:
        if self.session is not None and self.editor.text().strip():
            self.session.add_watch(self.editor.text())
            self.editor.clear()

    def remove_selected(self) -> None:
        row = self.table.currentRow()
        if self.session is not None and row >= 0:
            self.session.remove_watch(self.table.item(row, 0).text())

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace) and self.table.hasFocus():
            self.remove_selected()
            return
        super().keyPressEvent(event)

    def rows(self) -> list[tuple[str, str]]:
        """(expression, shown text) per row, for tests and copy."""
        return [(self.table.item(r, 0).text(), self.table.item(r, 1).text()) for r in range(self.table.rowCount())]

    def _on_debug(self, _source) -> None:
        s = self.session
        if s is not None and s.running:
            return
        values = s.watch_values() if s is not None else []
        self.table.setRowCount(len(values))
        for r, (text, value, error) in enumerate(values):
            self.table.setItem(r, 0, QTableWidgetItem(text))
            item = QTableWidgetItem(f"error: {error}" if error else ("" if value is None else format_value(value)))
            if error:
                item.setForeground(QColor("#d0443c"))
            item.setToolTip(item.text())
            self.table.setItem(r, 1, item)
