"""A warm parent for engine hosts, the window's side: a process that has imported torch once and
forks a host per request (its own side: ``zygote_main.py``).

Importing torch and the engine costs a host ~1.8 s of CPU. A Studio process that has needed a
second host (Restart after a crash, another window, a debug session's own host) will need more:
once that host has answered a real request, this zygote is started beside it, does the imports
once more and sits idle. Every later host is a fork of it, ready in milliseconds and sharing the
imported pages copy-on-write. A one-window session never starts one.

Why not ``multiprocessing``'s forkserver: its children re-import the parent's ``__main__``
(the Studio's entry point, which imports Qt into the host), and it cannot hand a child the
stdin/stdout/stderr a host speaks on. What is used instead is the same mechanism, small:
file descriptors passed over a Unix socket (``socket.send_fds``), ``os.fork``, and ``waitpid``
in the zygote, which writes each child's exit status to a pipe the Studio holds, so a host
killed by a signal is reported as precisely as a direct child ("killed by signal 9").

The zygote never starts a thread of its own and never runs a kernel, so nothing that a fork
cannot carry (a lock held by another thread, an OpenMP pool) exists when it forks.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import weakref
from typing import Optional


# -- the Studio's side -----------------------------------------------------------------------------
class ForkedProcess:
    """What :class:`~.connection.HostConnection` uses of a ``subprocess.Popen``, for a host forked
    by the zygote (not the Studio's child: its exit status comes through ``status``)."""

    def __init__(self, pid: int, stdin, stdout, status_fd: int):
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: Optional[int] = None
        self._status = status_fd
        self._lock = threading.Lock()      # the reader thread and shutdown() both wait
        # closed with this object, not on settling: a waiter on another thread may be in select()
        weakref.finalize(self, os.close, status_fd)

    def poll(self) -> Optional[int]:
        return self._settle(0)

    def wait(self, timeout: Optional[float] = None) -> int:
        code = self._settle(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"engine host {self.pid}", timeout)
        return code

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _settle(self, timeout: Optional[float]) -> Optional[int]:
        if self.returncode is not None:
            return self.returncode
        ready = _readable(self._status, timeout)
        with self._lock:
            if not ready or self.returncode is not None:
                return self.returncode
            text = os.read(self._status, 8)
            # 8 bytes from the zygote's waitpid; nothing when the zygote itself ended first (the
            # host then outlives it unobserved)
            self.returncode = int.from_bytes(text, "little", signed=True) if len(text) == 8 else 255
            return self.returncode


class Zygote:
    """The Studio process's zygote (one, shared by its windows): :meth:`warm` starts it, and
    :meth:`fork` gives a host once it has finished its imports (None before, or after it died)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None
        self._sock: Optional[socket.socket] = None
        self._ready = False
        self._hosts = 0         # hosts asked for (forked or not)

    def warm(self, env: dict) -> None:
        """Start the zygote in the background, once a host has done its imports. A process
        that needed a second host (a restart, another window) will need more; a one-window
        session never pays for a zygote. No-op while one runs."""
        with self._lock:
            if self._hosts < 2 or (self._proc is not None and self._proc.poll() is None):
                return
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self._proc = subprocess.Popen([sys.executable, "-P", "-m", "nac_studio.host.zygote_main", str(theirs.fileno())],
                                          pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, env=env, close_fds=True)
            theirs.close()
            self._sock, self._ready = ours, False

    def fork(self, argv: list, env: dict, log_fd: int) -> Optional[ForkedProcess]:
        """A host forked with ``argv`` (``python -m nac_studio.host``'s) and ``env``; None when no
        warm zygote answers at once (the caller then starts the host as a child)."""
        with self._lock:
            self._hosts += 1
            if self._sock is None or not self._is_ready():
                return None
            stdin_r, stdin_w = os.pipe()
            stdout_r, stdout_w = os.pipe()
            status_r, status_w = os.pipe()
            try:
                body = json.dumps({"argv": argv, "env": env}).encode()
                socket.send_fds(self._sock, [len(body).to_bytes(4, "little") + body],
                                [stdin_r, stdout_w, log_fd, status_w])
                reply = _recv_exactly(self._sock, 8)
            except OSError:
                reply = b""
            finally:
                for fd in (stdin_r, stdout_w, status_w):
                    os.close(fd)
            pid = int.from_bytes(reply, "little", signed=True) if len(reply) == 8 else -1
            if pid <= 0:
                for fd in (stdin_w, stdout_r, status_r):
                    os.close(fd)
                self._forget()
                return None
            return ForkedProcess(pid, os.fdopen(stdin_w, "wb", buffering=0),
                                 os.fdopen(stdout_r, "rb", buffering=1 << 16), status_r)

    def _is_ready(self) -> bool:
        """The zygote writes one byte when its imports are done."""
        if not self._ready:
            ready = _readable(self._sock.fileno(), 0)
            if not ready or _recv_exactly(self._sock, 1) != b"\x01":
                if ready:            # it ended during its imports
                    self._forget()
                return False
            self._ready = True
        return True

    def _forget(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._ready = None, False

    def stop(self) -> None:
        with self._lock:
            self._forget()        # EOF on its socket ends it; hosts it forked carry on
            if self._proc is not None:
                try:
                    self._proc.wait(2)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                self._proc = None


def _readable(fd: int, timeout: Optional[float]) -> bool:
    """``poll``, not ``select``: a window with many files open may hold descriptors past 1024."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else timeout * 1000))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


ZYGOTE = Zygote()
