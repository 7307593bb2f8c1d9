"""Decoders for the peer formats beside NAC (seeds 001–004), one module per format.

``detect`` names a file's format by its magic bytes first, then its extension; ``open_peer``
decodes it into a :class:`~nac_engine.peers.base.PeerFile`. Each format module provides
``FORMAT`` (the name ``nac info --json`` reports), ``EXTENSIONS``, ``sniff(head: bytes) -> bool``
(magic bytes only, on the first 4096 bytes) and ``decode(data: bytes, path=None, strict=False)``.
Modules are imported only when their format is asked for.
"""
from __future__ import annotations

import importlib
import os
from typing import Optional

from ..errors import NacFormatError
from ..format.mapped import FileBytes
from ..files import open_regular
from .base import DetailItem, PeerEdge, PeerFile, PeerGraph, PeerNode, PeerWarning, is_warning, mark_gaps

#: format name -> module (relative to this package). Order matters for sniffing.
FORMATS = {
    "tvmr": ".tvmr",
    "neff": ".neff",
    "hwx": ".hwx",
    "e5": ".e5",
    "mind": ".mind",
}

#: The largest peer file read into memory (bytes); larger ones are refused before reading.
MAX_PEER_BYTES = 1 << 30

NAC_MAGIC = b"NAC"


def _module(fmt: str):
    try:
        mod = importlib.import_module(FORMATS[fmt], __name__)
    except ModuleNotFoundError as e:      # a format whose decoder is not in this build
        if e.name and e.name.endswith(FORMATS[fmt].lstrip(".")):
            return None
        raise
    # a module without the decoder interface cannot claim files (and must not break the others)
    return mod if all(hasattr(mod, a) for a in ("FORMAT", "sniff", "decode")) else None


def extensions(fmt: str) -> tuple:
    """The file extensions of peer format ``fmt`` (empty when its decoder is not in this build)."""
    mod = _module(fmt)
    return tuple(getattr(mod, "EXTENSIONS", ())) if mod is not None else ()


def available_formats() -> list[str]:
    return [f for f in FORMATS if _module(f) is not None]


def detect(head: bytes, path: Optional[str] = None) -> Optional[str]:
    """``"nac"``, a peer format name, or ``None``: magic bytes first, then the extension."""
    if head[:3] == NAC_MAGIC:
        return "nac"
    mods = {f: _module(f) for f in FORMATS}
    for fmt, mod in mods.items():
        if mod is not None and mod.sniff(head):
            return fmt
    if path:
        ext = os.path.splitext(path)[1].lower()
        if ext == ".nac":
            return "nac"
        for fmt, mod in mods.items():
            if mod is not None and ext in getattr(mod, "EXTENSIONS", ()):
                return fmt
    return None


def detect_file(path: str) -> Optional[str]:
    with open_regular(path) as fh:
        head = fh.read(4096)
    return detect(head, path)


def read_bounded(path: str, limit: int = MAX_PEER_BYTES) -> bytes:
    """The whole file, refusing one over ``limit`` before reading it."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise NacFormatError("file", 0, f"{size:,} bytes is more than the {limit:,}-byte limit for this format")
        # read(limit + 1) would allocate the whole limit (1 GB) up front for any file: read what
        # is there, in bounded steps past the size seen (a file growing meanwhile stops at limit)
        chunks = [fh.read(min(os.fstat(fh.fileno()).st_size, limit))]
        total = len(chunks[0])
        while total < limit:
            more = fh.read(min(1 << 16, limit - total))
            if not more:
                break
            chunks.append(more)
            total += len(more)
        return b"".join(chunks)


def open_peer(path: str, fmt: Optional[str] = None, strict: bool = False) -> PeerFile:
    """Decode a peer-format file. Lenient by default: problems are collected on the result."""
    fmt = fmt or detect_file(path)
    if fmt is None or fmt == "nac":
        raise NacFormatError("file", 0, "not a peer-format file (no known magic bytes or extension)")
    mod = _module(fmt)
    if mod is None:
        raise NacFormatError("file", 0, f"no decoder for format {fmt!r} in this build")
    if getattr(mod, "READS_ON_DEMAND", False):      # a decoder that reads what it needs (NEFF: gigabytes)
        return mod.decode(file_bytes(path), path=path, strict=strict)
    return mod.decode(read_bounded(path), path=path, strict=strict)


class _OwnedFileBytes(FileBytes):
    """FileBytes over a descriptor of its own, closed when nothing holds it any more."""
    __slots__ = ("__weakref__",)


def file_bytes(path: str) -> FileBytes:
    """A regular file's bytes read with ``pread`` as they are asked for (never mapped, never read
    whole): a file shrunk by another program meanwhile gives short reads, not SIGBUS."""
    import weakref
    with open_regular(path) as fh:
        fd = os.dup(fh.fileno())
        size = os.fstat(fd).st_size
    out = _OwnedFileBytes(fd, size)
    weakref.finalize(out, os.close, fd)
    return out


__all__ = ["FORMATS", "DetailItem", "PeerWarning", "is_warning", "PeerEdge", "PeerFile", "PeerGraph", "PeerNode", "available_formats", "detect",
           "detect_file", "mark_gaps", "open_peer", "read_bounded"]
