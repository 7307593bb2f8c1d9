"""Command palette (Ctrl+Shift+P): type to fuzzy-filter every registered command, Enter runs it.

A frameless popup over the main window, as in VS Code and Perfetto. Disabled commands
are listed greyed so users learn they exist, but cannot be run from here.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QAbstractListModel, QEvent, QModelIndex, QPersistentModelIndex, Qt, QSize
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import (QFrame, QLabel, QLineEdit, QListView, QStyle, QStyledItemDelegate,
                               QStyleOptionViewItem, QVBoxLayout, QWidget)

from ..commands import Command, CommandRegistry, filter_commands

ROLE_COMMAND_ID = Qt.ItemDataRole.UserRole + 1
ROLE_SHORTCUT = Qt.ItemDataRole.UserRole + 2


class PaletteModel(QAbstractListModel):
    """The commands matching the current query, best match first."""

    def __init__(self, registry: CommandRegistry, parent=None):
        super().__init__(parent)
        self.registry = registry
        self.query = ""
        self._rows: list[Command] = []
        self.set_query("")

    def set_query(self, query: str) -> None:
        self.beginResetModel()
        self.query = query
        self._rows = filter_commands(self.registry.commands(), query)
        self.endResetModel()

    def command(self, row: int) -> Optional[Command]:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        cmd = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            category = (cmd.menu or "").split("/")[0]
            return f"{category}: {cmd.title}" if category else cmd.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return cmd.tip or cmd.id
        if role == ROLE_COMMAND_ID:
            return cmd.id
        if role == ROLE_SHORTCUT:
            return self.registry.shortcut_text(cmd.id)
        if role == Qt.ItemDataRole.DecorationRole:
            # a blank icon keeps titles aligned between commands with and without icons
            if cmd.icon:
                from ..icons import icon
                return icon(cmd.icon)
            return _blank_icon()
        return None

    def flags(self, index):
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        cmd = self._rows[index.row()]
        flags = Qt.ItemFlag.ItemNeverHasChildren
        if cmd.is_enabled():
            flags |= Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        return flags


def _blank_icon() -> QIcon:
    pm = QPixmap(16, 16)
    pm.fill(Qt.GlobalColor.transparent)
    return QIcon(pm)


class _Delegate(QStyledItemDelegate):
    """Title on the left, the shortcut right-aligned and dimmed."""

    def paint(self, painter, option, index):
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        shortcut = index.data(ROLE_SHORTCUT) or ""
        style = opt.widget.style() if opt.widget else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        if shortcut:
            painter.save()
            color = opt.palette.color(opt.palette.ColorGroup.Disabled, opt.palette.ColorRole.Text)
            if opt.state & QStyle.StateFlag.State_Selected:
                color = opt.palette.color(opt.palette.ColorRole.HighlightedText)
            painter.setPen(color)
            r = opt.rect.adjusted(0, 0, -10, 0)
            painter.drawText(r, int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), shortcut)
            painter.restore()

    def sizeHint(self, option, index):
        s = super().sizeHint(option, index)
        return QSize(s.width(), max(s.height(), 26))


class CommandPalette(QFrame):
    """Popup with a filter line and the matching commands."""

    def __init__(self, registry: CommandRegistry, parent: Optional[QWidget] = None):
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("commandPalette")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.registry = registry
        self.model = PaletteModel(registry, self)
        self.edit = QLineEdit(self)
        self.edit.setPlaceholderText("Type a command…")
        self.edit.setClearButtonEnabled(True)
        self.list = QListView(self)
        self.list.setModel(self.model)
        self.list.setItemDelegate(_Delegate(self.list))
        self.list.setUniformItemSizes(True)
        self.list.setIconSize(QSize(16, 16))
        self.list.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        self.no_match = QLabel("No matching command", self)
        self.no_match.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.no_match.setEnabled(False)
        self.no_match.hide()
        lay.addWidget(self.edit)
        lay.addWidget(self.list)
        lay.addWidget(self.no_match)
        self.edit.textChanged.connect(self._filter)
        self.edit.installEventFilter(self)
        self.list.clicked.connect(self._run_index)
        self.resize(560, 360)

    def popup(self) -> None:
        self.edit.clear()
        self._filter("")
        parent = self.parentWidget()
        if parent is not None:
            top = parent.mapToGlobal(parent.rect().topLeft())
            width = min(640, max(420, parent.width() // 2))
            self.setFixedWidth(width)
            self.move(top.x() + (parent.width() - width) // 2, top.y() + 60)
        self.show()
        self.edit.setFocus()

    def _filter(self, text: str) -> None:
        self.model.set_query(text)
        self._select_first_enabled()
        empty = self.model.rowCount() == 0
        self.list.setVisible(not empty)        # say so rather than show an empty list
        self.no_match.setVisible(empty)
        # the popup shrinks to its matches, like VS Code's
        rows = max(1, min(self.model.rowCount(), 14))
        row_h = self.list.sizeHintForRow(0) if self.model.rowCount() else 26
        self.list.setFixedHeight(rows * row_h + 2 * self.list.frameWidth() + 2)
        self.adjustSize()

    def _select_first_enabled(self) -> None:
        for row in range(self.model.rowCount()):
            cmd = self.model.command(row)
            if cmd is not None and cmd.is_enabled():
                self.list.setCurrentIndex(self.model.index(row))
                return

    def _move(self, step: int) -> None:
        n = self.model.rowCount()
        if not n:
            return
        row = self.list.currentIndex().row()
        for _ in range(n):
            row = (row + step) % n
            cmd = self.model.command(row)
            if cmd is not None and cmd.is_enabled():
                self.list.setCurrentIndex(self.model.index(row))
                return

    def run_current(self) -> None:
        self._run_index(self.list.currentIndex())

    def _run_index(self, index) -> None:
        if isinstance(index, QPersistentModelIndex):
            index = QModelIndex(index)
        cmd = self.model.command(index.row()) if index.isValid() else None
        if cmd is None or not cmd.is_enabled():
            return
        self.hide()
        self.registry.run(cmd.id)

    def eventFilter(self, obj, event) -> bool:
        if obj is self.edit and event.type() == QEvent.Type.KeyPress:
            key = event.key()
            if key in (Qt.Key.Key_Down, Qt.Key.Key_Tab):
                self._move(1)
                return True
            if key in (Qt.Key.Key_Up, Qt.Key.Key_Backtab):
                self._move(-1)
                return True
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self.run_current()
                return True
            if key == Qt.Key.Key_Escape:
                self.hide()
                return True
        return super().eventFilter(obj, event)
