"""A decoded section held as its bytes plus one start per record, list-like.

A hostile section can pack a record into 2 or 3 bytes (an argument-less instruction, an empty
MMAP record); a Python object per record is 50-150 bytes, far past the 20 bytes of RAM per file
byte a decoder may spend. :class:`LazyRecords` keeps what the reader validated (the bytes and
where each record starts) and makes the record objects the first time the list is asked for,
all at once, then behaves as that list; an edit turns it into a plain edited list. Bulk readers
that need no list (``verify``, ``dis``, the writer) walk :func:`walk_records`, which makes each
record afresh and keeps none.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Optional

_MUTATORS = ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
             "__setitem__", "__delitem__", "__iadd__")


class LazyRecords(Sequence):
    """Subclasses give ``_count()`` (records before materialising) and ``_walk()`` (the records
    made afresh, in order); ``_materialise()`` is the list of the walk unless they say otherwise."""

    __slots__ = ("_items", "_edited")

    def __init__(self):
        self._items: Optional[list] = None
        self._edited = False

    def _count(self) -> int:
        raise NotImplementedError

    def _walk(self) -> Iterator:
        raise NotImplementedError

    def _materialise(self) -> list:
        return list(self._walk())

    def walk(self) -> Iterator:
        """The records in order, made afresh and not kept (the list's own once it is made)."""
        return iter(self._items) if self._items is not None else self._walk()

    def _list(self) -> list:
        items = self._items
        if items is None:
            items = self._items = self._materialise()
        return items

    def __len__(self) -> int:
        return len(self._items) if self._items is not None else self._count()

    def __getitem__(self, index):
        return self._list()[index]

    def __iter__(self):
        return iter(self._list())

    def __reversed__(self):
        return reversed(self._list())

    def __contains__(self, item) -> bool:
        return item in self._list()

    def __eq__(self, other):
        if isinstance(other, LazyRecords):
            other = other._list()
        if isinstance(other, (list, tuple)):
            return self._list() == list(other)
        return NotImplemented

    __hash__ = None

    def __add__(self, other):
        return self._list() + list(other)

    def __radd__(self, other):
        return list(other) + self._list()

    def copy(self) -> list:
        return list(self._list())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} records)"


def _mutator(name: str):
    def method(self, *args, **kw):
        items = self._list()
        self._edited = True
        result = getattr(items, name)(*args, **kw)
        return self if name == "__iadd__" else result
    method.__name__ = name
    method.__doc__ = f"list.{name}: the table becomes a plain edited list (no view of its bytes)."
    return method


for _name in _MUTATORS:
    setattr(LazyRecords, _name, _mutator(_name))
del _name


def walk_records(records: Optional[Iterable]) -> Iterator:
    """A section's records without keeping them: a read file's table made one at a time, an
    edited or built list (or None: no section) as it is."""
    return records.walk() if isinstance(records, LazyRecords) else iter(records or ())
