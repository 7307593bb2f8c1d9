"""``nac dap``: the adapter on standard input/output, or on a TCP port of 127.0.0.1.

The protocol stream carries protocol messages only: nothing else is printed to it (a kernel's
warning goes to standard error, an adapter fault becomes an ``output`` event). A stream that is
not DAP (a bad header, a bad length, a body that is not JSON) cannot be resynchronised: the
adapter says why on standard error and ends with status 2.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
from typing import BinaryIO

from .adapter import Adapter
from .framing import ProtocolError, encode_message, read_message


def serve(reader: BinaryIO, writer: BinaryIO) -> int:
    """Run one debug session over a byte stream pair; the exit status."""
    lock = threading.Lock()

    def send(message: dict) -> None:
        data = encode_message(message)
        with lock:
            try:
                writer.write(data)
                writer.flush()
            except (BrokenPipeError, ConnectionError, ValueError):
                pass                 # the client has gone; the reader sees the end next

    adapter = Adapter(send)
    status = 0
    try:
        while not adapter.closed.is_set():
            try:
                message = read_message(reader)
            except ProtocolError as e:
                print(f"nac dap: {e}", file=sys.stderr)
                status = 2
                break
            except (ConnectionError, OSError):
                break
            if message is None:
                break
            adapter.handle(message)
    finally:
        adapter.shutdown()
    return status


def serve_stdio() -> int:
    # The protocol owns file descriptor 1: anything else printing there (a library's print)
    # would corrupt it, so stdout is pointed at stderr and the protocol writes to a private dup.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with os.fdopen(out_fd, "wb", buffering=0) as writer:
        return serve(sys.stdin.buffer, writer)


def serve_tcp(port: int, *, once: bool = False) -> int:
    """Listen on 127.0.0.1:``port``; one debug session per connection, one at a time."""
    with socket.create_server(("127.0.0.1", port)) as server:
        print(f"nac dap: listening on 127.0.0.1:{server.getsockname()[1]}", file=sys.stderr, flush=True)
        while True:
            conn, _ = server.accept()
            with conn, conn.makefile("rb") as reader, conn.makefile("wb") as writer:
                serve(reader, writer)
            if once:
                return 0
