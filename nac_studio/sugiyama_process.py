"""igraph's Sugiyama layout in a helper process, for graphs big enough to stall the UI.

Why a process: python-igraph keeps the GIL for the whole C call, and on a 2,314-node graph
(the 48-layer model with its blocks expanded) ``layout_sugiyama`` runs 80-110 ms; the UI
thread cannot run one line of Python meanwhile, so every expand or collapse froze the
window for that long whatever the UI itself did. In a child process the call holds no
lock of ours: the layout worker thread waits on a pipe (without the GIL) and the UI runs.

The pipe carries only numpy arrays in ``.npy`` form, read with ``allow_pickle=False``: no
pickle either way. The child is started on first use and kept for the next layouts (an
expand-all then collapse costs one start, ~0.2 s, paid by the worker thread, not the UI).
If it cannot be started or dies, :func:`sugiyama` computes in-process instead: a helper
process is a way to keep the UI fluid, never a reason for a layout to fail.

Run as a script, this module is the child: ``python sugiyama_process.py`` serves requests
on stdin/stdout until stdin closes.
"""
from __future__ import annotations

import atexit
import io
import subprocess
import sys
import threading
from typing import BinaryIO

import numpy as np

#: Vertices + edges from which a layout goes to the helper process; below, igraph's call
#: takes a few milliseconds and a round trip through the pipe is not worth it.
PROCESS_FROM = 600
#: Largest array message read from the pipe (a 150k-item layout is a few MB).
MAX_MESSAGE = 1 << 30


def _write(stream: BinaryIO, *arrays: np.ndarray) -> None:
    # each array as its .npy bytes behind an 8-byte length: numpy's own reader and writer
    # want a seekable file, a pipe is not one
    for a in arrays:
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.ascontiguousarray(a), allow_pickle=False)
        data = buf.getvalue()
        stream.write(len(data).to_bytes(8, "little"))
        stream.write(data)
    stream.flush()


def _read(stream: BinaryIO) -> np.ndarray:
    """One array from :func:`_write`; ``EOFError`` at the end of the stream."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("stream closed")
    size = int.from_bytes(head, "little")
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size:,} bytes")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("stream closed mid-message")
    return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)


def compute(n: int, edges: np.ndarray, layers: np.ndarray, maxiter: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """igraph's Sugiyama in this process: vertex coordinates (n×2), and each edge's bend
    points as one (k×2) array of all points plus per-edge counts."""
    import igraph
    g = igraph.Graph(n=n, edges=edges.tolist(), directed=True)
    lay = g.layout_sugiyama(layers=layers.tolist(), hgap=1, vgap=1, maxiter=maxiter)
    coords = np.asarray(lay.coords, dtype=np.float64).reshape(-1, 2)[:n]
    routing = lay.edge_routing
    counts = np.fromiter((len(r) for r in routing), dtype=np.int64, count=len(routing))
    points = np.asarray([p[:2] for r in routing for p in r], dtype=np.float64).reshape(-1, 2)
    return coords, points, counts


class _Helper:
    """The child process and a lock: one request at a time (layouts are rare)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.broken = False

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            # -P: this folder is not put on the child's path (its modules would shadow others)
            self.proc = subprocess.Popen([sys.executable, "-P", __file__], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return self.proc

    def run(self, n: int, edges: np.ndarray, layers: np.ndarray, maxiter: int):
        with self.lock:
            proc = self._start()
            _write(proc.stdin, np.array([n, maxiter], dtype=np.int64), edges.astype(np.int64).reshape(-1, 2),
                   layers.astype(np.int64))
            coords, points, counts = _read(proc.stdout), _read(proc.stdout), _read(proc.stdout)
        if coords.shape != (n, 2) or counts.shape != (len(edges),) or len(points) != int(counts.sum()):
            raise ValueError("helper process answered arrays of the wrong shape")
        return coords, points, counts

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.stdin.close()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()


_helper = _Helper()
atexit.register(_helper.stop)


def sugiyama(n: int, edges: np.ndarray, layers: np.ndarray, maxiter: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`compute`, in the helper process when the graph is big enough to matter."""
    if n + len(edges) < PROCESS_FROM or _helper.broken:
        return compute(n, edges, layers, maxiter)
    try:
        return _helper.run(n, edges, layers, maxiter)
    except (OSError, ValueError, EOFError):
        _helper.broken = True      # no second try per session: compute here from now on
        _helper.stop()
        return compute(n, edges, layers, maxiter)


def _serve() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            head = _read(stdin)
        except EOFError:        # stdin closed: the Studio is done with us
            return
        edges, layers = _read(stdin), _read(stdin)
        _write(stdout, *compute(int(head[0]), edges, layers, int(head[1])))


if __name__ == "__main__":
    _serve()
