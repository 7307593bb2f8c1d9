"""``nac dap``: a Debug Adapter Protocol server for one ``.nac`` file.

DAP's concepts on NAC's: one thread ("model"); a stop is a tick; the stack is the tick's call
stack in the user's PyTorch code (from the source map, innermost ``module (op)`` frame first;
one disassembly frame for a tick without one); the disassembly is a source (one line per tick)
and DAP's ``disassemble`` answer (``instructionReference`` = tick). Breakpoints on the user's
``.py`` lines, on ticks (instruction breakpoints), on op and parameter globs (function
breakpoints: ``aten.linear*``, ``param:encoder.*.weight``) and on NaN/Inf/kernel errors
(exception filters). Stepping: ``next`` one tick, ``stepIn``/``stepOut`` down/up the module
hierarchy, ``stepBack``/``reverseContinue`` and ``goto`` backwards as well as forwards.

Everything that runs goes through :class:`~nac_engine.dap.service.DebugService`, the same object
the Studio's engine host drives, so the two front ends share one debugger.

Threads: :meth:`Adapter.handle` is called by one reader thread, in message order. Actions that
run the model (continue, steps, goto, restart) are answered at once and run on one worker
thread, which sends the ``stopped`` (or ``terminated``) event when they end; ``pause`` cancels
the running one between two instructions. Anything a request does wrong is an error response:
a bad request never ends the adapter.
"""
from __future__ import annotations

import base64
import os
import re
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from ..cli_error import CliError
from ..errors import NacFormatError
from ..format.source_map import SourceFiles, line_ticks
from . import values as V
from .service import DebugService, completions

THREAD_ID = 1
DISASSEMBLY_REF = 1
EXCEPTION_FILTERS = [
    {"filter": "nan", "label": "NaN", "description": "Stop at a tick whose result holds a NaN", "default": False},
    {"filter": "inf", "label": "Inf", "description": "Stop at a tick whose result holds an infinity",
     "default": False},
    {"filter": "error", "label": "Kernel error", "description": "Stop where a kernel fails", "default": True},
]


class RequestError(Exception):
    """A request the adapter refuses; its text is the error response's message."""


