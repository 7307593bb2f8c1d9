"""The Studio's debug state for one file, without Qt: inputs, breakpoints, watches, the
execution tick, and what the views show about values (attached to a Document as ``doc.debug``).

Two cursors: the document's ``tick`` follows the user's *selection*; ``DebugSession.tick`` is
the *execution point* (the instruction executed last, -1 before the first step, ``None`` with
no run). Selecting another row never moves the execution point, and stepping never moves the
selection — like a debugger's current line versus the editor cursor. Every change is
announced through the document as the ``"debug"`` event, so each view redraws from here.

The run itself lives in the engine host (``nac_studio.host``): its values, history and kernels
are in that process, driven through a :class:`~nac_studio.host.remote_debugger.RemoteDebugger`.
What the user made lives here (breakpoints, watches and input choices, persisted per file as
JSON) and is handed to the host at each launch and change, so a host that died and was started
again gets all of it back. ``begin`` sends an action and returns its Future (settled off the UI
thread); the front end calls ``complete`` with it on the UI thread, which takes the state the
host sent and announces it. ``cancel`` pauses a running action between two instructions.
"""
from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional

import numpy as np

from nac_engine.errors import NacFormatError
from nac_engine.format.model import NacFile
from nac_engine.isa.optable import OP_INPUT
# a tokenizer's companion inputs (attention mask, ...): they follow the ids typed as text
from nac_engine.runtime.input_spec import companion_value

from .model.byte_sizes import human_bytes
from .model.input_slots import InputSlotInfo, input_slots  # noqa: F401  (re-exported)

#: Execution states shown in the status bar.
IDLE, RUNNING, STOPPED, FINISHED, ERROR = "idle", "running", "stopped", "finished", "error"
#: Breakpoint kinds the pane offers; ``value`` means: tick number, op glob, parameter glob,
#: nothing (nan/inf), an expression of the engine's condition language, or ``FILE:LINE`` of the
#: model's source (the ticks that line made).
BREAKPOINT_KINDS = ("tick", "op", "param", "nan", "inf", "expr", "line")
#: ``breakpoint_ticks()``'s mark of a tick where only logpoints are enabled.
LOGPOINT = "log"
#: Lines the Debug Console keeps (a logpoint in a loop prints per pass).
CONSOLE_LINES = 5000
INPUT_MODES = ("random", "zeros", "ones", "npy", "text", "values", "stored")


# --------------------------------------------------------------------------- inputs
@dataclass
class InputChoice:
    """How the user wants one slot filled."""
    mode: str = "random"          # one of INPUT_MODES
    shape: Optional[list] = None
    dtype: str = "float32"
    seed: int = 0
    path: str = ""
    text: str = ""
    values: str = ""              # typed values, a JSON list: [1, 15043, 29892]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "InputChoice":
        c = cls()
        if isinstance(d, dict):
            for k in ("mode", "dtype", "path", "text", "values"):
                if isinstance(d.get(k), str):
                    setattr(c, k, d[k])
            if isinstance(d.get("seed"), int):
                c.seed = d["seed"]
            if isinstance(d.get("shape"), list) and all(isinstance(x, int) and x >= 0 for x in d["shape"]):
                c.shape = list(d["shape"])
        if c.mode not in INPUT_MODES:
            c.mode = "random"
        return c


def default_choice(slot: InputSlotInfo) -> InputChoice:
    if slot.has_stored:
        return InputChoice(mode="stored")
    return InputChoice(mode="random", shape=list(slot.shape) if slot.shape is not None else None,
                       dtype=slot.dtype or "float32")


_DTYPES = {"float32", "float16", "float64", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}


def tokenized(slot: InputSlotInfo, choice: InputChoice, tokenizer) -> tuple[np.ndarray, int]:
    """The token ids of a text choice as a ``[1, n]`` array (padded with the tokenizer's padding
    id, or cut, to the length the file records) and how many of them are real tokens."""
    if tokenizer is None:
        raise ValueError(f"{slot.label}: the file embeds no tokenizer")
    from nac_engine.compiler.tokenizer import encode_text
    try:
        ids = encode_text(tokenizer, choice.text)
    except NacFormatError as e:
        raise ValueError(f"{slot.label}: {e.reason}") from None
    dtype = slot.dtype if slot.dtype and slot.dtype.startswith("int") else "int64"
    real = len(ids)
    if slot.shape is not None and len(slot.shape) == 2 and slot.shape[1] > 0:
        # a file compiled for a fixed length (position tables are sliced at export): pad
        # with the tokenizer's padding id, or cut, to the recorded length
        n = int(slot.shape[1])
        pad = next((i for i in (tokenizer.token_to_id(t) for t in ("[PAD]", "<pad>", "<|endoftext|>"))
                    if i is not None), 0)
        ids = ids[:n] + [pad] * max(0, n - len(ids))
        real = min(real, n)
    return np.asarray([ids], dtype=dtype), real


