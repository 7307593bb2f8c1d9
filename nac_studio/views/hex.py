"""Hex view: the file's bytes, coloured by section, with the selected field highlighted.

Clicking a byte selects the record it belongs to (instruction, parameter, ...);
double-clicking selects the innermost field. Hovering frames the field under the mouse
and names it in a tooltip (``OPS/instr[42]/D[1] = -3 → v39 (aten.relu.default)``). Go to
offset, search (bytes or text; in the background for big files), bookmarks and copy as
hex / C array / Python bytes live in the view's toolbar and in the command registry.

Bookmarks are kept per file between sessions when the view is given settings
(:meth:`HexView.set_settings`, see :mod:`nac_studio.bookmark_store`). Those saved for
another version of the file (its size or mtime changed) are not applied: the bookmark
menu lists them with Restore Anyway / Discard, and the first change to the file's
bookmarks replaces them.
"""
from __future__ import annotations

import os
import re
import weakref
from pathlib import Path
from typing import Optional

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QPainter, QPalette, QPen
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QLineEdit, QMenu, QSizePolicy, QToolButton,
                               QVBoxLayout, QWidget)

from nac_engine.spans import UNPARSED

from .. import debug_marks
from ..bookmark_store import BookmarkStore, file_identity
from ..qt_document import rebind
from ..model.document import Document, Selection
from ..icons import icon
from ..theme import mono_font, section_color
from ..widgets.hex_area import ROW, HexArea

#: Files up to this size are searched on the UI thread (a few milliseconds when cached).
INLINE_SEARCH_BYTES = 4 << 20
SEARCH_CHUNK = 4 << 20   # one chunk's find holds the GIL for about a millisecond
COPY_LIMIT = 1 << 20

_HEX_RE = re.compile(r"^[0-9a-fA-F\s]+$")


def parse_hex_pattern(text: str) -> bytes:
    """``"4E 41 43"``, ``"4e4143"``, ``"0x4e 0x41"`` → bytes (ValueError when not hex)."""
    cleaned = re.sub(r"0x", "", text.strip(), flags=re.IGNORECASE).replace(",", " ")
    if not cleaned or not _HEX_RE.match(cleaned):
        raise ValueError(f"not a hex byte string: {text!r}")
    digits = "".join(cleaned.split())
    if len(digits) % 2:
        raise ValueError(f"odd number of hex digits in {text!r}")
    return bytes.fromhex(digits)


def format_hex(data: bytes) -> str:
    return "\n".join(data[i:i + ROW].hex(" ").upper() for i in range(0, len(data), ROW))


def format_c_array(data: bytes, name: str = "data") -> str:
    lines = [", ".join(f"0x{b:02x}" for b in data[i:i + 12]) for i in range(0, len(data), 12)]
    body = ",\n    ".join(lines)
    return f"static const unsigned char {name}[{len(data)}] = {{\n    {body}\n}};\n"


def format_python_bytes(data: bytes) -> str:
    return repr(bytes(data))


class FileChunks:
    """A file read with ``os.pread``, which releases the GIL while the disk works.

    Searching the memory map itself would fault pages in while holding the GIL (and the
    reader maps files with ``MADV_RANDOM``, so without read-ahead): on a file not in the
    page cache that froze the UI for over a second per chunk.
    """

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size

    def __len__(self) -> int:
        return self.size

    def read_at(self, offset: int, n: int) -> bytes:
        return os.pread(self.fd, n, offset)

    def close(self) -> None:
        os.close(self.fd)


