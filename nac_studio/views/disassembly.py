"""Disassembly view: one row per instruction, arguments resolved and clickable.

Columns: tick, op, arguments (producers as ``v39`` links, parameters by name, constants by
value), signature, byte offset, the MMAP commands of that tick. The model formats a row
only when the view asks for it and keeps the last few thousand rows, so a file with
100k instructions opens as fast as one with ten. The filter is the model's own, not a
``QSortFilterProxyModel``: a proxy calls back into Python once per row on every keystroke
(and would make every row be formatted), while matching op names once per distinct op
and selecting rows with numpy stays instant at any size.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, NamedTuple, Optional

import numpy as np
from PySide6.QtCore import (QAbstractTableModel, QEvent, QItemSelectionModel, QModelIndex, QPersistentModelIndex,
                            QRect, QSize, Qt, QTimer, Signal)
from PySide6.QtGui import QColor, QFontMetrics, QGuiApplication, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QMenu, QStyle,
                               QStyledItemDelegate, QStyleOptionViewItem, QTableView, QVBoxLayout, QWidget)

from nac_engine.format.model import NacFile
from nac_engine.isa.coerce import use_note
from nac_engine.text.literals import format_literal
from nac_engine.isa.optable import OP_INPUT, OP_OUTPUT

from .. import debug_marks
from ..qt_document import rebind
from ..model.document import Selection
from ..model.graph_model import op_class
from ..model.graph_problems import problem_ticks

COL_TICK, COL_OP, COL_ARGS, COL_SIG, COL_OFFSET, COL_MMAP, COL_CYCLES, COL_TIME = range(8)
#: "Cycles": the shown hardware run's cycles per instruction; "Measured": a Profile run's time on this
#: CPU (each column shows once there is such a run)
HEADERS = ("Tick", "Op", "Arguments", "Signature", "Offset", "MMAP", "Cycles", "Measured")
ROW_CACHE = 4096
#: Model role: the argument segments of a row, for the link-painting delegate.
SegmentsRole = Qt.ItemDataRole.UserRole + 1
#: Model role: the instruction index (tick) of a row.
TickRole = Qt.ItemDataRole.UserRole + 2

_MMAP_SHORT = {"SAVE_RESULT": "SAVE", "SAVE_FOR_GRAD": "SAVE_GRAD", "FREE_AFTER_TRNG": "FREE_TRNG"}
_TICK_QUERY = re.compile(r"^[vt@]?(\d+)$")
# roles, alignments and flags as plain values: data()/flags() run per role per cell per repaint
from ..widgets.item_roles import (  # noqa: E402
    ITEM_FLAGS as _ITEM_FLAGS, ALIGN_LEFT as _ALIGN_LEFT, ALIGN_RIGHT as _ALIGN_RIGHT, DISPLAY as _DISPLAY,
    DECORATION as _DECORATION, TOOLTIP as _TOOLTIP, FONT as _FONT, ALIGNMENT as _ALIGNMENT,
    BACKGROUND as _BACKGROUND, FOREGROUND as _FOREGROUND)
_SEGMENTS = int(SegmentsRole)
_TICK = int(TickRole)
_ALIGN_OF_COL = tuple(_ALIGN_RIGHT if c in (COL_TICK, COL_OFFSET, COL_CYCLES, COL_TIME) else _ALIGN_LEFT
                      for c in range(len(HEADERS)))


class Segment(NamedTuple):
    text: str
    kind: str                       # ref | param | const | text
    target: Optional[Selection]     # what clicking it selects


class Row(NamedTuple):
    tick: str
    op: str
    args: str
    segments: tuple
    signature: str
    offset: str
    mmap: str
    op_class: str


# --------------------------------------------------------------------------- formatting
def _const_text(nac: NacFile, cid: Optional[int]) -> str:
    const = nac.constants.get(cid) if cid is not None else None
    if const is None:
        return f"c{cid}"
    try:
        text = format_literal(const.type, const.value)
    except (ValueError, TypeError):
        text = repr(const.value)
    return text if len(text) <= 48 else text[:47] + "…"


class RowFormatter:
    """Instruction → :class:`Row`; the lookups it needs are built once per file."""

    def __init__(self, nac: NacFile):
        self.nac = nac
        self.inputs = nac.input_name_map
        self.mmap = nac.mmap_by_tick()
        self.param_of_tick: dict[int, int] = {}
        for ins in nac.instructions:
            if ins.a == OP_INPUT and ins.b == 1 and ins.c and len(ins.c) >= 2:
                self.param_of_tick[ins.index] = ins.c[1]

    def param_name(self, pid: int) -> str:
        p = self.nac.params.get(pid)
        return p.name if p is not None else f"param #{pid}"

    def ref(self, p: int) -> Segment:
        """A producer: its parameter's name when it loads one, else ``vN``."""
        pid = self.param_of_tick.get(p)
        if pid is not None:
            return Segment(self.param_name(pid), "param", Selection("param", pid))
        return Segment(f"v{p}", "ref", Selection("instruction", p))

    def segments(self, ins) -> list[Segment]:
        nac = self.nac
        n = len(nac.instructions)
        if ins.a == OP_INPUT:
            c1 = ins.c[1] if ins.c and len(ins.c) >= 2 else None
            if ins.b == 0:
                name = self.inputs.get(ins.index)
                return [Segment(name, "text", None)] if name else []
            if ins.b == 1 and c1 is not None:
                return [Segment(self.param_name(c1), "param", Selection("param", c1))]
            if ins.b == 3 and c1 is not None:
                return [Segment(_const_text(nac, c1), "const", Selection("constant", c1))]
            return [Segment(f"id {c1}", "text", None)] if c1 is not None else []
        if ins.a == OP_OUTPUT or (ins.a < 10 and ins.a != 7):
            out = []
            for p in ins.producers():
                if out:
                    out.append(Segment(", ", "text", None))
                out.append(self.ref(p) if 0 <= p < n else Segment(f"v{p}?", "text", None))
            if not out and (ins.c or ins.d):
                out.append(Segment(f"C={list(ins.c or ())} D={list(ins.d or ())}", "text", None))
            return out
        if ins.a < 10:     # <CONVERGENCE>: D is a jump, not producers
            return [Segment(f"C={list(ins.c or ())} D={list(ins.d or ())}", "text", None)]
        sig = nac.signature(ins)
        if sig is None:
            return [Segment(f"signature #{ins.b}? C={list(ins.c or ())} D={list(ins.d or ())}", "text", None)]
        out = []
        for arg in nac.arguments(ins):
            if out:
                out.append(Segment(", ", "text", None))
            if arg.kind == "ref":
                p = arg.producer
                out.append(self.ref(p) if 0 <= p < ins.index else Segment(f"v{p}?", "text", None))
            else:
                note = use_note(arg.value, arg.code)   # a shared constant shown as the op uses it
                out.append(Segment(note or _const_text(nac, arg.const_id), "const",
                                   Selection("constant", arg.const_id) if arg.const_id in nac.constants else None))
        return out

    def row(self, t: int) -> Row:
        nac = self.nac
        ins = nac.instructions[t]
        name = nac.instruction_name(ins)
        segs = tuple(self.segments(ins))
        sig = nac.signature(ins) or ""
        cmds = self.mmap.get(t, ())
        mmap = ", ".join(f"{_MMAP_SHORT.get(c.name, c.name)} v{c.target}" for c in cmds)
        offset = f"0x{ins.offset:08x}" if ins.offset >= 0 else ""
        return Row(str(t), name, "".join(s.text for s in segs), segs, sig, offset, mmap, op_class(name))


