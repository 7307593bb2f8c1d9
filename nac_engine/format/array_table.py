"""A read file's ARRS entries held as their heads plus where each starts.

An ARRS entry with an empty name, rank 0 and no data is 12 bytes; it made a
:class:`NamedArray` and seven spans (115 B of RAM per file byte at read). :class:`ArrayTable`
keeps each entry's head (name, dtype, shape, data length: the data stays in the file) and makes
the NamedArray objects when the list is first asked for (see :mod:`.lazy_records`); ``dis``,
``verify`` and the writer walk it without keeping them. The reader builds an entry's spans when
they are asked for.
"""
from __future__ import annotations

import functools
import struct
from array import array
from typing import Any, Iterator, Optional

from .lazy_records import LazyRecords
from .model import NamedArray

_U16, _U64 = struct.Struct("<H"), struct.Struct("<Q")


@functools.lru_cache(maxsize=None)        # ranks are u8: 256 at most
def u32s(n: int) -> struct.Struct:
    """The struct of ``n`` little-endian u32 (a shape)."""
    return struct.Struct(f"<{n}I")


def array_head(buf, at: int, limit: int) -> Optional[tuple[str, int, tuple, int, int]]:
    """(name, dtype, shape, data length, head length) of the entry at ``buf[at:limit]``: its
    name's length and name, dtype, rank, shape and data length. None when the head does not
    fit or the name is not UTF-8 (the reader's field-by-field read then names the fault)."""
    if at + 2 > limit:
        return None
    p = at + 2 + _U16.unpack_from(buf, at)[0]
    if p + 2 > limit:
        return None
    try:
        name = str(buf[at + 2:p], "utf-8")
    except UnicodeDecodeError:
        return None
    dtype, rank = buf[p], buf[p + 1]
    p += 2
    if p + 4 * rank + 8 > limit:
        return None
    shape = u32s(rank).unpack_from(buf, p) if rank else ()
    p += 4 * rank
    return name, dtype, shape, _U64.unpack_from(buf, p)[0], p + 8 - at


class ArrayTable(LazyRecords):
    """``ArrayTable(heads, at, starts, file)``: entry ``i``'s head is ``heads[at[i]:]`` and the
    entry starts at file offset ``starts[i]`` (the reader checked every entry fits)."""

    __slots__ = ("_heads", "_at", "_starts", "_file")

    def __init__(self, heads: bytearray, at: array, starts: array, file: Any):
        super().__init__()
        self._heads, self._at, self._starts, self._file = heads, at, starts, file

    def _count(self) -> int:
        return len(self._starts)

    def _make(self, i: int) -> NamedArray:
        name, dtype, shape, length, head = array_head(self._heads, self._at[i], len(self._heads))
        return NamedArray(name, dtype, shape, self._starts[i] + head, length, _file=self._file)

    def _walk(self) -> Iterator[NamedArray]:
        return map(self._make, range(len(self._starts)))
