"""A read file's MMAP schedule held as the section's bytes plus one start per record.

An empty MMAP record is 3 bytes and its objects (the record, its command list, its offset) about
160: a hostile schedule of them cost 52 bytes of RAM per file byte at read. :class:`MmapTable`
makes the :class:`MmapRecord` objects when the list is first asked for, and ``verify``, ``dis``
and ``nac info`` walk it without keeping them (see :mod:`.lazy_records`).
"""
from __future__ import annotations

import struct
from array import array
from typing import Iterator

from .lazy_records import LazyRecords
from .model import MmapCommand, MmapRecord

RECORD_HEAD = struct.Struct("<HB")       # tick u16, command count u8
COMMAND = struct.Struct("<BH")           # action u8, target u16: one command (3 bytes)


class _InternedCommands(dict):
    """Equal commands share one (never mutated) object: a big schedule repeats a few thousand
    distinct (action, target) pairs millions of times."""

    def __missing__(self, key):
        if len(self) > 65536:       # all-distinct commands (hostile): don't keep a second copy
            self.clear()
        value = self[key] = MmapCommand(*key)
        return value


class MmapTable(LazyRecords):
    """``MmapTable(code, base, starts)``: record ``i`` starts at ``code[starts[i]]``, file
    offset ``base + starts[i]`` (the reader checked every record fits)."""

    __slots__ = ("_code", "_base", "_starts")

    def __init__(self, code: bytes, base: int, starts: array):
        super().__init__()
        self._code, self._base, self._starts = code, base, starts

    def _count(self) -> int:
        return len(self._starts)

    def offset(self, i: int) -> int:
        """The file offset of record ``i``, without making the records."""
        return self._items[i].offset if self._items is not None else self._base + self._starts[i]

    def record(self, i: int) -> MmapRecord:
        """Record ``i`` (made alone while the list is not)."""
        if self._items is not None:
            return self._items[i]
        return next(_records(self._code, self._base, self._starts[i:i + 1]))

    def _walk(self) -> Iterator[MmapRecord]:
        return _records(self._code, self._base, self._starts)


def _records(code: bytes, base: int, starts: array) -> Iterator[MmapRecord]:
    get = _InternedCommands().__getitem__
    head, commands = RECORD_HEAD.unpack_from, COMMAND.iter_unpack
    for s in starts:
        tick, count = head(code, s)
        yield MmapRecord(tick, list(map(get, commands(code[s + 3:s + 3 + 3 * count]))), base + s)