def find_in(source, pattern: bytes, start: int, forward: bool = True, ctx=None,
            chunk: int = SEARCH_CHUNK) -> int:
    """First match at or after ``start`` (forward) or the last one before ``start``
    (backward), wrapping around once; -1 when absent.

    ``source`` is bytes-like (bytes, mmap) or has ``read_at(offset, n)`` (:class:`FileChunks`).
    It is read a chunk at a time, so a background task reports progress and can stop
    between chunks, and no more than one chunk is in memory.
    """
    size = len(source)
    n = len(pattern)
    if n == 0 or n > size:
        return -1
    read = source.read_at if hasattr(source, "read_at") else (lambda o, k: bytes(source[o:o + k]))
    start = max(0, min(start, size))
    if forward:
        spans = [(start, size), (0, min(size, start + n - 1))]
    else:
        spans = [(0, start), (max(0, start - n + 1), size)]
    total = sum(b - a for a, b in spans) or 1
    done = 0
    for lo, hi in spans:
        if forward:
            pos = lo
            while pos < hi:
                end = min(hi, pos + chunk)
                # n - 1 bytes of overlap: a match may straddle two chunks
                idx = read(pos, min(size, end + n - 1) - pos).find(pattern)
                if idx >= 0 and pos + idx < hi:
                    return pos + idx
                done += end - pos
                pos = end
                if ctx is not None:
                    ctx.check()
                    ctx.progress(done, total)
        else:
            pos = hi
            while pos > lo:
                begin = max(lo, pos - chunk)
                idx = read(begin, min(size, pos + n - 1) - begin).rfind(pattern)
                if idx >= 0 and begin + idx < pos:
                    return begin + idx
                done += pos - begin
                pos = begin
                if ctx is not None:
                    ctx.check()
                    ctx.progress(done, total)
    return -1


def search_file(ctx, path: str, pattern: bytes, start: int, forward: bool) -> int:
    """Background search of a file on disk (see :class:`FileChunks`)."""
    chunks = FileChunks(path)
    try:
        return find_in(chunks, pattern, start, forward, ctx=ctx)
    finally:
        chunks.close()


def parse_goto(text: str, current: int) -> int:
    """``0x1c0``, ``448``, ``+16``, ``-0x10`` (relative to ``current``) → absolute offset."""
    t = text.strip().replace("_", "")
    if not t:
        raise ValueError("empty offset")
    rel = t[0] in "+-"
    value = int(t, 0) if not rel else (1 if t[0] == "+" else -1) * int(t[1:].strip(), 0)
    return current + value if rel else value


class SectionStrip(QWidget):
    """The file's sections as a strip: a legend, a minimap and a way to jump to a section.

    Widths are proportional to size with a floor, so a 40-byte CMAP stays visible next
    to a 500 MB DATA section. The current viewport is outlined.
    """
    sectionClicked = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._sections: list[tuple[str, int, int]] = []
        self._view: Optional[tuple[int, int]] = None
        self._boxes: list[tuple[QRectF, str, int, int]] = []
        self.setMouseTracking(True)
        self.setMinimumHeight(20)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(400, 20)

    def set_sections(self, sections: list[tuple[str, int, int]]) -> None:
        self._sections = sections
        self.update()

    def set_view(self, start: int, end: int) -> None:
        self._view = (start, end)
        self.update()

    def _layout(self) -> None:
        self._boxes = []
        if not self._sections:
            return
        w = self.width() - 2
        fm = self.fontMetrics()
        mins = [fm.horizontalAdvance(tag) + 10 for tag, _, _ in self._sections]
        total = sum(b - a for _, a, b in self._sections) or 1
        spare = max(0, w - sum(mins))
        x = 1.0
        for (tag, a, b), m in zip(self._sections, mins):
            width = m + spare * (b - a) / total
            self._boxes.append((QRectF(x, 1, width, self.height() - 2), tag, a, b))
            x += width

    def paintEvent(self, event) -> None:
        self._layout()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        for rect, tag, a, b in self._boxes:
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(section_color(tag, pal, strong=False))
            p.drawRect(rect.adjusted(0.5, 0, -0.5, 0))
            p.setPen(pal.color(QPalette.ColorRole.Text))
            p.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), tag)
        if self._view is not None and self._boxes:
            vs, ve = self._view
            xs = self._x_of(vs)
            xe = max(self._x_of(ve), xs + 3)
            pen = QPen(pal.color(QPalette.ColorRole.Highlight), 2)
            p.setPen(pen)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRoundedRect(QRectF(xs, 1, xe - xs, self.height() - 2), 2, 2)
        p.end()

    def _x_of(self, offset: int) -> float:
        for rect, _tag, a, b in self._boxes:
            if a <= offset < b or (offset == b and rect is self._boxes[-1][0]):
                frac = (offset - a) / max(1, b - a)
                return rect.left() + frac * rect.width()
        if self._boxes and offset < self._boxes[0][2]:
            return self._boxes[0][0].left()
        return self._boxes[-1][0].right() if self._boxes else 0.0

    def _box_at(self, pos: QPointF):
        for rect, tag, a, b in self._boxes:
            if rect.contains(pos):
                return tag, a, b
        return None

    def mousePressEvent(self, event) -> None:
        hit = self._box_at(event.position())
        if hit is not None:
            self.sectionClicked.emit(hit[0])

    def mouseMoveEvent(self, event) -> None:
        hit = self._box_at(event.position())
        if hit is not None:
            tag, a, b = hit
            self.setToolTip(f"{tag}: 0x{a:X}–0x{b:X} ({b - a:,} bytes)")
        self.setCursor(Qt.CursorShape.PointingHandCursor if hit else Qt.CursorShape.ArrowCursor)


