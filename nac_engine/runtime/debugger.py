"""Stepping debugger around a :class:`Session`: step, step back, run to, continue, breakpoints,
watches, bounded history — layered around ``Session.run_instruction``, never inside kernels.

Why a wrapper and not a Session subclass: the debugger owns the execution loop (forward steps,
and replays of earlier ticks in a scratch environment), while ``Session.run()`` stays the plain
fast path; and it can drive any Session subclass (an MMAP-checking or profiling session)
unchanged. Such a subclass sees replayed instructions again when an evicted tick is recomputed.

Ticks: ``debugger.tick`` is the **current** tick — the instruction executed last, whose result
you are looking at (-1 before the first step); ``next_tick`` is the one that runs next.
Breakpoints are tested after their instruction executes, so a stop at a breakpoint leaves
``tick`` on it with its result available. ``continue_()`` always executes at least one
instruction, so it never re-stops where it stands. ``run_to(t)`` ignores breakpoints unless
``breakpoints=True`` and goes backwards as well as forwards.

Memory: values no later instruction reads are dropped from ``session.results`` as soon as their
last consumer has run (the fx Interpreter's last-use freeing), so ``session.results`` is the
live set. Results for inspection live in a :class:`ResultHistory` bounded by ``history_bytes``;
a result it has evicted is recomputed from the nearest checkpoint (see ``history.py``) — exact,
because the interpreter is deterministic (true on CPU; on GPU only for deterministic kernels).
The run's values are not mutated in place by the kernels (exported graphs are functional); an
in-place ATen op would change history entries that share its input's storage.

Threads: every action takes a lock, so one runs at a time. ``run_in_thread("continue_")``
returns a ``concurrent.futures.Future``; ``cancel()`` (from any thread) stops the action between
two instructions with stop reason ``"cancelled"``. Observers (plain callables in ``on_tick``,
``on_stopped``, ``on_output``) run on the thread that executes — a GUI marshals them itself.
``on_tick`` fires for every executed instruction, so a GUI should throttle what it draws.
Actions run in order on one worker thread per debugger (an :class:`ActionThread`), kept for
:data:`WORKER_IDLE_S` after the last one: a GUI's F10 queues a call instead of starting (and
waiting for) a new thread. Debuggers made one after another for one file (Stop, then F5) may
share one ``ActionThread``: their runs then allocate in the memory the previous run freed
(glibc gives each live thread its own malloc arena, so a new thread beside an idle old one
starts on fresh pages; on GPT-2 12x768 that was ~7,800 page faults, ~40 ms, per Continue).
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

#: How long the action thread waits for the next action before it ends (a new one starts on demand).
WORKER_IDLE_S = 5.0

from ..format.model import NacFile
from ..isa.optable import OP_CONTROL_FLOW, OP_INPUT, uninitialised
from .errors import NacRuntimeError
from .expr import TICK_NAME, Expr, ExprError, to_python
from .history import Checkpoints, ResultHistory
from .kernels import first_of_multi
from .session import Session
from .tick_result import TickResult  # noqa: F401  (re-exported: it was defined here)

_NONE = object()


class ActionThread:
    """Runs queued callables in order on one daemon thread, started on demand and ended after
    :data:`WORKER_IDLE_S` without work. ``submit(fn)`` returns a Future of ``fn()``."""

    def __init__(self, name: str = "nac-debugger"):
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._alive = False

    def submit(self, fn: Callable[[], Any]) -> Future:
        future: Future = Future()

        def work():
            try:
                future.set_result(fn())
            except BaseException as e:    # handed to the caller through the Future
                future.set_exception(e)

        with self._lock:
            self._jobs.put(work)
            if not self._alive:
                self._alive = True
                threading.Thread(target=self._loop, name=self.name, daemon=True).start()
        return future

    def _loop(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=WORKER_IDLE_S)
            except queue.Empty:
                with self._lock:     # an action queued meanwhile is run, not stranded
                    if self._jobs.empty():
                        self._alive = False
                        return
                continue
            job()
            # drop it before waiting: the job holds its debugger, whose run's values must be
            # freeable as soon as the debugger is (not WORKER_IDLE_S later)
            del job


class Cancelled(NacRuntimeError):
    """Raised inside a replay when ``cancel()`` was called; the debugger's state is unchanged."""


