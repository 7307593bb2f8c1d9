"""A section's name records kept as its bytes plus one start per record, and CMAP's / PERM's
id -> text table over them (model-free: :mod:`.model` asks :func:`byte_ids`)."""
from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, Optional

NAME_HEAD = struct.Struct("<HH")        # a record's id (or input index) and its name's byte length
ID_TEXT_HEAD = struct.Struct("<HB")     # CMAP's and PERM's: an id and its text's byte length


class NameRecords:
    """``code[starts[i]:]`` is record ``i`` (checked by the reader: it fits, its name is UTF-8),
    at file offset ``base + starts[i]``: a ``head`` (key, name's byte length), then the name.
    DATA's name records have :data:`NAME_HEAD`, CMAP's and PERM's :data:`ID_TEXT_HEAD`."""

    __slots__ = ("code", "base", "starts", "head")

    def __init__(self, code: bytes, base: int, starts: array, head: struct.Struct = NAME_HEAD):
        self.code, self.base, self.starts, self.head = code, base, starts, head

    def __len__(self) -> int:
        return len(self.starts)

    def record(self, i: int) -> tuple[int, int, str]:
        """(file offset, id, name) of record ``i``."""
        s = self.starts[i]
        key, n = self.head.unpack_from(self.code, s)
        text = s + self.head.size
        return self.base + s, key, str(self.code[text:text + n], "utf-8")

    def __iter__(self) -> Iterator[tuple[int, int, str]]:
        code, base, head, size = self.code, self.base, self.head.unpack_from, self.head.size
        for s in self.starts:
            key, n = head(code, s)
            yield base + s, key, str(code[s + size:s + size + n], "utf-8")


class IdTextTable(MutableMapping):
    """CMAP's or PERM's id -> text when the section names ids past 255, kept as its records:
    65,536 three-byte records made a dict entry and an int each (30 B of RAM per file byte).
    Only ids 0..255 can be named by an instruction (its A and B are bytes): those are a dict
    made by the reader (``low``). Iteration walks the records; any other lookup or a change
    makes the whole dict. ``count``: distinct ids (fewer than records when one is defined
    again, a problem the reader reported; the mapping then keeps the later record's text)."""

    __slots__ = ("_records", "_count", "_low", "_dict")

    def __init__(self, records: NameRecords, count: int, low: dict):
        self._records, self._count, self._low = records, count, low
        self._dict: Optional[dict] = None

    def _made(self) -> dict:
        if self._dict is None:
            self._dict = {key: text for _offset, key, text in self._records}
            self._records = self._low = None
        return self._dict

    def __getitem__(self, key: int) -> str:
        if self._dict is None and type(key) is int and 0 <= key < 256:
            return self._low[key]
        return self._made()[key]

    def __contains__(self, key: object) -> bool:
        if self._dict is None and type(key) is int and 0 <= key < 256:
            return key in self._low
        return key in self._made()

    def get(self, key: int, default: Any = None) -> Any:
        if self._dict is None and type(key) is int and 0 <= key < 256:
            return self._low.get(key, default)
        return self._made().get(key, default)

    def __len__(self) -> int:
        return self._count if self._dict is None else len(self._dict)

    def __iter__(self) -> Iterator[int]:
        return (key for key, _text in self.items())

    def items(self) -> Iterator[tuple[int, str]]:
        if self._dict is None and self._count == len(self._records):
            return ((key, text) for _offset, key, text in self._records)
        return iter(self._made().items())

    def values(self) -> Iterator[str]:
        return (text for _key, text in self.items())

    def __setitem__(self, key: int, text: str) -> None:
        self._made()[key] = text

    def __delitem__(self, key: int) -> None:
        del self._made()[key]

    def __repr__(self) -> str:
        return f"IdTextTable({len(self)} ids)"


def byte_ids(table: Mapping) -> dict:
    """A CMAP's or PERM's ids 0..255 (all an instruction's A or B byte can name) with their
    texts, without walking the other ids of an :class:`IdTextTable`."""
    if isinstance(table, IdTextTable) and table._dict is None:
        return dict(table._low)
    return {k: v for k, v in table.items() if 0 <= k < 256}
