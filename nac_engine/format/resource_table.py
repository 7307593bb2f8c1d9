"""A read file's RSRC entries held as their heads plus where each starts.

An RSRC entry with an empty name and payload is 6 bytes; its :class:`Resource` object is about
120: a hostile section of them cost 19.8 bytes of RAM per file byte at read, at the bound.
:class:`ResourceTable` keeps each entry's head (name length, name, data length: the payload stays
in the file) and makes the Resource objects when the list is first asked for (see
:mod:`.lazy_records`); ``dis`` and the writer walk it without keeping them, and
:func:`find_resource` finds one by its name's bytes.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from typing import Any, Iterable, Iterator, Optional

from .lazy_records import LazyRecords
from .model import Resource

_U16, _U32 = struct.Struct("<H"), struct.Struct("<I")


class ResourceTable(LazyRecords):
    """``ResourceTable(heads, at, starts, file)``: entry ``i``'s head is ``heads[at[i]:]`` and
    the entry starts at file offset ``starts[i]`` (the reader checked every entry fits)."""

    __slots__ = ("_heads", "_at", "_starts", "_file", "_found")

    def __init__(self, heads: bytes, at: array, starts: array, file: Any):
        super().__init__()
        self._heads, self._at, self._starts, self._file = heads, at, starts, file
        # entries found by name, kept: a second find is the same object (what the source map's
        # and input signature's decode caches key on), and the list, once made, holds them too
        self._found: dict[int, Resource] = {}

    def _count(self) -> int:
        return len(self._starts)

    def start_of(self, i: int) -> int:
        """The file offset where entry ``i`` starts, without making the entries."""
        if self._items is not None:
            r = self._items[i]
            return r.data_offset - 6 - len(r.name.encode("utf-8"))
        return self._starts[i]

    def record(self, i: int) -> Resource:
        """Entry ``i`` (made alone while the list is not)."""
        if self._items is not None:
            return self._items[i]
        return self._found.get(i) or self._make(i)

    def _make(self, i: int) -> Resource:
        heads, h = self._heads, self._at[i]
        n = _U16.unpack_from(heads, h)[0]
        return Resource(str(heads[h + 2:h + 2 + n], "utf-8"), self._starts[i] + 6 + n,
                        _U32.unpack_from(heads, h + 2 + n)[0], _file=self._file)

    def find(self, name: str) -> Optional[Resource]:
        """The first entry called ``name`` (None if none), found in the heads' bytes without
        making the others."""
        if self._items is not None:
            return next((r for r in self._items if r.name == name), None)
        encoded = name.encode("utf-8")
        head = _U16.pack(len(encoded)) + encoded
        heads, at = self._heads, self._at
        pos = heads.find(head)
        while pos >= 0:
            i = bisect_left(at, pos)
            if i < len(at) and at[i] == pos:      # a match at an entry's head, not inside one
                found = self._found.get(i)
                if found is None:
                    found = self._found[i] = self._make(i)
                return found
            pos = heads.find(head, pos + 1)
        return None

    def _walk(self) -> Iterator[Resource]:
        found, make = self._found, self._make
        return (found.get(i) or make(i) for i in range(len(self._starts)))


def find_resource(rsrc: Optional[Iterable[Resource]], name: str) -> Optional[Resource]:
    """The first resource called ``name`` in a file's RSRC (None if none or no RSRC)."""
    if isinstance(rsrc, ResourceTable):
        return rsrc.find(name)
    return next((r for r in rsrc or () if r.name == name), None)
