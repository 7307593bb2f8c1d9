"""Debug Console: what the logpoints printed on the way (``[tick 41] attn max 3.2``), and an
input line that evaluates an expression of the engine's language at the execution point
(``max(abs(x))``, ``v12[0, :4]``, ``mean(fc1.weight)``) — VS Code's Debug Console for a model.
Tab completes a function, a parameter's dotted name or a value of the tick at hand (``vN``;
widgets/expression_completer.py). The lines belong to the file's debug session, so switching tabs keeps each file's own."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QPlainTextEdit, QToolButton, QVBoxLayout, QWidget

from ..qt_document import rebind
from ..theme import mono_font
from ..widgets.expression_completer import ExpressionCompleter
from ..model.value_text import format_value

#: Expressions the input line remembers (Up/Down).
HISTORY = 100


class DebugConsoleView(QWidget):
    title = "Debug Console"
    object_name = "debug_console"
    dock_area = "bottom"

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self._shown = (None, 0)            # (session, lines of it shown)
        self._history: list[str] = []
        self._back = 0
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setFont(mono_font())
        self.text.setMaximumBlockCount(10_000)
        self.text.setPlaceholderText("Logpoints print here: give a breakpoint a log message in the Breakpoints "
                                     "pane, e.g. max {max(abs(x))} row {x[0, :4]}")
        self.input = QLineEdit(self)
        self.input.setPlaceholderText("Evaluate at the execution point: max(abs(x)), v12[0, :4], mean(fc1.weight) …")
        self.input.setClearButtonEnabled(True)
        self.input.returnPressed.connect(self.evaluate_input)
        self.completion = ExpressionCompleter(self.input, lambda: self.session)     # Tab
        self.completer = self.completion.completer
        clear = QToolButton(self)
        clear.setText("Clear")              # a word: an ✕ beside a pane reads as "close the pane"
        clear.setToolTip("Clear the console")
        clear.setAutoRaise(True)
        clear.clicked.connect(lambda _c=False: self.session.console_clear() if self.session is not None else None)
        self.clear_button = clear
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.input, 1)
        row.addWidget(clear)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.text, 1)
        lay.addLayout(row)
        self.set_document(qdoc)

    @property
    def session(self):
        return self.qdoc.doc.debug if self.qdoc is not None else None

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, debug=self._on_debug)
        self.qdoc = qdoc
        self._on_debug(None)

    def lines(self) -> list[str]:
        return self.text.toPlainText().splitlines()

    # -- the input line ---------------------------------------------------------------------
    def evaluate_input(self) -> None:
        s, text = self.session, self.input.text().strip()
        if s is None or not text:
            return
        self.input.clear()
        if not self._history or self._history[-1] != text:
            self._history = (self._history + [text])[-HISTORY:]
        self._back = 0
        s.console_print(f"> {text}")
        future = s.evaluate(text)
        future.add_done_callback(lambda f, s=s: s.post(lambda: self._answered(s, f)))

    def _answered(self, s, future) -> None:
        exc = future.exception()
        s.console_print(f"  error: {exc}" if exc is not None else "  " + format_value(future.result()))
        s.notify()

    def keyPressEvent(self, event) -> None:
        if self.input.hasFocus() and event.key() in (Qt.Key.Key_Up, Qt.Key.Key_Down) and self._history:
            self._back = max(0, min(len(self._history), self._back + (1 if event.key() == Qt.Key.Key_Up else -1)))
            self.input.setText(self._history[-self._back] if self._back else "")
            return
        super().keyPressEvent(event)

    # -- document → view ------------------------------------------------------------------
    def _on_debug(self, _source) -> None:
        s = self.session
        lines = s.console if s is not None else ()
        total = s.console_total if s is not None else 0
        shown_session, shown = self._shown
        cleared = not lines and not self.text.document().isEmpty()
        if shown_session is not s or total < shown or total - shown > len(lines) or cleared:
            self.text.setPlainText("\n".join(lines))          # another file, cleared, or more than is kept
        elif total > shown:
            for line in list(lines)[len(lines) - (total - shown):]:
                self.text.appendPlainText(line)
        else:
            return
        self._shown = (s, total)
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())
