"""Debug commands (VS Code's keys), the debug toolbar and status, and the run loop's Qt side.

``register_debug_commands(window)`` declares every debug action in the window's command
registry (so menus, the toolbar, shortcuts and the palette come from one place) and attaches a
:class:`DebugController`. The controller gives each opened document a
:class:`~nac_studio.debug_session.DebugSession` (``doc.debug``) with the breakpoints, watches and
input choices saved for that file, runs Debugger actions on the Debugger's worker thread and
takes their results back on the UI thread through a queued signal — the UI never waits on a
kernel. While a Continue runs, a timer shows tick/total in the status bar; Pause and Stop cancel
between two instructions. A kernel exception stops the session at its tick and joins the
Problems list; the application carries on.

Keys: F5 Start/Continue, F6 Pause, F10 Step Over, F11 Step Into, Shift+F11 Step Out (the source
map's module hierarchy), Shift+F10 Step Back, Reverse Continue (menu), Ctrl+F10 Run to Cursor
(the selected row or node), Ctrl+Shift+F5 Restart, Shift+F5 Stop, F9 Toggle Breakpoint on the
selected instruction, Ctrl+Shift+I Inputs….
"""
from __future__ import annotations

import asyncio
import json
import os
import time
import weakref
from concurrent.futures import Future
from typing import Optional

from PySide6.QtCore import QObject, QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QToolBar

from . import debug_marks
from .debug_session import ERROR, DebugSession
from .model.document import Problem, Selection
from .widgets.task_indicator import ElidedText

#: Problems-list check name for a run's kernel error.
CHECK = "debug"
#: More graph-mark changes than this in one stop replace the layer (the canvas redraws the whole
#: view for them anyway; resolving each change to its node first cost ~1 ms on GPT-2's 586).
WHOLE_LAYER_CHANGES = 256
#: Room the debug status text asks for in the status bar (it is elided, full text in its tooltip, when longer).
STATUS_SAMPLE = "  Stopped at tick 99,999 — breakpoint #99 (op aten.softmax*) (999 ms)  "


class StatusText(ElidedText):
    """The debugger's status text: a constant size hint (the sample's width), so setting the
    text repaints this widget only and never asks the status bar to lay out again."""

    def __init__(self, parent=None):
        super().__init__(parent)
        fm = self.fontMetrics()
        self._hint = QSize(fm.horizontalAdvance(STATUS_SAMPLE), fm.height() + 4)
        self.setAutoFillBackground(True)     # opaque: a new text repaints this rectangle only, not the bar behind it

    def setText(self, text: str) -> None:  # noqa: N802 - the QLabel name
        super().setText(text)
        self.setToolTip(text.strip() or STATUS_TIP)

    def sizeHint(self) -> QSize:
        return self._hint

    def minimumSizeHint(self) -> QSize:
        return QSize(min(160, self._hint.width()), self._hint.height())


STATUS_TIP = "Debugger: state, why it stopped, time of the last action"
SETTINGS_GROUP = "debug"


