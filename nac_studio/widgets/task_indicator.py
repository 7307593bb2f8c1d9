"""The status bar's task indicator: title, progress and Cancel in one fixed-size widget.

Why not a ``QLabel`` + ``QProgressBar`` in the status bar: ``QProgressBar.setValue`` and
``setRange`` repaint *synchronously*, which flushes every dirty region of the window (the
graph canvas included) on each progress report, and showing, hiding or re-texting the
widgets changes the status bar's size hint, which re-lays out the whole main window. On
GPT-2 each task start cost 0.1 s of UI thread that way. Here the indicator keeps one
fixed size whether a task runs or not, its parts are placed by hand (no layout to
invalidate), and every change is a plain ``update()``.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QToolButton, QWidget

TEXT_WIDTH = 300
BAR_WIDTH = 140


class ElidedText(QWidget):
    """One line of text, elided to the widget's width (the whole text in its tooltip); ``setText``
    only repaints. ``align``: where the text sits when it fits; ``elide``: where it is cut."""

    def __init__(self, parent: Optional[QWidget] = None, align=Qt.AlignmentFlag.AlignRight,
                 elide=Qt.TextElideMode.ElideMiddle):
        super().__init__(parent)
        self._text = ""
        self._align, self._elide = align, elide

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:  # noqa: N802 - the QLabel name, so callers need not care
        if text != self._text:
            self._text = text
            self.setToolTip(text)
            self.update()

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        text = self.fontMetrics().elidedText(self._text, self._elide, self.width())
        p.drawText(self.rect(), Qt.AlignmentFlag.AlignVCenter | self._align, text)
        p.end()


class ProgressStrip(QWidget):
    """A thin progress bar with ``QProgressBar``'s range/value API that never repaints
    synchronously; ``setRange(0, 0)`` shows a moving busy mark."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self._min, self._max, self._value = 0, 1000, 0
        self._phase = 0.0
        self._busy = QTimer(self)
        self._busy.setInterval(50)
        self._busy.timeout.connect(self._spin)

    def minimum(self) -> int:
        return self._min

    def maximum(self) -> int:
        return self._max

    def value(self) -> int:
        return self._value

    def setRange(self, lo: int, hi: int) -> None:  # noqa: N802
        if (lo, hi) != (self._min, self._max):
            self._min, self._max = lo, hi
            self._sync_busy()
            self.update()

    def setValue(self, value: int) -> None:  # noqa: N802
        if value != self._value:
            self._value = value
            self.update()

    def _sync_busy(self) -> None:
        busy = self._max <= self._min and self.isVisible()
        if busy and not self._busy.isActive():
            self._busy.start()
        elif not busy:
            self._busy.stop()

    def _spin(self) -> None:
        self._phase = (self._phase + 0.04) % 1.0
        self.update()

    def showEvent(self, event) -> None:
        self._sync_busy()
        super().showEvent(event)

    def hideEvent(self, event) -> None:
        self._busy.stop()
        super().hideEvent(event)

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        pal = self.palette()
        h = min(8.0, float(self.height()))
        track = QRectF(0.5, (self.height() - h) / 2, self.width() - 1.0, h)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(pal.color(QPalette.ColorRole.Mid))
        p.setBrush(pal.color(QPalette.ColorRole.Base))
        p.drawRoundedRect(track, 3, 3)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(pal.color(QPalette.ColorRole.Highlight))
        if self._max > self._min:
            frac = min(1.0, max(0.0, (self._value - self._min) / (self._max - self._min)))
            p.drawRoundedRect(QRectF(track.x(), track.y(), track.width() * frac, h), 3, 3)
        else:
            w = track.width() * 0.25
            p.drawRoundedRect(QRectF(track.x() + (track.width() - w) * self._phase, track.y(), w, h), 3, 3)
        p.end()


class TaskIndicator(QWidget):
    """``label``, ``progress`` and ``cancel_button`` at fixed places in a fixed-size widget."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.label = ElidedText(self)
        self.progress = ProgressStrip(self)
        self.cancel_button = QToolButton(self)
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.cancel_button.setAutoRaise(True)
        button = self.cancel_button.sizeHint()
        h = max(button.height(), self.fontMetrics().height() + 4)
        self._button = QSize(button.width() + 4, button.height())
        self._size = QSize(TEXT_WIDTH + 8 + BAR_WIDTH + 6 + self._button.width(), h)
        # a constant size hint and a small minimum: the window can still be made narrow,
        # and nothing here ever asks the status bar to lay out again
        self.setFixedHeight(h)
        self.setMinimumWidth(self._button.width() + 60)
        self.set_active(False)

    def resizeEvent(self, event) -> None:
        w, h = self.width(), self.height()
        bw = self._button.width()
        bar = min(BAR_WIDTH, max(40, (w - bw - 14) // 3))
        text = max(0, w - bw - bar - 14)
        self.label.setGeometry(0, 0, text, h)
        self.progress.setGeometry(text + 8, 0, bar, h)
        self.cancel_button.setGeometry(w - bw, (h - self._button.height()) // 2, bw, self._button.height())
        super().resizeEvent(event)

    def set_active(self, active: bool) -> None:
        """Show or hide the parts; the indicator itself keeps its size either way."""
        for w in (self.label, self.progress, self.cancel_button):
            w.setVisible(active)

    def set_text_width(self, text_width: int) -> None:
        """The width given to the task title (default :data:`TEXT_WIDTH`). The main window
        narrows it when the window is resized small, so the status bar's messages keep room."""
        size = QSize(text_width + 8 + BAR_WIDTH + 6 + self._button.width(), self._size.height())
        if size != self._size:
            self._size = size
            self.updateGeometry()

    def sizeHint(self) -> QSize:
        return self._size

    def minimumSizeHint(self) -> QSize:
        return QSize(self._button.width() + 60, self._size.height())
