"""A small colour-scale card drawn as a child widget in a corner of the graph canvas.

The canvas's own painting stays untouched (and mouse events pass through). Subclasses say where
the card sits (``place``), what its title is, and paint their bar and labels into the rect that
:meth:`CanvasLegend.paint_card` returns after drawing the card and its title.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPalette, QPen
from PySide6.QtWidgets import QWidget


class CanvasLegend(QWidget):
    MARGIN = 8

    def __init__(self, canvas: QWidget, object_name: str, min_width: int, widest_text: str):
        super().__init__(canvas)
        self.setObjectName(object_name)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        fm = self.fontMetrics()
        self.setFixedSize(max(min_width, fm.horizontalAdvance(widest_text) + 16), fm.height() * 2 + 22)
        canvas.installEventFilter(self)
        self.hide()

    def title(self) -> str:
        return ""

    def place(self) -> None:
        self.move(self.MARGIN, self.MARGIN)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if obj is self.parentWidget() and event.type() == QEvent.Type.Resize:
            self.place()
        return False

    def showEvent(self, event) -> None:
        self.place()
        super().showEvent(event)

    def paint_card(self, p: QPainter) -> tuple[QRectF, QFontMetrics, QColor]:
        """Card background and title; returns the bar's rect, the font metrics and the text colour."""
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        back = QColor(pal.color(QPalette.ColorRole.Base))
        back.setAlpha(225)
        p.setPen(QPen(pal.color(QPalette.ColorRole.Mid), 1))
        p.setBrush(back)
        p.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
        fm = self.fontMetrics()
        text = pal.color(QPalette.ColorRole.WindowText)
        p.setPen(text)
        p.drawText(QRectF(8, 3, self.width() - 16, fm.height()), Qt.AlignmentFlag.AlignLeft,
                   fm.elidedText(self.title(), Qt.TextElideMode.ElideRight, self.width() - 16))
        return QRectF(8, 5 + fm.height(), self.width() - 16, 10), fm, text