class DebugController(QObject):
    """Runs the active document's debug session for the main window."""

    actionDone = Signal(object)        # the QtDocument whose action finished (UI thread)
    _finished = Signal(object, object)  # (QtDocument, Future), emitted on the worker thread
    _posted = Signal(object)            # a callable to run on the UI thread (sessions' ``post``)

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.inputs_dialog = None
        self._pending: Optional[tuple] = None      # action waiting for the Inputs dialog
        self._end_after: set[int] = set()          # id(session) to end when its action returns
        self._finished.connect(self._on_finished, Qt.ConnectionType.QueuedConnection)
        self._posted.connect(lambda fn: fn(), Qt.ConnectionType.QueuedConnection)
        self._timer = QTimer(self)
        self._timer.setInterval(100)
        self._timer.timeout.connect(self._update_status)
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(0)
        self._refresh_timer.timeout.connect(lambda: self.window.commands.refresh())
        self._graph_marks: Optional[tuple] = None    # (canvas, session ref, DebugMarks) the graph shows
        self.label = StatusText(window)
        self.label.setObjectName("debugStatus")
        self.label.setToolTip(STATUS_TIP)
        window.statusBar().addPermanentWidget(self.label)
        window.documentOpened.connect(self.attach)
        window.documentChanged.connect(lambda _q: (self._update_status(), self._mark_graph()))
        self._update_status()

    def _refresh_soon(self) -> None:
        """Re-evaluate the commands' enabled state once, after the current burst of changes
        (a step announces several; each refresh evaluates every command's predicate)."""
        self._refresh_timer.start()

    # -- documents -----------------------------------------------------------------------
    @property
    def qdoc(self):
        return self.window.active

    @property
    def session(self) -> Optional[DebugSession]:
        q = self.window.active
        return q.doc.debug if q is not None else None

    def attach(self, qdoc) -> DebugSession:
        """Give ``qdoc`` its debug session, with what was saved for the file."""
        doc = qdoc.doc
        if getattr(doc, "peer", None) is not None:     # a peer-format file: no program here to debug
            return None
        if doc.debug is None:
            doc.debug = DebugSession(doc.nac, notify=doc.debug_changed, connection=qdoc.host.connection,
                                     path=doc.path)
            doc.debug.post = self._posted.emit      # the host's answers come back on its reader thread
            saved = self._load(doc.path)
            if saved:
                doc.debug.load_json(saved)
            qdoc.debugChanged.connect(lambda _s, q=qdoc: self._on_debug_changed(q))
            if saved:
                # the panes took the document before it had a session: show what was restored
                # (the Breakpoints pane stayed empty until the first stop)
                doc.debug_changed()
        return doc.debug

    def _key(self, path: Optional[str]) -> Optional[str]:
        if not path:
            return None
        return f"{SETTINGS_GROUP}/" + os.path.abspath(path).replace("\\", "/").replace("/", "|")

    def _load(self, path) -> Optional[dict]:
        key = self._key(path)
        if key is None or not self.window.persist:
            return None
        raw = self.window.settings.value(key, "", type=str)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def save(self, qdoc) -> None:
        """Breakpoints, watches and input choices of the file, in QSettings."""
        key = self._key(qdoc.doc.path)
        if key is None or not self.window.persist or qdoc.doc.debug is None:
            return
        self.window.settings.setValue(key, json.dumps(qdoc.doc.debug.to_json()))

    def _on_debug_changed(self, qdoc) -> None:
        self.save(qdoc)
        if qdoc is self.window.active:
            self._update_status()
            self._mark_graph()
            self._refresh_soon()

    def _mark_graph(self) -> None:
        """The execution point and breakpoints on the graph, through the canvas's overlay API."""
        canvas = getattr(self.window.graph_view, "canvas", None)
        if canvas is None or not hasattr(canvas, "set_node_overlay"):
            return
        s = self.session
        if s is not None and s.running:
            return
        marks = debug_marks.DebugMarks(s)
        prev = self._graph_marks
        if prev is not None and prev[0] is canvas and prev[1]() is s and hasattr(canvas, "update_node_overlay"):
            # the canvas shows this session's last stop: move what moved (a step: two or three
            # nodes repainted, not the whole view)
            for layer, changes in debug_marks.graph_overlay_changes(prev[2], marks).items():
                if len(changes) > WHOLE_LAYER_CHANGES:     # a Continue's executed range: replace the layer
                    canvas.set_node_overlay(layer, debug_marks.graph_overlays(marks, (layer,))[layer])
                elif changes:
                    canvas.update_node_overlay(layer, changes)
        else:
            for layer, styles in debug_marks.graph_overlays(marks).items():
                if styles:
                    canvas.set_node_overlay(layer, styles)
                else:
                    canvas.clear_overlay(layer)
        self._graph_marks = (canvas, weakref.ref(s) if s is not None else (lambda: None), marks)
        # reveal the execution point (a pan only when its node is off screen)
        tick = marks.error_tick if marks.error_tick is not None else marks.exec_tick
        graph = self.window.graph_view.shown
        if tick is not None and graph is not None and 0 <= tick < len(graph.node_of_tick) \
                and graph.node_of_tick[tick] >= 0:
            canvas.ensure_visible(int(graph.node_of_tick[tick]))

    # -- actions -------------------------------------------------------------------------
    def can_run(self) -> bool:
        s = self.session
        return s is not None and not s.running and bool(len(s))

    def is_running(self) -> bool:
        s = self.session
        return s is not None and s.running

    def is_active(self) -> bool:
        s = self.session
        return s is not None and s.active

    # The command handlers below run through the command registry, which re-evaluates every
    # command's enabled state right after them: their launch need not ask for it again (a second
    # refresh during the action took the GIL from its worker).
    def start_or_continue(self) -> Optional[Future]:
        return self._launch("continue_", from_command=True)

    def step_over(self) -> Optional[Future]:
        return self._launch("step", from_command=True)

    def step_back(self) -> Optional[Future]:
        s = self.session
        if s is None or not s.active or s.tick is None or s.tick < 0:
            return None
        return self._launch("step_back", from_command=True)

    def step_into(self) -> Optional[Future]:
        return self._launch("step_in", from_command=True)

    def step_out(self) -> Optional[Future]:
        return self._launch("step_out", from_command=True)

    def reverse_continue(self) -> Optional[Future]:
        s = self.session
        if s is None or not s.active or s.tick is None or s.tick < 0:
            return None
        return self._launch("reverse_continue", from_command=True)

    def run_to_cursor(self) -> Optional[Future]:
        line = self._source_line()
        if line is not None:              # Ctrl+F10 in the Source pane: to that line
            where, ticks = line
            if not ticks:
                self.window.show_message(f"Run to Cursor: {where} made no instruction of this model")
                return None
            s = self.session
            now = s.tick if s.active and s.tick is not None else -1
            # the line's next pass after the execution point, else its first (backwards)
            return self._launch("run_to", next((t for t in ticks if t > now), ticks[0]), True, from_command=True)
        tick = self.cursor_tick()
        if tick is None:
            self.window.show_message("Run to Cursor: select an instruction (a disassembly row or a graph node)")
            return None
        return self._launch("run_to", tick, True, from_command=True)

    def run_to(self, tick: int, breakpoints: bool = False) -> Optional[Future]:
        """Run (or go back) to ``tick`` of the active file; ``breakpoints``: stop at one on the way."""
        return self._launch("run_to", tick, breakpoints)

    def restart(self) -> Optional[Future]:
        s = self.session
        if s is None:
            return None
        # as an IDE's Restart: from the start to the first breakpoint (or the end), not to before
        # tick 0 (the same run as Stop then F5, with the loaded weights kept)
        return self._launch("rerun" if s.active else "continue_", from_command=True)

    def pause(self) -> None:
        s = self.session
        if s is not None and s.running:
            s.cancel()

    def stop(self) -> None:
        """End debugging: a running action is cancelled (between two instructions) first."""
        s = self.session
        if s is None:
            return
        if s.running:
            self._end_after.add(id(s))
            s.cancel()
            return
        s.end()
        self._clear_problems(self.qdoc)

    # -- for other controllers (a generation feeds each decode run itself) --------------------
    def stop_session(self, qdoc) -> None:
        """End ``qdoc``'s run (it must not be running)."""
        s = qdoc.doc.debug
        if s is not None and s.active and not s.running:
            s.end()
            self._clear_problems(qdoc)

    def start_stopped(self, qdoc) -> None:
        """Launch ``qdoc``'s run on its inputs and stop before tick 0 (every view follows it)."""
        s = qdoc.doc.debug
        if s is None or s.running:
            return
        s.start()
        self._clear_problems(qdoc)
        self.show_debug_panes()
        if qdoc is self.qdoc:
            self._update_status()
            self._refresh_soon()

    def launch_on(self, qdoc, action: str, *args) -> Optional[Future]:
        """``action`` on ``qdoc``'s run, as its command would (``qdoc`` must be the active document)."""
        if qdoc is not self.qdoc:
            return None
        return self._launch(action, *args, from_command=True)

    def toggle_breakpoint(self) -> None:
        source = self.window.views.get("source")
        if source is not None and source.editor.hasFocus():      # F9 in the Source pane: that line
            said = source.toggle_breakpoint_at_cursor()
            if said is not None:
                self.window.show_message(said)
                return
        s, tick = self.session, self.cursor_tick()
        if s is None or tick is None:
            self.window.show_message("Toggle Breakpoint: select an instruction first")
            return
        spec = s.toggle_tick_breakpoint(tick)
        self.window.show_message(f"Breakpoint set on tick {tick}" if spec else f"Breakpoint on tick {tick} removed")

    def add_logpoint(self) -> None:
        """A logpoint on the selected instruction: its message (with {expressions}) goes to the
        Debug Console each time the run passes, and the run goes on."""
        line = self._source_line()        # in the Source pane: on the cursor's line
        s, tick = self.session, self.cursor_tick()
        if s is None or (tick is None and line is None):
            self.window.show_message("Add Logpoint: select an instruction first")
            return
        where = f"line {line[0]}" if line is not None else f"tick {tick}"
        text, ok = QInputDialog.getText(self.window, "Add Logpoint",
                                        f"Print each time {where} runs ({{expressions}} are evaluated there):",
                                        text=f"{line[0] if line else f'v{tick}'} max {{max(abs(x))}}")
        if not ok or not text.strip():
            return
        spec = s.add_breakpoint("line", line[0], log=text) if line is not None else \
            s.add_breakpoint("tick", str(tick), log=text)
        dock = self.window.docks.get("debug_console")
        if dock is not None:
            dock.show()
            dock.raise_()
        self.window.show_message(f"Logpoint #{spec.id} on {where}" + (f": {spec.error}" if spec.error else ""))

    def inspect_selection(self):
        """Pin an inspector on the selected parameter, or the selected tick's result."""
        from .debug_session import Subject
        q, s = self.qdoc, self.session
        view = self.window.views.get("tensor_inspector")
        if q is None or view is None or q.selection is None:
            return None
        if q.selection.kind == "param":
            subject = Subject("param", q.selection.key)
        else:
            tick = self.cursor_tick()
            if tick is None or s is None or s.tick is None or tick > s.tick:
                self.window.show_message("Inspect: select a parameter, or an instruction that has executed")
                return None
            subject = Subject("result", tick)
        dock = self.window.docks.get("tensor_inspector")
        if dock is not None:
            dock.show()
            dock.raise_()
        return view.inspect(subject)

    def source_line_shown(self) -> bool:
        """Whether the Source pane shows a file of this machine (F9 there acts on its lines)."""
        source = self.window.views.get("source")
        return source is not None and self.session is not None and source.line_at_cursor() is not None

    def _source_line(self) -> Optional[tuple[str, list[int]]]:
        """With the Source pane focused on a file of this machine: ("file.py:LINE", the ticks that
        line made) for its cursor's line; else None (the command acts on the selected tick)."""
        source, s = self.window.views.get("source"), self.session
        if source is None or s is None or not source.editor.hasFocus():
            return None
        at = source.line_at_cursor()
        if at is None:
            return None
        where = f"{at[0]}:{at[1]}"
        return where, s.line_ticks(where)

    def cursor_tick(self) -> Optional[int]:
        """The selected instruction (the editor cursor, not the execution point)."""
        q = self.qdoc
        if q is None:
            return None
        return q.doc.tick_of(q.selection) if q.selection is not None else q.doc.tick

    def load_operator_code(self, path: Optional[str] = None) -> None:
        """The Python file that registers the file's custom operators (torch.library): the engine
        host imports it before each run of this file; kept with the file's breakpoints. A run in
        progress is ended: the next one imports it."""
        s = self.session
        if s is None:
            return
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self.window, "Load Operator Code", "", "Python (*.py)")
            if not path:
                return
        done = s.add_import(path)
        if s.active:
            s.end()
        name = os.path.basename(path)
        self.window.show_message(f"Importing {name}…")
        done.add_done_callback(lambda f: s.post(lambda: self.window.show_message(
            f"Could not import {name}: {f.exception()}" if f.exception() is not None
            else f"{name} imported: its operators run; it is imported again before each run of this file", 10000)))

    def show_inputs(self, then: Optional[tuple] = None) -> None:
        """The Inputs dialog (non-modal; ``then``: the action to launch once accepted)."""
        from .widgets.inputs_dialog import InputsDialog
        s, q = self.session, self.qdoc
        if s is None:
            return
        if self.inputs_dialog is not None:
            self.inputs_dialog.close()
        self._pending = then
        dlg = InputsDialog(s, self.window)
        dlg.accepted.connect(lambda q=q, d=dlg: self._inputs_accepted(q, d))
        dlg.rejected.connect(lambda: setattr(self, "_pending", None))
        self.inputs_dialog = dlg
        dlg.open()

    def _inputs_accepted(self, qdoc, dlg) -> None:
        qdoc.doc.debug.set_choices(dlg.choices())
        self.save(qdoc)
        self.inputs_dialog = None
        pending, self._pending = self._pending, None
        if pending is not None and qdoc is self.qdoc:
            self._launch(*pending)

    def _launch(self, action: str, *args, from_command: bool = False) -> Optional[Future]:
        s, q = self.session, self.qdoc
        if s is None or s.running or not len(s):
            return None
        if not s.active:
            if s.needs_inputs():
                self.show_inputs((action, *args))
                return None
            try:
                s.start()
            except Exception as exc:     # an input that cannot be built (bad .npy, no shape)
                self.window.show_message(f"Cannot start: {exc}", 10000)
                self.show_inputs((action, *args))
                return None
            self._clear_problems(q)
            self.show_debug_panes()
        future = s.begin(action, *args)
        future.add_done_callback(lambda f, q=q: self._finished.emit(q, f))
        self._timer.start()
        self._update_status()
        if not from_command:
            self._refresh_soon()
        return future

    def show_debug_panes(self) -> None:
        """When a run starts: bring Variables and the Tensor Inspector to the front of their
        tab groups (the disassembly stays where it is). One already on screen is left alone
        (raising it again would repaint its tab group at every start)."""
        for name in ("variables", "tensor_inspector"):
            dock = self.window.docks.get(name)
            if dock is not None and not dock.isFloating() and dock.visibleRegion().isEmpty():
                dock.show()
                dock.raise_()

    def _on_finished(self, qdoc, future: Future) -> None:
        s = qdoc.doc.debug
        if s is None:
            return
        ending = id(s) in self._end_after
        s.complete(future, announce=not ending)
        if ending:                  # Stop: one announcement, of the ended session
            self._end_after.discard(id(s))
            s.end()
        if s.state == ERROR and s.error_tick is not None:
            self._report_error(qdoc, s)
        if not any(d.doc.debug is not None and d.doc.debug.running for d in self.window.docs):
            self._timer.stop()
        if qdoc is self.qdoc:
            self._reveal(qdoc, s)
            self._update_status()
            self._refresh_soon()
        self.actionDone.emit(qdoc)

    def _reveal(self, qdoc, s: DebugSession) -> None:
        """Show the execution point in the disassembly without moving the selection."""
        tick = s.error_tick if s.state == ERROR else s.tick
        view = self.window.views.get("disassembly")
        if tick is not None and tick >= 0 and view is not None and hasattr(view, "scroll_to_tick"):
            view.scroll_to_tick(tick)

    def _report_error(self, qdoc, s: DebugSession) -> None:
        nac = qdoc.doc.nac
        t = s.error_tick
        offset = nac.instructions[t].offset if 0 <= t < len(nac.instructions) else None
        p = Problem("OPS", offset if offset is not None and offset >= 0 else None,
                    f"run stopped at tick {t}: {s.error}", "error", Selection("instruction", t), kind="kernel")
        qdoc.doc.set_problems(CHECK, [p])
        self.window.show_message(f"Error at tick {t}: {s.error.splitlines()[0] if s.error else ''}", 10000)

    def _clear_problems(self, qdoc) -> None:
        if qdoc is not None and qdoc.doc.problems_from(CHECK):
            qdoc.doc.set_problems(CHECK, [])

    def _update_status(self) -> None:
        """The status-bar text, shown from the first run of a file on ("Not running" after
        Stop, so a Stop then F5 does not show and hide it). The label only repaints when its
        text changes (:class:`StatusText`): a Continue's tick counter never re-lays out the
        status bar (a QLabel's setText did, repainting the whole bar and the window behind it
        at every tick)."""
        s = self.session
        shown = s is not None and (s.active or s.weights_kept)
        self.label.setText(f"  {s.describe()}  " if shown else "")
        if self.label.isHidden() == shown:
            self.label.setVisible(shown)

    async def wait(self, timeout: float = 60.0) -> bool:
        """Until no debug action runs (for coroutines on the qasync loop: --run-to, benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(d.doc.debug is not None and d.doc.debug.running for d in self.window.docs):
                await asyncio.sleep(0)
                return True
            await asyncio.sleep(0.01)
        return False


async def run_to_from_cli(window, tick: int, inspect: Optional[str] = None, inputs: tuple = (),
                          timeout: float = 120.0) -> bool:
    """``nac-studio FILE --run-to TICK [--inspect vN] [--input NAME=x.npy|NAME=[1,2,3]]``: run the active file's
    debugger to ``tick`` and show that state (for screenshots in docs and reviews)."""
    import sys

    from nac_engine.runtime.input_spec import is_literal

    from .debug_session import InputChoice, Subject
    qdoc = window.active
    s = window.debug.attach(qdoc)
    if s is None:            # a peer-format file: its program is the converted NAC (Convert to NAC and Open)
        print("nac-studio: --run-to: this file is not a NAC program; convert it first (nac convert FILE -o OUT.nac)",
              file=sys.stderr)
        return False
    if inputs:
        choices = {}
        for item in inputs:
            name, _, path = item.partition("=")
            # a name, or the label the message lists for an unnamed input ("input @2")
            slot = next((sl for sl in s.slots if name in (sl.name, sl.label)), None)
            if slot is None or not path:
                print(f"nac-studio: --input {item!r}: the file's inputs are "
                      f"{', '.join(sl.label for sl in s.slots) or 'none'}", file=sys.stderr)
                return False
            choices[slot.position] = InputChoice(mode="values", values=path) if is_literal(path) \
                else InputChoice(mode="npy", path=path)
        s.set_choices({**{sl.position: s.choice(sl) for sl in s.slots}, **choices})
    if s.needs_inputs():
        print("nac-studio: --run-to: the file records no input shapes; give --input NAME=FILE.npy "
              f"for {', '.join(sl.label for sl in s.slots)}", file=sys.stderr)
        return False
    n = len(qdoc.nac.instructions)
    if not 0 <= tick < n:
        print(f"nac-studio: --run-to {tick}: the file has ticks 0..{n - 1}", file=sys.stderr)
        return False
    if window.debug._launch("run_to", tick, False) is None:
        print("nac-studio: --run-to: could not start the debugger", file=sys.stderr)
        return False
    await window.debug.wait(timeout)
    await asyncio.sleep(0.05)            # the queued completion reaches the UI thread
    if s.state == "error":
        print(f"nac-studio: run stopped at tick {s.error_tick}: {s.error}", file=sys.stderr)
    if inspect:
        text = inspect.lstrip("vt")
        if not text.isdigit() or int(text) > (s.tick or 0):
            print(f"nac-studio: --inspect {inspect}: not an executed tick (v0..v{s.tick})", file=sys.stderr)
            return False
        window.views["tensor_inspector"].inspect(Subject("result", int(text)))
    return True


def register_debug_commands(window) -> DebugController:
    """Declare the debug commands in ``window.commands``; returns the controller (also
    ``window.debug``). The toolbar is built once the window's own toolbar exists."""
    ctl = DebugController(window)
    window.debug = ctl
    c = window.commands
    has_doc = lambda: window.active is not None and ctl.session is not None  # noqa: E731
    c.add("debug.continue", "Start / Continue", ctl.start_or_continue, shortcut="F5", icon="debug-continue",
          menu="Debug", group="a", enabled=ctl.can_run,
          tip="Run to the next breakpoint or the end (asks for inputs before the first run)")
    c.add("debug.pause", "Pause", ctl.pause, shortcut="F6", icon="debug-pause", menu="Debug", group="a",
          order=1, enabled=ctl.is_running, tip="Stop the running Continue at the next instruction")
    c.add("debug.stepOver", "Step Over", ctl.step_over, shortcut="F10", icon="debug-step-over", menu="Debug",
          group="b", enabled=ctl.can_run, tip="Execute one instruction")
    c.add("debug.stepBack", "Step Back", ctl.step_back, shortcut="Shift+F10", icon="debug-step-back",
          menu="Debug", group="b", order=1,
          enabled=lambda: ctl.can_run() and ctl.session.tick is not None and ctl.session.tick >= 0,
          tip="Undo the last instruction: every view shows the previous tick")
    c.add("debug.stepInto", "Step Into", ctl.step_into, shortcut="F11", icon="debug-step-into", menu="Debug",
          group="b", order=3, enabled=ctl.can_run,
          tip="Run to the first instruction one module deeper (the module hierarchy of the source map)")
    c.add("debug.stepOut", "Step Out", ctl.step_out, shortcut="Shift+F11", icon="debug-step-out", menu="Debug",
          group="b", order=4, enabled=lambda: ctl.can_run() and ctl.session.tick is not None and ctl.session.tick >= 0,
          tip="Run to the first instruction after the current module")
    c.add("debug.reverseContinue", "Reverse Continue", ctl.reverse_continue, icon="debug-reverse-continue", menu="Debug",
          group="b", order=5, enabled=lambda: ctl.can_run() and ctl.session.tick is not None and ctl.session.tick >= 0,
          tip="Go back to the last tick where a breakpoint stops (or to before tick 0)")
    c.add("debug.runToCursor", "Run to Cursor", ctl.run_to_cursor, shortcut="Ctrl+F10", icon="debug-run-to",
          menu="Debug", group="b", order=2,
          enabled=lambda: ctl.can_run() and (ctl.cursor_tick() is not None or ctl.source_line_shown()),
          tip="Run (or go back) to the selected instruction (in the Source pane: to the cursor's line)")
    c.add("debug.restart", "Restart", ctl.restart, shortcut="Ctrl+Shift+F5", icon="debug-restart", menu="Debug",
          group="c", enabled=ctl.can_run, tip="Run again from the start, to the first breakpoint")
    c.add("debug.stop", "Stop", ctl.stop, shortcut="Shift+F5", icon="debug-stop", menu="Debug", group="c",
          order=1, enabled=ctl.is_active, tip="End the run (breakpoints and watches stay)")
    c.add("debug.toggleBreakpoint", "Toggle Breakpoint", ctl.toggle_breakpoint, shortcut="F9", icon="breakpoint",
          menu="Debug", group="d",
          enabled=lambda: has_doc() and (ctl.cursor_tick() is not None or ctl.source_line_shown()),
          tip="Break on the selected instruction (in the Source pane: on the cursor's line)")
    c.add("debug.addLogpoint", "Add Logpoint…", ctl.add_logpoint, menu="Debug", group="d", order=1,
          enabled=lambda: has_doc() and (ctl.cursor_tick() is not None or ctl.source_line_shown()),
          tip="Print a message (with {expressions} evaluated there) to the Debug Console each time the selected "
              "instruction (in the Source pane: the cursor's line) runs, without stopping")
    c.add("debug.inspect", "Inspect Tensor", ctl.inspect_selection, icon="tensor", menu="Debug", group="e", order=1,
          enabled=lambda: has_doc() and window.active.selection is not None and not ctl.is_running(),
          tip="Pin a tensor inspector on the selected parameter or executed instruction")
    c.add("debug.loadOperatorCode", "Load Operator Code…", lambda: ctl.load_operator_code(), menu="Debug", group="e",
          order=2, enabled=lambda: has_doc() and not ctl.is_running(),
          tip="A Python file that registers the model's custom operators (torch.library), imported by the "
              "engine before each run of this file")
    c.add("debug.inputs", "Inputs…", lambda: ctl.show_inputs(), shortcut="Ctrl+Shift+I", menu="Debug", group="e",
          enabled=lambda: has_doc() and not ctl.is_running(), tip="Choose the values fed to the file's inputs")
    c.add("debug.restartEngine", "Restart Engine", window.restart_engine, menu="Debug", group="f",
          tip="Start a fresh engine process (runs, layouts and statistics run there); documents, breakpoints, "
              "watches and inputs stay")

    def build_toolbar() -> None:
        tb = QToolBar("Debug", window)
        tb.setObjectName("toolbar.debug")
        tb.setIconSize(QSize(18, 18))
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        for cmd_id in ("debug.continue", "debug.pause", "debug.stepOver", "debug.stepInto", "debug.stepOut",
                       "debug.stepBack", "debug.runToCursor",
                       "debug.restart", "debug.stop", None, "debug.toggleBreakpoint"):
            if cmd_id is None:
                tb.addSeparator()
            else:
                tb.addAction(c.action(cmd_id))
        window.addToolBar(Qt.ToolBarArea.TopToolBarArea, tb)
        ctl.toolbar = tb
    ctl.toolbar = None
    QTimer.singleShot(0, build_toolbar)
    variables, inspector = window.views.get("variables"), window.views.get("tensor_inspector")
    if variables is not None and inspector is not None:
        variables.inspectRequested.connect(inspector.inspect)
    return ctl