@dataclass(frozen=True)
class StopReason:
    kind: str                   # step, step_back, run_to, breakpoint, end, restart, cancelled, error
    tick: int                   # the current tick at the stop
    breakpoints: tuple = ()     # ids of the breakpoints hit at this tick
    message: str = ""


@dataclass
class Breakpoint:
    """Stops where its location matches (``ticks``; None = every tick) and its condition holds."""
    id: int
    label: str
    ticks: Optional[frozenset]
    condition: Optional[Expr] = None
    enabled: bool = True
    hits: int = 0
    error: Optional[str] = None     # the last condition evaluation error, if any


class Debugger:
    """``Debugger(session_or_file, inputs=None, feeds=None, *, history_bytes=None,
    checkpoint_every=16, checkpoint_bytes=None, actions=None, **session_kwargs)``.

    ``checkpoint_bytes`` bounds the checkpoints' memory (default: ``history_bytes``);
    ``actions`` the :class:`ActionThread` that ``run_in_thread`` queues on (default: its own)."""

    def __init__(self, target: Session | NacFile | str | Path, inputs=None, feeds=None, *,
                 history_bytes: Optional[int] = None, checkpoint_every: int = 16,
                 checkpoint_bytes: Optional[int] = None, actions: Optional[ActionThread] = None,
                 **session_kwargs):
        self.session = target if isinstance(target, Session) else \
            Session(target, inputs=inputs, feeds=feeds, **session_kwargs)
        self.nac = self.session.nac
        ins = self.session.instructions
        # A value dies after its last consumer (or right away when nothing reads it and it is
        # no output): run()'s own table, which the session keeps from one run to the next.
        self._dies_at = self.session.dead_values()
        # Parameters stay out of the history: the session keeps every loaded weight, so a
        # parameter tick's value is at hand without being counted against the history's budget
        # (on GPT-2 the weights alone are ~495 MB, which evicted activations step back needs).
        # Not in a file with branches, where a parameter tick may hold a NotTaken placeholder.
        self._param_ticks = frozenset() if any(i.a == OP_CONTROL_FLOW for i in ins) else \
            frozenset(i.index for i in ins if i.a == OP_INPUT and i.b == 1)
        self.history = ResultHistory(history_bytes)
        self.checkpoints = Checkpoints(checkpoint_every,
                                       history_bytes if checkpoint_bytes is None else checkpoint_bytes)
        self.breakpoints: list[Breakpoint] = []
        self._next_bp = 1
        self._watch_exprs: dict[str, Expr | ExprError] = {}
        self.watches: dict[str, Any] = {}
        self.on_tick: list[Callable[[int], None]] = []
        self.on_stopped: list[Callable[[StopReason, int], None]] = []
        self.on_output: list[Callable[[list], None]] = []
        self.stop_reason: Optional[StopReason] = None
        self._sub_ticks: list[int] = []
        self._param_name_set: Optional[frozenset] = None
        self._lock = threading.RLock()
        self._cancel = threading.Event()
        self._actions = actions if actions is not None else ActionThread()
        self.session.reset()

    # -- state ------------------------------------------------------------------------------
    @property
    def tick(self) -> int:
        return self.session.tick - 1

    @property
    def next_tick(self) -> int:
        return self.session.tick

    @property
    def finished(self) -> bool:
        return self.session.finished

    @property
    def outputs(self) -> Optional[list[np.ndarray]]:
        return self.session.outputs

    def __len__(self) -> int:
        return len(self.session.instructions)

    # -- actions ----------------------------------------------------------------------------
    def step(self) -> StopReason:
        """Execute one instruction (breakpoints there count a hit and are named in the reason)."""
        self._cancel.clear()
        return self._step()

    def continue_(self) -> StopReason:
        """Run to the next enabled breakpoint or the end."""
        self._cancel.clear()
        return self._continue()

    def run_to(self, tick: int, *, breakpoints: bool = False) -> StopReason:
        """Make ``tick`` current, forwards (executing) or backwards (from history/replay)."""
        self._cancel.clear()
        return self._run_to(tick, breakpoints)

    def step_back(self) -> StopReason:
        """Make the previous tick current; the state is as if the current one never ran."""
        self._cancel.clear()
        return self._step_back()

    def restart(self) -> StopReason:
        """Back to before tick 0; history and checkpoints are dropped (hit counts are kept)."""
        self._cancel.clear()
        return self._restart()

    def reverse_continue(self) -> StopReason:
        """Back to the latest earlier tick where an enabled breakpoint matches (its condition
        tested on that tick's value, recomputed when evicted), else to before tick 0. Hit counts
        are not changed: those ticks ran already."""
        self._cancel.clear()
        with self._lock:
            for t in range(self.tick - 1, -1, -1):
                if self._cancel.is_set():
                    return self._stop("cancelled")
                hits = self._matches(t)
                if hits:
                    self._restore(t + 1)
                    return self._stop("breakpoint", hits)
            if self.tick >= 0:
                self._restore(0)
            return self._stop("step_back")

    def _matches(self, t: int) -> tuple:
        """The enabled breakpoints that would stop at executed tick ``t`` (its value recomputed
        only when a condition needs it); hit counts and errors are left alone."""
        return tuple(bp.id for bp in self._matching(t, lambda: self.value(t)))

    def evaluate(self, text: str) -> Any:
        """The value of an expression of the engine's language at the current tick (``x`` = its
        result, ``tN`` = tick N's, a parameter by name); ExprError when it does not parse or apply."""
        with self._lock:
            return self._evaluate(Expr(text, self._param_names), self.value(self.tick) if self.tick >= 0 else None)

    def _evaluate(self, expr: Expr, current: Any) -> Any:
        """``expr``'s value with ``x`` = ``current``; a failure of a tick it names is an ExprError."""
        try:
            return to_python(expr.evaluate(self._lookup(current)))
        except (IndexError, NacRuntimeError) as e:
            raise ExprError(str(e)) from None

    def cancel(self) -> None:
        """Ask the running action to stop between two instructions (any thread)."""
        self._cancel.set()

    def run_in_thread(self, action: str = "continue_", *args, **kwargs) -> Future:
        """Run ``action`` (continue_, step, run_to, step_back, restart) on a worker thread.
        The Future's result is the StopReason (or the action's exception)."""
        fn = {"continue_": self._continue, "step": self._step, "run_to": self._run_to,
              "step_back": self._step_back, "restart": self._restart}[action]
        self._cancel.clear()          # here, not in the thread: an early cancel() must count
        return self._actions.submit(lambda: fn(*args, **kwargs))

    def release(self) -> None:
        """Drop the run's values (history, checkpoints, live set) now, e.g. when the user stops
        debugging, instead of whenever the last reference to this debugger goes. Waits for a
        running action (call it when none runs). The debugger is back before tick 0."""
        with self._lock:
            self.session.reset()
            self.history.clear()
            self.checkpoints = Checkpoints(self.checkpoints.every, self.checkpoints.budget)
            self._sub_ticks = []

    def _step(self) -> StopReason:
        with self._lock:
            if self.finished:
                return self._stop("end")
            hits = self._forward()
            return self._stop("end" if self.finished and not hits else "step", hits)

    def _continue(self) -> StopReason:
        with self._lock:
            if not self.session.finished:
                # as run() does, in one pass: the calls, and the weights when no breakpoint can
                # stop the run early (a stop at tick 10 need not wait for the whole model's weights)
                self.session.prepare_all(weights=not any(bp.enabled for bp in self.breakpoints))
            return self._drive(None, True)

    def _run_to(self, tick: int, breakpoints: bool = False) -> StopReason:
        with self._lock:
            if not -1 <= tick < len(self):
                raise IndexError(f"tick {tick} is outside 0..{len(self) - 1}")
            if tick < self.tick:
                self._restore(tick + 1)
                return self._stop("run_to")
            if tick == self.tick:
                return self._stop("run_to")
            return self._drive(tick, breakpoints)

    def _step_back(self) -> StopReason:
        with self._lock:
            if self.tick >= 0:
                self._restore(self.tick)
            return self._stop("step_back")

    def _restart(self) -> StopReason:
        with self._lock:
            self.session.reset()
            self.history.clear()
            self.checkpoints = Checkpoints(self.checkpoints.every, self.checkpoints.budget)
            self._sub_ticks = []
            self._emit(self.on_tick, -1)
            return self._stop("restart")

    # -- forward execution ------------------------------------------------------------------
    def _drive(self, limit: Optional[int], use_breakpoints: bool) -> StopReason:
        s, cancelled, forward = self.session, self._cancel.is_set, self._forward   # bound once: per tick
        while not s.finished:
            if cancelled():
                return self._stop("cancelled")
            hits = forward()
            if hits and use_breakpoints:
                return self._stop("breakpoint", hits)
            if limit is not None and s.tick > limit:
                return self._stop("run_to")
        return self._stop("end")

    def _forward(self) -> tuple:
        """Execute the next instruction; returns the ids of the breakpoints it hits."""
        s = self.session
        i = s.tick
        if i == 0:
            missing = s.missing_inputs()
            if missing:
                raise s._missing_error(missing)
        sub = s.sub_outputs
        n_sub = len(sub)
        try:
            value = s.execute(i)          # run_instruction at run()'s cost (the prepared fast call)
        except Exception as e:
            self._stop("error", message=str(e))
            raise
        if len(sub) > n_sub:
            self._sub_ticks.append(i)
        if i not in self._param_ticks:
            self.history.put(i, value, i)
        dead = self._dies_at.get(i)
        if dead is not None:
            results = s.results
            for p in dead:
                results.pop(p, None)
        if not s.finished and self.checkpoints.due(s.tick):
            self.checkpoints.add(s.tick, s.results)
        hits = self._hits(i, value) if self.breakpoints else ()
        if self.on_tick:
            self._emit(self.on_tick, i)
        if s.finished and self.on_output:
            self._emit(self.on_output, s.outputs)
        return hits

    # -- going back -------------------------------------------------------------------------
    def _restore(self, k: int) -> None:
        """Set the state to 'about to execute k': the live set from history when it has every
        value, else replayed from the nearest checkpoint. Committed only when complete."""
        s = self.session
        env = {}
        du = self.nac.def_use()
        for p in range(k):
            last = du.last_use(p)
            if (p if last is None else last) >= k:
                v = self._at_hand(p)
                if v is _NONE:
                    env = None
                    break
                env[p] = v
        if env is None:
            env, _ = self._replay(self.checkpoints.nearest(k), k)
        s.results, s.tick, s.finished, s.outputs = env, k, False, None
        keep = sum(1 for t in self._sub_ticks if t < k)
        del s.sub_outputs[keep:], self._sub_ticks[keep:]
        self._emit(self.on_tick, k - 1)

    def _replay(self, checkpoint: tuple[int, dict], stop: int) -> tuple[dict, Any]:
        """Execute ticks checkpoint..stop-1 in a scratch environment; the session's own state
        is put back afterwards. Returns (live set before ``stop``, the value of ``stop - 1``)."""
        s = self.session
        start, env = checkpoint
        saved = (s.results, s.tick, s.finished, s.outputs, list(s.sub_outputs))
        value = None
        try:
            s.results = env
            for j in range(start, stop):
                if self._cancel.is_set():
                    raise Cancelled(f"cancelled while recomputing tick {stop - 1}")
                value = s.execute(j)
                if j not in self._param_ticks:
                    self.history.put(j, value, focus=self.tick)
                for p in self._dies_at.get(j, ()):
                    env.pop(p, None)
            return env, value
        finally:
            s.results, s.tick, s.finished, s.outputs, s.sub_outputs[:] = saved

    # -- inspection -------------------------------------------------------------------------
    def value(self, tick: int) -> Any:
        """The raw result (torch tensor, scalar, tuple or None) of an executed tick."""
        with self._lock:
            if not 0 <= tick <= self.tick:
                raise IndexError(f"tick {tick} has not been executed (current tick {self.tick})")
            v = self._at_hand(tick)
            if v is _NONE:
                _, v = self._replay(self.checkpoints.nearest(tick), tick + 1)
            return v

    def peek(self, tick: int, default: Any = None) -> Any:
        """The value of an executed tick if it is at hand (history, the live set, a loaded
        parameter), else ``default``: never recomputes, so it is cheap enough for a view."""
        with self._lock:
            if not 0 <= tick <= self.tick:
                return default
            v = self._at_hand(tick)
            return default if v is _NONE else v

    def _at_hand(self, tick: int) -> Any:
        """An executed tick's value without replaying: history, live set, or the session's
        loaded parameter (``_NONE`` when it must be recomputed)."""
        v = self.history.get(tick, _NONE)
        if v is _NONE:
            v = self.session.results.get(tick, _NONE)
            if v is _NONE and tick in self._param_ticks:
                v = self.session.load_param(self.session.instructions[tick])
        return v

    def result(self, tick: Optional[int] = None) -> TickResult:
        """Result and statistics of ``tick`` (default: the current tick)."""
        tick = self.tick if tick is None else tick
        v = self.value(tick)
        return TickResult(tick, self.nac.instruction_name(self.session.instructions[tick]), v)

    # -- breakpoints ------------------------------------------------------------------------
    def add_breakpoint(self, *, tick: Optional[int] = None, op: Optional[str] = None,
                       param: Optional[str] = None, condition: Optional[str] = None,
                       ticks: Optional[list] = None, label: str = "") -> Breakpoint:
        """One location (tick, several ``ticks`` such as a source line's, op-name glob,
        parameter-name glob) and/or a condition. A condition alone is tested at every tick but
        those whose value is uninitialised memory (``torch.empty`` and kin: whatever the allocator
        handed out, NaN bit patterns included, until an op fills it). A glob that matches
        nothing is an error."""
        if sum(x is not None for x in (tick, op, param, ticks)) > 1:
            raise ValueError("give at most one of tick, ticks, op, param")
        ins = self.session.instructions
        labels = []
        if ticks is not None:
            bad = [t for t in ticks if not 0 <= t < len(ins)]
            if bad or not ticks:
                raise IndexError(f"tick {bad[0]} is outside 0..{len(ins) - 1}" if bad else "no ticks given")
            ticks, labels = frozenset(ticks), [label or f"ticks {min(ticks)}..{max(ticks)}"]
        elif tick is not None:
            if not 0 <= tick < len(ins):
                raise IndexError(f"tick {tick} is outside 0..{len(ins) - 1}")
            ticks, labels = frozenset([tick]), [f"tick {tick}"]
        elif op is not None:
            ticks = frozenset(i.index for i in ins if fnmatchcase(self.nac.instruction_name(i), op))
            labels = [f"op {op}"]
            if not ticks:
                raise ValueError(f"no instruction's op matches {op!r}")
        elif param is not None:
            loads = [i.index for i in ins if i.a == OP_INPUT and i.b == 1
                     and (p := self.nac.param_for(i)) is not None and fnmatchcase(p.name, param)]
            if not loads:
                raise ValueError(f"no instruction loads a parameter matching {param!r}")
            ticks = frozenset(loads + [c for t in loads for c in self.nac.users(t)])
            labels = [f"param {param}"]
        expr = None
        if condition is not None:
            expr = Expr({"nan": "any(isnan(x))", "inf": "any(isinf(x))"}.get(condition, condition),
                        self._param_names)
            labels.append(f"if {expr.text}")
        if ticks is None and expr is not None:
            garbage = {i.index for i in ins if i.a >= 10 and uninitialised(self.nac.instruction_name(i))}
            if garbage:
                ticks = frozenset(range(len(ins))) - garbage
        bp = Breakpoint(self._next_bp, " ".join(labels) or "always", ticks, expr)
        self._next_bp += 1
        self.breakpoints.append(bp)
        return bp

    def break_on_nan(self) -> Breakpoint:
        return self.add_breakpoint(condition="nan")

    def breakpoint(self, bp_id: int) -> Breakpoint:
        for bp in self.breakpoints:
            if bp.id == bp_id:
                return bp
        raise KeyError(f"no breakpoint {bp_id}")

    def enable(self, bp: Breakpoint | int, enabled: bool = True) -> None:
        (bp if isinstance(bp, Breakpoint) else self.breakpoint(bp)).enabled = enabled

    def remove_breakpoint(self, bp: Breakpoint | int) -> None:
        bp = bp if isinstance(bp, Breakpoint) else self.breakpoint(bp)
        self.breakpoints.remove(bp)

    def _hits(self, i: int, value: Any) -> tuple:
        hits = self._matching(i, lambda: value, record_errors=True)
        for bp in hits:
            bp.hits += 1
        return tuple(bp.id for bp in hits)

    def _matching(self, i: int, value_of: Callable[[], Any], record_errors: bool = False) -> list:
        """The enabled breakpoints located at tick ``i`` whose condition holds on its value
        (``value_of()``, asked once and only if a condition needs it). A condition that cannot be
        evaluated there (the tick has no tensor) is not a hit; ``record_errors`` keeps its message."""
        out = []
        value = _NONE
        for bp in self.breakpoints:
            if not bp.enabled or (bp.ticks is not None and i not in bp.ticks):
                continue
            if bp.condition is not None:
                if value is _NONE:
                    value = value_of()
                try:
                    if not bp.condition.test(self._lookup(value)):
                        continue
                    if record_errors:
                        bp.error = None
                except ExprError as e:
                    if record_errors:
                        bp.error = str(e)
                    continue
            out.append(bp)
        return out

    # -- watches ----------------------------------------------------------------------------
    def add_watch(self, text: str) -> None:
        """Watch an expression (``x`` = current result, ``t<N>`` = tick N, a parameter by its
        name, e.g. ``mean(fc1.weight)``); re-evaluated at every stop into ``watches[text]`` (a
        value, or the ExprError)."""
        try:
            self._watch_exprs[text] = Expr(text, self._param_names)
        except ExprError as e:
            self._watch_exprs[text] = e
        self._update_watches()

    def remove_watch(self, text: str) -> None:
        self._watch_exprs.pop(text, None)
        self.watches.pop(text, None)

    def _update_watches(self) -> None:
        current = self.value(self.tick) if self.tick >= 0 else None
        for text, expr in self._watch_exprs.items():
            if isinstance(expr, ExprError):
                self.watches[text] = expr
                continue
            try:
                self.watches[text] = self._evaluate(expr, current)
            except ExprError as e:
                self.watches[text] = e

    @property
    def _param_names(self) -> frozenset:
        if self._param_name_set is None:
            self._param_name_set = frozenset(p.name for p in self.nac.params.values())
        return self._param_name_set

    def param_value(self, name: str) -> Any:
        """A parameter's tensor as the interpreter uses it (dequantised; read once when the
        session holds weights)."""
        p = self.nac.param_by_name(name)
        if p is None:
            raise KeyError(name)
        return self.session.weight(p)

    def _lookup(self, current: Any) -> Callable[[str], Any]:
        def lookup(name: str) -> Any:
            if name == "x":
                v = current
            elif TICK_NAME.match(name):
                v = self.value(int(name[1:]))
            else:
                v = self.param_value(name)
            return first_of_multi(v)
        return lookup

    # -- notification -----------------------------------------------------------------------
    def _stop(self, kind: str, hits: tuple = (), message: str = "") -> StopReason:
        self.stop_reason = StopReason(kind, self.tick, tuple(hits), message)
        if self._watch_exprs:
            self._update_watches()
        self._emit(self.on_stopped, self.stop_reason, self.tick)
        return self.stop_reason

    @staticmethod
    def _emit(observers: list, *args) -> None:
        for fn in list(observers):
            fn(*args)
