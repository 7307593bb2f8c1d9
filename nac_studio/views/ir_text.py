"""IR text view: a MIND Core IR file as text, coloured by token class, problems underlined.

For a MIND document it shows the file; clicking a line selects that instruction (hex, structure
and graph follow) and a selection elsewhere highlights its line. For a NAC document converted
from IR (``nac convert`` or the Studio's Run as NAC) it shows the IR source its source map names
and marks the line of the current tick and of the debugger's execution point, so stepping the
program walks the IR lines.
"""
from __future__ import annotations

import os
import re
from typing import Optional

from nac_engine.files import open_regular

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor, QTextFormat
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QTextEdit, QVBoxLayout, QWidget

from ..model.document import Selection
from ..qt_document import rebind
from ..theme import is_dark, mono_font
from ..widgets.rule_highlighter import RuleHighlighter
from . import peer_text

IR_SUFFIXES = (".ir", ".mic", ".mic2")
MAX_SHOWN_BYTES = 8 << 20
#: larger texts are shown uncoloured: QSyntaxHighlighter colours every line when the text is set
MAX_COLOURED_BYTES = 256 << 10


class IrHighlighter(RuleHighlighter):
    """Token classes of every MIND dialect: values, opcodes, types, numbers, strings, comments."""

    RULES = (
        ("number", r"(?<![%\w])[-+]?(\d+\.\d*([eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)\b"),
        ("value", r"%[A-Za-z0-9_]+"),
        ("opcode", r"(?<==)\s*[A-Za-z_][A-Za-z0-9_.]*|^\s*(mic@2|[amprtO]|T\d+|sum|mean|rshp|gth)(?=\s)"),
        ("type", r"\b[Tt]ensor<[^>]*>"),
        ("keyword", r"^\s*(outputs?|module)\b|\b(true|false|Same|Valid|Custom|Add|Sub|Mul|Div)\b"),
        ("string", r'"(?:[^"\\]|\\.)*"'),
        ("comment", r"#.*$|//.*$"),
    )
    LIGHT = {"number": ("#b35900",), "value": ("#1f5fbf",), "opcode": ("#7a2da8", True), "type": ("#0f7a6b",),
             "keyword": ("#9a3a3a", True), "string": ("#2f7d32",), "comment": ("#7c7c7c", False, True)}
    DARK = {"number": ("#f0a45d",), "value": ("#79a9ff",), "opcode": ("#d29bff", True), "type": ("#5fd0bd",),
            "keyword": ("#ff8f8f", True), "string": ("#8fd18f",), "comment": ("#8a8a8a", False, True)}