class Adapter:
    """``Adapter(send)``: ``send(message_dict)`` writes one protocol message (thread-safe here)."""

    def __init__(self, send: Callable[[dict], None]):
        self._send = send
        self._send_lock = threading.Lock()
        self._seq = 0
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="nac-dap")
        self._running = threading.Event()
        self.closed = threading.Event()
        self.service: Optional[DebugService] = None
        self.nac = None
        self.program = ""
        self._launch: dict = {}
        self._feeds: list = []
        self._slots: list = []          # (tick, name) of each input the run is fed, in feed order
        self._smap = None
        self._lines: Optional[list[str]] = None     # disassembly, one line per tick
        self._sources = SourceFiles()                           # the user's files as they are now
        self._told_changed: set[str] = set()                   # changed source files the console was told of
        self._source_refs: dict[int, str] = {}      # sourceReference -> recorded file (no local copy)
        self._handles: dict[int, Callable[[Optional[str], int, int], list]] = {}
        self._frames: list[dict] = []
        self._bps: dict[str, list] = {"source": [], "instruction": [], "function": [], "exception": []}
        self._source_bps: dict[str, list] = {}
        self._break_on_error = True
        self._next_id = 1
        self._exception: Optional[dict] = None
        self._terminated = False
        self._progress_events = False
        self._column_base = 1             # DAP columns count from 1 unless the client says otherwise

    # -- plumbing ---------------------------------------------------------------------------------
    def _write(self, message: dict) -> None:
        with self._send_lock:
            self._seq += 1
            message["seq"] = self._seq
            self._send(message)

    def event(self, name: str, body: Optional[dict] = None) -> None:
        msg = {"type": "event", "event": name}
        if body is not None:
            msg["body"] = body
        self._write(msg)

    def output(self, text: str, category: str = "console") -> None:
        self.event("output", {"category": category, "output": text if text.endswith("\n") else text + "\n"})

    def _respond(self, request: dict, body: Any = None, *, error: Optional[str] = None) -> None:
        msg = {"type": "response", "request_seq": request.get("seq", 0) if isinstance(request.get("seq"), int)
               else 0, "command": str(request.get("command", "")), "success": error is None}
        if error is not None:
            # the text as `message` only: a `body.error.format` would be read as a template
            # ({name} placeholders), and the messages quote JSON
            msg["message"] = error
        elif body is not None:
            msg["body"] = body
        self._write(msg)

    def handle(self, request: dict) -> None:
        """Answer one message (requests only; anything else is ignored, as DAP allows)."""
        if request.get("type") != "request":
            return
        command = request.get("command")
        fn = getattr(self, "_req_" + command, None) if isinstance(command, str) and command.isidentifier() else None
        if fn is None:
            self._respond(request, error=f"unsupported request {command!r}")
            return
        args = request.get("arguments")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            self._respond(request, error=f"{command}: 'arguments' must be an object")
            return
        try:
            body = fn(args, request)
        except RequestError as e:
            self._respond(request, error=str(e))
        except (CliError, NacFormatError, ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
            self._respond(request, error=f"{command}: {e}")
        except Exception as e:     # noqa: BLE001 - the adapter answers, it never dies on a request
            self._respond(request, error=f"{command}: internal error: {type(e).__name__}: {e}")
            self.output("".join(traceback.format_exception(e)), "stderr")
        else:
            if body is not _ANSWERED:
                self._respond(request, body)

    def _need_run(self):
        if self.service is None or self.service.debugger is None:
            raise RequestError("no model is running: launch first")
        return self.service.debugger

    # -- session ----------------------------------------------------------------------------------
    def _req_initialize(self, args, request):
        self._progress_events = bool(args.get("supportsProgressReporting"))
        self._column_base = 0 if args.get("columnsStartAt1") is False else 1
        self._respond(request, {
            "supportsConfigurationDoneRequest": True, "supportsConditionalBreakpoints": True,
            "supportsHitConditionalBreakpoints": True, "supportsFunctionBreakpoints": True,
            "supportsInstructionBreakpoints": True, "supportsStepBack": True, "supportsGotoTargetsRequest": True,
            "supportsRestartRequest": True, "supportsTerminateRequest": True, "supportsDisassembleRequest": True,
            "supportsReadMemoryRequest": True, "supportsExceptionInfoRequest": True,
            "supportsEvaluateForHovers": True, "supportsSetVariable": True, "supportsSteppingGranularity": False,
            "supportsDelayedStackTraceLoading": False, "supportsValueFormattingOptions": False,
            "supportsCancelRequest": False, "supportsLogPoints": True, "supportsCompletionsRequest": True,
            "supportsLoadedSourcesRequest": True,
            "completionTriggerCharacters": ["."],
            "exceptionBreakpointFilters": EXCEPTION_FILTERS})
        return _ANSWERED

    def _req_launch(self, args, request):
        self._open(args)
        self._respond(request)
        self.event("initialized")        # now breakpoints can be placed: the program's lines are known
        return _ANSWERED

    def _open(self, args: dict) -> None:
        program = args.get("program")
        if not isinstance(program, str) or not program:
            raise RequestError("launch: 'program' (the .nac file to debug, or a model.py to compile and debug) "
                               "is required")
        imports = args.get("imports") or []
        if not isinstance(imports, list) or not all(isinstance(r, str) and r for r in imports):
            raise RequestError("launch: 'imports' must be a list of .py files or module names")
        cwd = args.get("cwd")
        if cwd is not None:
            # the configuration's relative paths are the project's, wherever the editor started us
            if not isinstance(cwd, str) or not os.path.isdir(cwd):
                raise RequestError(f"launch: 'cwd' {cwd!r} is not a directory")
            program = os.path.join(cwd, program)
            imports = [os.path.join(cwd, r) if r.endswith(".py") else r for r in imports]
            args = {**args, "program": program, "imports": imports}
        from .model_program import CompileFailed, compile_model_program, is_model_program
        if is_model_program(program):         # the model's own file: compiled, then debugged
            extra = args.get("compileArgs") or []
            output = args.get("output")
            if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
                raise RequestError("launch: 'compileArgs' must be a list of nac compile arguments, e.g. "
                                   "[\"--quant\", \"fp16\"]")
            if output is not None and not isinstance(output, str):
                raise RequestError("launch: 'output' must be the path of the .nac to write")
            if output and cwd is not None:
                output = os.path.join(cwd, output)
            try:
                program = compile_model_program(program, output, extra, self.output,
                                                recompile=bool(args.get("recompile")))
            except CompileFailed as e:
                raise RequestError(f"launch: {e}") from None
            args = {**args, "program": program}
        from ..compiler.command import import_operator_code
        try:
            import_operator_code(imports)     # the program's custom operators (torch.library)
        except ValueError as e:
            raise RequestError(f"launch: imports: {e}") from None
        from ..cli_inputs import converted_peer, open_nac, open_peer_file
        peer = open_peer_file(program)           # a MIND .ir is debugged as its NAC, as nac run runs it
        if peer is not None:
            nac = converted_peer(program, peer.format, "nac dap")
            self.output(f"{program}: a {peer.format} program, converted to NAC in memory (nac convert writes it); "
                        "stepping its instructions", "important")
        else:
            nac = open_nac(program)
        try:
            feeds, slots = self._make_feeds(nac, program, args)
        except BaseException:
            nac.close()
            raise
        self.close_run()
        self.nac, self.program, self._launch = nac, program, dict(args)
        self._feeds, self._slots = feeds, slots
        self.service = DebugService(nac)
        from ..format.source_map import read_source_map
        try:
            self._smap = read_source_map(nac)
        except NacFormatError as e:
            self._smap = None
            self.output(f"{program}: the source map is unreadable ({e}); showing the disassembly", "important")
        self._lines = None
        self._sources = SourceFiles()
        self._told_changed.clear()
        self._terminated = False
        self._start_service()
        try:
            self._check_inputs(bool(args.get("inputs")))
        except RequestError:
            self.close_run()
            raise
        self.output(f"{program}: {len(nac.instructions)} instructions, {len(nac.params)} parameters, "
                    f"{len(slots)} input(s)" + ("" if self._smap else "; no source map (stepping the disassembly)"))
        if args.get("checkMmap"):
            self._report_mmap()
        if self._bps["source"] or self._bps["instruction"] or self._bps["function"] or self._bps["exception"]:
            self._install(announce=True)

    def _make_feeds(self, nac, program: str, args: dict) -> tuple[list, list]:
        """(one value per input slot, the slots as (tick, name)) from the launch's ``inputs``, or
        from the file's input signature when it gives none."""
        from ..cli_inputs import run_inputs
        from ..runtime.session import input_slots
        seed = args.get("seed", 0)
        if type(seed) is not int:
            raise RequestError("launch: 'seed' must be an integer")
        given = args.get("inputs") or {}
        if not isinstance(given, dict):
            raise RequestError("launch: 'inputs' must map input names to \"x.npy\" or \"SHAPE:DTYPE\"")
        slots = [(s.tick, s.name) for s in input_slots(nac)]
        bad = [name for name, value in given.items() if not isinstance(value, str)]
        if bad:
            raise RequestError(f"launch: input {bad[0]!r} must be a path to an .npy file or SHAPE:DTYPE text")
        # a relative .npy path is the launch configuration's: next to the program first, then under its cwd
        inputs = run_inputs(nac, given.items(), seed, default=not given,
                            base_dirs=[os.path.dirname(os.path.abspath(program))]
                            + ([args["cwd"]] if isinstance(args.get("cwd"), str) else []),
                            say=lambda text: self.output(f"{program}: {text}", "console"))
        known = {n for _, n in slots if n}
        unknown = [k for k in inputs if k not in known]
        if unknown:
            raise RequestError(f"launch: unknown input name(s) {', '.join(map(repr, unknown))}; the file names: "
                               + (", ".join(repr(k) for k in sorted(known)) or "none"))
        return [inputs.get(name) for _, name in slots], slots

    def _check_inputs(self, given: bool) -> None:
        """Refuse the launch as the command line refuses the run when inputs are missing (the
        session's own message), with the launch configuration's words for the fix."""
        from ..format.input_signature import missing_inputs_hint
        error = self.service.debugger.session.missing_input_error()
        if error is None:
            return
        hint = ""
        if not given:
            example = next((s.name for s in error.missing if s.name), "x")
            hint = (missing_inputs_hint(error.missing) +
                    f'; in the launch configuration: "inputs": {{"{example}": "1x128:int64"}} or {{"{example}": "x.npy"}}')
        raise RequestError(f"{self.program}: {error}{hint}")

    def _start_service(self) -> None:
        from ..runtime.errors import NacRuntimeError
        try:
            self.service.launch(self._feeds)
        except NacRuntimeError as e:
            raise RequestError(f"{self.program}: {e}") from None

    def _report_mmap(self) -> None:
        from ..format.mmap_lint import check_schedule
        report = check_schedule(self.nac)
        if not report.has_schedule:
            self.output(f"{self.program}: no MMAP schedule (nothing to check)")
            return
        for f in report.violations[:200]:
            self.output(f"{self.program}: tick {f.tick}: {f.kind}: {f.message}", "important")
        self.output(f"{self.program}: MMAP schedule: {len(report.violations)} violation(s), "
                    f"{len(report.hazards)} same-tick hazard(s)")

    def _req_configurationDone(self, args, request):
        self._respond(request)
        self._begin()
        return _ANSWERED

    def _begin(self) -> None:
        if self._launch.get("noDebug"):
            self._run("runTo", tick=len(self.nac.instructions) - 1, breakpoints=False)
        elif self._launch.get("stopOnEntry"):
            self._stopped("entry")
        else:
            self._run("continue")

    def _req_restart(self, args, request):
        new = args.get("arguments")
        if isinstance(new, dict) and new.get("program"):
            self._wait_idle()
            self._open(new)
        elif self.service is None:
            raise RequestError("restart: nothing was launched")
        else:
            self._wait_idle()
            self._terminated = False
            if self.service.debugger is None:
                self._start_service()
            self.service.act("restart")
        self._respond(request)
        self._begin()
        return _ANSWERED

    def _req_terminate(self, args, request):
        if self.service is not None:
            self.service.pause()
            self._wait_idle()
            self.service.terminate()
        self._respond(request)
        self._end(None)
        return _ANSWERED

    def _req_disconnect(self, args, request):
        if self.service is not None:
            self.service.pause()
        self._wait_idle()
        self.close_run()
        self._respond(request)
        self.closed.set()
        return _ANSWERED

    def close_run(self) -> None:
        if self.service is not None:
            self.service.close()
            self.service = None
        if self.nac is not None:
            self.nac.close()
            self.nac = None

    def shutdown(self) -> None:
        """The peer has gone: stop the running action, free the run."""
        if self.service is not None:
            self.service.pause()
        self._worker.shutdown(wait=True)
        self.close_run()

    def _req_pause(self, args, request):
        self._need_run()
        self._respond(request)
        if self._running.is_set():
            self.service.pause()         # the action ends as "cancelled": the stop says "pause"
        else:
            self._stopped("pause")
        return _ANSWERED

    # -- running ----------------------------------------------------------------------------------
    def _wait_idle(self) -> None:
        self._worker.submit(lambda: None).result()

    def _run(self, action: str, *, tick: Optional[int] = None, breakpoints: bool = True,
             reason: Optional[str] = None) -> None:
        """Start ``action`` on the worker; it sends the stop (or the end) when done."""
        self._need_run()
        self._handles.clear()
        self._running.set()
        self._worker.submit(self._act, action, tick, breakpoints, reason)

    def _act(self, action: str, tick: Optional[int], breakpoints: bool, reason: Optional[str]) -> None:
        progress = _Progress(self, len(self.nac.instructions)) if self._progress_events else None
        d = self.service.debugger
        if progress is not None:
            d.on_tick.append(progress.tick)
        try:
            state = self.service.act(action, tick=tick, breakpoints=breakpoints)
            for line in state.get("log") or ():          # the logpoints passed on the way
                self.output(line["text"] + "\n", "console")
            if progress is not None:
                progress.end()
            self._running.clear()
            self._after(state, reason)
        except Exception as e:     # noqa: BLE001 - reported, never fatal
            self._running.clear()
            self.output(f"{action}: {type(e).__name__}: {e}", "stderr")
            self._stopped("exception", f"{action} failed: {e}")
        finally:
            self._running.clear()
            if progress is not None:
                if progress.tick in d.on_tick:
                    d.on_tick.remove(progress.tick)
                progress.end()

    def _after(self, state: dict, reason: Optional[str]) -> None:
        error = state.get("error")
        if error:
            message = f"tick {error.get('tick')}: {error.get('message')}"
            if self._break_on_error:
                self._exception = {"exceptionId": error.get("type") or "KernelError", "description": message,
                                   "breakMode": "always"}
                self._stopped("exception", message)
            else:
                self.output(f"{self.program}: {message}", "stderr")
                self._end(1)
            return
        r = state.get("reason") or {}
        kind = r.get("kind")
        if kind == "end" or (state.get("finished") and kind not in ("breakpoint",)):
            self._finish()
            return
        if kind == "cancelled":
            self._stopped("pause")
        elif kind == "breakpoint":
            ids = r.get("breakpoints") or []
            filters = {b["id"]: b for b in self._bps["exception"]}
            exc = [filters[i] for i in ids if i in filters]
            if exc:
                t = state["tick"]
                op = self.nac.instruction_name(self.nac.instructions[t])
                what = "NaN" if exc[0]["filter"] == "nan" else "Inf"
                message = f"{what} at tick {t} in {op}"
                self._exception = {"exceptionId": what, "description": message, "breakMode": "always",
                                   "details": {"message": message, "typeName": what,
                                               "evaluateName": f"t{t}"}}
                self._stopped("exception", message)
            else:
                self._stopped("breakpoint", hit=[i for i in ids if i not in filters])
        else:
            self._stopped(reason or "step")

    def _stopped(self, reason: str, text: Optional[str] = None, hit: Optional[list] = None) -> None:
        self._handles.clear()
        body = {"reason": reason, "threadId": THREAD_ID, "allThreadsStopped": True}
        if text:
            body["text"] = text
            body["description"] = text
        if hit:
            body["hitBreakpointIds"] = hit
        self.event("stopped", body)

    def _finish(self) -> None:
        outs = self.service.outputs() if self.service is not None and self.service.debugger is not None else []
        from ..format.output_names import output_labels
        for label, arr in zip(output_labels(self.nac, len(outs)), outs):
            self.output(f"{label}: {V.summary(arr)}")
        self._end(0)

    def _end(self, code: Optional[int]) -> None:
        if self._terminated:
            return
        self._terminated = True
        if code is not None:
            self.event("exited", {"exitCode": code})
        self.event("terminated")

    def _step_request(self, request: dict, action: str, *, tick: Optional[int] = None, reason: str = "step",
                      breakpoints: bool = True) -> object:
        self._need_run()
        self._respond(request)
        self._exception = None
        self._run(action, tick=tick, breakpoints=breakpoints, reason=reason)
        return _ANSWERED

    def _req_continue(self, args, request):
        self._need_run()
        self._respond(request, {"allThreadsContinued": True})
        self._exception = None
        self._run("continue")
        return _ANSWERED

    def _req_next(self, args, request):
        return self._step_request(request, "next")

    def _req_stepBack(self, args, request):
        return self._step_request(request, "stepBack")

    def _req_reverseContinue(self, args, request):
        return self._step_request(request, "reverseContinue")

    def _req_stepIn(self, args, request):
        return self._step_request(request, "stepIn")

    def _req_stepOut(self, args, request):
        return self._step_request(request, "stepOut")

    def _req_gotoTargets(self, args, request):
        self._need_run()
        source = _source_arg(args, "gotoTargets")
        line = args.get("line")
        if type(line) is not int:
            raise RequestError("gotoTargets: 'line' must be an integer")
        ticks = self._ticks_for(source, line)
        return {"targets": [{"id": t, "label": f"tick {t}: {self.nac.instruction_name(self.nac.instructions[t])}",
                             "line": line, "instructionPointerReference": str(t)} for t in ticks[:1000]]}

    def _req_goto(self, args, request):
        self._need_run()
        t = args.get("targetId")
        if type(t) is not int or not 0 <= t < len(self.nac.instructions):
            raise RequestError(f"goto: no target {t!r}")
        return self._step_request(request, "runTo", tick=t, reason="goto", breakpoints=False)

    # -- breakpoints ------------------------------------------------------------------------------
    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _req_setBreakpoints(self, args, request):
        source = args.get("source")
        if not isinstance(source, dict):
            raise RequestError("setBreakpoints: 'source' is required")
        wanted = args.get("breakpoints")
        if wanted is None:
            wanted = [{"line": ln} for ln in args.get("lines") or []]
        if not isinstance(wanted, list) or not all(isinstance(b, dict) and type(b.get("line")) is int for b in wanted):
            raise RequestError("setBreakpoints: 'breakpoints' must be a list of {line, condition?, hitCondition?}")
        key = str(source.get("path") or f"ref:{source.get('sourceReference')}")
        entries = []
        for b in wanted:
            entries.append({"id": self._new_id(), "source": source, "line": b["line"],
                            "condition": b.get("condition") or "", "hitCondition": b.get("hitCondition") or "",
                            "logMessage": b.get("logMessage") if isinstance(b.get("logMessage"), str) else ""})
        self._source_bps[key] = entries
        self._bps["source"] = [e for es in self._source_bps.values() for e in es]
        results = self._install()
        return {"breakpoints": [results[e["id"]] for e in entries]}

    def _req_setInstructionBreakpoints(self, args, request):
        wanted = args.get("breakpoints")
        if not isinstance(wanted, list) or not all(isinstance(b, dict) for b in wanted):
            raise RequestError("setInstructionBreakpoints: 'breakpoints' must be a list")
        entries = []
        for b in wanted:
            ref, off = b.get("instructionReference"), b.get("offset", 0)
            try:
                tick = int(str(ref)) + int(off or 0)
            except ValueError:
                tick = None
            entries.append({"id": self._new_id(), "tick": tick, "ref": ref, "condition": b.get("condition") or "",
                            "hitCondition": b.get("hitCondition") or ""})
        self._bps["instruction"] = entries
        results = self._install()
        return {"breakpoints": [results[e["id"]] for e in entries]}

    def _req_setFunctionBreakpoints(self, args, request):
        wanted = args.get("breakpoints")
        if not isinstance(wanted, list) or not all(isinstance(b, dict) and isinstance(b.get("name"), str)
                                                   for b in wanted):
            raise RequestError("setFunctionBreakpoints: 'breakpoints' must be a list of {name}")
        entries = [{"id": self._new_id(), "name": b["name"], "condition": b.get("condition") or "",
                    "hitCondition": b.get("hitCondition") or ""} for b in wanted]
        self._bps["function"] = entries
        results = self._install()
        return {"breakpoints": [results[e["id"]] for e in entries]}

    def _req_setExceptionBreakpoints(self, args, request):
        filters = args.get("filters") or []
        options = args.get("filterOptions") or []
        if not isinstance(filters, list) or not isinstance(options, list):
            raise RequestError("setExceptionBreakpoints: 'filters' must be a list")
        names = [str(f) for f in filters] + [str(o.get("filterId")) for o in options if isinstance(o, dict)]
        known = {f["filter"] for f in EXCEPTION_FILTERS}
        bad = [n for n in names if n not in known]
        if bad:
            raise RequestError(f"setExceptionBreakpoints: unknown filter(s) {', '.join(bad)}; known: nan, inf, error")
        self._break_on_error = "error" in names
        self._bps["exception"] = [{"id": self._new_id(), "filter": n} for n in dict.fromkeys(names) if n != "error"]
        results = self._install()
        return {"breakpoints": [results[e["id"]] for e in self._bps["exception"]]
                + ([{"verified": True}] if "error" in names else [])}

    def _install(self, announce: bool = False) -> dict[int, dict]:
        """Every breakpoint to the service as one list (it replaces them all); the DAP answer per id."""
        specs, answers = [], {}
        for e in self._bps["source"]:
            answer = {"id": e["id"], "line": e["line"], "source": e["source"]}
            if self.nac is None:
                answer.update(verified=False, message="the program is not launched yet")
            else:
                ticks = self._ticks_for(e["source"], e["line"])
                if not ticks:
                    answer.update(verified=False, message=f"no instruction of this model comes from line {e['line']}")
                else:
                    specs.append({"id": e["id"], "kind": "ticks", "ticks": ticks, "value": f"line {e['line']}",
                                  "condition": e["condition"], "hitCondition": e["hitCondition"],
                                  "log": e["logMessage"]})
            answers[e["id"]] = answer
        for e in self._bps["instruction"]:
            answers[e["id"]] = {"id": e["id"], "instructionReference": str(e["ref"])}
            if e["tick"] is None:
                answers[e["id"]].update(verified=False, message=f"{e['ref']!r} is not a tick")
            else:
                specs.append({"id": e["id"], "kind": "tick", "value": str(e["tick"]), "condition": e["condition"],
                              "hitCondition": e["hitCondition"]})
        for e in self._bps["function"]:
            answers[e["id"]] = {"id": e["id"]}
            name = e["name"].strip()
            if name.startswith("param:"):
                specs.append({"id": e["id"], "kind": "param", "value": name[6:].strip(), "condition": e["condition"],
                              "hitCondition": e["hitCondition"]})
            else:
                if self.nac is not None and not any(ch in name for ch in "*?[") and \
                        not any(self.nac.instruction_name(i) == name for i in self.nac.instructions):
                    name += ".*"           # "aten.linear" means every overload of it
                specs.append({"id": e["id"], "kind": "op", "value": name, "condition": e["condition"],
                              "hitCondition": e["hitCondition"]})
        for e in self._bps["exception"]:
            answers[e["id"]] = {"id": e["id"]}
            specs.append({"id": e["id"], "kind": e["filter"], "value": ""})
        if self.service is not None:
            for r in self.service.set_breakpoints(specs):
                a = answers[r["id"]]
                a["verified"] = bool(r["verified"])
                if r["message"]:
                    a["message"] = r["message"]
        for a in answers.values():
            a.setdefault("verified", self.service is not None)
        if announce:
            for a in answers.values():
                self.event("breakpoint", {"reason": "changed", "breakpoint": a})
        return answers

    def _ticks_for(self, source: dict, line: int) -> list[int]:
        """The ticks a source line made: the ticks whose op is on it; else, for a line that calls a
        module or function, the first tick of each run of ticks inside that call."""
        if not isinstance(source, dict):
            return []
        n = len(self.nac.instructions)
        if source.get("sourceReference") == DISASSEMBLY_REF and not source.get("path"):
            return [line - 1] if 0 < line <= n else []
        recorded = self._recorded_file(source)
        if recorded is None or self._smap is None:
            return []
        return line_ticks(self._smap, recorded, line, self._line_now)

    def _recorded_file(self, source: dict) -> Optional[str]:
        """The source map's name for the file an editor gives (by path, or our sourceReference)."""
        ref = source.get("sourceReference")
        if isinstance(ref, int) and ref in self._source_refs and not source.get("path"):
            return self._source_refs[ref]
        path = source.get("path")
        if not isinstance(path, str) or self._smap is None:
            return None
        real = os.path.realpath(path)
        norm = path.replace("\\", "/")
        for f in self._files():
            local = self._locate(f)
            if local is not None and os.path.realpath(local) == real:
                return f
        for f in self._files():
            if norm == f or norm.endswith("/" + f):
                return f
        return None

    def _files(self) -> list[str]:
        seen = dict.fromkeys(e.file for e in self._smap.entries if e.file)
        for e in self._smap.entries:
            for f in e.stack:
                seen.setdefault(f[1])
        return list(seen)

    def _line_now(self, recorded: str, line: Optional[int], code: Optional[str]) -> Optional[int]:
        """A recorded line's number in the local copy of its file as it is now: the file may have
        changed since the compile (another release of a library, the user's edits), and the editor
        shows the file as it is. The recorded number where there is no readable local copy or the
        recorded text is not found near it."""
        local = self._locate(recorded) if line else None
        if local is None or not self._sources.readable(local):
            return line
        found = self._sources.line_now(local, line, code)
        if found != line and local not in self._told_changed:
            # say once why the editor's lines are not the recorded ones (the Studio's Source pane
            # says it in its header)
            self._told_changed.add(local)
            self.output(f"{local} has changed since {os.path.basename(self.program)} was compiled: "
                        "its lines are matched by their recorded text"
                        + ("" if found else f" (line {line} no longer reads {(code or '').strip()!r})"), "console")
        return found or line

    def _locate(self, recorded: str) -> Optional[str]:
        return self._sources.locate(recorded, near=self.program)

    # -- where the run stands ---------------------------------------------------------------------
    def _req_threads(self, args, request):
        return {"threads": [{"id": THREAD_ID, "name": "model"}]}

    def _req_stackTrace(self, args, request):
        d = self._need_run()
        t = d.tick if d.tick >= 0 else d.next_tick
        t = min(t, len(self.nac.instructions) - 1)
        self._frames = self._frames_at(t)
        start, levels = int(args.get("startFrame") or 0), int(args.get("levels") or 0)
        frames = self._frames[start:start + levels] if levels > 0 else self._frames[start:]
        return {"stackFrames": frames, "totalFrames": len(self._frames)}

    def _frames_at(self, t: int) -> list[dict]:
        op = self.nac.instruction_name(self.nac.instructions[t])
        e = self._smap.entry(t) if self._smap is not None else None
        where = f"{e.module_path} ({op})" if e is not None and e.module_path else op
        out = []
        if e is not None and e.file and e.line:
            out.append((where, e.file, self._line_now(e.file, e.line, e.code)))
            outer = list(reversed(e.stack))[1:] if e.stack else []
            out += [(name, file, self._line_now(file, line, code)) for name, file, line, code in outer]
        frames = [{"id": k, "name": name, "source": self._source(file), "line": line, "column": 1,
                   "instructionPointerReference": str(t)} for k, (name, file, line) in enumerate(out)]
        if not frames:
            frames.append({"id": 0, "name": f"tick {t}: {where}", "source": self._disassembly_source(),
                           "line": t + 1, "column": 1, "instructionPointerReference": str(t)})
        return frames

    def _disassembly_source(self) -> dict:
        return {"name": os.path.basename(self.program) + " (disassembly)", "sourceReference": DISASSEMBLY_REF,
                "presentationHint": "deemphasize", "origin": "one line per tick"}

    def _source(self, recorded: str) -> dict:
        local = self._locate(recorded)
        if local is not None:
            return {"name": os.path.basename(recorded), "path": os.path.abspath(local)}
        ref = next((r for r, f in self._source_refs.items() if f == recorded), None)
        if ref is None:
            ref = DISASSEMBLY_REF + 1 + len(self._source_refs)
            self._source_refs[ref] = recorded
        return {"name": os.path.basename(recorded), "sourceReference": ref,
                "origin": "lines recorded at compile time (the file is not on this machine)"}

    def _req_loadedSources(self, args, request):
        """Every source file the model's instructions came from or were called through, as the
        source map names them (VS Code's Loaded Scripts view), and the disassembly."""
        self._need_nac()
        files = self._files() if self._smap is not None else []
        return {"sources": [self._source(f) for f in files] + [self._disassembly_source()]}

    def _req_source(self, args, request):
        self._need_nac()
        source = _source_arg(args, "source")
        ref = args.get("sourceReference") or source.get("sourceReference")
        if type(ref) is not int and ref is not None:
            raise RequestError(f"source: 'sourceReference' must be an integer, not {ref!r}")
        if ref == DISASSEMBLY_REF:
            return {"content": "\n".join(self._disassembly()) + "\n", "mimeType": "text/x-nac-asm"}
        if ref in self._source_refs:
            recorded = self._source_refs[ref]
            lines: dict[int, str] = {}
            for e in self._smap.entries:
                if e.file == recorded and e.line and e.code is not None:
                    lines[e.line] = e.code
                for _, f, ln, code in e.stack:
                    if f == recorded:
                        lines.setdefault(ln, code)
            n = max(lines, default=0)
            return {"content": "\n".join(lines.get(i, "") for i in range(1, n + 1)) + "\n", "mimeType": "text/x-python"}
        path = source.get("path")
        if isinstance(path, str) and path.endswith(".py") and self._recorded_file({"path": path}) is not None:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return {"content": fh.read(), "mimeType": "text/x-python"}
        raise RequestError(f"source: no source {ref!r}")

    def _need_nac(self):
        if self.nac is None:
            raise RequestError("no model is loaded: launch first")
        return self.nac

    def _disassembly(self) -> list[str]:
        if self._lines is None:
            from ..text.disasm import Tables
            from ..text.textops import format_instruction
            t = Tables(self.nac)
            names = {n.index: n.name for n in self.nac.input_names}
            self._lines = [format_instruction(ins, t, names) for ins in self.nac.instructions]
        return self._lines

    def _req_disassemble(self, args, request):
        self._need_nac()
        try:
            base = int(str(args.get("memoryReference")))
        except ValueError:
            raise RequestError(f"disassemble: memoryReference {args.get('memoryReference')!r} is not a tick") from None
        first = base + int(args.get("offset") or 0) + int(args.get("instructionOffset") or 0)
        count = int(args.get("instructionCount") or 0)
        if not 0 <= count <= 100_000:
            raise RequestError("disassemble: instructionCount must be 0..100000")
        lines, n = self._disassembly(), len(self.nac.instructions)
        out = []
        for t in range(first, first + count):
            if not 0 <= t < n:
                out.append({"address": str(t), "instruction": "", "presentationHint": "invalid"})
                continue
            item = {"address": str(t), "instruction": lines[t]}
            e = self._smap.entry(t) if self._smap is not None else None
            if e is not None:
                if e.module_path:
                    item["symbol"] = e.module_path
                if e.file and e.line:
                    item["location"] = self._source(e.file)
                    item["line"] = e.line
            out.append(item)
        return {"instructions": out}

    def _req_exceptionInfo(self, args, request):
        if self._exception is None:
            raise RequestError("exceptionInfo: the run is not stopped at an exception")
        return dict(self._exception)

    # -- variables --------------------------------------------------------------------------------
    def _handle(self, fetch: Callable[[Optional[str], int, int], list]) -> int:
        ref = len(self._handles) + 1
        self._handles[ref] = fetch
        return ref

    def _req_scopes(self, args, request):
        d = self._need_run()
        t = d.tick
        scopes = []
        if t >= 0:
            ins = self.nac.instructions[t]
            scopes.append(self._scope("This tick", len(ins.producers()) + 1, lambda f, s, c: self._this_tick(t),
                                      hint="locals"))
            scopes.append(self._scope("Live values", None, lambda f, s, c: self._live()))
        scopes.append(self._scope("Inputs", len(self._slots), lambda f, s, c: self._inputs(), hint="arguments"))
        params = sorted(self.nac.params.values(), key=lambda p: p.id)
        ref = self._handle(lambda f, s, c: self._params(params, f, s, c))
        scopes.append({"name": "Parameters", "variablesReference": ref, "indexedVariables": len(params),
                       "expensive": True})
        return {"scopes": scopes}

    def _scope(self, name: str, count: Optional[int], fetch, hint: Optional[str] = None) -> dict:
        s = {"name": name, "variablesReference": self._handle(fetch), "expensive": False}
        if count is not None:
            s["namedVariables"] = count
        if hint:
            s["presentationHint"] = hint
        return s

    def _tick_var(self, name: str, tick: int, note: str = "") -> dict:
        d = self.service.debugger
        v = d.value(tick)
        var = self._var(name, v, f"t{tick}", f"t{tick}")
        if note:
            var["value"] += f"  ({note})"
        return var

    def _var(self, name: str, v: Any, evaluate_name: Optional[str], memref: Optional[str]) -> dict:
        var = {"name": name, "value": V.summary(v), "variablesReference": 0}
        if evaluate_name:
            var["evaluateName"] = evaluate_name
        if V.is_tensor(v):
            var["type"] = f"{V.dtype_of(v)}[{', '.join(str(int(x)) for x in v.shape)}]"
            var["variablesReference"] = self._handle(lambda f, s, c: self._tensor_children(v, evaluate_name, f, s, c))
            var["namedVariables"] = 3
            var["indexedVariables"] = V.rows(v)
            if memref:
                var["memoryReference"] = memref
        elif isinstance(v, (tuple, list)) and v:
            var["variablesReference"] = self._handle(
                lambda f, s, c: [self._var(f"[{i}]", x, None, None) for i, x in enumerate(v)])
            var["indexedVariables"] = len(v)
        return var

    def _tensor_children(self, v, evaluate_name, filter_: Optional[str], start: int, count: int) -> list:
        out = []
        if filter_ != "indexed":
            out += [{"name": "shape", "value": str(list(int(x) for x in v.shape)), "variablesReference": 0},
                    {"name": "dtype", "value": V.dtype_of(v), "variablesReference": 0},
                    {"name": "stats", "value": V.stats_text(v), "variablesReference": 0}]
        if filter_ != "named":
            n = V.rows(v)
            stop = min(n, start + (count if count > 0 else V.UNPAGED_LIMIT))
            for i in range(max(start, 0), stop):
                x = V.row(v, i)
                if V.is_tensor(x):
                    out.append(self._var(f"[{i}]", x, None, None))
                else:
                    out.append({"name": f"[{i}]", "value": V.element_text(x), "variablesReference": 0})
        return out

    def _this_tick(self, t: int) -> list:
        ins = self.nac.instructions[t]
        out = [self._tick_var(f"v{p}", p, "argument") for p in ins.producers()]
        out.append(self._tick_var(f"v{t}", t, "result"))
        return out

    def _live(self) -> list:
        out = []
        for entry in self.service.state().get("values", [])[1:]:
            t = entry["tick"]
            where = entry["where"] or "held"
            if entry["available"]:
                out.append(self._tick_var(f"v{t}", t, where))
            else:
                shape = "" if entry["shape"] is None else f"{entry['dtype']}{entry['shape']}"
                out.append({"name": f"v{t}", "value": f"{shape} ({where}; recomputed when expanded)".strip(),
                            "evaluateName": f"t{t}", "variablesReference":
                            self._handle(lambda f, s, c, t=t: [self._tick_var(f"v{t}", t)])})
        return out

    def _inputs(self) -> list:
        d = self.service.debugger
        out = []
        for (tick, name), feed in zip(self._slots, self._feeds):
            label = name or f"input@{tick}"
            if d.tick >= tick:
                out.append(self._tick_var(label, tick))
            elif feed is not None:
                out.append(self._var(label, feed, f"t{tick}", None))
            else:
                out.append({"name": label, "value": "the file's stored constant", "variablesReference": 0})
        return out

    def _params(self, params: list, filter_: Optional[str], start: int, count: int) -> list:
        stop = min(len(params), start + (count if count > 0 else V.UNPAGED_LIMIT))
        out = []
        for p in params[max(start, 0):stop]:
            meta = f"{p.dtype}{list(p.shape)}" if p.meta is not None else "parameter"
            out.append({"name": p.name, "value": f"{meta} (expand to load)", "evaluateName": p.name,
                        "variablesReference": self._handle(lambda f, s, c, p=p: self._param_children(p, f, s, c)),
                        "memoryReference": f"param:{p.name}"})
        return out

    def _param_children(self, p, filter_, start, count) -> list:
        v = self.service.debugger.param_value(p.name)
        return [self._var(p.name, v, p.name, f"param:{p.name}")] if filter_ != "indexed" else []

    def _req_variables(self, args, request):
        self._need_run()
        ref = args.get("variablesReference")
        fetch = self._handles.get(ref) if type(ref) is int else None
        if fetch is None:
            raise RequestError(f"variables: no variables {ref!r} at this stop")
        start, count = args.get("start") or 0, args.get("count") or 0
        if type(start) is not int or type(count) is not int or start < 0 or count < 0:
            raise RequestError("variables: 'start' and 'count' must be non-negative integers")
        filter_ = args.get("filter")
        return {"variables": fetch(filter_ if filter_ in ("named", "indexed") else None, start, count)}

    def _req_setVariable(self, args, request):
        d = self._need_run()
        name, value = args.get("name"), args.get("value")
        labels = [(n or f"input@{t}") for t, n in self._slots]
        if name not in labels:
            raise RequestError(f"setVariable: only an input can be set (the inputs: {', '.join(labels) or 'none'})")
        if d.tick >= 0:
            raise RequestError("setVariable: inputs can be set before the first tick only (restart first)")
        k = labels.index(name)
        feeds = list(self._feeds)          # a new list: the service keeps the old one to compare
        try:
            feeds[k] = self._input_value(name, str(value), feeds[k])
        except CliError as e:               # (the command line's words: --input NAME: ...)
            raise RequestError(f"setVariable: {name}: {str(e).split(': ', 1)[-1]}") from None
        old, self._feeds = self._feeds, feeds
        self._wait_idle()
        try:
            self._start_service()
        except RequestError:
            # a value the file cannot take (another shape, say): the run goes on with the old one
            self._feeds = old
            self._start_service()
            self._install()
            raise
        self._install()
        v = self._feeds[k]
        return {"value": V.summary(v), "type": f"{V.dtype_of(v)}{list(v.shape)}"}

    def _input_value(self, name: str, text: str, old):
        import numpy as np
        from ..cli_inputs import load_npy, shaped_inputs
        text = text.strip()
        if text.endswith(".npy"):
            return load_npy(text)
        try:
            number = float(text)
        except ValueError:
            return shaped_inputs(self.nac, [(name, text)], int(self._launch.get("seed", 0) or 0))[name]
        if old is None:
            raise RequestError(f"setVariable: {name!r} has no shape yet; give SHAPE:DTYPE or an .npy file")
        return np.full(np.shape(old), number, dtype=np.asarray(old).dtype)

    def _req_evaluate(self, args, request):
        d = self._need_run()
        text = args.get("expression")
        if not isinstance(text, str) or not text.strip():
            raise RequestError("evaluate: 'expression' is required")
        from ..runtime.expr import ExprError
        expr = text.strip()           # (v12 and t12 both name tick 12's value in the language)
        try:
            value = d.evaluate(expr)
        except ExprError as e:
            raise RequestError(str(e)) from None
        m = re.fullmatch(r"[tv](\d+)", expr)
        memref = f"t{m.group(1)}" if m else (f"param:{expr}" if self.nac.param_by_name(expr) is not None else None)
        var = self._var(text, value, expr, memref)
        out = {"result": var["value"], "variablesReference": var["variablesReference"]}
        for k in ("type", "namedVariables", "indexedVariables", "memoryReference"):
            if k in var:
                out[k] = var[k]
        return out

    def _req_completions(self, args, request):
        """The debug console's completions: functions, ``x``, the constants, parameter names and
        the values of the tick at hand (``vN``), replacing the name typed before the column."""
        text, column = args.get("text"), args.get("column")
        if not isinstance(text, str) or type(column) is not int:
            raise RequestError("completions: 'text' and 'column' are required")
        d = self.service.debugger if self.service is not None else None
        cursor = column - self._column_base
        start, found = completions(self.service.nac if self.service is not None else None,
                                   d.tick if d is not None else None, text, cursor)
        return {"targets": [{"label": label, "text": label, "type": kind, "start": start + self._column_base,
                             "length": max(0, cursor - start)} for label, kind in found]}

    def _req_readMemory(self, args, request):
        d = self._need_run()
        ref = args.get("memoryReference")
        if not isinstance(ref, str):
            raise RequestError("readMemory: 'memoryReference' is required")
        if ref.startswith("param:"):
            v = d.param_value(ref[6:])
        elif re.fullmatch(r"t\d+", ref):
            v = d.value(int(ref[1:]))
        else:
            raise RequestError(f"readMemory: unknown memory reference {ref!r}")
        if not V.is_tensor(v):
            raise RequestError(f"readMemory: {ref} is not a tensor")
        offset, count = int(args.get("offset") or 0), int(args.get("count") or 0)
        if offset < 0 or count < 0:
            raise RequestError("readMemory: 'offset' and 'count' must be non-negative")
        chunk, size = V.raw_bytes(v, offset, count)
        # past the tensor's end nothing can be read; a request larger than one answer carries
        # gets the first part (the client asks again from where it ends)
        unreadable = max(0, offset + count - max(size, offset)) if offset + len(chunk) >= size else 0
        return {"address": str(offset), "data": base64.b64encode(chunk).decode("ascii"),
                "unreadableBytes": unreadable}


_ANSWERED = object()


class _Progress:
    """DAP's progress events for an action that runs long (a client that said
    ``supportsProgressReporting``): started after :data:`PROGRESS_AFTER_S`, updated at most every
    :data:`PROGRESS_EVERY_S` with the tick reached, ended when the action is."""

    def __init__(self, adapter: Adapter, total: int):
        self.adapter, self.total = adapter, max(total, 1)
        self.began = time.monotonic()
        self.last = 0.0
        self.id: Optional[str] = None

    def tick(self, t: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S or now - self.began < PROGRESS_AFTER_S:
            return
        self.last = now
        pct = min(100.0, 100.0 * (t + 1) / self.total)
        if self.id is None:
            self.id = f"run-{id(self)}"
            self.adapter.event("progressStart", {"progressId": self.id, "title": "Running", "cancellable": False,
                                                 "message": f"tick {t:,} of {self.total:,}", "percentage": pct})
        else:
            self.adapter.event("progressUpdate", {"progressId": self.id, "message": f"tick {t:,} of {self.total:,}",
                                                  "percentage": pct})

    def end(self) -> None:
        if self.id is not None:
            self.adapter.event("progressEnd", {"progressId": self.id})
            self.id = None


#: A run shows progress once it has taken this long, and updates it this often.
PROGRESS_AFTER_S = 0.5
PROGRESS_EVERY_S = 0.25


def _source_arg(args: dict, command: str) -> dict:
    """A request's optional ``source`` (DAP's Source object): {} when absent."""
    source = args.get("source")
    if source is None:
        return {}
    if not isinstance(source, dict):
        raise RequestError(f"{command}: 'source' must be an object, not {source!r}")
    return source
