"""A connection to the engine host process, without Qt: start it, send requests, settle futures.

The Studio's window wraps it in :class:`~nac_studio.host.client.EngineHost` (Qt signals on the UI
thread); Qt-free code (the debug session, headless tests) uses it directly. A reader thread
parses the host's messages, reads array files into memory (``arrays``) and settles each request's
``future`` at once, then calls ``on_message`` (still on the reader thread) so a wrapper can hand
the message on. When the host ends, every open request fails with :class:`EngineStopped` saying
how (a signal, an exit status, its last words on stderr), and ``on_stopped`` is called.
"""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import traceback
from concurrent.futures import Future, InvalidStateError
from typing import Any, Callable, Optional

from nac_engine.dap.framing import ProtocolError, encode_message, read_message

from . import PROTOCOL_VERSION
from .arrays import ArrayError, ArrayWriter, decode, remove_directory, shared_directory
from .zygote import ZYGOTE


class EngineStopped(RuntimeError):
    """The engine host ended before answering (``str()`` says how: signal, exit code)."""


class HostError(RuntimeError):
    """A request failed inside the host: ``type`` is the engine's exception class name."""

    def __init__(self, message: str, body: Optional[dict] = None):
        super().__init__(message)
        err = (body or {}).get("error") or {}
        self.type = err.get("type", "")
        self.tick = err.get("tick")
        self.traceback = err.get("traceback", "")


class RequestCancelled(Exception):
    """The request was cancelled or superseded before it finished."""


class Request:
    """One request in flight: ``future`` settles with the response body (or an exception)."""

    def __init__(self, connection: "HostConnection", seq: int, command: str):
        self.connection = connection
        self.seq = seq
        self.command = command
        self.future: Future = Future()
        self.on_progress: Optional[Callable[[float, str], None]] = None   # reader thread
        self.cancel_requested = False
        self.convert: Optional[Callable[[Any], Any]] = None

    def cancel(self) -> None:
        if not self.future.done():
            self.cancel_requested = True
            self.connection.send("cancel", {"requestId": self.seq})

    def abandon(self, reason: str) -> None:
        """Stop waiting for it: cancelled in the host, and settled here now, so a worker thread
        blocked on it goes on (and lets go of what it holds) whenever the host answers."""
        if not self.future.done():
            self.cancel()
            self.connection._settle(self, error=RequestCancelled(reason))


def describe_exit(returncode: Optional[int]) -> str:
    if returncode is None:
        return "engine stopped: it no longer answers"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        why = ""
        if name == "SIGBUS":     # what a mapped file cut short by another program raises on a read
            why = " — a file it had mapped was probably truncated on disk; reload it"
        return f"engine stopped: killed by signal {-returncode} ({name}){why}"
    if returncode == 0:
        return "engine stopped"
    return f"engine stopped: exit status {returncode}"