# --------------------------------------------------------------------------- model
class DisassemblyModel(QAbstractTableModel):
    """Instructions as rows, formatted lazily; ``set_filter`` narrows the rows."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.nac: Optional[NacFile] = None
        self.fmt: Optional[RowFormatter] = None
        self.rows = np.zeros(0, dtype=np.int64)     # instruction index per visible row, ascending
        self.filter_text = ""
        self.current_tick: Optional[int] = None
        self.exec_tick: Optional[int] = None        # the debugger's execution point (not the selection)
        self.error_tick: Optional[int] = None       # where the run failed
        self.breakpoints: dict[int, bool | str] = {}    # tick -> its mark (debug_session.breakpoint_ticks)
        self.error_text = ""                        # why the run failed at error_tick
        self.problem_ticks: dict[int, str] = {}     # damaged tick -> reason (graph_problems, as the graph)
        self.measured: dict[int, float] = {}        # tick -> seconds, from a Profile run
        self.cycles: dict[int, int] = {}            # tick -> cycles in the hardware run shown
        self._cache: OrderedDict[int, Row] = OrderedDict()
        self._ops: Optional[np.ndarray] = None      # (a << 16 | b) per instruction, built on first filter
        self._mono = None
        self._dark = False
        self._colors: dict = {}                     # row tints, op-class icons, dim text: per theme
        self._roles = {_DISPLAY: self._display, _TICK: self._tick_role, _SEGMENTS: self._segments,
                       _TOOLTIP: self._tooltip, _FONT: self._font, _ALIGNMENT: self._alignment,
                       _BACKGROUND: self._background, _DECORATION: self._decoration,
                       _FOREGROUND: self._foreground}

    def set_nac(self, nac: Optional[NacFile]) -> None:
        self.beginResetModel()
        self.nac = nac
        self.fmt = RowFormatter(nac) if nac is not None else None
        self.rows = np.arange(len(nac.instructions), dtype=np.int64) if nac is not None else np.zeros(0, np.int64)
        self.filter_text = ""
        self.current_tick = None
        self.problem_ticks = {}
        self._cache.clear()
        self._ops = None
        self.endResetModel()

    def set_font(self, font) -> None:
        self._mono = font

    def set_dark(self, dark: bool) -> None:
        """The theme: light or dark row tints and icons; the dim text colour is read again."""
        self._dark = dark
        self._colors = {}

    def _color(self, key: str):
        c = self._colors.get(key)
        if c is None:
            dark = self._dark
            if key == "tick":
                c = _tick_color(dark)
            elif key == "damaged":
                c = _damaged_color(dark)
            elif key == "exec":
                c = debug_marks.exec_row_color(dark)
            elif key == "error":
                c = debug_marks.error_row_color(dark)
            elif key == "dim":
                c = QGuiApplication.palette().color(QPalette.ColorRole.PlaceholderText)
            else:     # an op class: its border colour as the Op column's swatch
                from ..widgets.graph_canvas import class_colors
                self._colors.update({f"class:{k}": v[1] for k, v in class_colors(dark).items()})
                c = self._colors.get(key)
            self._colors[key] = c
        return c

    # -- rows ---------------------------------------------------------------------------
    def row_data(self, row: int) -> Row:
        t = int(self.rows[row])
        r = self._cache.get(t)
        if r is None:
            r = self.fmt.row(t)
            self._cache[t] = r
            if len(self._cache) > ROW_CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(t)
        return r

    def tick_at(self, row: int) -> int:
        return int(self.rows[row])

    def row_of_tick(self, tick: int) -> Optional[int]:
        """Visible row of instruction ``tick`` (``None`` when filtered out)."""
        i = int(np.searchsorted(self.rows, tick))
        return i if i < len(self.rows) and self.rows[i] == tick else None

    # -- filtering ------------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        text = text.strip()
        if text == self.filter_text or self.nac is None:
            return
        self.beginResetModel()
        self.filter_text = text
        self.rows = self.matching(text)
        self.endResetModel()

    def matching(self, text: str) -> np.ndarray:
        """Instructions whose op, parameter or input name, MMAP command contains ``text`` (any
        case), or whose tick is ``v<N>`` / ``<N>``. Every word must match (AND)."""
        nac = self.nac
        n = len(nac.instructions)
        if not text:
            return np.arange(n, dtype=np.int64)
        mask = np.ones(n, dtype=bool)
        for word in text.lower().split():
            mask &= self._match_word(word)
        return np.nonzero(mask)[0].astype(np.int64)

    def _match_word(self, q: str) -> np.ndarray:
        nac = self.nac
        n = len(nac.instructions)
        if self._ops is None:
            self._ops = np.fromiter(((ins.a << 16) | (ins.b & 0xFFFF) for ins in nac.instructions),
                                    dtype=np.int64, count=n)
        hit = np.zeros(n, dtype=bool)
        m = _TICK_QUERY.match(q)
        if m and q[0] in "vt@":
            t = int(m.group(1))
            if t < n:
                hit[t] = True
            return hit
        if m:
            t = int(m.group(1))
            if t < n:
                hit[t] = True
        keys, first = np.unique(self._ops, return_index=True)
        names = {int(k): nac.instruction_name(nac.instructions[int(i)]) for k, i in zip(keys, first)}
        wanted = [k for k, name in names.items() if q in name.lower()]
        if wanted:
            hit |= np.isin(self._ops, np.asarray(wanted, dtype=np.int64))
        fmt = self.fmt
        for t, pid in fmt.param_of_tick.items():
            if q in fmt.param_name(pid).lower():
                hit[t] = True
        for t, name in fmt.inputs.items():
            if 0 <= t < n and q in name.lower():
                hit[t] = True
        for t, cmds in fmt.mmap.items():
            if 0 <= t < n and any(q in c.name.lower() for c in cmds):
                hit[t] = True
        return hit

    # -- current tick ---------------------------------------------------------------------
    def set_current_tick(self, tick: Optional[int]) -> None:
        old = self.current_tick
        self.current_tick = tick
        for t in (old, tick):
            if t is None:
                continue
            r = self.row_of_tick(t)
            if r is not None:
                self.dataChanged.emit(self.index(r, 0), self.index(r, len(HEADERS) - 1),
                                      [Qt.ItemDataRole.BackgroundRole])

    def set_debug_marks(self, marks) -> None:
        """Execution point, error and breakpoint gutter from a ``debug_marks.DebugMarks``."""
        changed = {self.exec_tick, self.error_tick, marks.exec_tick, marks.error_tick,
                   *self.breakpoints, *marks.breakpoints} - {None}
        self.exec_tick, self.error_tick, self.breakpoints = marks.exec_tick, marks.error_tick, dict(marks.breakpoints)
        self.error_text = marks.error
        for t in changed:
            r = self.row_of_tick(t)
            if r is not None:
                self.dataChanged.emit(self.index(r, 0), self.index(r, len(HEADERS) - 1))

    def set_problem_ticks(self, ticks: dict[int, str]) -> None:
        """Damaged instructions (decode problem or missing tensor): red tint, reason as tooltip."""
        changed = set(self.problem_ticks) | set(ticks)
        self.problem_ticks = dict(ticks)
        for t in changed:
            r = self.row_of_tick(t)
            if r is not None:
                self.dataChanged.emit(self.index(r, 0), self.index(r, len(HEADERS) - 1))

    # -- Qt model interface ----------------------------------------------------------------
    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(HEADERS)

    def headerData(self, section: int, orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[section] if 0 <= section < len(HEADERS) else None
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.TextAlignmentRole:
            return _ALIGN_LEFT
        return None

    def flags(self, index: QModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return _ITEM_FLAGS

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        handler = self._roles.get(role)
        if handler is None or self.fmt is None:
            return None
        row = index.row()
        if not (0 <= row < len(self.rows)):     # an invalid index has row -1
            return None
        return handler(row, index.column())

    # one method per role (see _roles); row is valid here
    def _display(self, row: int, col: int) -> Any:
        if col == COL_TIME:
            seconds = self.measured.get(int(self.rows[row]))
            return "" if seconds is None else f"{seconds * 1e6:,.1f} µs"
        if col == COL_CYCLES:
            cycles = self.cycles.get(int(self.rows[row]))
            return "" if cycles is None else f"{cycles:,}"
        r = self.row_data(row)
        return (r.tick, r.op, r.args, r.signature, r.offset, r.mmap)[col]

    def set_measured(self, measured: dict, cycles: dict) -> None:
        """A Profile run's seconds and the shown hardware run's cycles per tick (empty: none)."""
        self.measured, self.cycles = dict(measured), dict(cycles)
        if len(self.rows):
            self.dataChanged.emit(self.index(0, COL_CYCLES), self.index(len(self.rows) - 1, COL_TIME))

    def _tick_role(self, row: int, col: int) -> int:
        return int(self.rows[row])

    def _segments(self, row: int, col: int) -> Any:
        return self.row_data(row).segments if col == COL_ARGS else None

    def _tooltip(self, row: int, col: int) -> Optional[str]:
        t = int(self.rows[row])
        if self.error_tick is not None and t == self.error_tick:
            return f"The run stopped here: {self.error_text}"
        damaged = self.problem_ticks.get(t)
        if damaged is not None:
            return f"Damaged instruction: {damaged}"
        r = self.row_data(row)
        if col == COL_ARGS and r.args:
            return f"{r.op}({r.args})"
        if col == COL_OP:
            return f"{r.op} · {r.op_class}"
        if col == COL_MMAP and r.mmap:
            return r.mmap
        return None

    def _font(self, row: int, col: int) -> Any:
        return self._mono

    def _alignment(self, row: int, col: int) -> int:
        return _ALIGN_OF_COL[col]

    def _background(self, row: int, col: int) -> Any:
        t = int(self.rows[row])
        if t == self.error_tick:
            return self._color("error")
        if t == self.exec_tick:
            return self._color("exec")
        if t == self.current_tick:
            return self._color("tick")
        if t in self.problem_ticks:
            return self._color("damaged")
        return None

    def _decoration(self, row: int, col: int) -> Any:
        if col == COL_OP:
            return self._color("class:" + self.row_data(row).op_class)
        if col == COL_TICK and (self.breakpoints or self.exec_tick is not None or self.error_tick is not None):
            t = int(self.rows[row])
            if t in self.breakpoints or t == self.exec_tick or t == self.error_tick:
                return debug_marks.gutter_icon(self.breakpoints.get(t), t == self.exec_tick, t == self.error_tick)
        return None

    def _foreground(self, row: int, col: int) -> Any:
        return self._color("dim") if col in (COL_TICK, COL_OFFSET, COL_SIG) else None


def _damaged_color(dark: bool) -> QColor:
    # the graph's problem outline red (#d0312d), as a row tint
    c = QColor("#d0312d")
    c.setAlphaF(0.30 if dark else 0.18)
    return c


def _tick_color(dark: bool) -> QColor:
    # the same amber as the graph's current-tick frame, as a row tint
    c = QColor("#e8a317")
    c.setAlphaF(0.28 if dark else 0.22)
    return c


def segment_color(kind: str, pal: QPalette) -> QColor:
    dark = pal.color(QPalette.ColorRole.Base).lightness() < 128
    if kind == "ref":
        return pal.color(QPalette.ColorRole.Link)
    if kind == "param":
        return QColor.fromHsl(32, 170, 150 if dark else 85)
    if kind == "const":
        return QColor.fromHsl(140, 110, 150 if dark else 70)
    return pal.color(QPalette.ColorRole.Text)


# --------------------------------------------------------------------------- delegate
class ArgumentsDelegate(QStyledItemDelegate):
    """Paints argument segments in their colours and turns clicks on them into selections."""

    linkActivated = Signal(object)      # Selection

    def paint(self, painter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        segs = index.data(SegmentsRole)
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget is not None else QGuiApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        if not segs:
            return
        painter.save()
        font = index.data(Qt.ItemDataRole.FontRole) or opt.font
        painter.setFont(font)
        fm = QFontMetrics(font)
        rect = opt.rect.adjusted(4, 0, -4, 0)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        pal = opt.palette
        x = rect.left()
        right = rect.right()
        hovered = getattr(opt.widget, "_hover_link", None)
        for k, seg in enumerate(segs):
            w = fm.horizontalAdvance(seg.text)
            if x >= right:
                break
            if selected:
                color = pal.color(QPalette.ColorRole.HighlightedText)
            else:
                color = segment_color(seg.kind, pal)
            f = font
            if seg.target is not None and hovered == (QPersistentModelIndex(index), k):
                f = type(font)(font)
                f.setUnderline(True)
                painter.setFont(f)
            painter.setPen(color)
            text = seg.text if x + w <= right else fm.elidedText(seg.text, Qt.TextElideMode.ElideRight, right - x)
            painter.drawText(QRect(x, rect.top(), right - x, rect.height()),
                             _ALIGN_LEFT, text)
            if f is not font:
                painter.setFont(font)
            x += w
        painter.restore()

    def segment_at(self, option_rect: QRect, index: QModelIndex, x: int, font) -> Optional[int]:
        segs = index.data(SegmentsRole)
        if not segs:
            return None
        fm = QFontMetrics(font)
        left = option_rect.left() + 4
        for k, seg in enumerate(segs):
            w = fm.horizontalAdvance(seg.text)
            if left <= x < left + w:
                return k if seg.target is not None else None
            left += w
        return None

    def editorEvent(self, event, model, option, index) -> bool:
        if (event.type() == QEvent.Type.MouseButtonRelease and event.button() == Qt.MouseButton.LeftButton
                and index.column() == COL_ARGS):
            font = index.data(Qt.ItemDataRole.FontRole) or option.font
            k = self.segment_at(option.rect, index, int(event.position().x()), font)
            if k is not None:
                self.linkActivated.emit(index.data(SegmentsRole)[k].target)
                return True
        return super().editorEvent(event, model, option, index)


class _Table(QTableView):
    """Table with a pointing-hand cursor over argument links."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._hover_link = None
        self.setMouseTracking(True)

    def mouseMoveEvent(self, event) -> None:
        super().mouseMoveEvent(event)
        idx = self.indexAt(event.position().toPoint())
        link = None
        delegate = self.itemDelegateForColumn(COL_ARGS)
        if idx.isValid() and idx.column() == COL_ARGS and isinstance(delegate, ArgumentsDelegate):
            font = idx.data(Qt.ItemDataRole.FontRole) or self.font()
            k = delegate.segment_at(self.visualRect(idx), idx, int(event.position().x()), font)
            if k is not None:
                link = (QPersistentModelIndex(idx), k)
        if link != self._hover_link:
            old = self._hover_link
            self._hover_link = link
            for ln in (old, link):
                if ln is not None and ln[0].isValid():
                    self.viewport().update(self.visualRect(QModelIndex(ln[0])))
            if link is not None:
                self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
            else:
                self.viewport().unsetCursor()

    def leaveEvent(self, event) -> None:
        self._hover_link = None
        self.viewport().unsetCursor()
        super().leaveEvent(event)


