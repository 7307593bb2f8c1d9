"""`nac` commands run in a process of their own, as a user runs them, without paying torch's
import (~2 s) for each: one server per pytest worker imports the CLI once and forks a child per
command. The child takes the command's working directory, stdout and stderr (pipes read here),
runs ``nac_engine.cli.main`` and exits with its code, so a test sees what ``python -m
nac_engine.cli ...`` prints and returns. A command with its own environment runs as a real
``python -m nac_engine.cli`` (the server's imports were made under the test run's environment).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import Optional

_SERVER = r"""
import json, os, signal, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
import torch, nac_engine.cli                  # what every command imports
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
sock.sendall(b"\x01")
while True:
    msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
    if not msg:
        break
    if os.fork():
        for fd in fds:
            os.close(fd)
        continue
    sock.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    out, err, status = fds
    os.write(status, os.getpid().to_bytes(8, "little"))
    os.dup2(out, 1); os.dup2(err, 2)
    null = os.open(os.devnull, os.O_RDONLY); os.dup2(null, 0)
    req = json.loads(msg)
    os.chdir(req["cwd"])
    code = 1
    try:
        code = nac_engine.cli.main(req["argv"])
    except SystemExit as e:                    # argparse's usage errors, --help, --version
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os.write(status, int(code).to_bytes(8, "little", signed=True))
        os._exit(int(code) & 0xFF)
"""

_lock = threading.RLock()
_server: Optional[tuple] = None      # (process, socket)


def _connection() -> socket.socket:
    global _server
    with _lock:
        if _server is not None and _server[0].poll() is None:
            return _server[1]
        mine, theirs = socket.socketpair()
        proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                stdin=subprocess.DEVNULL)
        theirs.close()
        if mine.recv(1) != b"\x01":
            raise RuntimeError("the CLI fork server did not start")
        _server = (proc, mine)
        return mine


def run_cli(argv, cwd=None, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m nac_engine.cli *argv`` in ``cwd``: returncode, stdout and stderr (text)."""
    argv = [str(a) for a in argv]
    if env is not None:
        return subprocess.run([sys.executable, "-m", "nac_engine.cli", *argv], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=timeout)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()
    try:
        with _lock:
            socket.send_fds(_connection(), [json.dumps({"argv": argv, "cwd": os.fspath(cwd or os.getcwd())})
                                            .encode()], [out_w, err_w, st_w])
    finally:
        for fd in (out_w, err_w, st_w):
            os.close(fd)
    chunks: dict = {out_r: [], err_r: [], st_r: []}

    def drain(fd):
        while True:
            data = os.read(fd, 1 << 16)
            if not data:
                break
            chunks[fd].append(data)
    readers = [threading.Thread(target=drain, args=(fd,), daemon=True) for fd in chunks]
    for t in readers:
        t.start()
    for t in readers:
        t.join(timeout)
    status = b"".join(chunks[st_r])
    if any(t.is_alive() for t in readers):
        if len(status) >= 8:
            os.kill(int.from_bytes(status[:8], "little"), signal.SIGKILL)
        raise subprocess.TimeoutExpired(["nac", *argv], timeout)
    for fd in chunks:
        os.close(fd)
    code = int.from_bytes(status[8:16], "little", signed=True) if len(status) >= 16 else -signal.SIGKILL
    return subprocess.CompletedProcess(["nac", *argv], code, b"".join(chunks[out_r]).decode(),
                                       b"".join(chunks[err_r]).decode())
