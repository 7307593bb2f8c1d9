"""Differential debugging's commands: the graph's error overlay and First Divergence.

``register_diff_commands(window, view)`` declares, in the window's command registry:

- "Graph: Diff Error Overlay" (a toggle, View › Graph): the active document's last diff drawn on
  the graph through the canvas's overlay layer :data:`nac_studio.diff_overlay.LAYER`, with its
  colour bar; it follows the Diff pane's result (a new diff, Clear) and the active document, so
  another file never shows this one's errors.
- "First Divergence" (Debug menu): selects the first pair over the tolerance in the Diff pane,
  then runs this file's debug session to that tick through the debug controller (on its worker;
  the same inputs the diff ran with: the input choices are set back to the diff's if they changed
  since), so Variables and the Inspector show the tick; once it stops, the pane shows the
  debugger's value there beside the compared run's value at the matched tick (kept in the diff
  result), statistics computed in a TaskRunner worker.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject

from . import diff_overlay


class DiffController(QObject):
    def __init__(self, window, view):
        super().__init__(window)
        self.window = window
        self.view = view
        self.overlay_on = True
        self.legend: Optional[diff_overlay.ErrorScaleLegend] = None
        self._awaiting: dict[int, tuple] = {}     # id(doc) -> (qdoc, result, pair) of a First Divergence run
        view.resultChanged.connect(self._on_result)
        window.documentChanged.connect(lambda _q: self.update_overlay())
        window.debug.actionDone.connect(self._on_debug_done)

    # -- overlay ------------------------------------------------------------------------
    def _canvas(self):
        return getattr(self.window.graph_view, "canvas", None)

    def _active_result(self):
        q = self.window.active
        return self.view.result_for(q) if q is not None else None

    def _on_result(self, qdoc) -> None:
        self._awaiting.pop(id(qdoc.doc), None)
        if qdoc is self.window.active:
            self.update_overlay()
        self.window.commands.refresh()

    def update_overlay(self) -> None:
        canvas = self._canvas()
        if canvas is None:
            return
        result = self._active_result() if self.overlay_on else None
        if self.legend is None:
            self.legend = diff_overlay.ErrorScaleLegend(canvas)
        styles = diff_overlay.overlay_styles(result)
        if not styles:
            canvas.clear_overlay(diff_overlay.LAYER)
            self.legend.hide()
            return
        canvas.set_node_overlay(diff_overlay.LAYER, styles)
        self.legend.set_scale(result.metric, result.tolerance)
        self.legend.show()
        self.legend.raise_()

    def toggle_overlay(self) -> None:
        self.overlay_on = not self.overlay_on
        self.update_overlay()
        if self.overlay_on and self._active_result() is None:
            self.window.show_message("Compare this file with another in the Diff pane first; the overlay follows "
                                     "its result")

    # -- first divergence ------------------------------------------------------------------
    def has_divergence(self) -> bool:
        r = self._active_result()
        return r is not None and r.first_divergence is not None

    def first_divergence(self):
        """Select the first divergence and run the debugger to it (the Future, or ``None`` when the
        run waits for the Inputs dialog, cannot start, or there is no divergence)."""
        q = self.window.active
        result = self._active_result()
        if q is None or result is None or result.first_divergence is None:
            return None
        first = result.first_divergence
        tick = self.view.select_first_divergence()
        s = q.doc.debug
        if s is None:        # a peer-format document: no debugger here
            return None
        used = self.view.inputs_used(q)
        if used is not None and (s.choices != used[0] or s.inputs_confirmed != used[1]):
            s.set_choices(used[0])           # ends a run on other inputs; the next one starts on the diff's
            s.inputs_confirmed = used[1]
            self.window.show_message("Inputs set back to those the diff ran with")
        if s.running:
            self.window.show_message("First Divergence: wait for the running debug action (or Pause it)")
            return None
        self._awaiting[id(q.doc)] = (q, result, first)
        self.view.show_comparison_pending(first)
        future = self.window.debug.run_to(tick)
        if future is None and not s.needs_inputs() and self.window.debug.inputs_dialog is None:
            self._awaiting.pop(id(q.doc), None)
            self.view.show_comparison(None, None, first, "the debugger could not start")
        return future

    def _on_debug_done(self, qdoc) -> None:
        pending = self._awaiting.get(id(qdoc.doc))
        if pending is None:
            return
        _q, result, first = pending
        s = qdoc.doc.debug
        if s is None or s.state == "error" or s.tick != first.tick_a:
            if s is not None and s.state == "error":
                self._awaiting.pop(id(qdoc.doc), None)
                self.view.show_comparison(None, None, first, f"the run stopped at tick {s.error_tick}: "
                                          f"{s.error.splitlines()[0] if s.error else ''}")
            return            # another action finished first (or a breakpoint on the way): keep waiting
        self._awaiting.pop(id(qdoc.doc), None)
        values = result.values_of(first)
        label_b = f"{result.b_name} tick {first.tick_b}" if first.tick_b is not None else result.b_name

        def work(ctx):
            from nac_engine.runtime.tick_result import TickResult
            a = s.result(first.tick_a)
            b = TickResult(first.tick_b if first.tick_b is not None else first.tick_a, first.op_b, values[1]) \
                if values is not None else None
            return a, b
        view = self.view
        # handlers given to submit: connected before the worker can finish (a quick task would beat a
        # connect() made after it)
        qdoc.tasks.submit("Divergence statistics", work,
                          on_done=lambda ab, q=qdoc: view.show_comparison(ab[0], ab[1], first, "", label_b)
                          if view.result_for(q) is result else None,
                          on_error=lambda e: view.show_comparison(None, None, first, str(e) or type(e).__name__))


def register_diff_commands(window, view) -> DiffController:
    """The diff commands (View › Graph and Debug menus, palette) and their controller (``window.diff``)."""
    ctl = DiffController(window, view)
    window.diff = ctl
    c = window.commands
    c.add("graph.diffErrorOverlay", "Graph: Diff Error Overlay", ctl.toggle_overlay, menu="View/Graph", group="e",
          checked=lambda: ctl.overlay_on, enabled=lambda: window.active is not None,
          tip="Colour each matched graph node by its error against the compared file (Diff pane)")
    c.add("debug.firstDivergence", "First Divergence", ctl.first_divergence, menu="Debug", group="y",
          enabled=lambda: ctl.has_divergence() and not window.debug.is_running(),
          tip="Run to the first tick whose error against the compared file exceeds the tolerance; the Diff "
              "pane shows both values there")
    return ctl


__all__ = ["DiffController", "register_diff_commands"]
