"""A painted hex view over any bytes-like buffer (the Studio gives it the file's mmap).

Only the rows on screen are read and painted: scrolling a 1 GB file touches a few
hundred bytes per frame, never the whole mapping. The widget knows nothing about NAC;
the caller supplies coloured regions (sections), highlighted ranges (the selected
field's bytes), bookmarks, a search match and two callbacks: the tooltip text for an
offset and the byte range to frame when the mouse hovers an offset.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Callable, Iterable, Optional

from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import (QColor, QFont, QFontDatabase, QFontMetricsF, QKeyEvent, QPainter, QPalette, QPen,
                           QPolygonF)
from PySide6.QtWidgets import QAbstractScrollArea, QToolTip, QWidget

ROW = 16          # bytes per row; a 32-bit scroll bar then covers files up to 32 GB
_MAX_ROWS = 2**31 - 1


def _hex_cell_text(chunk: bytes, keep_zero: bool) -> str:
    """Hex digits of ``chunk`` with either the zero or the non-zero bytes blanked out."""
    parts = []
    for b in chunk:
        if (b == 0) == keep_zero:
            parts.append(f"{b:02X}")
        else:
            parts.append("  ")
    return " ".join(parts)


class HexArea(QAbstractScrollArea):
    clicked = Signal(int)             # a byte was clicked (no drag)
    doubleClicked = Signal(int)
    cursorMoved = Signal(int)         # keyboard moved the cursor
    rangeSelected = Signal(int, int)  # a drag selected [start, end)

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self._buf = None
        self._size = 0
        self._region_starts: list[int] = []
        self._regions: list[tuple[int, int, QColor]] = []
        self._highlights: list[tuple[int, int]] = []
        self._match: Optional[tuple[int, int]] = None
        self._exec: list[tuple[int, int, QColor]] = []     # the debugger's execution point
        self._range: Optional[tuple[int, int]] = None
        self._bookmarks: list[int] = []
        self._hover: Optional[tuple[int, int]] = None
        self._hover_offset = -1
        self._cursor = 0
        self._anchor: Optional[int] = None
        self._dragging = False
        self.tooltip_provider: Optional[Callable[[int], str]] = None
        self.hover_range_provider: Optional[Callable[[int], Optional[tuple[int, int]]]] = None
        self.setMouseTracking(True)
        self.viewport().setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setFrameShape(QAbstractScrollArea.Shape.NoFrame)
        self.verticalScrollBar().valueChanged.connect(self.viewport().update)
        self.horizontalScrollBar().valueChanged.connect(self.viewport().update)
        self._set_font(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))

    # -- configuration ---------------------------------------------------------------------
    def _set_font(self, font: QFont) -> None:
        font.setStyleHint(QFont.StyleHint.Monospace)
        font.setFixedPitch(True)
        self._font = font
        fm = QFontMetricsF(font)
        self._cw = fm.horizontalAdvance("0")
        self._lh = round(fm.height() + 3)
        self._ascent = fm.ascent()
        self._relayout()

    def setFont(self, font: QFont) -> None:   # noqa: N802 (Qt override)
        super().setFont(font)
        self._set_font(QFont(font))

    @property
    def buffer(self):
        """The bytes on display (None before a file)."""
        return self._buf

    def set_buffer(self, buf) -> None:
        """Any object with ``len()`` and slicing (bytes, mmap, memoryview)."""
        self._buf = buf
        self._size = len(buf) if buf is not None else 0
        self._cursor = 0
        self._range = None
        self._match = None
        self._hover = None
        self._relayout()
        self.verticalScrollBar().setValue(0)
        self.viewport().update()

    @property
    def size_bytes(self) -> int:
        return self._size

    def set_regions(self, regions: Iterable[tuple[int, int, QColor]]) -> None:
        """Background colours: ``(start, end, colour)``, non-overlapping."""
        self._regions = sorted(regions, key=lambda r: r[0])
        self._region_starts = [r[0] for r in self._regions]
        self.viewport().update()

    def set_highlights(self, ranges: Iterable[tuple[int, int]]) -> None:
        self._highlights = [(a, b) for a, b in ranges if b > a]
        self.viewport().update()

    def highlights(self) -> list[tuple[int, int]]:
        return list(self._highlights)

    def set_exec_ranges(self, ranges: Iterable[tuple[int, int, QColor]]) -> None:
        """The debugger's execution point (instruction and MMAP record bytes): ``(start, end,
        colour)``, drawn tinted and framed under the selection."""
        self._exec = [(a, b, c) for a, b, c in ranges if b > a]
        self.viewport().update()

    def exec_ranges(self) -> list[tuple[int, int]]:
        return [(a, b) for a, b, _c in self._exec]

    def set_match(self, match: Optional[tuple[int, int]]) -> None:
        self._match = match
        self.viewport().update()

    def set_bookmarks(self, offsets: Iterable[int]) -> None:
        self._bookmarks = sorted(set(offsets))
        self.viewport().update()

    def selected_range(self) -> Optional[tuple[int, int]]:
        return self._range

    @property
    def cursor_offset(self) -> int:
        return self._cursor

    def set_cursor(self, offset: int, ensure_visible: bool = True) -> None:
        if self._size == 0:
            return
        self._cursor = max(0, min(self._size - 1, offset))
        if ensure_visible:
            self.ensure_visible(self._cursor)
        self.viewport().update()

    # -- geometry --------------------------------------------------------------------------
    @property
    def _digits(self) -> int:
        return max(8, len(f"{max(self._size - 1, 0):X}"))

    def _relayout(self) -> None:
        cw = self._cw
        self._x_gutter = 6
        self._x_offset = self._x_gutter + 6
        self._x_hex = self._x_offset + (self._digits + 2) * cw
        self._x_ascii = self._x_hex + (ROW * 3 + 1) * cw + cw
        self._content_width = int(self._x_ascii + ROW * cw + 2 * cw)
        self._header_h = self._lh + 2
        self._update_scrollbars()

    def _cell_left(self, i: int) -> float:
        return self._x_hex + i * 3 * self._cw + (self._cw if i >= ROW // 2 else 0) - 0.5 * self._cw

    def _cell_right(self, i: int) -> float:
        return self._cell_left(i) + 3 * self._cw

    def content_width(self) -> int:
        return self._content_width

    @property
    def rows_total(self) -> int:
        return min(_MAX_ROWS, (self._size + ROW - 1) // ROW)

    def visible_rows(self) -> int:
        return max(1, (self.viewport().height() - self._header_h) // self._lh)

    def first_row(self) -> int:
        return self.verticalScrollBar().value()

    def _update_scrollbars(self) -> None:
        vis = self.visible_rows()
        vs = self.verticalScrollBar()
        vs.setRange(0, max(0, self.rows_total - vis + 1))
        vs.setPageStep(vis)
        vs.setSingleStep(1)
        hs = self.horizontalScrollBar()
        hs.setRange(0, max(0, self._content_width - self.viewport().width()))
        hs.setPageStep(self.viewport().width())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._update_scrollbars()

    def ensure_visible(self, offset: int, center: bool = False) -> None:
        row = offset // ROW
        first = self.first_row()
        vis = self.visible_rows()
        if center or not (first <= row < first + vis - 1):
            target = row - vis // 3 if center or row < first or row >= first + vis else row - vis + 2
            self.verticalScrollBar().setValue(max(0, target))

    def offset_at(self, pos) -> Optional[int]:
        """Byte under a viewport position (hex or ASCII column), or ``None``."""
        x = pos.x() + self.horizontalScrollBar().value()
        y = pos.y() - self._header_h
        if y < 0 or self._size == 0:
            return None
        row = self.first_row() + int(y // self._lh)
        col = None
        if self._cell_left(0) <= x < self._cell_right(ROW - 1):
            for i in range(ROW):
                if x < self._cell_right(i):
                    col = i
                    break
        elif self._x_ascii <= x < self._x_ascii + ROW * self._cw:
            col = int((x - self._x_ascii) // self._cw)
        if col is None:
            return None
        off = row * ROW + col
        return off if off < self._size else None

    # -- painting --------------------------------------------------------------------------
    def paintEvent(self, event) -> None:
        p = QPainter(self.viewport())
        pal = self.palette()
        base = pal.color(QPalette.ColorRole.Base)
        text = pal.color(QPalette.ColorRole.Text)
        dim = QColor(text)
        dim.setAlphaF(0.38)
        p.fillRect(self.viewport().rect(), base)
        p.setFont(self._font)
        dx = self.horizontalScrollBar().value()
        p.translate(-dx, 0)
        self._paint_header(p, pal)
        if self._buf is None or self._size == 0:
            p.end()
            return
        first = self.first_row()
        nrows = min(self.visible_rows() + 1, self.rows_total - first)
        start = first * ROW
        end = min(self._size, (first + nrows) * ROW)
        data = bytes(self._buf[start:end])
        lh, cw = self._lh, self._cw
        y0 = self._header_h
        p.setClipRect(QRect(dx, y0, self.viewport().width(), self.viewport().height() - y0))
        # offset gutter background
        gutter = pal.color(QPalette.ColorRole.AlternateBase)
        p.fillRect(QRectF(0, y0, self._x_hex - cw, nrows * lh), gutter)
        # backgrounds first: sections, then the selection, search match, drag range
        self._paint_ranges(p, first, nrows, self._visible_regions(start, end), fill=True)
        if self._exec:
            self._paint_ranges(p, first, nrows, self._exec, fill=True)
            self._paint_ranges(p, first, nrows, [(a, b, QColor(c.red(), c.green(), c.blue())) for a, b, c in self._exec],
                               fill=False)
        hl = QColor(pal.color(QPalette.ColorRole.Highlight))
        hl.setAlpha(120)
        self._paint_ranges(p, first, nrows, [(a, b, hl) for a, b in self._highlights], fill=True)
        edge = QColor(pal.color(QPalette.ColorRole.Highlight))
        self._paint_ranges(p, first, nrows, [(a, b, edge) for a, b in self._highlights], fill=False)
        if self._range is not None:
            rc = QColor(pal.color(QPalette.ColorRole.Highlight))
            rc.setAlpha(70)
            self._paint_ranges(p, first, nrows, [(self._range[0], self._range[1], rc)], fill=True)
        if self._match is not None:
            self._paint_ranges(p, first, nrows, [(self._match[0], self._match[1], QColor(255, 190, 40, 170))],
                               fill=True)
        if self._hover is not None:
            hover = QColor(text)
            hover.setAlpha(140)
            self._paint_ranges(p, first, nrows, [(self._hover[0], self._hover[1], hover)], fill=False)
        # text
        for r in range(nrows):
            row_off = (first + r) * ROW
            chunk = data[r * ROW:(r + 1) * ROW]
            if not chunk:
                break
            baseline = y0 + r * lh + self._ascent + 1.5
            p.setPen(dim)
            p.drawText(QPointF(self._x_offset, baseline), f"{row_off:0{self._digits}X}")
            for half in (0, 1):
                part = chunk[half * 8:(half + 1) * 8]
                if not part:
                    continue
                x = self._x_hex + half * (8 * 3 + 1) * cw
                p.setPen(text)
                p.drawText(QPointF(x, baseline), _hex_cell_text(part, keep_zero=False))
                p.setPen(dim)
                p.drawText(QPointF(x, baseline), _hex_cell_text(part, keep_zero=True))
            printable = "".join(chr(b) if 0x20 <= b < 0x7F else " " for b in chunk)
            dots = "".join(" " if 0x20 <= b < 0x7F else "·" for b in chunk)
            p.setPen(text)
            p.drawText(QPointF(self._x_ascii, baseline), printable)
            p.setPen(dim)
            p.drawText(QPointF(self._x_ascii, baseline), dots)
        # bookmarks: a marker in the gutter and an underline under the byte
        mark = QColor(224, 160, 48)
        for off in self._bookmarks_between(start, end):
            r = off // ROW - first
            y = y0 + r * lh
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(mark)
            p.drawPolygon(QPolygonF([QPointF(self._x_gutter - 3, y + 3), QPointF(self._x_gutter + 4, y + lh / 2),
                                     QPointF(self._x_gutter - 3, y + lh - 3)]))
            i = off % ROW
            p.fillRect(QRectF(self._cell_left(i) + 0.5 * cw, y + lh - 2.5, 2 * cw, 2), mark)
            p.fillRect(QRectF(self._x_ascii + i * cw, y + lh - 2.5, cw, 2), mark)
        # cursor: a box around the byte in both columns
        if start <= self._cursor < end:
            r = self._cursor // ROW - first
            i = self._cursor % ROW
            y = y0 + r * lh
            pen = QPen(pal.color(QPalette.ColorRole.Highlight) if self.hasFocus() else dim, 1.5)
            p.setPen(pen)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(self._cell_left(i) + 0.5 * cw - 2, y + 1, 2 * cw + 4, lh - 2))
            p.drawRect(QRectF(self._x_ascii + i * cw - 0.5, y + 1, cw + 1, lh - 2))
        p.end()

    def _paint_header(self, p: QPainter, pal: QPalette) -> None:
        cw = self._cw
        p.fillRect(QRectF(0, 0, max(self._content_width, self.viewport().width()) + 200, self._header_h),
                   pal.color(QPalette.ColorRole.Window))
        dim = QColor(pal.color(QPalette.ColorRole.WindowText))
        dim.setAlphaF(0.55)
        p.setPen(dim)
        baseline = self._ascent + 1
        p.drawText(QPointF(self._x_offset, baseline), "Offset".ljust(self._digits))
        for half in (0, 1):
            labels = " ".join(f"{i:02X}" for i in range(half * 8, half * 8 + 8))
            p.drawText(QPointF(self._x_hex + half * (8 * 3 + 1) * cw, baseline), labels)
        p.drawText(QPointF(self._x_ascii, baseline), "0123456789ABCDEF")
        line = QColor(pal.color(QPalette.ColorRole.Mid))
        p.setPen(line)
        p.drawLine(QPointF(0, self._header_h - 0.5), QPointF(self._content_width + 200, self._header_h - 0.5))

    def _visible_regions(self, start: int, end: int) -> list[tuple[int, int, QColor]]:
        if not self._regions:
            return []
        i = max(0, bisect_right(self._region_starts, start) - 1)
        out = []
        while i < len(self._regions) and self._regions[i][0] < end:
            a, b, c = self._regions[i]
            if b > start:
                out.append((a, b, c))
            i += 1
        return out

    def _bookmarks_between(self, start: int, end: int) -> list[int]:
        i = bisect_right(self._bookmarks, start - 1)
        out = []
        while i < len(self._bookmarks) and self._bookmarks[i] < end:
            out.append(self._bookmarks[i])
            i += 1
        return out

    def _paint_ranges(self, p: QPainter, first: int, nrows: int, ranges, fill: bool) -> None:
        """Fill (or outline) byte ranges row by row in both the hex and ASCII columns."""
        lh, cw, y0 = self._lh, self._cw, self._header_h
        view_start = first * ROW
        view_end = (first + nrows) * ROW
        for a, b, color in ranges:
            a, b = max(a, view_start), min(b, view_end, self._size)
            if a >= b:
                continue
            if fill:
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(color)
            else:
                p.setPen(QPen(color, 1))
                p.setBrush(Qt.BrushStyle.NoBrush)
            row = a // ROW
            while row * ROW < b:
                i = max(a, row * ROW) - row * ROW
                j = min(b, (row + 1) * ROW) - 1 - row * ROW
                y = y0 + (row - first) * lh
                hex_rect = QRectF(self._cell_left(i), y, self._cell_right(j) - self._cell_left(i), lh)
                asc_rect = QRectF(self._x_ascii + i * cw, y, (j - i + 1) * cw, lh)
                if fill:
                    p.drawRect(hex_rect)
                    p.drawRect(asc_rect)
                else:
                    p.drawRect(hex_rect.adjusted(0.5, 0.5, -0.5, -0.5))
                    p.drawRect(asc_rect.adjusted(0.5, 0.5, -0.5, -0.5))
                row += 1

    # -- input -----------------------------------------------------------------------------
    def mousePressEvent(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return super().mousePressEvent(event)
        off = self.offset_at(event.position())
        if off is None:
            return
        self.setFocus()
        if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            a = min(self._cursor, off)
            b = max(self._cursor, off) + 1
            self._range = (a, b)
            self.viewport().update()
            self.rangeSelected.emit(a, b)
            return
        self._anchor = off
        self._dragging = False
        self._cursor = off
        self.viewport().update()

    def mouseMoveEvent(self, event) -> None:
        off = self.offset_at(event.position())
        if self._anchor is not None and event.buttons() & Qt.MouseButton.LeftButton and off is not None:
            if off != self._anchor or self._dragging:
                self._dragging = True
                self._range = (min(self._anchor, off), max(self._anchor, off) + 1)
                self._cursor = off
                self.viewport().update()
            return
        if off != self._hover_offset:
            self._hover_offset = -1 if off is None else off
            hover = None
            if off is not None and self.hover_range_provider is not None:
                hover = self.hover_range_provider(off)
            if hover != self._hover:
                self._hover = hover
                self.viewport().update()

    def mouseReleaseEvent(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton or self._anchor is None:
            return super().mouseReleaseEvent(event)
        anchor, self._anchor = self._anchor, None
        if self._dragging and self._range is not None:
            self._dragging = False
            self.rangeSelected.emit(*self._range)
            return
        self._range = None
        self.clicked.emit(anchor)

    def mouseDoubleClickEvent(self, event) -> None:
        off = self.offset_at(event.position())
        if off is not None:
            self.doubleClicked.emit(off)

    def leaveEvent(self, event) -> None:
        self._hover_offset = -1
        if self._hover is not None:
            self._hover = None
            self.viewport().update()
        super().leaveEvent(event)

    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            off = self.offset_at(event.pos())
            text = self.tooltip_provider(off) if (off is not None and self.tooltip_provider) else ""
            if text:
                QToolTip.showText(event.globalPos(), text, self.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self._size == 0:
            return super().keyPressEvent(event)
        key = event.key()
        ctrl = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
        vis = self.visible_rows()
        moves = {
            Qt.Key.Key_Left: -1, Qt.Key.Key_Right: 1, Qt.Key.Key_Up: -ROW, Qt.Key.Key_Down: ROW,
            Qt.Key.Key_PageUp: -ROW * (vis - 1), Qt.Key.Key_PageDown: ROW * (vis - 1),
        }
        if key in moves:
            target = self._cursor + moves[key]
        elif key == Qt.Key.Key_Home:
            target = 0 if ctrl else self._cursor - self._cursor % ROW
        elif key == Qt.Key.Key_End:
            target = self._size - 1 if ctrl else min(self._size - 1, self._cursor - self._cursor % ROW + ROW - 1)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.clicked.emit(self._cursor)
            return
        else:
            return super().keyPressEvent(event)
        target = max(0, min(self._size - 1, target))
        if target != self._cursor:
            self.set_cursor(target)
            self.cursorMoved.emit(target)

    def wheelEvent(self, event) -> None:
        # three rows per notch, like text editors; pixel deltas from touchpads scroll finer
        delta = event.angleDelta().y()
        if delta:
            steps = -delta / 120 * 3
            vs = self.verticalScrollBar()
            vs.setValue(vs.value() + int(round(steps)) if abs(steps) >= 1 else vs.value() + (1 if steps > 0 else -1))
            event.accept()
            return
        super().wheelEvent(event)

    def focusInEvent(self, event) -> None:
        self.viewport().update()
        super().focusInEvent(event)

    def focusOutEvent(self, event) -> None:
        self.viewport().update()
        super().focusOutEvent(event)
