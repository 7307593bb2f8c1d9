"""Source pane: the user's PyTorch code behind the current tick, from the file's source map.

The tick is the document's ``effective_tick``: the execution point of the debug session while a
run is under way, else the selected tick. The header names the module path and the exported
node; below, the whole source file scrolled to the recorded line, which is highlighted — or,
when the file cannot be found on this machine, the line text recorded at compile time. Paths
are resolved, files read (again when they change on disk) and recorded lines found by their text
in a file changed since the compile (the user's edits, another library release) by
:class:`nac_engine.format.source_map.SourceFiles`, which ``nac dap`` uses too.

F9 (or the editor's context menu) on a line of a file shown here sets a line breakpoint there: the
run stops at the ticks that line made (``DebugSession.toggle_line_breakpoint``); the lines with one
are tinted red (paler when disabled). Ctrl+F10 runs to the line's next pass.

A debugger step must not cost work proportional to the source file: each file is loaded and
highlighted once into its own text document (kept per path; the editor switches documents
when the tick's file changes), and a refresh whose entry, file and header are unchanged does
nothing; one whose line changed only moves the highlight and the cursor.
"""
from __future__ import annotations

import keyword
import re
import weakref
from typing import Optional

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QColor, QFontDatabase, QTextCursor, QTextDocument, QTextFormat
from PySide6.QtWidgets import QLabel, QPlainTextDocumentLayout, QTextEdit, QVBoxLayout, QWidget

from nac_engine.errors import NacFormatError
from nac_engine.format.source_map import SourceEntry, SourceFiles, read_source_map
from nac_engine.isa.optable import OP_OUTPUT

from ..qt_document import rebind
from ..theme import is_dark
from ..widgets.rule_highlighter import RuleHighlighter
from ..widgets.code_editor import CodeEditor

#: Readers of a parameter (or values an output returns) looked at for a source line.
LINE_SEARCH_MAX = 64


class PythonHighlighter(RuleHighlighter):
    """Keywords, builtins-ish names, numbers, strings and comments: enough to read model code."""

    RULES = (
        ("keyword", r"\b(?:" + "|".join(sorted(keyword.kwlist, key=len, reverse=True)) + r")\b"),
        ("module", r"\b(?:self|torch|nn|F|np)\b"),
        ("definition", r"\bdef\s+(\w+)|\bclass\s+(\w+)"),
        ("number", r"\b[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?\b"),
        ("string", r"\"[^\"\\]*(?:\\.[^\"\\]*)*\"|'[^'\\]*(?:\\.[^'\\]*)*'"),
        ("comment", r"#[^\n]*"),
    )
    LIGHT = {"keyword": ("#8f3fb0", True), "module": ("#1f6fb2",), "definition": ("#a15c00", True),
             "number": ("#2e7d32",), "string": ("#b3541e",), "comment": ("#7a7a7a", False, True)}
    DARK = {"keyword": ("#d29bff", True), "module": ("#79a9ff",), "definition": ("#f0a45d", True),
            "number": ("#8fd18f",), "string": ("#f2a27a",), "comment": ("#8a8a8a", False, True)}


