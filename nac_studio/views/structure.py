"""Structure view: sections → records → fields, straight from the reader's byte spans.

The model walks :class:`~nac_engine.spans.Span` objects and never copies them, so
it is exactly as lazy as the span tree: instruction and MMAP spans are built the first
time their section is expanded, each instruction's fields the first time it is. Bytes no
field explains (``unparsed``) and records holding a problem are marked (an error icon for
decode problems and schedule violations, a warning icon for schedule hazards); a mark
propagates to every ancestor so a collapsed section still shows it. Problems found after
opening (the background MMAP schedule check) update the marks in place.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QAbstractItemModel, QEvent, QModelIndex, Qt, QTimer
from PySide6.QtGui import QColor, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLineEdit, QTreeView, QVBoxLayout, QWidget

from nac_engine.spans import UNPARSED, Span

from ..qt_document import rebind
from ..model.document import Selection, severity_of
from ..icons import icon

COLUMNS = ("Name", "Offset", "Size", "Type", "Value")
COL_NAME, COL_OFFSET, COL_SIZE, COL_TYPE, COL_VALUE = range(5)
ROLE_SPAN = Qt.ItemDataRole.UserRole + 1
# roles, alignments and flags as plain values: data()/flags() run per role per cell per repaint
from ..widgets.item_roles import (  # noqa: E402
    ITEM_FLAGS as _ITEM_FLAGS, ALIGN_RIGHT as _ALIGN_RIGHT, DISPLAY as _DISPLAY, DECORATION as _DECORATION,
    TOOLTIP as _TOOLTIP, FOREGROUND as _FOREGROUND, BACKGROUND as _BACKGROUND, ALIGNMENT as _ALIGNMENT,
    FONT as _FONT)
_SPAN = int(ROLE_SPAN)
_ROLES = frozenset((_DISPLAY, _DECORATION, _TOOLTIP, _FOREGROUND, _BACKGROUND, _ALIGNMENT, _FONT, _SPAN))

_RECORD_TYPES = {"instruction", "mmap_record", "cmap", "perm", "const", "param", "input", "tensor",
                 "resource", "array", "mmap_command"}


def _value_text(value, limit: int = 120) -> str:
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value[:32])
        return raw.hex(" ") + (" …" if len(value) > 32 else "")
    if isinstance(value, (list, tuple)):
        head = ", ".join(str(x) for x in list(value)[:16])
        return f"[{head}{', …' if len(value) > 16 else ''}]"
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class SpanTreeModel(QAbstractItemModel):
    """Tree model over a span root. Internal pointers are the spans themselves."""

    def __init__(self, root: Optional[Span] = None, problems: Optional[list] = None, parent=None):
        super().__init__(parent)
        self._root: Optional[Span] = None
        self._kids: dict[int, list[Span]] = {}
        self._row: dict[int, int] = {}
        self._marked: dict[int, tuple[str, str]] = {}   # id(span) -> (severity, first problem text)
        self._marked_spans: dict[int, Span] = {}
        self._problem_offsets: list = []
        self.set_root(root, problems or [])

    # -- data source ----------------------------------------------------------------------
    def set_root(self, root: Optional[Span], problems: list) -> None:
        self.beginResetModel()
        self._root = root
        self._kids.clear()
        self._row.clear()
        self._problem_offsets = list(problems)
        self._mark_problems()
        self.endResetModel()

    def set_problems(self, problems: list) -> None:
        """New problem list, same tree: re-mark and repaint only the rows whose mark changed."""
        before = dict(self._marked)
        spans = dict(self._marked_spans)
        self._problem_offsets = list(problems)
        self._mark_problems()
        spans.update(self._marked_spans)
        for key, span in spans.items():
            if before.get(key) != self._marked.get(key) and key in self._row:
                idx = self.createIndex(self._row[key], COL_NAME, span)
                self.dataChanged.emit(idx, idx)

    @property
    def root(self) -> Optional[Span]:
        return self._root

    def _mark_problems(self) -> None:
        """id(span) → (worst severity, its first problem text), for each span on the path
        to a problem's byte."""
        self._marked, self._marked_spans = {}, {}
        if self._root is None:
            return
        for p in self._problem_offsets:
            offset = getattr(p, "offset", None)
            if not isinstance(offset, int):
                continue
            mark = (severity_of(p), getattr(p, "reason", str(p)))
            node = self._root.span_at(min(max(offset, 0), max(self._root.length - 1, 0)))
            while node is not None and node is not self._root:
                old = self._marked.get(id(node))
                if old is None or (old[0] == "warning" and mark[0] == "error"):
                    self._marked[id(node)] = mark
                    self._marked_spans[id(node)] = node
                node = node.parent

    def children_of(self, span: Span) -> list[Span]:
        kids = self._kids.get(id(span))
        if kids is None:
            kids = span.children
            self._kids[id(span)] = kids
            for r, k in enumerate(kids):
                self._row[id(k)] = r
        return kids

    def span_for(self, index: QModelIndex) -> Optional[Span]:
        if not index.isValid():
            return self._root
        return index.internalPointer()

    def index_of(self, span: Span) -> QModelIndex:
        """Index of ``span``, expanding the lazy levels on the way down if needed."""
        if self._root is None or span is None or span is self._root:
            return QModelIndex()
        chain = []
        node = span
        while node is not None and node is not self._root:
            chain.append(node)
            node = node.parent
        if node is not self._root:
            return QModelIndex()
        parent = self._root
        for node in reversed(chain):
            self.children_of(parent)
            if id(node) not in self._row:
                return QModelIndex()
            parent = node
        return self.createIndex(self._row[id(span)], 0, span)

    # -- QAbstractItemModel ---------------------------------------------------------------
    def index(self, row, column, parent=QModelIndex()):
        if self._root is None or column < 0 or column >= len(COLUMNS):
            return QModelIndex()
        pspan = self.span_for(parent)
        if pspan is None:
            return QModelIndex()
        kids = self.children_of(pspan)
        if not (0 <= row < len(kids)):
            return QModelIndex()
        return self.createIndex(row, column, kids[row])

    def parent(self, index=QModelIndex()):
        if not index.isValid():
            return QModelIndex()
        span: Span = index.internalPointer()
        p = span.parent
        if p is None or p is self._root:
            return QModelIndex()
        if id(p) not in self._row:
            self.children_of(p.parent)
        return self.createIndex(self._row[id(p)], 0, p)

    def rowCount(self, parent=QModelIndex()):
        if parent.isValid() and parent.column() != 0:
            return 0
        span = self.span_for(parent)
        if span is None:
            return 0
        return len(self.children_of(span))

    def hasChildren(self, parent=QModelIndex()):
        if parent.isValid() and parent.column() != 0:
            return False
        span = self.span_for(parent)
        if span is None:
            return False
        if id(span) in self._kids:
            return bool(self._kids[id(span)])
        # Unbuilt lazy levels say "yes" without building: drawing an expand arrow must
        # not materialise every instruction of a section.
        return span.has_children

    def columnCount(self, parent=QModelIndex()):
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def flags(self, index):
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return _ITEM_FLAGS

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role not in _ROLES or not index.isValid():
            return None
        span: Span = index.internalPointer()
        col = index.column()
        if role == _DISPLAY:
            if col == COL_NAME:
                return span.name
            if col == COL_OFFSET:
                return f"0x{span.offset:X}"
            if col == COL_SIZE:
                return f"{span.length:,}"
            if col == COL_TYPE:
                return span.type
            if col == COL_VALUE:
                return _value_text(span.value)
            return None
        if role == _SPAN:
            return span
        if role == _ALIGNMENT:
            return _ALIGN_RIGHT if col in (COL_OFFSET, COL_SIZE) else None
        if role == _FONT:
            return self._fixed_font() if col in (COL_OFFSET, COL_SIZE) else None
        unparsed = span.type == UNPARSED or span.name == UNPARSED
        if role == _FOREGROUND:
            if unparsed:
                return QColor("#d23c3c")
            if col in (COL_OFFSET, COL_SIZE, COL_TYPE):
                return QGuiApplication.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
            return None
        severity, problem = self._marked.get(id(span), (None, None))
        if role == _DECORATION:
            if col != COL_NAME:
                return None
            if unparsed:
                return icon("error")
            if problem is not None:
                return icon(severity)
            if span.type == "section" or span.type == "header":
                return icon("section")
            if span.type in _RECORD_TYPES:
                return icon("record")
            return icon("field")
        if role == _TOOLTIP:
            lines = [span.path or "<file>", f"offset 0x{span.offset:X} ({span.offset}), {span.length:,} bytes"]
            full = _value_text(span.value, limit=2000)
            lines.append(f"{span.type}: {full}" if full else span.type)   # the Value column elides at 120
            if unparsed:
                lines.append("Bytes no decoded field explains.")
            if problem is not None:
                lines.append(f"{'Problem' if severity == 'error' else 'Warning'}: {problem}")
            return "\n".join(lines)
        if role == _BACKGROUND and (unparsed or severity == "error") and col == COL_NAME:
            c = QColor("#d23c3c" if unparsed else "#e6a01e")
            c.setAlpha(40)
            return c
        return None

    def _fixed_font(self):
        font = getattr(self, "_fixed", None)
        if font is None:
            font = self._fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        return font

    def severity_at(self, span: Span) -> Optional[str]:
        """The worst severity of the problems inside ``span`` (``None``: none)."""
        mark = self._marked.get(id(span))
        return mark[0] if mark is not None else None


