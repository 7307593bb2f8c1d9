"""Reading an open file's bytes when another program may shrink it.

A file up to ``reader.WHOLE_READ_MAX`` is read whole into a private buffer at open: nothing
done to the file afterwards reaches it. A bigger file is memory-mapped for the decode, and
afterwards its bytes (weights, resources, arrays, payloads for a save, what a hex view shows) are
read with ``pread`` on the file's own descriptor, never through the mapping: a page of a mapping
past the file's current end raises SIGBUS when touched, which Python cannot catch and which
kills the process (in the Studio, the user's session). A ``pread`` past the end just returns
fewer bytes, and a payload that no longer lies in the file is a :class:`FileChangedError`.
"""
from __future__ import annotations

import mmap
import os
import weakref

import numpy as np

from ..errors import NacFormatError


class FileChangedError(NacFormatError):
    """The file was truncated (or replaced in place) after it was opened."""


#: Buffers :func:`read_at` filled with pread: fresh copies nobody else holds.
_READ_COPIES: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()
_ALIGN = 64       # what torch's allocator gives: kernels see the same alignment as on a copy


def is_read_copy(arr) -> bool:
    """Whether numpy array ``arr`` lies in a buffer :func:`read_at` made (then it is its holder's
    own: a session may compute in it without copying it again)."""
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, np.ndarray) and _READ_COPIES.get(id(base)) is base


def is_mapped(nac) -> bool:
    return isinstance(getattr(nac, "_buf", None), mmap.mmap)


def current_size(nac) -> int:
    """Bytes the file holds now (for a file held in memory: its length)."""
    buf = nac._buf
    if isinstance(buf, mmap.mmap):
        try:
            return os.fstat(nac._fd).st_size
        except (TypeError, OSError):     # closed
            return 0
    return len(buf) if buf is not None else 0


def read_at(nac, offset: int, length: int, section: str, what: str) -> bytes:
    """Bytes ``[offset, offset+length)`` of the open file: a mapped one's read with ``pread`` into
    a fresh, writable, 64-byte-aligned ``uint8`` array; :class:`FileChangedError` when they are no
    longer all there."""
    buf = nac._buf if nac is not None else None
    if buf is None:
        raise NacFormatError(section, max(offset, 0), f"{what}: the file is closed")
    if isinstance(buf, mmap.mmap):
        try:
            out = pread_aligned(nac._fd, offset, length)
        except (TypeError, OSError):
            out = None
        if out is not None:
            return out
    elif 0 <= offset and offset + length <= len(buf):
        return bytes(buf[offset:offset + length])
    raise FileChangedError(section, max(offset, 0),
                           f"{what}: the file is now {current_size(nac)} bytes, too short for bytes "
                           f"{offset}..{offset + length}; it changed on disk after it was opened — reload it")


def pread_aligned(fd: int, offset: int, length: int):
    """Bytes ``[offset, offset+length)`` of descriptor ``fd`` read with ``pread`` into a fresh,
    writable, 64-byte-aligned ``uint8`` array that :func:`is_read_copy` recognises; None when
    the file ends before them. ``OSError`` as ``pread`` raises it."""
    raw = np.empty(length + _ALIGN, np.uint8)
    shift = (-raw.ctypes.data) % _ALIGN
    out = raw[shift:shift + length]
    view = memoryview(out).cast("B")
    got = 0
    while got < length:
        n = os.preadv(fd, [view[got:]], offset + got)
        if n == 0:
            return None
        got += n
    _READ_COPIES[id(raw)] = raw
    return out


class FileBytes:
    """A mapped file's bytes as views see them (``len``, indexing, slicing, ``read_at``), read
    with ``pread``: after another program shrinks the file, a slice is shorter, never a SIGBUS."""

    __slots__ = ("_fd", "_size")

    def __init__(self, fd: int, size: int):
        self._fd = fd
        self._size = size

    def __len__(self) -> int:
        return self._size

    def read_at(self, offset: int, n: int) -> bytes:
        try:
            return os.pread(self._fd, max(0, n), offset)
        except OSError:         # closed meanwhile
            return b""

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self._size)
            data = self.read_at(start, stop - start)
            return data if step == 1 else data[::step]
        i = key + self._size if key < 0 else key
        if not 0 <= i < self._size:
            raise IndexError("file offset out of range")
        b = self.read_at(i, 1)
        return b[0] if b else 0
