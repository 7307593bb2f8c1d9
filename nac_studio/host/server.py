"""The engine host's request loop (Qt-free; runs in the host process, ``python -m nac_studio.host``).

Messages are DAP's (``nac_engine.dap.framing``): the Studio sends requests on the host's stdin and
reads responses and events on its stdout. The main thread only reads: it answers ``cancel`` and
``pause`` at once (they must overtake the work they stop) and queues everything else on a *lane*:

* ``debug``: the debugger's requests, one at a time in order (a step must see the breakpoints
  set before it);
* ``view``: quick reads a view waits on to draw (a tensor's window for the heatmap, a page of the
  values table), so they never queue behind a long statistics pass or a layout;
* ``inspect``: a tensor's statistics, asked for by a selection (the Properties pane, the
  inspector), so that clicking a weight never waits behind a file's shape pass (1-3 s on a fresh
  host: the meta kernels' imports), a layout or a simulation;
* ``work``: everything else (layouts, shapes, simulations, sweeps...), one at a time.

Each lane is one thread, so a long job on one never delays the other. A request may carry
``"supersede": KEY``: a queued request with the same key is then answered "superseded" without
running, and a running one is asked to stop (its handler sees ``ctx.cancelled`` at its next
check). Handlers are ``fn(ctx, arguments) -> body``; numpy arrays anywhere in the body cross as
files (``arrays``). A handler's exception becomes a failed response naming it; the host keeps
serving. What cannot be answered (a segfault in a kernel, the memory cap, ``kill -9``) ends the
process, and the Studio reports how it ended.
"""
from __future__ import annotations

import collections
import os
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO, Callable, Optional

from nac_engine.dap.framing import ProtocolError, encode_message, event, read_message, response

from . import PROTOCOL_VERSION
from .arrays import ArrayError, ArrayWriter, decode

#: Longest wait between two progress events of one request (they are dropped in between).
PROGRESS_INTERVAL_S = 0.05


class Cancelled(Exception):
    """Raised inside a handler by ``ctx.check()`` once its request is cancelled or superseded."""


class Context:
    """What a handler gets besides its arguments: cancellation, progress, the host's state."""

    def __init__(self, server: "HostServer", request: dict):
        self.server = server
        self.request = request
        self.seq = request.get("seq", 0)
        self.cancel_event = threading.Event()
        self.why = "cancelled"
        self._last_progress = 0.0

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def check(self) -> None:
        if self.cancel_event.is_set():
            raise Cancelled(self.why)

    def progress(self, done: float, total: float = 1.0, text: Optional[str] = None) -> None:
        """Report progress (throttled) and stop here if the request was cancelled."""
        self.check()
        now = time.monotonic()
        if now - self._last_progress < PROGRESS_INTERVAL_S and done < total:
            return
        self._last_progress = now
        frac = 0.0 if total <= 0 else max(0.0, min(1.0, done / total))
        body = {"progressId": str(self.seq), "percentage": round(100 * frac, 2)}
        if text:
            body["message"] = text
        self.server.send_event("progressUpdate", body)

    def send_event(self, name: str, body: Any = None) -> None:
        self.server.send_event(name, body)

    @property
    def state(self) -> Any:
        return self.server.state


class Handler:
    def __init__(self, fn: Callable[[Context, dict], Any], lane: str = "work"):
        self.fn = fn
        self.lane = lane