class SourceView(QWidget):
    title = "Source"
    object_name = "source"
    dock_area = "bottom"

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self._maps = weakref.WeakKeyDictionary()  # document -> SourceMap | None | str (error)
        self._sources = SourceFiles()             # located, read (again when changed), lines found
        # path -> (document, its highlighter once painted, the text it holds)
        self._documents: dict[str, tuple] = {}
        self._shown_key: Optional[tuple] = None   # what is on screen: (entry, path, header), to skip repeats
        self.shown_path: Optional[str] = None    # the file on screen (None: recorded line only)
        self.shown_entry: Optional[SourceEntry] = None
        self.shown_file: Optional[str] = None    # the source map's name for the file on screen
        self._exec_line: Optional[int] = None    # the highlighted (execution or selected) line
        # line -> enabled (None: refused, no instruction there), of the line breakpoints in the shown file
        self._bp_lines: dict[int, Optional[bool]] = {}
        self.header = QLabel(self)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.header.setWordWrap(True)
        self.header.setContentsMargins(6, 3, 6, 3)
        self.editor = CodeEditor(self)
        self.editor.gutterClicked.connect(self._gutter_clicked)
        self.editor.line_tip = self.line_tip
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        # messages and recorded lines; owned here, since the editor deletes a document it owns
        # when it is given another one
        self._scratch = QTextDocument(self)
        self._scratch.setDocumentLayout(QPlainTextDocumentLayout(self._scratch))
        self._scratch.setDefaultFont(self.editor.font())
        self.highlighter = PythonHighlighter(self._scratch, is_dark())
        self.editor.setDocument(self._scratch)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.header)
        lay.addWidget(self.editor, 1)
        self.editor.viewport().installEventFilter(self)
        self.editor.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.editor.customContextMenuRequested.connect(self._context_menu)
        #: the window's Run to Cursor, Toggle Breakpoint and Add Logpoint (they act on the cursor's
        #: line while this editor has the focus), offered on a right-click; a click in the gutter
        #: is the second on that line
        self.line_actions: list = []
        self._follow = False       # the view is centred on the highlighted line, and the user has not scrolled
        self.editor.verticalScrollBar().actionTriggered.connect(self._user_scrolled)
        self.set_document(qdoc)

    def eventFilter(self, obj, event) -> bool:
        if obj is self.editor.viewport():
            if event.type() == QEvent.Type.Paint:
                self._highlight_when_painted()
            elif event.type() == QEvent.Type.Resize and self._follow and self._exec_line is not None:
                # centred for the size the pane had (none while it was a hidden tab): again for
                # this one, unless the user has scrolled away since
                QTimer.singleShot(0, self.editor, self.editor.centerCursor)    # (dropped if the editor goes)
        return False

    def _highlight_when_painted(self) -> None:
        """Give the shown file's document its highlighter (it highlights on the next turn)."""
        path = self.editor.property("path")
        cached = self._documents.get(path) if path else None
        if cached is not None and cached[1] is None:
            self._documents[path] = (cached[0], PythonHighlighter(cached[0], is_dark()), cached[2])

    def retint(self) -> None:
        """The theme changed: the code's colours for it."""
        dark = is_dark()          # the application's palette: this widget's follows it later
        for highlighter in [self.highlighter] + [c[1] for c in self._documents.values() if c[1] is not None]:
            highlighter.set_dark(dark)
        self._apply_selections()

    # -- document ---------------------------------------------------------------------------
    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, tick=self._refresh, debug=self._refresh)
        self.qdoc = qdoc
        self._refresh(None)

    def source_map(self):
        """The current document's SourceMap, ``None`` without one, or the error text of a bad one."""
        if self.qdoc is None:
            return None
        key = self.qdoc.doc
        if key not in self._maps:
            try:
                self._maps[key] = read_source_map(self.qdoc.nac)
            except NacFormatError as e:
                self._maps[key] = f"the source map does not decode: {e}"
        return self._maps[key]

    def highlighted_line(self) -> Optional[int]:
        """1-based line number highlighted in the editor (None when nothing is)."""
        return self._exec_line

    # -- line breakpoints ---------------------------------------------------------------------
    def line_at_cursor(self) -> Optional[tuple[str, int]]:
        """(the source map's name for the file shown, the cursor's 1-based line), or None when no
        file of this machine is shown (a message, or a line as recorded)."""
        if self.shown_path is None or self.shown_file is None:
            return None
        return self.shown_file, self.editor.textCursor().blockNumber() + 1

    def toggle_breakpoint_at_cursor(self) -> Optional[str]:
        """What F9 did here, for the status bar (None: nothing to set a breakpoint on)."""
        where = self.line_at_cursor()
        s = self.qdoc.doc.debug if self.qdoc is not None else None
        if where is None or s is None:
            return None
        spec = s.toggle_line_breakpoint(*where)
        if spec is None:
            return f"Breakpoint on {where[0]}:{where[1]} removed"
        if spec.error:
            return f"Breakpoint on {where[0]}:{where[1]}: {spec.error}"
        return f"Breakpoint set on {where[0]}:{where[1]} ({len(s.ticks_of(spec))} instruction(s))"

    def _context_menu(self, pos) -> None:
        menu = self.editor.createStandardContextMenu()
        cursor = self.editor.cursorForPosition(pos)
        if self.line_at_cursor() is not None and self.qdoc is not None and self.qdoc.doc.debug is not None:
            line = cursor.blockNumber() + 1
            menu.addSeparator()
            for action in self.line_actions:
                text = action.text().replace("&", "")
                label = text.replace("Cursor", f"Line {line}")
                if label == text:
                    label = text.replace("…", "") + f" on Line {line}" + ("…" if text.endswith("…") else "")
                item = menu.addAction(label)
                item.setEnabled(action.isEnabled())
                item.triggered.connect(lambda _c=False, c=cursor, a=action: self._on_line(c, a))
        menu.exec(self.editor.viewport().mapToGlobal(pos))
        menu.deleteLater()

    def line_tip(self, line: int) -> str:
        """The gutter's tooltip: which instructions the line made (where a breakpoint there stops)."""
        where = self.line_at_cursor()
        s = self.qdoc.doc.debug if self.qdoc is not None else None
        if where is None or s is None:
            return ""
        ticks = s.line_ticks(f"{where[0]}:{line}")
        if not ticks:
            return f"Line {line} made no instruction of this model"
        shown = ", ".join(f"v{t}" for t in ticks[:8]) + (f", … ({len(ticks)})" if len(ticks) > 8 else "")
        return (f"Line {line} made {len(ticks)} instruction{'s' if len(ticks) != 1 else ''}: {shown}\n"
                "Click to set or remove a breakpoint here (F9)")

    def _gutter_clicked(self, line: int) -> None:
        if len(self.line_actions) > 1 and self.line_at_cursor() is not None:
            doc = self.editor.document()
            self._on_line(QTextCursor(doc.findBlockByNumber(line - 1)), self.line_actions[1])

    def _on_line(self, cursor, action) -> None:
        self.editor.setTextCursor(cursor)
        self.editor.setFocus()          # the window's command acts on this line while the editor has it
        action.trigger()

    def _breakpoint_lines(self) -> dict[int, Optional[bool]]:
        s = self.qdoc.doc.debug if self.qdoc is not None else None
        if s is None or self.shown_path is None or self.shown_file is None:
            return {}
        return s.line_marks(self.shown_file)

    # -- drawing ----------------------------------------------------------------------------
    def _refresh(self, _source=None) -> None:
        if self.qdoc is None:
            self._show_message("No file open.")
            return
        smap = self.source_map()
        if smap is None:
            self._show_message("This file has no source map. Files compiled by nac compile carry one "
                               "(unless --no-debug-info); the reference compiler's do not.")
            return
        if isinstance(smap, str):
            self._show_message(smap)
            return
        tick = self.qdoc.doc.effective_tick
        if tick is None:
            self._show_message("Select an instruction (or run) to see the code that produced it.")
            return
        entry = smap.entry(tick)
        if entry is None:
            self._show_message(f"Tick {tick} has no source map entry.")
            return
        self._show_entry(tick, entry)
        marks = self._breakpoint_lines()
        if marks != self._bp_lines:
            self._bp_lines = marks
            self._apply_selections()
        else:
            self._update_gutter()       # a run that started or ended on the same line

    def _show_message(self, text: str) -> None:
        if self._shown_key == ("message", text):
            return
        self._shown_key = ("message", text)
        self.shown_entry, self.shown_path, self.shown_file = None, None, None
        self._bp_lines = {}
        self.header.setText(text)
        self._show_text(None, "")
        self._highlight(None)

    def _show_entry(self, tick: int, entry: SourceEntry) -> None:
        self.shown_entry = entry
        where = "tick" if self.qdoc.doc.execution_tick is None else "execution point"
        module = entry.module_path or "(top-level module)"
        parts = [f"<b>{_esc(module)}</b> &nbsp;·&nbsp; node <code>{_esc(entry.node_name)}</code>"
                 f" &nbsp;·&nbsp; {where} {tick}"]
        via = self._line_for(tick) if entry.file is None else None
        if via is not None:
            # a parameter, an input or an output: the line of the instruction it feeds (or returns)
            t, entry, relation = via
            parts[0] += (f"<br>no line of its own; {relation} tick {t} (node <code>{_esc(entry.node_name)}</code>)"
                         f", here:")
        if entry.file is None:
            header = parts[0] + "<br>no source line recorded (a parameter, an input or an output)"
            if self._shown_key == (entry, None, header):
                return
            self._shown_key = (entry, None, header)
            self.header.setText(header)
            self.shown_path = self.shown_file = None
            self._show_text(None, "")
            self._highlight(None)
            return
        path = self._sources.locate(entry.file, getattr(self.qdoc.doc, "path", None))
        text = self._sources.text(path) if path else None
        location = f"{entry.file}:{entry.line}" if entry.line else entry.file
        line = entry.line
        if text is None:
            parts.append(f"{_esc(location)} — file not found here; the line as recorded at compile time:")
        elif line:
            # the file may have changed since the compile (another release of a library, the
            # user's edits): the recorded line's text says where it is now
            line = self._sources.line_now(path, entry.line, entry.code)
            if line is None:
                parts.append(f"{_esc(location)} — <b>this file has changed since the compile</b>: line {entry.line} "
                             f"no longer reads <code>{_esc((entry.code or '').strip())}</code>")
            elif line != entry.line:
                parts.append(f"{_esc(entry.file)}:{line} (line {entry.line} at compile time; the file has "
                             f"changed since)")
            else:
                parts.append(_esc(location))
        else:
            parts.append(_esc(location))
        if len(entry.stack) > 1:        # how the code got here: the calls that led to this line
            calls = [f"{_esc(name)} :{self._line_now(file, line, code)}"
                     for name, file, line, code in entry.stack[:-1]]
            parts.append("<small>called from " + " › ".join(calls) + "</small>")
        header = "<br>".join(parts)
        key = (entry, path if text is not None else None, header, text)    # (the text: a file edited since)
        if self._shown_key == key:           # the same stop shown again (a second event of one step)
            return
        self._shown_key = key
        self.shown_file = entry.file
        if text is None:
            self.shown_path = None
            self._show_text(None, entry.code or "")
            line = 1 if entry.code else None
        else:
            self.shown_path = path
            self._show_text(path, text)
        self._bp_lines = self._breakpoint_lines()
        self.header.setText(header)
        self.header.setToolTip(path or entry.file)
        self._highlight(line)
        if line is None and text is not None and entry.line:
            self._scroll_to(entry.line)   # not highlighted: that line no longer reads the recorded code

    def _line_for(self, tick: int) -> Optional[tuple]:
        """For an instruction with no line of its own: ``(tick, entry, relation)`` of the nearest
        one with a line — a parameter's or an input's first reader, the value an output returns —
        or None."""
        smap, nac = self.source_map(), self.qdoc.doc.nac
        if not hasattr(smap, "entry") or not 0 <= tick < len(nac.instructions):
            return None
        ins = nac.instructions[tick]
        if ins.a == OP_OUTPUT:
            candidates, relation = sorted({tick + x for x in ins.d or () if x < 0}, reverse=True), "returns the value of"
        else:
            candidates, relation = nac.users(tick), "first read by"
        for t in candidates[:LINE_SEARCH_MAX]:
            e = smap.entry(t)
            if e is not None and e.file is not None:
                return t, e, relation
        return None

    def _show_text(self, path: Optional[str], text: str) -> None:
        """Put a file's text in the editor: its own document, loaded and highlighted on first use
        and kept (switching back is a pointer swap), or the scratch document for other text."""
        if path is None:
            doc = self._scratch
            if doc.toPlainText() != text:
                doc.setPlainText(text)
        else:
            cached = self._documents.get(path)
            if cached is not None and cached[2] is not text:      # the file changed on disk
                cached[0].deleteLater()       # after the editor has the new one (below)
                cached = None
            if cached is None:
                doc = QTextDocument(self)
                doc.setDocumentLayout(QPlainTextDocumentLayout(doc))
                doc.setDefaultFont(self.editor.font())
                doc.setPlainText(text)
                # highlighted when first painted (_highlight_when_painted): a model's source is
                # ~2,000 lines, ~50 ms of highlighting, wasted while this pane is a hidden tab
                cached = self._documents[path] = (doc, None, text)
            doc = cached[0]
        if self.editor.document() is not doc:
            self.editor.setExtraSelections([])
            self.editor.setDocument(doc)
            self.editor.setProperty("path", path)
        self.editor.set_numbered(path is not None)

    def _highlight(self, line: Optional[int]) -> None:
        doc = self.editor.document()
        self._exec_line = line if line is not None and 1 <= line <= doc.blockCount() else None
        self._apply_selections()
        if self._exec_line is not None:
            self._scroll_to(line)

    def _apply_selections(self) -> None:
        """The breakpoint lines' tint, then the highlighted line over it."""
        doc = self.editor.document()
        lines = [(ln, QColor(220, 60, 50, 70 if on else 30)) for ln, on in sorted(self._bp_lines.items())
                 if on is not None]
        if self._exec_line is not None:
            # fainter on a dark theme, where the code's light text must stay readable over it
            lines.append((self._exec_line, QColor(255, 214, 102, 70 if is_dark() else 150)))
        sels = []
        for ln, color in lines:
            if not 1 <= ln <= doc.blockCount():
                continue
            sel = QTextEdit.ExtraSelection()
            sel.format.setBackground(color)
            sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            sel.cursor = QTextCursor(doc.findBlockByNumber(ln - 1))
            sels.append(sel)
        if sels or self.editor.extraSelections():
            self.editor.setExtraSelections(sels)
        self._update_gutter()

    def _update_gutter(self) -> None:
        s = self.qdoc.doc.debug if self.qdoc is not None else None
        # the arrow marks an execution point; a selected instruction's line is only tinted
        running_here = s is not None and s.active and self.shown_path is not None
        self.editor.set_marks(self._bp_lines if self.shown_path is not None else {},
                              self._exec_line if running_here else None)

    def _scroll_to(self, line: int) -> None:
        doc = self.editor.document()
        if not 1 <= line <= doc.blockCount():
            return
        self.editor.setTextCursor(QTextCursor(doc.findBlockByNumber(line - 1)))
        self.editor.centerCursor()
        QTimer.singleShot(0, self.editor, self.editor.centerCursor)    # again once laid out (a dock just raised)
        self._follow = True

    def _user_scrolled(self, _action) -> None:
        self._follow = False

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._exec_line is not None:
            QTimer.singleShot(0, self.editor, self.editor.centerCursor)

    def _line_now(self, recorded: str, line: Optional[int], code: Optional[str]):
        """A caller's line as the file reads now (the recorded number where it cannot be found)."""
        return self._sources.current_line(recorded, line, code, getattr(self.qdoc.doc, "path", None))


def _esc(text: str) -> str:
    return re.sub(r"[&<>]", lambda m: {"&": "&amp;", "<": "&lt;", ">": "&gt;"}[m.group()], text)