class HostConnection:
    """``HostConnection(memory_cap=None, env=None)``; the process starts on the first request."""

    def __init__(self, memory_cap: Optional[int] = None, env: Optional[dict] = None):
        self.memory_cap = memory_cap
        self.env = env
        self.proc: Optional[subprocess.Popen] = None
        self.array_dir: Optional[str] = None
        self.last_exit = ""
        self.exit_tick: Optional[int] = None     # where a run was when the host died (last_tick then)
        #: called on the reader thread: every message after its request's future settled
        self.on_message: Optional[Callable[[dict], None]] = None
        #: called on the reader thread when the host ended by itself (not by :meth:`shutdown`)
        self.on_stopped: Optional[Callable[[str], None]] = None
        #: more callables for every event (reader thread): a remote debugger hears its run's progress
        self.listeners: list[Callable[[dict], None]] = []
        self.pending: dict[int, Request] = {}
        self._seq = itertools.count(1)
        self._lock = threading.RLock()
        self._reader: Optional[threading.Thread] = None
        self._generation = 0
        self._closing = False
        self._shut = False           # shut down on purpose: no request starts it again (start() does)
        self._log = None
        self._env: dict = {}
        self._warm_zygote = False     # on this host's first real answer (its imports are done)
        #: code that registers custom operators, imported by every host this connection starts
        #: (a restarted host needs it before a simulation or a layout, not only before a run)
        self.operator_code: list[str] = []

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Start the host process (no-op while it runs); returns at once."""
        with self._lock:
            if self.alive:
                return
            self._closing = False
            self._shut = False
            self._generation += 1
            if self.array_dir:                 # a host that died: its directory (the new one replaces it)
                remove_directory(self.array_dir)
            self.array_dir = shared_directory()
            self._writer = ArrayWriter(self.array_dir, prefix="s")     # the Studio's arrays (inputs)
            # -P: the working directory is not put on sys.path (a file there named like a module
            # must not be imported in its place)
            cmd = [sys.executable, "-P", "-m", "nac_studio.host", "--arrays", self.array_dir]
            if self.memory_cap is not None:
                cmd += ["--memory-cap", str(int(self.memory_cap))]
            env = dict(os.environ if self.env is None else self.env)
            env.pop("QT_QPA_PLATFORM", None)
            self._log = open(os.path.join(self.array_dir, "host.log"), "wb")
            self._env, self._warm_zygote = env, True
            self.proc = ZYGOTE.fork(cmd[4:], env, self._log.fileno()) or subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env, close_fds=True)
            self._reader = threading.Thread(target=self._read_loop, args=(self.proc, self._generation),
                                            name="engine-host-reader", daemon=True)
            self._reader.start()
            init = self._request("initialize", {"adapterID": "nac-studio", "protocolVersion": PROTOCOL_VERSION})
            for path in self.operator_code:     # one each: a file moved away does not keep the others out
                self._request("nac/importOperatorCode", {"imports": [path]})
        init.future.add_done_callback(self._check_version)

    def import_operator_code(self, paths: list[str]) -> Request:
        """Import ``paths`` in the host now, and in every host started after this one."""
        with self._lock:
            for path in paths:
                if path not in self.operator_code:
                    self.operator_code.append(path)
            return self.request("nac/importOperatorCode", {"imports": list(paths)})

    def _check_version(self, future: Future) -> None:
        if future.exception() is not None:
            return
        body = future.result()
        if not isinstance(body, dict) or body.get("protocolVersion") != PROTOCOL_VERSION:
            self.last_exit = f"the engine host speaks protocol {body.get('protocolVersion')!r}, not {PROTOCOL_VERSION}"
            threading.Thread(target=self.shutdown, daemon=True).start()

    def restart(self) -> None:
        self.shutdown()
        self.start()

    def shutdown(self, timeout: float = 2.0) -> None:
        """End the host: ``disconnect``, then SIGKILL if it is still there after ``timeout``."""
        with self._lock:
            proc, self._closing, self._shut = self.proc, True, True
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.stdin.write(encode_message({"seq": 0, "type": "request", "command": "disconnect"}))
                proc.stdin.flush()
                proc.stdin.close()
            except (OSError, ValueError):
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout)
        self._fail_all(EngineStopped(self.last_exit or "the engine host was shut down"))
        with self._lock:
            if self.proc is proc:
                self.proc = None
                if self._log is not None:
                    self._log.close()
                remove_directory(self.array_dir or "")
                self.array_dir = None

    # -- requests ---------------------------------------------------------------------------------
    def request(self, command: str, arguments: Optional[dict] = None, *, supersede: Any = None,
                convert: Optional[Callable[[Any], Any]] = None) -> Request:
        """Send a request (starting the host if it is not running, unless it was shut down on
        purpose: a late request of a closed window must not start one). ``convert(body)``: what
        the future holds instead of the body, made on the reader thread (off the UI thread)."""
        with self._lock:
            if not self.alive and not self._shut:
                self.start()
            return self._request(command, arguments, supersede, convert)

    def _request(self, command: str, arguments: Optional[dict] = None, supersede: Any = None,
                 convert: Optional[Callable[[Any], Any]] = None) -> Request:
        req = Request(self, next(self._seq), command)
        req.convert = convert
        self.pending[req.seq] = req
        try:
            arguments = self._writer.encode(arguments or {})
        except (OSError, TypeError) as e:
            self._settle(req, error=HostError(f"cannot hand the arguments to the engine host: {e}"))
            return req
        message = {"seq": req.seq, "type": "request", "command": command, "arguments": arguments}
        if supersede is not None:
            message["supersede"] = supersede
        if not self._write(message):
            self._settle(req, error=EngineStopped(self.last_exit or "the engine host is not running"))
        return req

    def call(self, command: str, arguments: Optional[dict] = None, timeout: Optional[float] = None) -> Any:
        """Send a request and wait for its body. Never on a UI thread."""
        return self.request(command, arguments).future.result(timeout)

    def send(self, command: str, arguments: Optional[dict] = None) -> None:
        """A request whose answer nobody waits for (cancel, pause)."""
        self._write({"seq": next(self._seq), "type": "request", "command": command, "arguments": arguments or {}})

    def _write(self, message: dict) -> bool:
        data = encode_message(message, allow_nan=True)
        with self._lock:
            proc = self.proc
            if proc is None or proc.poll() is not None:
                return False
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (OSError, ValueError):
                return False
        return True

    # -- incoming ---------------------------------------------------------------------------------
    def _read_loop(self, proc: subprocess.Popen, generation: int) -> None:
        while True:
            try:
                msg = read_message(proc.stdout)
            except (ProtocolError, OSError, ValueError) as e:
                print(f"nac-studio: engine host stream: {e}", file=sys.stderr)
                msg = None
            if msg is None:
                break
            try:
                if msg.get("body") is not None and self.array_dir:
                    msg["body"] = decode(msg["body"], self.array_dir)
            except ArrayError as e:
                msg = {**msg, "success": False, "message": f"bad array from the engine host: {e}", "body": None}
            if msg.get("type") == "response":
                if self._warm_zygote and msg.get("command") != "initialize":
                    self._warm_zygote = False
                    ZYGOTE.warm(self._env)
                req = self.pending.pop(msg.get("request_seq"), None)
                if req is not None:
                    self._settle_from(req, msg)
                    msg["_request"] = req
            elif msg.get("type") == "event" and msg.get("event") == "progressUpdate":
                body = msg.get("body") or {}
                try:
                    req = self.pending.get(int(body.get("progressId", 0)))
                except (TypeError, ValueError):
                    req = None
                if req is not None and req.on_progress is not None:
                    _deliver(req.on_progress, float(body.get("percentage", 0)) / 100.0,
                             str(body.get("message") or ""))
                msg["_request"] = req
            if self.on_message is not None:
                _deliver(self.on_message, msg)
            if msg.get("type") == "event":
                for fn in list(self.listeners):
                    _deliver(fn, msg)
            # while the next message is awaited, this one (its request, with the callbacks that
            # hold a debug session and its document) and the last listener are not kept alive
            msg = req = fn = None
        try:
            code = proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if generation == self._generation and not self._closing:
            self.exit_tick = self.last_tick()
            self.last_exit = describe_exit(code) + self._log_tail()
            self._fail_all(EngineStopped(self.last_exit))
            if self.on_stopped is not None:
                self.on_stopped(self.last_exit)

    def last_tick(self) -> Optional[int]:
        """The tick a run in the host was executing when it last wrote one (the host writes it at
        every instruction to a file that outlives it); None when no run was under way."""
        try:
            with open(os.path.join(self.array_dir or "", "progress.bin"), "rb") as f:
                tick = int.from_bytes(f.read(8), sys.byteorder, signed=True)
        except (OSError, ValueError):
            return None
        return tick if tick >= 0 else None

    def _log_tail(self) -> str:
        """The last line the host wrote to stderr, when it said something before it ended."""
        try:
            with open(os.path.join(self.array_dir or "", "host.log"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 2000))
                lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return f" ({lines[-1].strip()[:200]})" if lines else ""

    def _settle_from(self, req: Request, msg: dict) -> None:
        body = msg.get("body")
        if msg.get("success"):
            if req.convert is not None:
                try:
                    body = req.convert(body)
                except Exception as e:     # noqa: BLE001 - a body that does not convert fails its request
                    self._settle(req, error=HostError(f"the engine host's answer to {req.command} did not "
                                                      f"convert: {type(e).__name__}: {e}"))
                    return
            self._settle(req, body=body)
        elif isinstance(body, dict) and body.get("cancelled"):
            self._settle(req, error=RequestCancelled(msg.get("message") or "cancelled"))
        else:
            self._settle(req, error=HostError(msg.get("message") or "the engine host refused the request", body))

    def _settle(self, req: Request, body: Any = None, error: Optional[BaseException] = None) -> None:
        self.pending.pop(req.seq, None)
        if req.future.done():
            return
        try:        # (abandon() on another thread may settle it first)
            if error is not None:
                req.future.set_exception(error)
            else:
                req.future.set_result(body)
        except InvalidStateError:
            pass

    def _fail_all(self, error: BaseException) -> None:
        for req in list(self.pending.values()):
            self._settle(req, error=error)
            if self.on_message is not None:
                self.on_message({"type": "_failed", "_request": req})


def _deliver(callback, *args) -> None:
    """Call a receiver from the reader thread. Its error is its own: it is printed, and the reader
    goes on (a progress callback of a superseded task whose Qt object was already deleted raised
    here and ended the thread, after which no answer from the host ever arrived)."""
    try:
        callback(*args)
    except Exception:                        # noqa: BLE001 - whatever a receiver does wrong
        traceback.print_exc(file=sys.stderr)