class IrTextView(QWidget):
    object_name = "ir_text"
    title = "IR Text"

    def __init__(self, qdoc=None, parent=None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.editor = QPlainTextEdit(self)
        self.editor.setReadOnly(True)
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.editor.setFont(mono_font())
        self.editor.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                            | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.highlighter = IrHighlighter(self.editor.document(), is_dark())
        self.tvmr_highlighter = peer_text.TvmrHighlighter(None, is_dark())
        self.info = QLabel(self)
        self.info.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.info)
        lay.addWidget(self.editor, 1)
        self.editor.cursorPositionChanged.connect(self._on_cursor)
        self._data = b""
        self._ascii = True
        self._tick_lines: dict[int, int] = {}      # NAC doc converted from IR: tick -> IR line
        self._problem_sel: list = []
        self._line_sel: list = []
        self._syncing = False
        self.set_document(qdoc)

    # -- what is shown ------------------------------------------------------------------------
    @property
    def text(self) -> str:
        return self.editor.toPlainText()

    @property
    def mode(self) -> str:
        """``"peer"`` (a MIND document), ``"peer_text"`` (a binary peer's text form, :mod:`.peer_text`),
        ``"source"`` (a NAC program's IR source) or ``""``."""
        return self._mode

    _mode = ""

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, selection=self._on_selection, tick=self._on_tick, problems=self._on_problems,
               debug=self._on_tick)
        self.qdoc = qdoc
        self._tick_lines = {}
        self._mode = ""
        data, note = b"", "No IR text: open a MIND Core IR file (.ir, mic@2), or a program converted from one."
        if qdoc is not None:
            peer = getattr(qdoc.doc, "peer", None)
            if peer is not None and peer.format == "mind":
                data, note, self._mode = peer.data, "", "peer"
            elif peer is not None:
                text = peer_text.text_form(peer)
                title = getattr(peer, "title", peer.format)
                if text is not None:
                    data, note, self._mode = text.encode("utf-8"), f"{title}: text form (nac dis)", "peer_text"
                else:
                    note = f"{title} files have no text form."
            elif peer is None:
                data, note = self._source_of_program(qdoc)
        self._data = data[:MAX_SHOWN_BYTES]
        self._ascii = self._data.isascii()
        self._syncing = True
        try:
            coloured = len(self._data) <= MAX_COLOURED_BYTES
            self.highlighter.setDocument(None)
            self.tvmr_highlighter.setDocument(None)
            self.editor.setPlainText(self._data.decode("utf-8", "replace"))
            tvmr = self._mode == "peer_text" and qdoc.doc.peer.format == "tvmr"
            if coloured and (self._mode != "peer_text" or tvmr):
                (self.tvmr_highlighter if tvmr else self.highlighter).setDocument(self.editor.document())
            elif self._data:
                note = (note + " " if note else "") + f"Not coloured: larger than {MAX_COLOURED_BYTES >> 10} KB."
        finally:
            self._syncing = False
        self.info.setText(note)
        self.info.setVisible(bool(note))
        self._on_problems(None)
        self._on_selection(None)
        self._on_tick(None)

    def _source_of_program(self, qdoc) -> tuple[bytes, str]:
        """The IR file a NAC program's source map names (next to the program, or as recorded)."""
        from nac_engine.errors import NacFormatError
        from nac_engine.format.source_map import read_source_map
        try:
            sm = read_source_map(qdoc.nac)
        except (NacFormatError, ValueError):
            sm = None
        if sm is None:
            return b"", "This program has no source map."
        entries = [e for e in sm.entries if e.file and e.file.endswith(IR_SUFFIXES) and e.line]
        if not entries:
            return b"", "This program was not converted from MIND Core IR."
        recorded = entries[0].file
        here = os.path.dirname(os.path.abspath(qdoc.doc.path or "."))
        candidates = [recorded] if os.path.isabs(recorded) else []
        candidates.append(os.path.join(here, os.path.basename(recorded)))
        for path in candidates:
            if os.path.isfile(path) and os.path.getsize(path) <= MAX_SHOWN_BYTES:
                try:
                    with open_regular(path) as fh:
                        data = fh.read(MAX_SHOWN_BYTES)
                except (OSError, ValueError):
                    continue
                self._tick_lines = {e.tick: e.line for e in entries if e.file == recorded}
                self._mode = "source"
                return data, f"Source of this program: {path}"
        return b"", f"The IR source {recorded} was not found next to this file."

    def line_of_tick(self, tick: Optional[int]) -> Optional[int]:
        return self._tick_lines.get(tick) if tick is not None else None

    # -- bytes <-> text positions ------------------------------------------------------------
    def _char(self, offset: int) -> int:
        if self._ascii:
            return offset
        return len(self._data[:offset].decode("utf-8", "replace"))

    def _byte(self, char: int) -> int:
        if self._ascii:
            return char
        return len(self.text[:char].encode("utf-8"))

    # -- document -> view --------------------------------------------------------------------
    def _on_problems(self, _source) -> None:
        sels = []
        if self._mode == "peer" and self.qdoc is not None:
            color = QColor("#d23c3c")
            for p in self.qdoc.doc.problems:
                off, length = getattr(p, "offset", None), getattr(p, "length", 0) or 0
                if not isinstance(off, int) or off >= len(self._data):
                    continue
                s = QTextEdit.ExtraSelection()
                s.format.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
                s.format.setUnderlineColor(color)
                s.format.setToolTip(str(p))
                cur = QTextCursor(self.editor.document())
                a = self._char(off)
                b = self._char(min(len(self._data), off + max(1, length)))
                if length <= 0:            # no length: underline to the end of the line
                    nl = self._data.find(b"\n", off)
                    b = self._char(len(self._data) if nl < 0 else max(nl, off + 1))
                cur.setPosition(a)
                cur.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
                s.cursor = cur
                sels.append(s)
        self._problem_sel = sels
        self._apply()

    def underlined(self) -> list[tuple[int, int]]:
        """(start, end) text positions of the underlined problems (tests, tooltips)."""
        return [(s.cursor.selectionStart(), s.cursor.selectionEnd()) for s in self._problem_sel]

    def _on_selection(self, source) -> None:
        if self._mode == "peer_text" and source is not self:
            self._mark_peer_text()
        if source is self or self.qdoc is None or self._mode != "peer":
            return
        span = self.qdoc.doc.span_of(self.qdoc.selection) if self.qdoc.selection is not None else None
        self._mark_lines([self._line_at(span.offset)] if span is not None else [], "#fff3bf", "#4a4426")

    #: the IR line of the debugger's execution point (``None``: no session stopped on an IR tick)
    exec_line: Optional[int] = None

    def _on_tick(self, _source) -> None:
        self.exec_line = None
        if self._mode == "peer_text":
            self._mark_peer_text()
        if self.qdoc is None or self._mode != "source":
            return
        self.exec_line = self.line_of_tick(self.qdoc.doc.execution_tick)
        selected = self.line_of_tick(self.qdoc.tick)
        lines = [selected] if selected is not None and selected != self.exec_line else []
        self._mark_lines(lines, "#d6ecff", "#23374d", exec_line=self.exec_line)


    def _mark_peer_text(self) -> None:
        """A binary peer's text form: the selection's line and, once a TVMR machine has stepped, the line
        of its execution point (the instruction about to run)."""
        doc, peer = self.qdoc.doc, self.qdoc.doc.peer
        span = doc.span_of(self.qdoc.selection) if self.qdoc.selection is not None else None
        selected = peer_text.line_of_offset(peer, span.offset) if span is not None else None
        machine = getattr(doc, "tvmr_session", None)          # the TVMR Machine pane's stepping state
        tick = machine.exec_index if machine is not None and machine.position > 0 else None
        ins = getattr(peer, "instructions", ())
        self.exec_line = (peer_text.line_of_offset(peer, ins[tick].offset)
                          if tick is not None and 0 <= tick < len(ins) else None)
        lines = [selected] if selected is not None and selected != self.exec_line else []
        self._mark_lines(lines, "#fff3bf", "#4a4426", exec_line=self.exec_line)

    def _line_at(self, offset: int) -> int:
        return self._data.count(b"\n", 0, offset) + 1

    def current_lines(self) -> list[int]:
        """1-based lines marked as current (selection, tick or execution point)."""
        return [s.cursor.blockNumber() + 1 for s in self._line_sel]

    def _mark_lines(self, lines: list, light: str, dark: str, exec_line: Optional[int] = None) -> None:
        from ..debug_marks import exec_row_color
        sels = []
        dark_theme = is_dark()
        color = QColor(dark if dark_theme else light)
        marks = [(line, color) for line in lines]
        if exec_line is not None:                   # the execution point first: it is scrolled to
            marks.insert(0, (exec_line, exec_row_color(dark_theme)))
        for line, c in marks:
            block = self.editor.document().findBlockByNumber(line - 1)
            if not block.isValid():
                continue
            s = QTextEdit.ExtraSelection()
            s.format.setBackground(c)
            s.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            s.cursor = QTextCursor(block)
            sels.append(s)
        self._line_sel = sels
        self._apply()
        if sels:
            self._syncing = True
            try:
                self.editor.setTextCursor(QTextCursor(sels[0].cursor.block()))
                self.editor.centerCursor()
            finally:
                self._syncing = False

    def _apply(self) -> None:
        self.editor.setExtraSelections(self._line_sel + self._problem_sel)

    # -- view -> document ---------------------------------------------------------------------
    def _on_cursor(self) -> None:
        if self._syncing or self.qdoc is None:
            return
        cur = self.editor.textCursor()
        if self._mode == "peer":
            line_start = self._byte(cur.block().position())
            # the first non-blank byte of the line, so the whole instruction is selected
            m = re.match(rb"[ \t]*", self._data[line_start:line_start + 256])
            off = min(len(self._data) - 1, line_start + (m.end() if m else 0))
            if off >= 0:
                self.qdoc.select(Selection("offset", off), source=self)
        elif self._mode == "peer_text":
            off = peer_text.offset_of_line(self.qdoc.doc.peer, cur.blockNumber() + 1)
            if off is not None:
                self.qdoc.select(Selection("offset", off), source=self)
        elif self._mode == "source":
            line = cur.blockNumber() + 1
            ticks = sorted(t for t, l in self._tick_lines.items() if l == line)
            if ticks:
                self.qdoc.select(Selection("instruction", ticks[-1]), source=self)

    def retint(self) -> None:
        self.highlighter.set_dark(is_dark())
        self.tvmr_highlighter.set_dark(is_dark())
        self._on_problems(None)
