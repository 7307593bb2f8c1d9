"""A decoded section held as its bytes plus one start per record, list-like.

A hostile section can pack a record into 2 or 3 bytes (an argument-less instruction, an empty
MMAP record); a Python object per record is 50-150 bytes, far past the 20 bytes of RAM per file
byte a decoder may spend. :class:`LazyRecords` keeps what the reader validated (the bytes and
where each record starts) and makes the record objects the first time the list is asked for,
all at once, then behaves as that list; an edit turns it into a plain edited list. Bulk readers
that need no list (``verify``, ``dis``, the writer) walk :func:`walk_records`, which makes each
record afresh and keeps none. :class:`LazyIdMap` is the same for a table of records keyed by
a u16 id (CNST, DATA's parameter names): a mapping whose objects are made one at a time on
lookup, and all at once when it is iterated or changed.
"""
from __future__ import annotations

import operator
from array import array
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, Optional

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


class LazyIdMap(MutableMapping):
    """id -> object over records the reader checked (ids are u16). ``present`` is a bitset of
    the ids (membership without the objects), ``distinct`` how many there are (fewer than the
    records when an id comes twice, a problem the reader reported; the mapping then keeps the
    later record's). A lookup makes that one object and keeps it; iterating or changing the
    mapping makes them all (the ones made before included), a plain dict from then on.
    Subclasses give ``_n()`` (records), ``_ids()`` (each record's id, in order) and
    ``_make(i)`` (record ``i``'s object, made afresh, with an ``id``)."""

    __slots__ = ("_present", "_distinct", "_where", "_some", "_dict")

    def __init__(self, present: bytearray, distinct: int):
        self._present, self._distinct = present, distinct
        self._where: Optional[array] = None     # id -> its (last) record, made on demand
        self._some: dict = {}                   # objects made by lookups, before the dict is
        self._dict: Optional[dict] = None

    def _n(self) -> int:
        raise NotImplementedError

    def _ids(self) -> Iterator[int]:
        raise NotImplementedError

    def _make(self, i: int) -> Any:
        raise NotImplementedError

    def _record_of(self, key: int) -> int:
        """The index of the (last) record of ``key``, which the table holds: the first call
        indexes the records by id (4 bytes per id up to the largest)."""
        where = self._where
        if where is None:
            where = self._where = array("i", bytes(4 * (max(self._ids()) + 1)))
            for i, ident in enumerate(self._ids()):
                where[ident] = i
        return where[key]

    def made(self) -> dict:
        """The mapping as a dict, made now if it was not."""
        items = self._dict
        if items is None:
            some, items = self._some, {}
            for i, key in enumerate(self._ids()):   # in record order; a later record of an id wins
                obj = some.get(key)
                items[key] = obj if obj is not None else self._make(i)
            self._dict, self._some, self._where = items, {}, None
        return items

    def one(self, key: int) -> Any:
        """The object of ``key`` (None when the table has none), made alone if need be."""
        if self._dict is not None:
            return self._dict.get(key)
        obj = self._some.get(key)
        if obj is None and key in self:
            obj = self._some[key] = self._make(self._record_of(key))
        return obj

    def walk(self) -> Iterator:
        """The objects in order, made afresh and not kept (the mapping's own when it has them)."""
        if self._dict is not None or self._distinct != self._n():
            return iter(self.made().values())
        some = self._some
        return (some.get(key) or self._make(i) for i, key in enumerate(self._ids()))

    def __contains__(self, key: object) -> bool:
        if self._dict is not None:
            return key in self._dict
        key = _as_id(key)
        return key is not None and bool(self._present[key >> 3] & (1 << (key & 7)))

    def get(self, key: int, default: Any = None) -> Any:
        if self._dict is None:
            key = _as_id(key)
            if key is None:
                return default
        obj = self.one(key)
        return default if obj is None else obj

    def __getitem__(self, key: int) -> Any:
        obj = self.get(key)
        if obj is None:
            raise KeyError(key)
        return obj

    def __len__(self) -> int:
        return self._distinct if self._dict is None else len(self._dict)

    def __iter__(self) -> Iterator[int]:
        return iter(self.made())

    def keys(self):
        return self.made().keys()

    def values(self):
        return self.made().values()

    def items(self):
        return self.made().items()

    def __setitem__(self, key: int, obj: Any) -> None:
        self.made()[key] = obj

    def __delitem__(self, key: int) -> None:
        del self.made()[key]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.made() == dict(other.items())
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} ids)"


def _as_id(key: object) -> Optional[int]:
    """``key`` as a u16 id (a numpy integer is one too), else None."""
    try:
        key = operator.index(key)
    except TypeError:
        return None
    return key if 0 <= key < 65536 else None