class HexView(QWidget):
    title = "Hex"
    object_name = "hex"
    message = Signal(str)   # one-line feedback for the status bar

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.qdoc = None
        # Document -> offset -> label; weak, so a closed file's marks go with it (and a new
        # document can never inherit them through a reused id)
        self._bookmarks: "weakref.WeakKeyDictionary[Document, dict[int, str]]" = weakref.WeakKeyDictionary()
        self._stale: "weakref.WeakKeyDictionary[Document, dict[int, str]]" = weakref.WeakKeyDictionary()
        self.store: Optional[BookmarkStore] = None
        self._search_task = None
        self._icon_buttons: list[tuple[QToolButton, str]] = []
        self.area = HexArea(self)
        self.area.setFont(mono_font())
        self.area.tooltip_provider = self._tooltip
        self.area.hover_range_provider = self._hover_range
        self.area.clicked.connect(self._on_click)
        self.area.doubleClicked.connect(self._on_double_click)
        self.area.cursorMoved.connect(self._on_cursor_moved)
        self.area.verticalScrollBar().valueChanged.connect(self._update_strip_view)
        self.strip = SectionStrip(self)
        self.strip.sectionClicked.connect(self._on_section_clicked)

        self.goto_edit = QLineEdit(self)
        self.goto_edit.setPlaceholderText("Go to offset")
        self.goto_edit.setToolTip("Offset: 0x1C0, 448, +16 / -0x10 relative to the cursor, or a section tag")
        self.goto_edit.setFixedWidth(120)
        self.goto_edit.returnPressed.connect(self._goto_from_edit)
        self.search_edit = QLineEdit(self)
        self.search_edit.setPlaceholderText("Find bytes or text")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.returnPressed.connect(lambda: self.find(forward=True))
        self.search_mode = QComboBox(self)
        self.search_mode.addItems(["Hex", "Text"])
        self.search_mode.setToolTip("Search for hex bytes (4E 41 43) or UTF-8 text")
        prev_btn = self._tool("back", "Find previous (Shift+F3)", lambda: self.find(forward=False))
        next_btn = self._tool("forward", "Find next (F3)", lambda: self.find(forward=True))
        self.bookmark_btn = self._tool("bookmark", "Toggle bookmark at the cursor (Ctrl+B)", self.toggle_bookmark)
        self.bookmark_menu = QMenu(self)
        self.bookmark_menu.aboutToShow.connect(self._fill_bookmark_menu)
        self.bookmark_btn.setMenu(self.bookmark_menu)
        self.bookmark_btn.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        copy_btn = self._tool("copy", "Copy selected bytes", lambda: self.copy("hex"))
        copy_menu = QMenu(self)
        for label, fmt in (("Copy as Hex", "hex"), ("Copy as C Array", "c"), ("Copy as Python bytes", "python")):
            act = QAction(label, copy_menu)
            act.triggered.connect(lambda _c=False, f=fmt: self.copy(f))
            copy_menu.addAction(act)
        copy_btn.setMenu(copy_menu)
        copy_btn.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        self.cursor_label = QLabel(self)
        self.cursor_label.setFont(mono_font(-0.5))
        self.cursor_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        bar.setSpacing(4)
        bar.addWidget(self.goto_edit)
        bar.addSpacing(6)
        bar.addWidget(self.search_edit, 1)
        bar.addWidget(self.search_mode)
        bar.addWidget(prev_btn)
        bar.addWidget(next_btn)
        bar.addSpacing(6)
        bar.addWidget(self.bookmark_btn)
        bar.addWidget(copy_btn)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        strip_row = QHBoxLayout()
        strip_row.setContentsMargins(4, 0, 4, 3)
        strip_row.addWidget(self.strip)
        lay.addLayout(strip_row)
        lay.addWidget(self.area, 1)
        foot = QHBoxLayout()
        foot.setContentsMargins(6, 1, 6, 1)
        foot.addWidget(self.cursor_label, 1)
        lay.addLayout(foot)
        self.area.cursorMoved.connect(lambda _o: self._update_cursor_label())
        self.area.clicked.connect(lambda _o: self._update_cursor_label())
        self.set_document(qdoc)

    def preferred_width(self) -> int:
        """Width that shows every column without a horizontal scroll bar."""
        return self.area.content_width() + self.area.verticalScrollBar().sizeHint().width() + 12

    def retint(self) -> None:
        """Re-draw the toolbar icons in the current palette (the main window calls this)."""
        for button, name in self._icon_buttons:
            button.setIcon(icon(name))
        self._apply_colors()

    def _tool(self, icon_name: str, tip: str, slot) -> QToolButton:
        b = QToolButton(self)
        self._icon_buttons.append((b, icon_name))
        b.setIcon(icon(icon_name))
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(slot)
        return b

    # -- document -------------------------------------------------------------------------
    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, selection=self._on_selection, debug=self._on_debug)
        self.cancel_search()
        self.qdoc = qdoc
        if qdoc is None:
            self.area.set_buffer(None)
            self.area.set_regions([])
            self.strip.set_sections([])
            self.cursor_label.setText("")
            return
        nac = qdoc.nac
        self.area.set_buffer(nac.buffer if nac.buffer is not None else b"")
        self._apply_colors()
        self.area.set_bookmarks(self.bookmarks().keys())
        self._on_selection(None)
        self._binding = True            # a document shown again keeps its scroll position
        try:
            self._on_debug(None)
        finally:
            self._binding = False
        self._update_strip_view()
        self._update_cursor_label()

    def _on_debug(self, _source) -> None:
        """The execution point's instruction and MMAP record bytes, tinted in the debugger's colour."""
        doc = self.qdoc.doc if self.qdoc is not None else None
        marks = debug_marks.DebugMarks(doc.debug if doc is not None else None)
        color = debug_marks.error_row_color(False) if marks.error_tick is not None else debug_marks.exec_row_color(False)
        ranges = debug_marks.hex_ranges(doc, marks)
        self.area.set_exec_ranges([(a, a + n, color) for a, n in ranges])
        # a new stop brings its instruction's bytes into view, as the disassembly scrolls to its row
        at = marks.error_tick if marks.error_tick is not None else marks.exec_tick
        if ranges and at != getattr(self, "_shown_exec", None) and not getattr(self, "_binding", False):
            self.area.ensure_visible(ranges[0][0])
        self._shown_exec = at

    def _apply_colors(self) -> None:
        if self.qdoc is None:
            return
        root = self.qdoc.nac.spans
        regions, sections = [], []
        pal = self.palette()
        if root is not None:
            for sec in root.children:
                tag = UNPARSED if sec.name == UNPARSED else sec.name
                sections.append((tag, sec.offset, sec.end))
                holes = [k for k in sec.children if k.name == UNPARSED] if tag != UNPARSED else []
                pos = sec.offset
                for h in holes:
                    if h.offset > pos:
                        regions.append((pos, h.offset, section_color(tag, pal)))
                    regions.append((h.offset, h.end, section_color(UNPARSED, pal)))
                    pos = h.end
                if sec.end > pos:
                    regions.append((pos, sec.end, section_color(tag, pal)))
        self.area.set_regions(regions)
        self.strip.set_sections([s for s in sections if s[2] > s[1]])

    def changeEvent(self, event) -> None:
        from PySide6.QtCore import QEvent
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_colors()
        super().changeEvent(event)

    def _on_selection(self, source) -> None:
        if self.qdoc is None:
            return
        sel = self.qdoc.selection
        spans = self.qdoc.doc.spans_of(sel) if sel is not None else []
        self.area.set_highlights([(s.offset, s.end) for s in spans])
        if source is self or not spans:
            return
        first = spans[0]
        self.area.set_cursor(first.offset, ensure_visible=False)
        self.area.ensure_visible(first.offset, center=not self._comfortably_visible(first.offset))
        self._update_cursor_label()

    def _comfortably_visible(self, offset: int) -> bool:
        """On screen and not in the two rows at either edge (where it is easy to miss)."""
        first = self.area.first_row()
        row = offset // ROW
        return first + 1 <= row < first + self.area.visible_rows() - 2

    def _is_visible(self, offset: int) -> bool:
        first = self.area.first_row()
        return first <= offset // ROW < first + self.area.visible_rows()

    # -- view → document ------------------------------------------------------------------
    def _on_click(self, offset: int) -> None:
        if self.qdoc is None:
            return
        sel = self.qdoc.doc.selection_at(offset)
        if sel is not None:
            self.qdoc.select(sel, source=self)

    def _on_double_click(self, offset: int) -> None:
        if self.qdoc is None or self.qdoc.nac.spans is None:
            return
        leaf = self.qdoc.nac.spans.span_at(offset)
        if leaf is None or leaf.parent is None:
            self.qdoc.select(Selection("offset", offset), source=self)
        else:
            self.qdoc.select(Selection("span", leaf.path), source=self)

    def _on_cursor_moved(self, offset: int) -> None:
        # keyboard navigation selects as it goes, but only when it leaves the current record
        if self.qdoc is None:
            return
        if any(a <= offset < b for a, b in self.area.highlights()):
            return
        self._on_click(offset)

    def _on_section_clicked(self, tag: str) -> None:
        if self.qdoc is None:
            return
        root = self.qdoc.nac.spans
        sec = next((s for s in root.children if s.name == tag), None) if root is not None else None
        if sec is None:
            return
        self.area.set_cursor(sec.offset, ensure_visible=False)
        self.area.ensure_visible(sec.offset, center=False)
        self.area.verticalScrollBar().setValue(sec.offset // ROW)
        if tag != UNPARSED:
            self.qdoc.select(Selection("section", tag), source=self)
        else:
            self.qdoc.select(Selection("offset", sec.offset), source=self)

    # -- hover ----------------------------------------------------------------------------
    def _leaf(self, offset: int):
        if self.qdoc is None or self.qdoc.nac.spans is None:
            return None
        return self.qdoc.nac.spans.span_at(offset)

    def _tooltip(self, offset: int) -> str:
        leaf = self._leaf(offset)
        byte = self.area.buffer[offset] if self.area.buffer is not None and offset < self.area.size_bytes else 0
        head = f"0x{offset:X} ({offset:,}): 0x{byte:02X}"
        if leaf is None or leaf.parent is None:
            return head + "\n(no field)"
        return f"{self.qdoc.doc.describe_span(leaf)}\n{head}"

    def _hover_range(self, offset: int):
        leaf = self._leaf(offset)
        if leaf is None or leaf.parent is None:
            return None
        return (leaf.offset, leaf.end)

    def _update_strip_view(self, *_):
        first = self.area.first_row() * ROW
        self.strip.set_view(first, min(self.area.size_bytes, first + self.area.visible_rows() * ROW))

    def _update_cursor_label(self) -> None:
        if self.qdoc is None:
            return
        off = self.area.cursor_offset
        leaf = self._leaf(off)
        where = leaf.path if leaf is not None and leaf.parent is not None else "—"
        size = self.area.size_bytes
        self.cursor_label.setText(f"0x{off:08X}  {off:,} / {size:,}   {where}")

    # -- go to ----------------------------------------------------------------------------
    def go_to(self, text: str) -> bool:
        if self.qdoc is None:
            return False
        root = self.qdoc.nac.spans
        t = text.strip()
        offset = None
        if root is not None:
            sec = next((s for s in root.children if s.name.lower() == t.lower()), None)
            if sec is not None:
                offset = sec.offset
        if offset is None:
            try:
                offset = parse_goto(t, self.area.cursor_offset)
            except ValueError:
                self.message.emit(f"Not an offset: {text!r}")
                return False
        if not (0 <= offset < max(1, self.area.size_bytes)):
            self.message.emit(f"Offset {offset:#x} is outside the file (0..{self.area.size_bytes - 1:#x})")
            return False
        self.area.set_cursor(offset, ensure_visible=False)
        self.area.ensure_visible(offset, center=True)
        sel = self.qdoc.doc.selection_at(offset)
        if sel is not None:
            self.qdoc.select(sel, source=self)
        self._update_cursor_label()
        return True

    def _goto_from_edit(self) -> None:
        ok = self.go_to(self.goto_edit.text())
        self.goto_edit.setStyleSheet("" if ok else "QLineEdit { color: #d23c3c; }")

    def focus_goto(self) -> None:
        self.goto_edit.setFocus()
        self.goto_edit.selectAll()

    def focus_search(self) -> None:
        self.search_edit.setFocus()
        self.search_edit.selectAll()

    # -- search ---------------------------------------------------------------------------
    def pattern(self) -> bytes:
        text = self.search_edit.text()
        if self.search_mode.currentText() == "Hex":
            return parse_hex_pattern(text)
        if not text:
            raise ValueError("nothing to search for")
        return text.encode("utf-8")

    def find(self, forward: bool = True):
        """Find the next/previous match from the cursor; big files search in a task."""
        if self.qdoc is None:
            return None
        try:
            pat = self.pattern()
        except ValueError as e:
            self.message.emit(str(e))
            return None
        buf = self.area.buffer
        if buf is None or not len(buf):
            return None
        start = self.area.cursor_offset + (1 if forward else 0)
        if len(buf) <= INLINE_SEARCH_BYTES:
            self._found(find_in(buf, pat, start, forward), pat)
            return None
        self.cancel_search()
        path = self.qdoc.doc.path
        if path and os.path.isfile(path) and os.path.getsize(path) == len(buf):
            work = lambda ctx: search_file(ctx, path, pat, start, forward)  # noqa: E731
        else:   # a document without its file on disk: search the buffer itself
            work = lambda ctx: find_in(buf, pat, start, forward, ctx=ctx)  # noqa: E731
        task = self.qdoc.tasks.submit(f"Searching {len(buf) >> 20} MB", work,
                                      on_done=lambda idx, p=pat: self._found(idx, p),
                                      on_error=self._search_failed)
        self._search_task = task
        return task

    def cancel_search(self) -> None:
        if self._search_task is not None and not self._search_task.done():
            self._search_task.cancel()
        self._search_task = None

    def _search_failed(self, exc) -> None:
        from ..tasks import Cancelled
        self.message.emit("Search cancelled" if isinstance(exc, Cancelled) else f"Search failed: {exc}")

    def _found(self, idx: int, pat: bytes) -> None:
        if idx < 0:
            self.area.set_match(None)
            self.message.emit("Not found")
            return
        self.area.set_match((idx, idx + len(pat)))
        self.area.set_cursor(idx, ensure_visible=False)
        self.area.ensure_visible(idx, center=not self._is_visible(idx))
        self._update_cursor_label()
        leaf = self._leaf(idx)
        where = f" in {leaf.path}" if leaf is not None and leaf.parent is not None else ""
        self.message.emit(f"Found at 0x{idx:X}{where}")

    # -- bookmarks ------------------------------------------------------------------------
    def set_settings(self, settings) -> None:
        """Keep bookmarks between sessions in ``settings`` (``None``: only for this session).
        Documents already shown keep what they have."""
        self.store = BookmarkStore(settings) if settings is not None else None

    def bookmarks(self) -> dict[int, str]:
        if self.qdoc is None:
            return {}
        doc = self.qdoc.doc
        marks = self._bookmarks.get(doc)
        if marks is None:
            marks = self._bookmarks[doc] = self._load_bookmarks(doc)
        return marks

    def stale_bookmarks(self) -> dict[int, str]:
        """Bookmarks saved for another version of the current file, not applied."""
        if self.qdoc is None:
            return {}
        self.bookmarks()
        return self._stale.get(self.qdoc.doc, {})

    def _identity(self, doc: Document):
        return doc.file_identity or (file_identity(doc.path) if doc.path else None)

    def _load_bookmarks(self, doc: Document) -> dict[int, str]:
        if self.store is None or not doc.path:
            return {}
        marks, stale = self.store.load(doc.path, self._identity(doc))
        if stale:
            self._stale[doc] = stale
            self.message.emit(f"{len(stale)} bookmark{'s' if len(stale) != 1 else ''} saved for an earlier "
                              f"version of {Path(doc.path).name} not applied (the file changed; see Bookmarks)")
        return marks

    def _save_bookmarks(self) -> None:
        """Write the current file's bookmarks (this replaces any stale ones)."""
        if self.qdoc is None:
            return
        doc = self.qdoc.doc
        self._stale.pop(doc, None)
        if self.store is not None and doc.path:
            self.store.save(doc.path, self._identity(doc), self.bookmarks())

    def restore_stale_bookmarks(self) -> int:
        """Apply the bookmarks saved for an earlier version anyway; returns how many."""
        if self.qdoc is None:
            return 0
        stale = self._stale.pop(self.qdoc.doc, {})
        marks = self.bookmarks()
        marks.update({off: label for off, label in stale.items() if off < self.area.size_bytes})
        self._save_bookmarks()
        self.area.set_bookmarks(marks.keys())
        return len(stale)

    def discard_stale_bookmarks(self) -> None:
        if self.qdoc is not None and self._stale.pop(self.qdoc.doc, None):
            self._save_bookmarks()

    def toggle_bookmark(self, offset: Optional[int] = None) -> None:
        if self.qdoc is None:
            return
        off = self.area.cursor_offset if offset is None else offset
        marks = self.bookmarks()
        if off in marks:
            del marks[off]
            self.message.emit(f"Bookmark at 0x{off:X} removed")
        else:
            leaf = self._leaf(off)
            marks[off] = leaf.path if leaf is not None and leaf.parent is not None else f"0x{off:X}"
            self.message.emit(f"Bookmarked 0x{off:X} ({marks[off]})")
        self.area.set_bookmarks(marks.keys())
        self._save_bookmarks()

    def next_bookmark(self, forward: bool = True) -> Optional[int]:
        marks = sorted(self.bookmarks())
        if not marks:
            self.message.emit("No bookmarks")
            return None
        cur = self.area.cursor_offset
        later = [m for m in marks if (m > cur if forward else m < cur)]
        target = (later[0] if forward else later[-1]) if later else (marks[0] if forward else marks[-1])
        self.go_to(str(target))
        return target

    def _fill_bookmark_menu(self) -> None:
        self.bookmark_menu.clear()
        marks = self.bookmarks()
        stale = self.stale_bookmarks()
        if not marks:
            a = self.bookmark_menu.addAction("No bookmarks (Ctrl+B adds one at the cursor)")
            a.setEnabled(False)
        for off in sorted(marks):
            act = self.bookmark_menu.addAction(icon("bookmark-on"), f"0x{off:08X}   {marks[off]}")
            act.triggered.connect(lambda _c=False, o=off: self.go_to(str(o)))
        if stale:
            self.bookmark_menu.addSeparator()
            head = self.bookmark_menu.addAction(icon("warning"), f"Saved for an earlier version of this file "
                                                                 f"({len(stale)}, not applied):")
            head.setEnabled(False)
            for off in sorted(stale)[:20]:
                self.bookmark_menu.addAction(f"    0x{off:08X}   {stale[off]}").setEnabled(False)
            self.bookmark_menu.addAction("Restore Them Anyway", self.restore_stale_bookmarks)
            self.bookmark_menu.addAction("Discard Them", self.discard_stale_bookmarks)
        if marks:
            self.bookmark_menu.addSeparator()
            clear = self.bookmark_menu.addAction("Clear All Bookmarks")
            clear.triggered.connect(self._clear_bookmarks)

    def _clear_bookmarks(self) -> None:
        self.bookmarks().clear()
        self.area.set_bookmarks([])
        self._save_bookmarks()

    # -- copy -----------------------------------------------------------------------------
    def copy_range(self) -> Optional[tuple[int, int]]:
        """What "copy" copies: a dragged range, else the highlighted field, else the cursor byte."""
        rng = self.area.selected_range()
        if rng is not None:
            return rng
        hl = self.area.highlights()
        if hl:
            return (hl[0][0], hl[0][1])
        if self.area.size_bytes:
            return (self.area.cursor_offset, self.area.cursor_offset + 1)
        return None

    def copied_text(self, fmt: str = "hex") -> Optional[str]:
        rng = self.copy_range()
        if rng is None or self.area.buffer is None:
            return None
        a, b = rng
        clipped = b - a > COPY_LIMIT
        data = bytes(self.area.buffer[a:min(b, a + COPY_LIMIT)])
        if fmt == "c":
            text = format_c_array(data)
        elif fmt == "python":
            text = format_python_bytes(data)
        else:
            text = format_hex(data)
        self.message.emit(f"Copied {len(data):,} bytes from 0x{a:X}" +
                          (f" (first {COPY_LIMIT:,} of {b - a:,})" if clipped else ""))
        return text

    def copy(self, fmt: str = "hex") -> None:
        text = self.copied_text(fmt)
        if text is not None:
            QGuiApplication.clipboard().setText(text)