class StructureView(QWidget):
    """Dock view: the span tree, synced with the document selection both ways."""
    title = "Structure"
    object_name = "structure"

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.qdoc = None
        self.model = SpanTreeModel(parent=self)
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Go to path (e.g. OPS/instr[12]) or offset…")
        self.filter.setClearButtonEnabled(True)
        self.filter.returnPressed.connect(self._go_to_text)
        self.tree = QTreeView(self)
        self.tree.setModel(self.model)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tree.setExpandsOnDoubleClick(True)
        self.tree.setAllColumnsShowFocus(True)
        hdr = self.tree.header()
        hdr.setStretchLastSection(True)
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.tree.setColumnWidth(COL_NAME, 140)
        self.tree.setColumnWidth(COL_OFFSET, 76)
        self.tree.setColumnWidth(COL_SIZE, 62)
        self.tree.setColumnWidth(COL_TYPE, 80)
        self.tree.selectionModel().currentChanged.connect(self._on_current)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.filter)
        lay.addWidget(self.tree)
        self._syncing = False
        self._reveal_pending = False
        self.tree.viewport().installEventFilter(self)
        self.set_document(qdoc)

    # -- document -------------------------------------------------------------------------
    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, selection=self._on_selection, problems=self._on_problems)
        self.qdoc = qdoc
        if qdoc is None:
            self.model.set_root(None, [])
            return
        nac = qdoc.nac
        # sections start collapsed: the first screen is the file's layout at a glance
        self.model.set_root(nac.spans, list(qdoc.doc.problems))
        self._on_selection(None)

    # -- document → view ------------------------------------------------------------------
    def _on_problems(self, _source) -> None:
        if self.qdoc is not None:
            self.model.set_problems(list(self.qdoc.doc.problems))

    def _on_selection(self, source) -> None:
        if source is self or self.qdoc is None:
            return
        if self.tree.viewport().visibleRegion().isEmpty():
            # hidden or a tab behind another pane: revealing expands the record's section and
            # lays out every row in it (O(records) on a large model), for nothing on screen;
            # done when the tree next paints
            self._reveal_pending = True
            return
        # on screen: revealed a frame later. The first reveal in a section lays out all of its
        # rows (35 ms for the 2,314 instructions of a 48-layer model), and in the selection's own
        # frame that came on top of every other pane's update and repaint
        if not self._reveal_pending:
            self._reveal_pending = True
            QTimer.singleShot(0, self, self._reveal_if_pending)

    def eventFilter(self, obj, event) -> bool:
        if self._reveal_pending and obj is self.tree.viewport() and event.type() == QEvent.Type.Paint:
            QTimer.singleShot(0, self, self._reveal_if_pending)    # not inside the paint itself
        return False

    def _reveal_if_pending(self) -> None:
        if self._reveal_pending:
            self._reveal_selection()

    def _reveal_selection(self) -> None:
        self._reveal_pending = False
        if self.qdoc is None:
            return
        sel = self.qdoc.selection
        spans = self.qdoc.doc.spans_of(sel) if sel is not None else []
        if not spans:
            self._set_current(QModelIndex())
            return
        self.reveal(spans[0])

    def reveal(self, span: Span) -> None:
        idx = self.model.index_of(span)
        if idx.isValid():
            self._set_current(idx)
            self.tree.scrollTo(idx, QAbstractItemView.ScrollHint.EnsureVisible)

    def _set_current(self, idx: QModelIndex) -> None:
        self._syncing = True
        try:
            sm = self.tree.selectionModel()
            if idx.isValid():
                sm.setCurrentIndex(idx, sm.SelectionFlag.ClearAndSelect | sm.SelectionFlag.Rows)
            else:
                sm.clearSelection()
        finally:
            self._syncing = False

    def current_span(self) -> Optional[Span]:
        if self._reveal_pending:      # asked while hidden: what the tree shows once it is shown
            self._reveal_selection()
        idx = self.tree.currentIndex()
        return self.model.span_for(idx) if idx.isValid() else None

    # -- view → document ------------------------------------------------------------------
    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._syncing or self.qdoc is None or not current.isValid():
            return
        span = self.model.span_for(current)
        if span is None:
            return
        self.qdoc.select(self.selection_for(span), source=self)

    def selection_for(self, span: Span) -> Selection:
        """A record selects as what it is (instruction, param, ...); a field as itself."""
        doc = self.qdoc.doc
        owner = doc.owner_of(span)
        if owner is not None and doc.span_of(owner) is span:
            return owner
        if owner is not None and owner.kind == "param" and span in doc.spans_of(owner):
            return owner
        if span.type == "section" or (span.parent is doc.nac.spans and span.name == "header"):
            return Selection("section", span.name)
        return Selection("span", span.path)

    def _go_to_text(self) -> None:
        if self.qdoc is None:
            return
        text = self.filter.text().strip()
        if not text:
            return
        root = self.qdoc.nac.spans
        span = None
        try:
            offset = int(text, 0)
        except ValueError:
            offset = None
        if offset is not None and root is not None:
            span = root.span_at(offset)
        elif root is not None:
            span = root.find(text.strip("/"))
        if span is None:
            self.filter.setStyleSheet("QLineEdit { color: #d23c3c; }")
            return
        self.filter.setStyleSheet("")
        self.reveal(span)
        self.qdoc.select(self.selection_for(span), source=None)