# --------------------------------------------------------------------------- the view
class DisassemblyView(QWidget):
    title = "Disassembly"
    object_name = "disassembly"

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self._syncing = False
        self.model = DisassemblyModel(self)
        self.table = _Table(self)
        self.table.setModel(self.model)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(False)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.table.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerItem)
        self.table.setCornerButtonEnabled(False)
        vh = self.table.verticalHeader()
        vh.hide()
        # fixed row height: the view never measures rows, so 100k rows cost nothing
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)
        hh.setHighlightSections(False)
        self.delegate = ArgumentsDelegate(self.table)
        self.delegate.linkActivated.connect(self._on_link)
        # right-click: the window's actions on the row under the pointer (breakpoint, logpoint, run
        # to here, inspect), given by the window: this view knows no commands
        self.row_actions: list = []
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.setItemDelegateForColumn(COL_ARGS, self.delegate)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row)
        self.table.viewport().installEventFilter(self)    # a click in the tick column's gutter: breakpoint

        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter by op, parameter, input, MMAP action or v<tick>…")
        self.filter.setClearButtonEnabled(True)
        self._filter_timer = QTimer(self)
        self._filter_timer.setSingleShot(True)
        self._filter_timer.setInterval(120)
        self._filter_timer.timeout.connect(self.apply_filter)
        self.filter.textChanged.connect(lambda _t: self._filter_timer.start())
        self.filter.returnPressed.connect(self.apply_filter)
        self.count = QLabel("", self)
        pal = self.count.palette()
        pal.setColor(QPalette.ColorRole.WindowText, pal.color(QPalette.ColorRole.PlaceholderText))
        self.count.setPalette(pal)

        top = QHBoxLayout()
        top.setContentsMargins(4, 3, 6, 3)
        top.setSpacing(6)
        top.addWidget(self.filter, 1)
        top.addWidget(self.count)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        self._apply_font()
        self.set_document(qdoc)

    def _apply_font(self) -> None:
        try:
            from ..theme import mono_font
            font = mono_font()
        except ImportError:
            from PySide6.QtGui import QFontDatabase
            font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.model.set_font(font)
        fm = QFontMetrics(font)
        self.table.verticalHeader().setDefaultSectionSize(fm.height() + 6)
        self.table.verticalHeader().setMinimumSectionSize(fm.height() + 2)
        ch = fm.horizontalAdvance("0")
        self.table.setColumnWidth(COL_TICK, ch * 7)
        self.table.setColumnWidth(COL_OP, ch * 30)
        self.table.setColumnWidth(COL_ARGS, ch * 72)
        self.table.setColumnWidth(COL_SIG, ch * 10)
        self.table.setColumnWidth(COL_OFFSET, ch * 12)
        # Arguments takes what is left and MMAP keeps room for a tick's usual commands
        # ("FREE v0, FREE v1, PRELOAD v5"): a narrow dock no longer cuts the MMAP column off
        hh = self.table.horizontalHeader()
        hh.setStretchLastSection(False)
        hh.setSectionResizeMode(COL_ARGS, QHeaderView.ResizeMode.Stretch)
        self.table.setColumnWidth(COL_MMAP, ch * 34)
        self.table.setColumnWidth(COL_TIME, ch * 13)
        self.table.setColumnWidth(COL_CYCLES, ch * 13)
        self.table.setIconSize(QSize(8, 8))

    def changeEvent(self, event) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.model.set_dark(self.palette().color(QPalette.ColorRole.Base).lightness() < 128)
            self.table.viewport().update()
        super().changeEvent(event)

    # -- document -------------------------------------------------------------------------
    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, selection=self._on_selection, tick=self._on_tick, debug=self._on_debug,
               problems=self._on_problems, simulation=self._on_simulation)
        self.qdoc = qdoc
        self.model.set_dark(self.palette().color(QPalette.ColorRole.Base).lightness() < 128)
        self.filter.blockSignals(True)
        self.filter.clear()
        self.filter.blockSignals(False)
        self.model.set_nac(qdoc.nac if qdoc is not None else None)
        self._update_count()
        self._on_simulation("profile", None)
        if qdoc is None:
            return
        self._on_tick(None)
        self._on_selection(None)
        self._on_debug(None)
        self._on_problems(None)

    def _on_simulation(self, what: str, _source) -> None:
        if what not in ("profile", "run"):
            return
        st = getattr(self.qdoc.doc, "simulation", None) if self.qdoc is not None else None
        measured = st.measured() if st is not None else {}
        run = st.run if st is not None else None
        cycles = run.result.cycles_by_tick() if run is not None else {}
        self.model.set_measured(measured, cycles)
        self.table.setColumnHidden(COL_TIME, not measured)
        self.table.setColumnHidden(COL_CYCLES, not cycles)

    def _on_problems(self, _source) -> None:
        self.model.set_problem_ticks(problem_ticks(self.qdoc.doc) if self.qdoc is not None
                                     and self.qdoc.doc.nac is not None else {})

    def _on_debug(self, _source) -> None:
        self.model.set_debug_marks(debug_marks.DebugMarks(self.qdoc.doc.debug if self.qdoc is not None else None))

    def scroll_to_tick(self, tick: int) -> None:
        """Bring ``tick``'s row into view without selecting it (the execution point)."""
        row = self.model.row_of_tick(tick)
        if row is not None:
            self.table.scrollTo(self.model.index(row, COL_TICK), QAbstractItemView.ScrollHint.EnsureVisible)

    def apply_filter(self) -> None:
        self._filter_timer.stop()
        self.model.set_filter(self.filter.text())
        self._update_count()
        if self.qdoc is not None:      # keep the selected instruction selected if it is still shown
            self.reveal(self.qdoc.selection)

    def _update_count(self) -> None:
        nac = self.model.nac
        if nac is None:
            self.count.setText("")
            return
        n = len(nac.instructions)
        shown = self.model.rowCount()
        self.count.setText(f"{n:,} instructions" if shown == n else f"{shown:,} of {n:,}")

    # -- document → view ------------------------------------------------------------------
    def tick_for(self, sel: Optional[Selection]) -> Optional[int]:
        """The instruction a selection points at: itself, its record, or a parameter's load."""
        if sel is None or self.qdoc is None:
            return None
        tick = self.qdoc.doc.tick_of(sel)
        if tick is not None:
            return tick
        if sel.kind == "param" and self.model.fmt is not None:
            for t, pid in self.model.fmt.param_of_tick.items():
                if pid == sel.key:
                    return t
        return None

    def _on_selection(self, source) -> None:
        if source is self or self.qdoc is None:
            return
        self.reveal(self.qdoc.selection)

    def reveal(self, sel: Optional[Selection]) -> None:
        """Make the row of ``sel`` current and visible, without selecting anything again."""
        tick = self.tick_for(sel)
        row = self.model.row_of_tick(tick) if tick is not None else None
        self._syncing = True
        try:
            sm = self.table.selectionModel()
            if row is None:
                sm.clearSelection()
                sm.setCurrentIndex(QModelIndex(), QItemSelectionModel.SelectionFlag.NoUpdate)
                return
            idx = self.model.index(row, COL_TICK)
            sm.setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect |
                               QItemSelectionModel.SelectionFlag.Rows)
            self.table.scrollTo(idx, QAbstractItemView.ScrollHint.EnsureVisible)
        finally:
            self._syncing = False

    def _on_tick(self, source) -> None:
        if self.qdoc is None:
            return
        tick = self.qdoc.tick
        self.model.set_current_tick(tick)
        if source is not self and tick is not None:
            row = self.model.row_of_tick(tick)
            if row is not None:
                self.table.scrollTo(self.model.index(row, COL_TICK), QAbstractItemView.ScrollHint.EnsureVisible)

    # -- view → document ------------------------------------------------------------------
    def _on_current_row(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._syncing or self.qdoc is None or not current.isValid():
            return
        self.qdoc.select(Selection("instruction", self.model.tick_at(current.row())), source=self)

    GUTTER = 18   # pixels at the left of the tick column where a click toggles a breakpoint

    def eventFilter(self, obj, event) -> bool:
        if (obj is self.table.viewport() and event.type() == QEvent.Type.MouseButtonPress
                and event.button() == Qt.MouseButton.LeftButton and self.qdoc is not None
                and getattr(self.qdoc.doc, "debug", None) is not None):
            pos = event.position().toPoint()
            idx = self.table.indexAt(pos)
            if idx.isValid() and idx.column() == COL_TICK and pos.x() - self.table.visualRect(idx).left() < self.GUTTER:
                self.qdoc.doc.debug.toggle_tick_breakpoint(self.model.tick_at(idx.row()))
                return True
        return super().eventFilter(obj, event)

    def _on_link(self, sel: Selection) -> None:
        if self.qdoc is None or sel is None:
            return
        self.qdoc.select(sel, source=self)
        self.reveal(sel)    # a link goes somewhere else: follow it (our own echo is ignored)

    def _context_menu(self, pos) -> None:
        idx = self.table.indexAt(pos)
        if not idx.isValid() or not self.row_actions:
            return
        self.select_tick(self.model.tick_at(idx.row()))     # the actions act on the selection
        menu = QMenu(self)
        for action in self.row_actions:       # a disabled one shows greyed (run to here while running)
            menu.addSeparator() if action is None else menu.addAction(action)
        menu.exec(self.table.viewport().mapToGlobal(pos))

    def select_tick(self, tick: int) -> None:
        """Make ``tick``'s row current (as a click would)."""
        row = self.model.row_of_tick(tick)
        if row is not None:
            self.table.selectionModel().setCurrentIndex(
                self.model.index(row, COL_TICK),
                QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
