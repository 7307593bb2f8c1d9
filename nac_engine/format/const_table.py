"""CNST as read: the records' bytes and one start each, a :class:`Constant` made when it is first
asked for.

A constant record is 5 bytes at its shortest (a null): a hostile table of 65,000 made a
Constant, a dict entry and an int each, 30 B of RAM per file byte at read and 44 at dis. The
reader checks every record and keeps what it checked; :class:`ConstTable` (the ``constants``
mapping) makes a constant on lookup (kept: the interpreter and the views ask for the same
ones again) and the whole dict the first time it is iterated or changed. ``verify``, ``dis``
and the writer walk :func:`constant_values`, which makes each constant afresh and keeps none.
ORCH's constant pool (same records) is a :class:`PoolTable`: a list made when first asked for.
"""
from __future__ import annotations

import functools
import itertools
import struct
from array import array
from collections.abc import Iterator, Mapping
from typing import Callable, Optional

from . import layout as L
from .lazy_records import LazyIdMap, LazyRecords
from .model import Constant

CONST_HEAD = struct.Struct("<HBH")      # id, type, length
_SCALAR = {L.CONST_INT64: struct.Struct("<q"), L.CONST_FLOAT64: struct.Struct("<d")}


def decode_constant(buf, at: int, limit: int) -> tuple[Optional[Constant], int]:
    """A record read from ``buf[at:limit]``: (the constant, where the next record starts), or
    (None, at) for one that needs the careful, field-by-field read, which names what is wrong
    (an unknown type, a record that does not fit, a bad bool byte or string)."""
    if at + 5 > limit:
        return None, at
    cid, typ, ln = CONST_HEAD.unpack_from(buf, at)
    end = at + 5
    scalar = _SCALAR.get(typ)
    if scalar is not None:
        if ln == 8 and end + 8 <= limit:
            return Constant(cid, typ, scalar.unpack_from(buf, end)[0]), end + 8
    elif typ == L.CONST_STRING:
        if end + ln <= limit:
            try:
                return Constant(cid, typ, str(buf[end:end + ln], "utf-8")), end + ln
            except UnicodeDecodeError:
                pass
    elif typ == L.CONST_BOOL:
        if end < limit and buf[end] <= 1:
            return Constant(cid, typ, bool(buf[end]), ln), end + 1
    elif typ == L.CONST_NULL:
        return Constant(cid, typ, None, ln), end
    elif typ == L.CONST_LIST_I32 or typ == L.CONST_LIST_F32:
        if end + 4 * ln <= limit:
            return Constant(cid, typ, _list_struct(typ, ln).unpack_from(buf, end) if ln else ()), end + 4 * ln
    return None, at


@functools.lru_cache(maxsize=256)
def _list_struct(typ: int, n: int) -> struct.Struct:
    return struct.Struct(f"<{n}{'i' if typ == L.CONST_LIST_I32 else 'f'}")


class ConstRecords:
    """CNST-format records checked by the reader: record ``i`` is ``code[starts[i]:]`` (file
    offset ``base + starts[i]``) for the first ``count`` starts; ``careful(offset)`` reads one
    that :func:`decode_constant` leaves. Iterating makes each constant afresh."""

    __slots__ = ("code", "base", "starts", "count", "careful")

    def __init__(self, code: bytes, base: int, starts: array, count: int, careful: Callable[[int], Constant]):
        self.code, self.base, self.starts, self.count, self.careful = code, base, starts, count, careful

    def __len__(self) -> int:
        return self.count

    def make(self, i: int) -> Constant:
        s = self.starts[i]
        const = decode_constant(self.code, s, len(self.code))[0]
        return const if const is not None else self.careful(self.base + s)

    def ids(self) -> Iterator[int]:
        code, head, starts = self.code, CONST_HEAD.unpack_from, self.starts
        return (head(code, starts[i])[0] for i in range(self.count))

    def __iter__(self) -> Iterator[Constant]:
        code, limit, base, careful = self.code, len(self.code), self.base, self.careful
        for s in itertools.islice(self.starts, self.count):
            yield decode_constant(code, s, limit)[0] or careful(base + s)


class ConstTable(LazyIdMap):
    """``ConstTable(records, present, distinct)``: constant id -> :class:`Constant` over
    :class:`ConstRecords` (see :class:`~.lazy_records.LazyIdMap`)."""

    __slots__ = ("_records",)

    def __init__(self, records: ConstRecords, present: bytearray, distinct: int):
        super().__init__(present, distinct)
        self._records = records

    def _n(self) -> int:
        return len(self._records)

    def _ids(self) -> Iterator[int]:
        return self._records.ids()

    def _make(self, i: int) -> Constant:
        return self._records.make(i)


class PoolTable(LazyRecords):
    """ORCH's constant pool as read (a list of :class:`Constant`, made when first asked for);
    :meth:`by_id` is id -> constant without making the list (a MEP listing's pool look-ups)."""

    __slots__ = ("_records", "_present", "_distinct")

    def __init__(self, records: ConstRecords, present: bytearray, distinct: int):
        super().__init__()
        self._records, self._present, self._distinct = records, present, distinct

    def _count(self) -> int:
        return len(self._records)

    def _walk(self) -> Iterator[Constant]:
        return iter(self._records)

    def by_id(self) -> Mapping:
        if self._items is not None:
            return {c.id: c for c in self._items}
        return ConstTable(self._records, self._present, self._distinct)


def pool_values(pool) -> Mapping:
    """ORCH pool id -> value (a later constant of an id wins), for the MEP listing."""
    by_id = pool.by_id() if isinstance(pool, PoolTable) else {c.id: c for c in pool}
    return _Values(by_id)


class _Values(Mapping):
    __slots__ = ("_by_id",)

    def __init__(self, by_id: Mapping):
        self._by_id = by_id

    def __getitem__(self, key):
        return self._by_id[key].value

    def __contains__(self, key) -> bool:
        return key in self._by_id

    def __iter__(self):
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


def constant_values(constants: Mapping) -> Iterator[Constant]:
    """A file's constants in order without keeping them: a read file's made one at a time, a
    built or used mapping's as they are."""
    return constants.walk() if isinstance(constants, ConstTable) else iter(constants.values())