def make_value(slot: InputSlotInfo, choice: InputChoice, tokenizer=None) -> Any:
    """The array a choice stands for (``None``: use the value stored in the file)."""
    mode = choice.mode
    if mode == "stored":
        if not slot.has_stored:
            raise ValueError(f"{slot.label}: the file stores no value for it")
        return None
    if mode == "npy":
        if not choice.path:
            raise ValueError(f"{slot.label}: no .npy file chosen")
        from nac_engine.files import open_regular
        try:
            with open_regular(choice.path) as fh:
                return np.load(fh, allow_pickle=False)
        except NacFormatError as e:
            raise ValueError(f"{slot.label}: {e.reason}") from None
    if mode == "text":
        return tokenized(slot, choice, tokenizer)[0]
    if mode == "values":
        from nac_engine.runtime.input_spec import parse_literal
        try:
            return parse_literal(choice.values, slot.dtype, slot.shape)
        except ValueError as e:
            raise ValueError(f"{slot.label}: {e}") from None
    shape = choice.shape if choice.shape is not None else (list(slot.shape) if slot.shape is not None else None)
    if shape is None:
        raise ValueError(f"{slot.label}: the file records no shape; give one")
    dtype = choice.dtype or slot.dtype or "float32"
    if dtype not in _DTYPES:
        raise ValueError(f"{slot.label}: unknown dtype {dtype!r}")
    np_dtype = "float32" if dtype == "bfloat16" else dtype
    shape = tuple(int(x) for x in shape)
    if mode == "zeros":
        return np.zeros(shape, dtype=np_dtype)
    if mode == "ones":
        return np.ones(shape, dtype=np_dtype)
    rng = np.random.default_rng(choice.seed)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("int") or dtype.startswith("uint"):
        lo = int(slot.low) if slot.low is not None else 0
        hi = int(slot.high) if slot.high is not None else 100
        return rng.integers(lo, max(hi, lo + 1), size=shape).astype(np_dtype)
    return rng.standard_normal(shape).astype(np_dtype)


# --------------------------------------------------------------------------- breakpoints
@dataclass
class BreakpointSpec:
    """A breakpoint as the user wrote it; handed to each Debugger a run creates."""
    kind: str                     # one of BREAKPOINT_KINDS
    value: str = ""
    condition: str = ""           # optional extra condition on a location
    enabled: bool = True
    id: int = 0
    hits: int = 0
    error: str = ""               # why the engine refused it, or its condition's last error
    log: str = ""                 # a logpoint's message ({expressions} evaluated): printed, no stop
    hit_condition: str = ""       # which hits stop (DAP's hitCondition: N, >=N, >N, ==N, %N)

    @property
    def label(self) -> str:
        if self.kind in ("nan", "inf"):
            text = f"{self.kind.upper()} anywhere"
        elif self.kind == "expr":
            text = f"if {self.value}"
        else:
            text = f"{self.kind} {self.value}"
        return text + (f" if {self.condition}" if self.condition and self.kind != "expr" else "") \
            + (f" (hit {self.hit_condition})" if self.hit_condition else "") + (" (log)" if self.log else "")

    def to_json(self) -> dict:
        return {"kind": self.kind, "value": self.value, "condition": self.condition, "enabled": self.enabled,
                **({"log": self.log} if self.log else {}),
                **({"hitCondition": self.hit_condition} if self.hit_condition else {})}

    @classmethod
    def from_json(cls, d: dict) -> Optional["BreakpointSpec"]:
        if not isinstance(d, dict) or d.get("kind") not in BREAKPOINT_KINDS:
            return None
        return cls(d["kind"], str(d.get("value", "")), str(d.get("condition", "")), bool(d.get("enabled", True)),
                   log=str(d.get("log") or ""), hit_condition=str(d.get("hitCondition") or ""))


@dataclass
class Variable:
    """A value at the execution point: the current result, or one still live."""
    tick: int
    name: str
    where: str                    # "current result", "live", "MMAP SAVE_RESULT", ...
    shape: Optional[tuple] = None
    dtype: Optional[str] = None
    available: bool = True        # False: evicted from history (recomputed on demand)


@dataclass(frozen=True)
class Subject:
    """What a tensor inspector shows: ``result`` (key: tick; None = follow the execution
    point) or ``param`` (key: parameter id). An input is the result of its ``<INPUT>`` tick."""
    kind: str
    key: Any = None

    @property
    def follows(self) -> bool:
        return self.kind == "result" and self.key is None


def _file_line(value: str) -> tuple[str, Optional[int]]:
    """A line breakpoint's ``FILE:LINE`` as (FILE, LINE), LINE None when it is no number."""
    file, _, line = value.strip().rpartition(":")
    return file, int(line) if file and line.strip().isdigit() else None


