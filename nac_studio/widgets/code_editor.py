"""A read-only code editor with a gutter: line numbers, a dot on each line that holds a breakpoint
(paler when disabled, a grey ring when refused: no instruction there) and an arrow at the
execution point; a click in the gutter is
``gutterClicked(line)`` (the Source pane toggles a breakpoint there, as an IDE's gutter does).

The gutter is painted from the editor's visible blocks only (Qt's line-number-area pattern), so a
2,000-line model file costs no more to scroll than without it.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QPlainTextEdit, QToolTip, QWidget

BREAKPOINT_ON = QColor(220, 60, 50)
BREAKPOINT_OFF = QColor(220, 60, 50, 90)
EXECUTION = QColor(232, 170, 20)
UNVERIFIED = QColor(140, 140, 140)


class _Gutter(QWidget):
    def __init__(self, editor: "CodeEditor"):
        super().__init__(editor)
        self.editor = editor
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            line = self.editor.line_at(event.pos().y())
            tip = "" if line is None else self.editor.line_tip(line)
            if tip:
                QToolTip.showText(event.globalPos(), tip, self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)

    def sizeHint(self) -> QSize:
        return QSize(self.editor.gutter_width(), 0)

    def paintEvent(self, event) -> None:
        self.editor.paint_gutter(self, event.rect())

    def mousePressEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            line = self.editor.line_at(event.position().y())
            if line is not None:
                self.editor.gutterClicked.emit(line)
        event.accept()


class CodeEditor(QPlainTextEdit):
    gutterClicked = Signal(int)      # a 1-based line number

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.marks: dict[int, Optional[bool]] = {}   # line -> breakpoint enabled (None: unverified)
        self.execution_line: Optional[int] = None
        self.numbered = True                       # False: a message, not a file (no gutter)
        #: ``line_tip(line)``: the gutter's tooltip for a line (the Source pane: what it made)
        self.line_tip = lambda line: "Click to set or remove a breakpoint on this line (F9)"
        self.gutter = _Gutter(self)
        self.blockCountChanged.connect(self._fit_gutter)
        self.updateRequest.connect(self._scroll_gutter)
        self._fit_gutter()

    # -- what the gutter shows ----------------------------------------------------------------
    def set_marks(self, marks: dict[int, Optional[bool]], execution_line: Optional[int]) -> None:
        if marks != self.marks or execution_line != self.execution_line:
            self.marks, self.execution_line = dict(marks), execution_line
            self.gutter.update()

    def setDocument(self, document) -> None:      # noqa: N802 - Qt's name
        super().setDocument(document)
        self._fit_gutter()
        self.gutter.update()

    def set_numbered(self, numbered: bool) -> None:
        if numbered != self.numbered:
            self.numbered = numbered
            self.gutter.setVisible(numbered)
            self._fit_gutter()

    # -- geometry -----------------------------------------------------------------------------
    def gutter_width(self) -> int:
        if not self.numbered:
            return 0
        fm = self.fontMetrics()
        digits = max(3, len(str(max(1, self.blockCount()))))
        return fm.height() + fm.horizontalAdvance("9") * digits + 10

    def _fit_gutter(self, _count: int = 0) -> None:
        self.setViewportMargins(self.gutter_width(), 0, 0, 0)
        self._place_gutter()

    def _place_gutter(self) -> None:
        cr = self.contentsRect()
        self.gutter.setGeometry(QRect(cr.left(), cr.top(), self.gutter_width(), cr.height()))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._place_gutter()

    def _scroll_gutter(self, rect: QRect, dy: int) -> None:
        if dy:
            self.gutter.scroll(0, dy)
        else:
            self.gutter.update(0, rect.y(), self.gutter.width(), rect.height())

    def line_at(self, y: float) -> Optional[int]:
        """The 1-based line at height ``y`` of the gutter (None below the last line)."""
        block = self.cursorForPosition(QPoint(0, int(y))).block()
        if not block.isValid():
            return None
        top = self.blockBoundingGeometry(block).translated(self.contentOffset()).top()
        if y > top + self.blockBoundingRect(block).height():
            return None
        return block.blockNumber() + 1

    # -- painting -----------------------------------------------------------------------------
    def paint_gutter(self, gutter: QWidget, rect: QRect) -> None:
        p = QPainter(gutter)
        pal = self.palette()
        p.fillRect(rect, pal.color(QPalette.ColorRole.Window))
        fm = self.fontMetrics()
        dot = fm.height()
        number_color = pal.color(QPalette.ColorRole.PlaceholderText)
        block = self.firstVisibleBlock()
        top = self.blockBoundingGeometry(block).translated(self.contentOffset()).top()
        width = gutter.width()
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        while block.isValid() and top <= rect.bottom():
            height = self.blockBoundingRect(block).height()
            if block.isVisible() and top + height >= rect.top():
                line = block.blockNumber() + 1
                row = QRect(0, int(top), width, int(height))
                if line in self.marks:
                    marked, d = self.marks[line], dot * 0.7
                    if marked is None:        # unverified (no instruction there): a hollow grey ring
                        p.setPen(QPen(UNVERIFIED, 1.5))
                        p.setBrush(Qt.BrushStyle.NoBrush)
                    else:
                        p.setPen(Qt.PenStyle.NoPen)
                        p.setBrush(BREAKPOINT_ON if marked else BREAKPOINT_OFF)
                    p.drawEllipse(QPointF(3 + dot / 2, top + height / 2), d / 2, d / 2)
                if line == self.execution_line:
                    p.setPen(Qt.PenStyle.NoPen)
                    p.setBrush(EXECUTION)
                    cy, x0 = top + height / 2, 3 + dot * 0.15
                    p.drawPolygon(QPolygonF([QPointF(x0, cy - dot * 0.35), QPointF(x0 + dot * 0.7, cy),
                                             QPointF(x0, cy + dot * 0.35)]))
                p.setPen(pal.color(QPalette.ColorRole.Text) if line == self.execution_line else number_color)
                p.drawText(row.adjusted(dot + 4, 0, -6, 0), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                           str(line))
            block = block.next()
            top += height
        p.end()
