"""Tab completion for a line edit that takes an expression of the engine's language (the Debug
Console's input, the Watches editor): a function, a parameter's dotted name or a value of the
tick at hand (``vN``). One candidate is written in; several are listed under the line (their
common start written in first). The candidates are ``nac_engine.dap.service.completions``, the
ones ``nac dap`` gives an editor; they are computed here (torch-free, no engine request)."""
from __future__ import annotations

import os
from typing import Callable, Optional

from PySide6.QtCore import QEvent, QObject, QStringListModel, Qt
from PySide6.QtWidgets import QCompleter, QLineEdit


class ExpressionCompleter(QObject):
    """``ExpressionCompleter(line_edit, session)``: ``session()`` is the file's DebugSession (or
    None); Tab in ``line_edit`` completes."""

    def __init__(self, line_edit: QLineEdit, session: Callable[[], Optional[object]]):
        super().__init__(line_edit)
        self.line = line_edit
        self.session = session
        line_edit.installEventFilter(self)          # Tab completes (a line edit would move the focus)
        self.completer = QCompleter(QStringListModel(self), self)
        self.completer.setWidget(line_edit)
        self.completer.setCaseSensitivity(Qt.CaseSensitivity.CaseSensitive)
        # queued: QCompleter writes the bare candidate into a line edit it serves first
        self.completer.activated.connect(self._chosen, Qt.ConnectionType.QueuedConnection)
        self._replace = ("", 0, 0)                  # (text, start, end): the typed name a completion replaces

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt's name
        # an empty line keeps Tab for moving the focus on (keyboard users need it)
        if obj is self.line and event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Tab \
                and not self.completer.popup().isVisible() and self.line.text()[:self.line.cursorPosition()].strip():
            self.complete()
            return True
        return super().eventFilter(obj, event)

    def complete(self) -> list[str]:
        """The candidates for the name before the cursor, written in or listed; returns them."""
        from nac_engine.dap.service import completions
        s = self.session()
        if s is None:
            return []
        text, cursor = self.line.text(), self.line.cursorPosition()
        start, found = completions(s.nac, s.tick if s.active and s.tick >= 0 else None, text, cursor)
        labels = [label for label, _kind in found]
        if not labels:
            return []
        self._replace = (text, start, cursor)
        common = os.path.commonprefix(labels)
        if len(labels) == 1 or len(common) > cursor - start:
            self._insert(labels[0] if len(labels) == 1 else common)
        if len(labels) > 1:
            self.completer.model().setStringList(labels)
            self.completer.setCompletionPrefix(common)
            self.completer.complete()
        return labels

    def _insert(self, label: str) -> None:
        text, start, end = self._replace
        text = text[:start] + label + text[end:]
        self.line.setText(text)
        self.line.setCursorPosition(start + len(label))
        self._replace = (text, start, start + len(label))

    def _chosen(self, label: str) -> None:
        self._insert(label)
        self.line.setFocus()