def _names(file: str, recorded: str) -> bool:
    """Whether ``file`` (as typed: ``model.py``) names the source map's ``recorded`` file."""
    return file == recorded or recorded.replace("\\", "/").endswith("/" + file.lstrip("/"))


# --------------------------------------------------------------------------- the session
class DebugSession:
    """Debug state of one open file. ``notify`` is called (on the UI thread) after every
    change; the Studio passes ``doc.debug_changed``. ``connection``: the engine host to run in
    (the window's; None: one of its own, started on first use and shut down by :meth:`close`).
    ``post(fn)`` runs ``fn`` on the UI thread (the front end sets it; headless: at once)."""

    def __init__(self, nac: NacFile, notify: Optional[Callable[[], None]] = None, connection=None,
                 path: Optional[str] = None):
        self.nac = nac
        self.path = path or nac.path
        self.notify = notify or (lambda: None)
        self.post: Callable[[Callable[[], None]], None] = lambda fn: fn()
        self._connection = connection
        self._own_connection = None
        self.slots = input_slots(nac)
        self.choices: dict[int, InputChoice] = {}
        self.inputs_confirmed = not any(not s.has_stored and s.shape is None for s in self.slots)
        self.breakpoints: list[BreakpointSpec] = []
        self.watches: list[str] = []
        # code that registers the file's custom operators (torch.library), imported by the engine
        # host before a run: Debug › Load Operator Code…, kept per file
        self.imports: list[str] = []
        # the Debug Console: logpoints' lines and evaluated expressions, newest last
        self.console: deque[str] = deque(maxlen=CONSOLE_LINES)
        self.console_total = 0        # lines ever printed (the view appends the new ones)
        self.debugger = None          # the RemoteDebugger of the current run
        self.state = IDLE
        self.reason = None            # the last StopReason
        self.error: str = ""
        self.error_tick: Optional[int] = None
        self.elapsed = 0.0
        self.action = ""
        self.extra_arguments: dict = {}     # handed to every action (the crash tests' hooks)
        self._started = 0.0
        self._next_id = 1
        self._stats: dict[int, Any] = {}      # tick -> TickResult (values are fixed per run)
        self._summaries: dict[int, Any] = {}  # tick -> TickResult without its array (too big to send)
        self._tokenizer: Any = False
        self._bp_ticks: Optional[tuple] = None   # (what the breakpoints were, their ticks): one glob match per edit
        self._sources = None                     # SourceFiles: a line breakpoint's file as it reads now
        self._recorded_files: Optional[tuple] = None   # (source map, the files it names, sorted)
        self._host_kept = False                  # the host keeps the last run's loaded weights
        # values given by a program rather than chosen by the user (a generation's decode step:
        # the last step's cache and token); by input name, they win over the choices
        self.feed_override: Optional[dict] = None

    @property
    def connection(self):
        if self._connection is None:
            from .host.connection import HostConnection
            self._connection = self._own_connection = HostConnection()
        return self._connection

    # -- inputs -------------------------------------------------------------------------
    def choice(self, slot: InputSlotInfo) -> InputChoice:
        return self.choices.get(slot.position) or default_choice(slot)

    def set_choices(self, choices: dict[int, InputChoice]) -> None:
        """New input choices: the next run uses them (a running session is ended)."""
        self.choices = dict(choices)
        self.inputs_confirmed = True
        if self.debugger is not None:
            self.end()

    @property
    def tokenizer(self):
        """The tokenizer the file embeds (``None`` when it has none or it cannot be rebuilt)."""
        if self._tokenizer is False:
            try:
                from nac_engine.compiler.tokenizer import load_tokenizer
                self._tokenizer = load_tokenizer(self.nac)
            except Exception:    # a damaged or unusable tokenizer: no text mode
                self._tokenizer = None
        return self._tokenizer

    def feeds(self) -> list:
        """One value per slot (``None``: the file's stored constant). Random/zeros/ones of a
        slot the input signature describes, at its recorded shape and dtype, come from the
        engine's ``make_inputs`` over the whole signature, so F5 and ``nac run`` with the same
        seed feed the same values."""
        if self.feed_override is not None:
            missing = [s.name or f"input @{s.position}" for s in self.slots if s.name not in self.feed_override]
            if missing:
                raise ValueError(f"no value for {', '.join(missing)}")
            return [self.feed_override[s.name] for s in self.slots]
        tok = self.tokenizer if any(self.choice(s).mode == "text" for s in self.slots) else None
        specs = [s.spec for s in self.slots if s.spec is not None]
        made: dict[tuple, dict] = {}
        out = []
        for s in self.slots:
            c = self.choice(s)
            if s.spec is not None and c.mode in ("random", "zeros", "ones") \
                    and (c.shape is None or tuple(c.shape) == tuple(s.spec.shape)) \
                    and (not c.dtype or c.dtype == s.spec.dtype):
                from nac_engine.format.input_signature import make_inputs
                key = (c.seed, c.mode)
                if key not in made:
                    made[key] = make_inputs(specs, seed=c.seed, fill=c.mode)
                out.append(made[key][s.spec.name])
            else:
                out.append(make_value(s, c, tok))
        self._follow_text(out, tok)
        return out

    def _follow_text(self, values: list, tok) -> None:
        """A tokenizer's companion inputs (attention mask, token type ids, position ids) follow
        the ids typed as text and their padding, unless the user gave them a value of their own
        (a .npy file, the stored one)."""
        text = next((s for s in self.slots if self.choice(s).mode == "text"), None)
        if text is None or tok is None:
            return
        ids, real = tokenized(text, self.choice(text), tok)
        n = ids.shape[1]
        for s in self.slots:
            if s is text or self.choice(s).mode in ("npy", "stored", "text", "values"):
                continue
            if s.shape is not None and tuple(s.shape) != (1, n):
                continue
            value = companion_value(s.name, real, n, s.dtype)
            if value is not None:
                values[s.position] = value

    def needs_inputs(self) -> bool:
        """True when a run cannot start without asking (no signature and no remembered choice)."""
        return not self.inputs_confirmed and any(not s.has_stored for s in self.slots)

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.debugger is not None

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def tick(self) -> Optional[int]:
        """The execution point (``None`` without a run)."""
        return self.debugger.tick if self.debugger is not None else None

    def __len__(self) -> int:
        return len(self.nac.instructions)

    def start(self) -> None:
        """Launch a run in the engine host on the chosen inputs, with the breakpoints and watches
        (queued there before any action that follows). The host reuses the weights it loaded for
        this file's last run."""
        from .host.remote_debugger import RemoteDebugger
        feeds = self.feeds()
        self._mark_new_run()
        self.debugger = RemoteDebugger(self.connection, self.path, self.nac)
        self._stats.clear()
        self._summaries.clear()
        for spec in self.breakpoints:     # hits count within a run (a hit condition's "the 3rd")
            spec.hits = 0
        launched = self.debugger.launch(feeds, self._specs(), list(self.watches), list(self.imports))
        launched.add_done_callback(lambda f, d=self.debugger: self.post(lambda: self._verdicts(d, f)))
        self.state, self.reason, self.error, self.error_tick = STOPPED, None, "", None

    def _mark_new_run(self) -> None:
        """The Debug Console keeps earlier runs' lines: mark where this one starts (unless a front
        end just marked it, as a generation does for each token's run)."""
        if self.console and not self.console[-1].startswith("──"):
            self.console_print("── new run ──")

    def end(self) -> None:
        """Stop debugging: the run and its values are dropped (breakpoints stay). The host keeps
        the interpreter session with its loaded weights and prepared calls, so the next start
        (Stop then F5, Restart, new inputs) does not read the weights again; :meth:`close` frees
        them."""
        d, self.debugger = self.debugger, None
        if d is not None:
            d.cancel()
            d.terminate()
            d.detach()
            self._host_kept = True
        self._stats.clear()
        self._summaries.clear()
        self.state, self.reason, self.error, self.error_tick = IDLE, None, "", None
        self.notify()

    def close(self) -> None:
        """End debugging and free the weights the host keeps for the next run (the file closes)."""
        d = self.debugger
        self.end()
        if self._connection is not None and (d is not None or self._host_kept) and self._connection.alive:
            self._connection.request("nac/closeDebug", {"path": self.path})
        self._host_kept = False
        if self._own_connection is not None:
            self._own_connection.shutdown()
            self._own_connection = self._connection = None

    def engine_stopped(self, message: str) -> None:
        """The engine host died: the run's values went with it. The session shows how (and at
        which tick a running action was), keeps everything the user made, and the next F5
        launches again in a fresh host."""
        d, self.debugger = self.debugger, None
        if d is not None:
            at = self.connection.exit_tick      # where the run was: the host wrote it at every instruction
            if at is None and self.state == RUNNING:
                at = d.running_tick
            d.detach()
            self.state, self.error = ERROR, message + (f" at tick {at}" if at is not None and at >= 0 else "")
            self.error_tick = at if at is not None and at >= 0 else None
        self._host_kept = False
        self._stats.clear()
        self._summaries.clear()
        self.notify()

    def forget_run(self) -> None:
        """The engine host is being replaced: the run (which lives there) is gone with it; the
        session is back to idle with everything the user made."""
        d, self.debugger = self.debugger, None
        if d is not None:
            d.detach()
        self._host_kept = False
        self._stats.clear()
        self._summaries.clear()
        self.state, self.reason, self.error, self.error_tick = IDLE, None, "", None
        self.notify()

    @property
    def weights_kept(self) -> bool:
        """Whether the next start reuses a session whose weights are loaded (after a Stop)."""
        return self._host_kept and self._connection is not None and self._connection.alive

    def begin(self, action: str, *args) -> Future:
        """Run a Debugger action (``continue_``, ``step``, ``run_to``, ``step_back``, ``restart``,
        ``rerun`` (restart, then continue), ``step_in``, ``step_out``, ``reverse_continue``)
        in the engine host; call :meth:`complete` with the Future on the UI thread."""
        if self.debugger is None:
            self.start()
        if action in ("restart", "rerun"):
            self._stats.clear()
            self._summaries.clear()
            self._mark_new_run()
        self.state, self.action, self.error, self.error_tick = RUNNING, action, "", None
        self._started = time.perf_counter()
        self.debugger.extra = dict(self.extra_arguments)
        # no announcement here: views keep showing the last stop while an action runs (the
        # front end shows "running" itself), so a step costs one round of view updates
        return self.debugger.run_in_thread(action, *args)

    def run_now(self, action: str, *args):
        """Synchronous form of ``begin`` + ``complete`` (headless use and tests)."""
        future = self.begin(action, *args)
        try:
            future.result()
        except Exception:       # noqa: BLE001 - complete() takes the failure
            pass
        return self.complete(future)

    def cancel(self) -> None:
        if self.debugger is not None:
            self.debugger.cancel()

    def complete(self, future: Future, announce: bool = True):
        """Take the result of an action: the state, why it stopped, how long it took
        (``announce=False``: the caller announces, e.g. it ends the session right after)."""
        self.elapsed = time.perf_counter() - self._started
        if self.debugger is None:      # ended while it ran (or the engine stopped)
            return None
        try:
            reason = future.result()
        except Exception as exc:
            self.reason = self.debugger.stop_reason
            self.state = ERROR
            self.error = str(exc)
            self.error_tick = getattr(exc, "tick", None)
            if self.error_tick is None and not getattr(exc, "at_launch", False):
                self.error_tick = self.debugger.next_tick
            self._take_log()
            self._sync_hits()
            if announce:
                self.notify()
            return None
        self.reason = reason
        self.state = FINISHED if self.debugger.finished else STOPPED
        self._take_log()
        self._sync_hits()
        if announce:
            self.notify()
        return reason

    def progress(self) -> tuple[int, int]:
        """(ticks executed, total) while running; read from the UI thread."""
        d = self.debugger
        return (d.next_tick if d is not None else 0), len(self)

    def describe(self) -> str:
        """Status-bar text: state, why it stopped, elapsed time."""
        if self.debugger is None:
            if self.state == ERROR and self.error:
                return self.error.splitlines()[0]
            return "Not running"
        if self.state == RUNNING:
            done, total = self.progress()
            return f"Running… tick {done:,}/{total:,}"
        took = f" ({self.elapsed * 1000:.0f} ms)" if self.elapsed < 1 else f" ({self.elapsed:.2f} s)"
        if self.state == ERROR:
            where = f" at tick {self.error_tick}" if self.error_tick is not None else ""
            return f"Error{where}: {self.error.splitlines()[0] if self.error else ''}{took}"
        r = self.reason
        if self.state == FINISHED:
            return f"Finished after tick {self.tick}{took}{self.history_note()}"
        if r is None or self.tick is None or self.tick < 0:
            return "Ready (before tick 0)"
        why = {"breakpoint": "breakpoint " + ", ".join(self._label_of(b) for b in r.breakpoints),
               "cancelled": "paused", "step": "step", "step_back": "step back",
               "run_to": {"step_in": "step into", "step_out": "step out"}.get(self.action, "run to cursor"),
               "restart": "restart"}.get(r.kind, r.kind)
        return f"Stopped at tick {self.tick} — {why}{took}{self.history_note()}"

    def history_note(self) -> str:
        """" · …" when the step-back history has dropped results to stay within its budget
        (they are recomputed from checkpoints when stepped back to), else ""."""
        h = getattr(self.debugger, "history", None)
        if not isinstance(h, dict) or not h.get("dropped"):
            return ""
        budget = h.get("budget")
        size = f" ({human_bytes(budget)})" if budget else ""
        return f" · step-back history full{size}: {h['dropped']:,} older results dropped, recomputed when revisited"

    def _label_of(self, spec_id: int) -> str:
        spec = self.breakpoint(spec_id)
        return f"#{spec.id} {spec.label}" if spec is not None else f"#{spec_id}"

    # -- breakpoints ----------------------------------------------------------------------
    def _specs(self) -> list[dict]:
        return [{**self._engine_spec(spec), "hits": spec.hits} for spec in self.breakpoints]

    def _engine_spec(self, spec: BreakpointSpec) -> dict:
        """The spec as the engine takes it: a source line as the ticks it made."""
        out = {**spec.to_json(), "id": spec.id}
        if spec.kind == "line":
            out.update(kind="ticks", ticks=self.line_ticks(spec.value), value=f"line {spec.value}")
        return out

    def _install(self) -> None:
        """Hand every breakpoint to the running debugger (the host answers which it refused);
        without a run, check them here (a bad number, a glob matching nothing, a bad expression)."""
        self._bp_ticks = None
        if self.debugger is None:
            from nac_engine.dap.service import check_breakpoint
            for spec in self.breakpoints:
                spec.error = check_breakpoint(self.nac, self._engine_spec(spec))
            return
        d = self.debugger
        f = d.set_breakpoints(self._specs())
        f.add_done_callback(lambda f, d=d: self.post(lambda: self._verdicts(d, f)))

    def _verdicts(self, d, future: Future) -> None:
        """UI thread: the host's word on each breakpoint (set while the run was live)."""
        if d is not self.debugger or future.exception() is not None:
            return
        for v in future.result() or []:
            spec = self.breakpoint(v.get("id"))
            if spec is not None:
                spec.error = v.get("message", "")
        self.notify()

    def add_breakpoint(self, kind: str, value: str = "", condition: str = "", enabled: bool = True,
                       announce: bool = True, log: str = "", hit_condition: str = "") -> BreakpointSpec:
        """``log``: a logpoint's message (printed to the Debug Console; the run goes on).
        ``hit_condition``: which of its hits stop (``5``, ``>=5``, ``>5``, ``==5``, ``%5``)."""
        if kind not in BREAKPOINT_KINDS:
            raise ValueError(f"unknown breakpoint kind {kind!r}")
        spec = BreakpointSpec(kind, str(value).strip(), condition.strip(), enabled, self._next_id, log=log.strip(),
                              hit_condition=hit_condition.strip())
        self._next_id += 1
        self.breakpoints.append(spec)
        self._install()
        if announce:
            self.notify()
        return spec

    def breakpoint(self, spec_id: int) -> Optional[BreakpointSpec]:
        return next((b for b in self.breakpoints if b.id == spec_id), None)

    def remove_breakpoint(self, spec_id: int) -> None:
        spec = self.breakpoint(spec_id)
        if spec is None:
            return
        self.breakpoints.remove(spec)
        self._install()
        self.notify()

    def edit_breakpoint(self, spec_id: int, *, value: Optional[str] = None, condition: Optional[str] = None,
                        enabled: Optional[bool] = None, log: Optional[str] = None,
                        hit_condition: Optional[str] = None) -> None:
        spec = self.breakpoint(spec_id)
        if spec is None:
            return
        if value is not None:
            spec.value = str(value).strip()
        if condition is not None:
            spec.condition = condition.strip()
        if log is not None:
            spec.log = log.strip()
        if hit_condition is not None:
            spec.hit_condition = hit_condition.strip()
        if enabled is not None:
            spec.enabled = bool(enabled)
        self._install()
        self.notify()

    def toggle_tick_breakpoint(self, tick: int) -> Optional[BreakpointSpec]:
        """F9: remove the tick breakpoint on ``tick`` if there is one, else add it."""
        for spec in self.breakpoints:
            if spec.kind == "tick" and spec.value == str(tick):
                self.remove_breakpoint(spec.id)
                return None
        return self.add_breakpoint("tick", str(tick))

    def toggle_line_breakpoint(self, file: str, line: int) -> Optional[BreakpointSpec]:
        """F9 in the Source pane: remove the breakpoint on ``file:line`` (``file`` as the source map
        names it, ``line`` as the file reads now) if there is one, else add it."""
        value = f"{file}:{line}"
        for spec in self.breakpoints:
            if spec.kind == "line" and spec.value == value:
                self.remove_breakpoint(spec.id)
                return None
        return self.add_breakpoint("line", value)

    def line_ticks(self, value: str) -> list[int]:
        """A line breakpoint's ticks. ``value`` is ``FILE:LINE``: FILE as the source map names it
        (or the end of that name: ``model.py``), LINE as the file reads now (it may have been
        edited since the compile)."""
        from nac_engine.format.source_map import SourceFiles, line_ticks
        smap, (file, line) = self.source_map(), _file_line(value)
        if smap is None or line is None:
            return []
        if self._recorded_files is None or self._recorded_files[0] is not smap:
            # every file the map names, once per map (a hover in the Source pane's gutter asks too)
            named = {e.file for e in smap.entries if e.file} | {f[1] for e in smap.entries for f in e.stack if f[1]}
            self._recorded_files = (smap, sorted(named))
        recorded = next((f for f in self._recorded_files[1] if _names(file, f)), None)
        if recorded is None:
            return []
        if self._sources is None:
            self._sources = SourceFiles()
        return line_ticks(smap, recorded, line, lambda rec, ln, code: self._sources.current_line(rec, ln, code,
                                                                                                   self.path))

    def line_marks(self, recorded: str) -> dict[int, Optional[bool]]:
        """line -> enabled, of the line breakpoints on ``recorded``'s lines; ``None`` for one the
        engine refused (a line that made no instruction: an editor's unverified breakpoint)."""
        out: dict[int, Optional[bool]] = {}
        for spec in self.breakpoints:
            file, line = _file_line(spec.value) if spec.kind == "line" else ("", None)
            if line is None or not _names(file, recorded):
                continue
            if spec.error:
                out.setdefault(line, None)
            else:
                out[line] = bool(out.get(line)) or spec.enabled
        return out

    def source_map(self):
        """The file's SourceMap, or None (none recorded, or one that does not decode)."""
        from nac_engine.errors import NacFormatError
        from nac_engine.format.source_map import read_source_map
        try:
            return read_source_map(self.nac)         # (decoded once per file and kept by the engine)
        except NacFormatError:
            return None

    def breakpoint_ticks(self) -> dict[int, bool | str]:
        """tick -> True (an enabled breakpoint), False (disabled ones only) or ``LOGPOINT`` (enabled
        logpoints only: the run prints there and goes on), for every instruction a tick/op/param
        breakpoint sits on (the gutter and graph marks); computed from the file, so it works before
        any run. Every stop asks, so an op or parameter glob is matched against the file once per
        change of the breakpoints, not once per step."""
        key = tuple((spec.kind, spec.value, spec.enabled, bool(spec.log)) for spec in self.breakpoints)
        if self._bp_ticks is None or self._bp_ticks[0] != key:
            rank = {False: 0, LOGPOINT: 1, True: 2}          # what a tick's mark shows: the strongest
            out: dict[int, bool | str] = {}
            for spec in self.breakpoints:
                mark = (LOGPOINT if spec.log else True) if spec.enabled else False
                for t in self.ticks_of(spec):
                    if rank[mark] >= rank[out.get(t, False)]:
                        out[t] = mark
            self._bp_ticks = (key, out)
        return dict(self._bp_ticks[1])

    def ticks_of(self, spec: BreakpointSpec) -> list[int]:
        from fnmatch import fnmatchcase
        nac = self.nac
        if spec.kind == "tick":
            try:
                t = int(spec.value)
            except ValueError:
                return []
            return [t] if 0 <= t < len(nac.instructions) else []
        if spec.kind == "op" and spec.value:
            return [i.index for i in nac.instructions if fnmatchcase(nac.instruction_name(i), spec.value)]
        if spec.kind == "param" and spec.value:
            return [i.index for i in nac.instructions if i.a == OP_INPUT and i.b == 1
                    and (p := nac.param_for(i)) is not None and fnmatchcase(p.name, spec.value)]
        if spec.kind == "line":
            return self.line_ticks(spec.value)
        return []

    def _sync_hits(self) -> None:
        if self.debugger is None:
            return
        for spec_id, (hits, error) in self.debugger.breakpoint_state.items():
            spec = self.breakpoint(spec_id)
            if spec is not None:
                spec.hits = hits
                if error:
                    spec.error = error

    # -- custom operators -----------------------------------------------------------------
    def add_import(self, path: str) -> Future:
        """Code that registers the file's custom operators: imported by the engine host now (for
        a simulation or a profile before any run) and before each run; kept with the file."""
        if path not in self.imports:
            self.imports.append(path)
        return self.connection.import_operator_code([path]).future

    # -- the debug console ----------------------------------------------------------------
    def _take_log(self) -> None:
        """The lines the logpoints printed during the action that just ended."""
        for line in self.debugger.take_log():
            self.console_print(f"[tick {line.get('tick')}] {line.get('text', '')}")

    def console_print(self, text: str) -> None:
        self.console.append(text)
        self.console_total += 1

    def console_clear(self) -> None:
        self.console.clear()
        self.notify()

    def evaluate(self, text: str) -> Future:
        """An expression's value at the execution point (the Debug Console's input line): the
        Future's result is the value (a number, an array, text); an error is its exception."""
        if self.debugger is None:
            f: Future = Future()
            f.set_exception(RuntimeError("not running: start a run (F5 or F10) first"))
            return f
        return self.debugger.evaluate(text)

    # -- watches --------------------------------------------------------------------------
    def add_watch(self, text: str) -> None:
        text = text.strip()
        if not text or text in self.watches:
            return
        self.watches.append(text)
        self._send_watches()
        self.notify()

    def remove_watch(self, text: str) -> None:
        if text in self.watches:
            self.watches.remove(text)
            self._send_watches()
            self.notify()

    def _send_watches(self) -> None:
        d = self.debugger
        if d is None:
            return
        f = d.set_watches(list(self.watches))     # evaluated at the stop: the pane shows it when back
        f.add_done_callback(lambda _f, d=d: self.post(lambda: self.notify() if d is self.debugger else None))

    def watch_values(self) -> list[tuple[str, Any, str]]:
        """(expression, value or None, error text) per watch, as of the last stop."""
        out = []
        vals = self.debugger.watches if self.debugger is not None else {}
        for text in self.watches:
            v = vals.get(text)
            if isinstance(v, Exception):
                out.append((text, None, str(v)))
            elif text not in vals:
                out.append((text, None, "" if self.debugger is None else "not evaluated yet"))
            else:
                out.append((text, v, ""))
        return out

    # -- values ---------------------------------------------------------------------------
    def result(self, tick: Optional[int] = None, max_values: Optional[int] = None):
        """The :class:`TickResult` of ``tick`` (default: the execution point), from the host and
        cached for the run: a tick's value never changes within one run. ``max_values``: the
        statistics alone when the value is bigger (the Variables pane). Blocks on the host:
        call it off the UI thread."""
        d = self.debugger
        if d is None:
            raise RuntimeError("no run")
        tick = d.tick if tick is None else tick
        r = self._stats.get(tick)
        if r is None and max_values is not None:
            r = self._summaries.get(tick)
        if r is None:
            r = d.result(tick, max_values)
            (self._stats if r.tensor is not None or r.shape is None else self._summaries)[tick] = r
        return r

    def cached_result(self, tick: int):
        """What :meth:`result` has for ``tick`` (its statistics at least), or None."""
        r = self._stats.get(tick)
        return r if r is not None else self._summaries.get(tick)

    def outputs(self) -> Optional[list]:
        """The finished run's outputs (blocks on the host: off the UI thread)."""
        return self.debugger.outputs if self.debugger is not None else None

    def variables(self) -> list[Variable]:
        """The current result, then every value live at the execution point: what later
        instructions still read (the interpreter's live set) and what the MMAP schedule holds
        in memory at that tick, as the host listed them with its last stop (statistics come
        from :meth:`result`, off the UI thread)."""
        d = self.debugger
        if d is None or d.tick < 0 or self.running:
            return []
        out: list[Variable] = []
        for v in d.values:
            var = Variable(int(v["tick"]), self.name_of(int(v["tick"])), v.get("where", ""),
                           available=bool(v.get("available", True)))
            if v.get("shape") is not None:
                var.shape, var.dtype = tuple(v["shape"]), v.get("dtype")
            out.append(var)
        return out

    def name_of(self, tick: int) -> str:
        ins = self.nac.instructions[tick]
        if ins.a == OP_INPUT:
            p = self.nac.param_for(ins) if ins.b == 1 else None
            if p is not None:
                return p.name
            name = self.nac.input_name_map.get(tick)
            if name:
                return name
        return f"v{tick} {self.nac.instruction_name(ins)}"

    # -- persistence ----------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"breakpoints": [b.to_json() for b in self.breakpoints], "watches": list(self.watches),
                "inputs": {str(k): c.to_json() for k, c in self.choices.items()},
                **({"imports": list(self.imports)} if self.imports else {})}

    def load_json(self, data: dict) -> None:
        """Breakpoints, watches and input choices saved for this file (bad entries skipped)."""
        if not isinstance(data, dict):
            return
        for d in data.get("breakpoints", []) or []:
            spec = BreakpointSpec.from_json(d)
            if spec is not None:
                self.add_breakpoint(spec.kind, spec.value, spec.condition, spec.enabled, announce=False, log=spec.log,
                                    hit_condition=spec.hit_condition)
        for w in data.get("watches", []) or []:
            if isinstance(w, str) and w.strip() and w not in self.watches:
                self.watches.append(w.strip())
        self.imports = [r for r in data.get("imports") or [] if isinstance(r, str) and r][:16] \
            if isinstance(data.get("imports"), list) else []
        if self.imports:        # what the user loaded for this file: its shapes and simulation need it too
            self.connection.import_operator_code(self.imports)
        inputs = data.get("inputs") or {}
        if isinstance(inputs, dict) and inputs:
            choices = {}
            for k, v in inputs.items():
                if str(k).isdigit() and int(k) < len(self.slots):
                    choices[int(k)] = InputChoice.from_json(v)
            if choices:
                self.choices = choices
                self.inputs_confirmed = True


__all__ = ["DebugSession", "Subject", "BreakpointSpec", "InputChoice", "InputSlotInfo", "Variable", "input_slots",
           "make_value", "default_choice", "BREAKPOINT_KINDS", "INPUT_MODES",
           "IDLE", "RUNNING", "STOPPED", "FINISHED", "ERROR"]

