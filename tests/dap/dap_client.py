"""A small DAP client for the tests: runs ``nac dap`` as a child process and speaks the base
protocol to it with the engine's own framing (so the framing is tested from both ends)."""
from __future__ import annotations

import queue
import subprocess
import sys
import threading
from typing import Optional

from nac_engine.dap.framing import ProtocolError, encode_message, read_message

TIMEOUT = 120.0


class DapClient:
    def __init__(self, *argv: str, cwd: Optional[str] = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "nac_engine.cli", "dap", *argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
        self.seq = 0
        self.responses: dict[int, queue.Queue] = {}
        self.events: queue.Queue = queue.Queue()
        self.received: list[dict] = []
        self.protocol_errors: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                msg = read_message(self.proc.stdout)
            except ProtocolError as e:
                self.protocol_errors.append(str(e))
                return
            if msg is None:
                self.events.put(None)
                return
            self.received.append(msg)
            if msg.get("type") == "response":
                self.responses.setdefault(msg["request_seq"], queue.Queue()).put(msg)
            else:
                self.events.put(msg)

    def send(self, command: str, arguments: Optional[dict] = None) -> int:
        self.seq += 1
        msg = {"seq": self.seq, "type": "request", "command": command}
        if arguments is not None:
            msg["arguments"] = arguments
        self.responses.setdefault(self.seq, queue.Queue())
        self.proc.stdin.write(encode_message(msg))
        self.proc.stdin.flush()
        return self.seq

    def response(self, seq: int, timeout: float = TIMEOUT) -> dict:
        return self.responses.setdefault(seq, queue.Queue()).get(timeout=timeout)

    def request(self, command: str, arguments: Optional[dict] = None, *, ok: bool = True) -> dict:
        r = self.response(self.send(command, arguments))
        if ok:
            assert r["success"], f"{command} failed: {r.get('message')}"
        return r

    def wait_event(self, name: str, timeout: float = TIMEOUT) -> dict:
        while True:
            msg = self.events.get(timeout=timeout)
            if msg is None:
                raise EOFError(f"the adapter ended before a {name!r} event")
            if msg.get("event") == name:
                return msg

    def start(self, launch: dict, *, breakpoints: Optional[dict] = None, exceptions: Optional[list] = None,
              functions: Optional[list] = None) -> dict:
        """initialize, launch, configure, configurationDone; the launch response."""
        self.request("initialize", {"adapterID": "nac", "linesStartAt1": True, "columnsStartAt1": True})
        launched = self.request("launch", launch, ok=False)
        if not launched["success"]:
            return launched
        self.wait_event("initialized")
        for path, lines in (breakpoints or {}).items():
            self.request("setBreakpoints", {"source": {"path": path}, "breakpoints": [{"line": ln} for ln in lines]})
        if exceptions is not None:
            self.request("setExceptionBreakpoints", {"filters": exceptions})
        if functions is not None:
            self.request("setFunctionBreakpoints", {"breakpoints": [{"name": n} for n in functions]})
        self.request("configurationDone")
        return launched

    def stopped(self, timeout: float = TIMEOUT) -> dict:
        return self.wait_event("stopped", timeout)["body"]

    def top(self) -> dict:
        return self.request("stackTrace", {"threadId": 1})["body"]["stackFrames"][0]

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.request("disconnect", {})
        except Exception:
            pass
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
