"""``python -m nac_studio.host --arrays DIR [--memory-cap BYTES]``: the engine host process.

It speaks on the stdin/stdout it was started with, and on nothing else: fd 1 is pointed at
stderr before any engine code runs, so a stray ``print`` (ours, torch's) cannot corrupt a message.
"""
from __future__ import annotations

import argparse
import os
import sys


def memory_cap_default() -> int:
    """``NAC_HOST_MEMORY_CAP`` (bytes, or ``8G``/``1500M``; 0: no cap) when set, else 80% of the
    machine's memory: a runaway allocation fails in the host (MemoryError, or torch's allocator
    refused past RLIMIT_DATA) before the machine swaps the Studio out."""
    text = os.environ.get("NAC_HOST_MEMORY_CAP", "").strip()
    if text:
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        try:
            return int(float(text[:-1] if scale > 1 else text) * scale)
        except ValueError:
            print(f"nac host: NAC_HOST_MEMORY_CAP={text!r} is not a size; using the default", file=sys.stderr)
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 0.8)
    except (ValueError, OSError, AttributeError):
        return 0


def limit_memory(cap: int) -> None:
    """Cap the host's anonymous memory (RLIMIT_DATA: heap and private writable mappings; the
    weights' read-only file mappings do not count, so a multi-GB model still maps)."""
    if cap <= 0:
        return
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    except (ImportError, ValueError, OSError):    # not on this platform, or above the hard limit
        pass


def keep_freed_memory() -> None:
    """Ask glibc's malloc to keep what a run frees for the next one: each Continue allocates
    about the working set the last one freed (its step-back history included), and with the
    default thresholds (large blocks mapped on their own, the heap's free top trimmed past
    128 KB) every Continue faulted its pages in again (48-layer GPT-2: ~2,200 faults, 4 ms of
    a 58 ms Continue). Blocks up to 32 MB come from the heap, and up to 1 GB of free heap is
    kept. No effect off glibc."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 1 << 30)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nac_studio.host")
    ap.add_argument("--arrays", required=True, help="directory for the array files the host writes")
    ap.add_argument("--memory-cap", type=int, default=None, help="bytes of anonymous memory (0: none)")
    args = ap.parse_args(argv)
    proto_in = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    limit_memory(memory_cap_default() if args.memory_cap is None else args.memory_cap)
    keep_freed_memory()
    from nac_engine import threads
    threads.reserve(1)       # the kernels leave a core to the window's UI thread beside this process
    from .handlers import HostState, handlers
    from .server import HostServer
    server = HostServer(proto_in, proto_out, handlers(), args.arrays, HostState(args.arrays))
    try:
        server.serve()
    finally:
        server.close()
    # the Studio closed the pipe (disconnect, or it ended without a word): the directory in
    # /dev/shm goes with this process, whoever made it (memory, not disk, left behind otherwise)
    from .arrays import remove_directory
    remove_directory(args.arrays)
    return 0


if __name__ == "__main__":
    code = main()
    # The interpreter's teardown with torch loaded takes 0.4-0.9 s, and a closing window waits
    # for its host to end; nothing is left to run (the array directory is gone, every answer
    # sent). A host forked from the zygote ends the same way.
    sys.stderr.flush()
    os._exit(code)
