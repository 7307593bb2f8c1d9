"""``python -P -m nac_studio.host.zygote_main FD``: the zygote itself (see ``zygote.py``). It imports
what a host imports, says so with one byte on the socket FD, then forks a host per request and
reports each one's exit status on the pipe that came with the request."""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

_MAX_REQUEST = 1 << 20


def serve(sock: socket.socket) -> None:
    import importlib
    import warnings
    # Python 3.12 warns on any fork of a process with threads; the zygote's are the BLAS pool's
    # idle workers, which its library re-creates in the child (pthread_atfork), as for every
    # fork-based worker pool (torch's DataLoader, multiprocessing's "fork")
    warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks", category=DeprecationWarning)
    # what a host imports before it can answer a file's first requests (forked hosts find it
    # loaded: without the graph's layout modules a fork's first layout took 240 ms, not 17)
    from .handlers import WARM_IMPORTS
    for name in ("nac_studio.host.server", *WARM_IMPORTS):
        importlib.import_module(name)
    # and what torch loads on its first meta op: without it each forked host's first shape pass
    # (every compiled file's graph edges) spent 1.2 s importing sympy and the meta kernels
    from nac_engine.runtime.shapes import load_meta_kernels
    load_meta_kernels()
    from .__main__ import main as host_main
    children: dict[int, int] = {}         # pid -> the status pipe's write end
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    try:
        sock.sendall(b"\x01")
    except OSError:             # the Studio ended while the imports ran
        return
    while True:
        try:
            ready, _, _ = select.select([sock, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 512)
            _reap(children)
        if sock in ready:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(sock, _MAX_REQUEST, 4)
            except OSError:
                msg, fds = b"", []
            if not msg:
                return                    # the Studio went away (its hosts see their own pipes close)
            if len(fds) != 4:
                for fd in fds:
                    os.close(fd)
                sock.sendall((-1).to_bytes(8, "little", signed=True))
                continue
            want = 4 + int.from_bytes(msg[:4].ljust(4, b"\0"), "little")
            while len(msg) < want:        # a stream socket may hand a long environment over in parts
                more = sock.recv(min(want - len(msg), _MAX_REQUEST))
                if not more:
                    return
                msg += more
            request = json.loads(msg[4:want])
            pid = os.fork()
            if pid == 0:
                _become_host(sock, [wake_r, wake_w, fds[3], *children.values()], fds[:3], request, host_main)
            children[pid] = fds[3]
            for fd in fds[:3]:
                os.close(fd)
            sock.sendall(pid.to_bytes(8, "little", signed=True))


def _reap(children: dict) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = children.pop(pid, None)
        if fd is not None:
            code = os.waitstatus_to_exitcode(status)      # -N for a signal, as Popen reports it
            try:
                os.write(fd, code.to_bytes(8, "little", signed=True))
            except OSError:     # the Studio no longer waits for this host (it closed its end)
                pass
            os.close(fd)


def _become_host(sock, zygote_fds: list, fds: list, request: dict, host_main) -> None:
    """In the forked child: the zygote's own descriptors and signal set-up go, the passed ones
    become stdin/stdout/stderr, and the host runs as ``python -m nac_studio.host`` would."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in zygote_fds:         # a sibling's status pipe held here would hide its end
            os.close(fd)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        code = host_main(request["argv"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:       # noqa: BLE001 - the host's own report, then the child's end
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code or 0)


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