class _Lane:
    def __init__(self, server: "HostServer", name: str):
        self.server = server
        self.name = name
        self.queue: collections.deque = collections.deque()
        self.running: Optional[Context] = None
        self.wake = threading.Condition(server.lock)
        self.thread = threading.Thread(target=self._loop, name=f"host-{name}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            with self.wake:
                while not self.queue:
                    self.wake.wait()
                ctx, handler = self.queue.popleft()
                if ctx is None:
                    return
                self.running = ctx
            try:
                self.server.run(ctx, handler)
            finally:
                with self.server.lock:
                    self.running = None


class HostServer:
    """``HostServer(rfile, wfile, handlers, array_dir, state)``; :meth:`serve` returns at EOF."""

    def __init__(self, rfile: BinaryIO, wfile: BinaryIO, handlers: dict[str, Handler], array_dir: str,
                 state: Any = None):
        self.rfile = rfile
        self.wfile = wfile
        self.handlers = handlers
        self.arrays = ArrayWriter(array_dir)
        self.array_dir = array_dir
        self.state = state
        self.lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._seq = 0
        self.lanes = {name: _Lane(self, name) for name in ("debug", "view", "inspect", "work")}

    # -- output ---------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        with self._write_lock:
            self._seq += 1
            return self._seq

    def _send(self, message: dict) -> None:
        data = encode_message(message, allow_nan=True)
        with self._write_lock:
            self.wfile.write(data)
            self.wfile.flush()

    def send_event(self, name: str, body: Any = None) -> None:
        self._send(event(name, self._next_seq(), self.arrays.encode(body)))

    def respond(self, request: dict, body: Any = None, *, success: bool = True,
                message: Optional[str] = None) -> None:
        try:
            encoded = self.arrays.encode(body)
        except Exception as e:   # noqa: BLE001 - an array that cannot cross is the request's failure
            encoded, success, message = None, False, f"{type(e).__name__}: {e}"
        self._send(response(request, self._next_seq(), encoded, success=success, message=message))

    # -- input ----------------------------------------------------------------------------------
    def serve(self) -> None:
        """Read requests until the Studio closes the pipe (or sends ``disconnect``)."""
        while True:
            try:
                msg = read_message(self.rfile)
            except ProtocolError as e:
                print(f"nac host: {e}", file=sys.stderr)
                return
            if msg is None:
                return
            if msg.get("type") != "request":
                continue
            command = msg.get("command")
            if command == "disconnect":
                self.respond(msg)
                return
            if command == "cancel":
                self._cancel((msg.get("arguments") or {}).get("requestId"), "cancelled")
                self.respond(msg)
                continue
            if command == "initialize":
                self.respond(msg, {"protocolVersion": PROTOCOL_VERSION, "pid": os.getpid(),
                                   "arrayDirectory": self.array_dir, "python": sys.version.split()[0],
                                   "commands": sorted(self.handlers)})
                continue
            handler = self.handlers.get(command)
            if handler is None:
                self.respond(msg, success=False, message=f"unknown request {command!r}")
                continue
            if handler.lane == "now":          # answered by the reader itself (pause: must overtake)
                self.run(Context(self, msg), handler)
                continue
            ctx = Context(self, msg)
            key = msg.get("supersede")
            with self.lock:
                if key is not None:
                    self._supersede(key)
                lane = self.lanes[handler.lane]
                lane.queue.append((ctx, handler))
                lane.wake.notify()

    def _supersede(self, key: Any) -> None:
        """Drop queued requests with ``key`` and ask a running one to stop (lock held)."""
        for lane in self.lanes.values():
            kept = collections.deque()
            for ctx, handler in lane.queue:
                if ctx is not None and ctx.request.get("supersede") == key:
                    self.respond(ctx.request, {"cancelled": True}, success=False, message="superseded")
                else:
                    kept.append((ctx, handler))
            lane.queue = kept
            if lane.running is not None and lane.running.request.get("supersede") == key:
                lane.running.why = "superseded"
                lane.running.cancel_event.set()

    def _cancel(self, seq: Any, why: str) -> None:
        with self.lock:
            for lane in self.lanes.values():
                for item in list(lane.queue):
                    ctx = item[0]
                    if ctx is not None and ctx.seq == seq:
                        lane.queue.remove(item)
                        self.respond(ctx.request, {"cancelled": True}, success=False, message=why)
                        return
                if lane.running is not None and lane.running.seq == seq:
                    lane.running.why = why
                    lane.running.cancel_event.set()
                    return

    def run(self, ctx: Context, handler: Handler) -> None:
        """Run one request and answer it, whatever happens inside."""
        if ctx.cancelled:
            self.respond(ctx.request, {"cancelled": True}, success=False, message=ctx.why)
            return
        try:
            arguments = decode(ctx.request.get("arguments") or {}, self.array_dir)
            body = handler.fn(ctx, arguments)
        except ArrayError as e:
            self.respond(ctx.request, success=False, message=f"bad array in the request: {e}")
        except Cancelled as e:
            self.respond(ctx.request, {"cancelled": True}, success=False, message=str(e) or "cancelled")
        except MemoryError:
            self.respond(ctx.request, {"error": {"type": "MemoryError"}}, success=False,
                         message="out of memory in the engine (the host's memory cap)")
        except Exception as e:   # noqa: BLE001 - every failure is the request's, never the host's
            self.respond(ctx.request, {"error": {"type": type(e).__name__, "tick": getattr(e, "tick", None),
                                                 "traceback": traceback.format_exc(limit=8)}},
                         success=False, message=str(e) or type(e).__name__)
        else:
            self.respond(ctx.request, body)

    def close(self) -> None:
        with self.lock:
            for lane in self.lanes.values():
                if lane.running is not None:
                    lane.running.cancel_event.set()
                lane.queue.clear()
                lane.queue.append((None, None))
                lane.wake.notify()
