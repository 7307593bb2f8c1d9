"""Touching a memory-mapped file safely when another program may shrink it.

A page of a mapping past the file's current end raises SIGBUS when read, which kills the
process (in the Studio, the user's session). So before a payload of an open file is read
through the mapping, the file's *current* size is asked of the mapping's own descriptor
(``mmap.size()`` is an fstat of it: the same inode even when the path was renamed over), and a
payload that no longer lies inside the file is a :class:`FileChangedError` instead.

Arrays handed out earlier stay views of the mapping; the check covers every new access (the
interpreter's loading, ``Parameter.raw()/array()``, resources), and the Studio notices the
change on disk and offers to reload.
"""
from __future__ import annotations

import mmap

from ..errors import NacFormatError


class FileChangedError(NacFormatError):
    """The file was truncated (or replaced in place) after it was opened."""


def current_size(nac) -> int:
    """Bytes the file holds now (for a bytes-backed NacFile: its length)."""
    buf = nac._buf
    if isinstance(buf, mmap.mmap):
        try:
            return buf.size()
        except (ValueError, OSError):     # closed mapping, or the descriptor went away
            return 0
    return len(buf) if buf is not None else 0


def check_mapped(nac, offset: int, length: int, section: str, what: str) -> None:
    """Raise :class:`FileChangedError` unless ``[offset, offset+length)`` is still in the file."""
    if nac is None or nac._buf is None:
        raise NacFormatError(section, max(offset, 0), f"{what}: the file is closed")
    end = offset + length
    if end <= len(nac._buf) and (not isinstance(nac._buf, mmap.mmap) or end <= current_size(nac)):
        return
    raise FileChangedError(section, max(offset, 0),
                           f"{what}: the file is now {current_size(nac)} bytes, too short for bytes "
                           f"{offset}..{end}; it changed on disk after it was opened — reload it")


def mapped_slice(nac, offset: int, length: int, what: str, section: str = "RSRC") -> bytes:
    check_mapped(nac, offset, length, section, what)
    return bytes(nac._buf[offset:offset + length])
