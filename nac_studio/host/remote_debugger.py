"""The debugger of a run that lives in the engine host, seen from the Studio (Qt-free).

It answers the questions the Studio's debug session asks (``tick``, ``next_tick``, ``finished``,
the stop reason, the watches' values, the values at hand) from the state the host sent with its
last answer, so nothing the UI thread reads waits on the host. Actions return a
``concurrent.futures.Future`` settled on the connection's reader thread once the host answered
(its state applied first); :meth:`result` and :meth:`outputs` block and are for worker threads.
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Optional

from nac_engine.runtime.tick_result import TickResult

from .connection import HostConnection

#: The Studio's action names -> the host's requests.
_REQUESTS = {"continue_": "continue", "step": "next", "step_back": "stepBack", "run_to": "nac/runTo",
             "restart": "restart", "rerun": "nac/rerun", "step_in": "stepIn", "step_out": "stepOut",
             "reverse_continue": "reverseContinue"}


@dataclass(frozen=True)
class StopReason:
    kind: str                   # step, step_back, run_to, breakpoint, end, restart, cancelled
    tick: int
    breakpoints: tuple = ()     # the Studio's breakpoint ids hit at this tick
    message: str = ""


class RunError(RuntimeError):
    """An action ended in an error (a kernel failed); ``tick`` is where. ``at_launch``: the run
    never started (its inputs or operator code were refused): no tick is to blame."""

    def __init__(self, message: str, tick: Optional[int], at_launch: bool = False):
        super().__init__(message)
        self.tick = tick
        self.at_launch = at_launch


class RemoteDebugger:
    """``RemoteDebugger(connection, path, nac)``; :meth:`launch` first."""

    def __init__(self, connection: HostConnection, path: str, nac):
        self.connection = connection
        self.path = path
        self.nac = nac
        self._state: dict = {"tick": -1, "nextTick": 0, "finished": False}
        self.running_tick: Optional[int] = None     # while an action runs: the host's last report
        self.launched: Optional[Future] = None
        self.extra: dict = {}                       # arguments every action carries (test hooks)
        self._waited: set = set()                   # requests worker threads block on (result, outputs)
        connection.listeners.append(self._on_event)

    def _on_event(self, msg: dict) -> None:        # reader thread
        body = msg.get("body") or {}
        if msg.get("event") == "nac/running" and body.get("path") == self.path and self.running_tick is not None:
            self.running_tick = int(body.get("tick", self.running_tick))

    def detach(self) -> None:
        """Stop hearing the host's events (the run is over for the Studio), and stop waiting for
        answers about it: a worker blocked on one would keep the session, and through it the
        closed file's Document, until a busy host got to it."""
        if self._on_event in self.connection.listeners:
            self.connection.listeners.remove(self._on_event)
        for req in list(self._waited):
            req.abandon("the run ended")

    def _wait(self, command: str, arguments: dict):
        """Send a request and wait for its body (worker threads only); :meth:`detach` ends the wait."""
        req = self.connection.request(command, arguments)
        self._waited.add(req)
        try:
            return req.future.result()
        finally:
            self._waited.discard(req)

    # -- state as of the last answer ------------------------------------------------------------
    @property
    def tick(self) -> int:
        return int(self._state.get("tick", -1))

    @property
    def next_tick(self) -> int:
        if self.running_tick is not None:
            return self.running_tick + 1
        return int(self._state.get("nextTick", 0))

    @property
    def finished(self) -> bool:
        return bool(self._state.get("finished"))

    def __len__(self) -> int:
        return len(self.nac.instructions)

    @property
    def stop_reason(self) -> Optional[StopReason]:
        r = self._state.get("reason")
        if not r:
            return None
        return StopReason(r.get("kind", ""), int(r.get("tick", -1)), tuple(r.get("breakpoints") or ()),
                          r.get("message", ""))

    @property
    def watches(self) -> dict:
        """expression -> value, or the ExprError-like exception the engine reported."""
        out = {}
        for w in self._state.get("watches") or []:
            if w.get("error") == "not evaluated yet":
                continue
            out[w["expression"]] = ValueError(w["error"]) if w.get("error") else w.get("value")
        return out

    @property
    def values(self) -> list:
        """The values at hand at the stop: ``{tick, where, available, shape, dtype}``."""
        return list(self._state.get("values") or [])

    @property
    def breakpoint_state(self) -> dict:
        """The Studio's breakpoint id -> (hits, error)."""
        return {b["id"]: (int(b.get("hits", 0)), b.get("error", "")) for b in self._state.get("breakpoints") or []}

    @property
    def weights_read(self) -> int:
        """Parameters the run read from the file so far (0 when the host had them loaded)."""
        return int(self._state.get("weightsRead", 0))

    @property
    def history(self) -> dict:
        """The step-back history: ``{budget, held, dropped}`` (bytes, bytes, results)."""
        return dict(self._state.get("history") or {})

    def take_log(self) -> list:
        """The lines the logpoints printed during the last action (each once)."""
        return list(self._state.pop("log", None) or [])

    def evaluate(self, text: str) -> Future:
        """An expression's value at the stop; an ExprError's text is the Future's exception."""
        out: Future = Future()

        def done(f: Future) -> None:
            if f.exception() is not None:
                out.set_exception(f.exception())
                return
            body = f.result() or {}
            if body.get("error"):
                out.set_exception(ValueError(body["error"]))
            else:
                out.set_result(body.get("value"))
        self._send("evaluate", expression=str(text)).add_done_callback(done)
        return out

    def apply(self, state: Optional[dict]) -> None:
        if isinstance(state, dict) and state.get("running"):
            self._state = state

    # -- requests -------------------------------------------------------------------------------
    def _send(self, command: str, **arguments) -> Future:
        req = self.connection.request(command, {"path": self.path, **arguments})
        return req.future

    def launch(self, feeds: list, breakpoints: list, watches: list, imports: Optional[list] = None) -> Future:
        """Start the run in the host (queued before any action that follows); ``imports``: the code
        that registers the file's custom operators, imported there first."""
        self.launched = self._then_state(self._send("launch", feeds=feeds, breakpoints=breakpoints,
                                                    watches=watches, imports=list(imports or [])), "breakpoints")
        return self.launched

    def set_breakpoints(self, specs: list) -> Future:
        return self._then_state(self._send("nac/setBreakpoints", breakpoints=specs), "breakpoints")

    def set_watches(self, texts: list) -> Future:
        return self._then_state(self._send("nac/setWatches", watches=texts))

    def _then_state(self, inner: Future, key: Optional[str] = None) -> Future:
        out: Future = Future()

        def done(f: Future) -> None:
            if f.exception() is not None:
                out.set_exception(f.exception())
                return
            body = f.result() or {}
            self.apply(body.get("state"))
            out.set_result((body.get(key) or []) if key else body)
        inner.add_done_callback(done)
        return out

    def run_in_thread(self, action: str, *args, **kwargs) -> Future:
        """Run an action in the host; the Future's result is the StopReason (or a RunError)."""
        arguments = dict(self.extra)
        if action == "run_to":
            arguments["tick"] = int(args[0] if args else kwargs["tick"])
            arguments["breakpoints"] = bool(args[1] if len(args) > 1 else kwargs.get("breakpoints", False))
        self.running_tick = self.tick
        out: Future = Future()
        inner = self._send(_REQUESTS[action], **arguments)

        def done(f: Future) -> None:
            self.running_tick = None
            # the launch is answered first (one debug lane): when it failed, this action's "no run"
            # is not the reason the user needs, the launch's is
            launch = self.launched
            failed = launch.exception() if launch is not None and launch.done() else None
            if failed is not None:
                out.set_exception(RunError(f"the run could not start: {failed}", None, at_launch=True))
                return
            if f.exception() is not None:
                out.set_exception(f.exception())
                return
            state = (f.result() or {}).get("state") or {}
            self.apply(state)
            err = state.get("error")
            if err:
                out.set_exception(RunError(err.get("message", "error"), err.get("tick")))
            else:
                out.set_result(self.stop_reason)
        inner.add_done_callback(done)
        return out

    def cancel(self) -> None:
        """Pause: the running action stops between two instructions."""
        self.connection.send("pause", {"path": self.path})

    def result(self, tick: Optional[int] = None, max_values: Optional[int] = None) -> TickResult:
        """The tick's result and statistics (blocks: worker threads only); its array only when it
        has at most ``max_values`` values (None: always)."""
        tick = self.tick if tick is None else tick
        args = {"path": self.path, "tick": tick}
        if max_values is not None:
            args["maxValues"] = int(max_values)
        return TickResult.from_summary(self._wait("nac/result", args))

    @property
    def outputs(self) -> Optional[list]:
        """The run's outputs once it finished (blocks: worker threads and tests only)."""
        if not self.finished:
            return None
        return self._wait("nac/outputs", {"path": self.path}).get("outputs")

    def terminate(self) -> Future:
        return self._send("terminate")

    def close(self) -> Future:
        return self._send("nac/closeDebug")
