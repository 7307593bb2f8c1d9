"""DATA's name blocks (parameters, inputs) held as the block's bytes plus one start per record.

A name record is 4 bytes and an empty name: a hostile block of 65,000 of them made a
:class:`Parameter` (and a dict entry, and an int) per record, 46 bytes of RAM per file byte at
read. The reader keeps what it validated; :class:`ParamTable` (the ``params`` mapping) and
:class:`InputNameTable` (the ``input_names`` list) make their objects the first time they are
used, then behave as that dict or list. ``verify``, ``dis``, ``nac info`` and the writer walk
:func:`parameter_items` / :func:`parameter_names` and ``walk_records`` (:mod:`.lazy_records`),
which make each object afresh and keep none.
A file with internal weights makes its parameters at read: its tensor records are bigger than
the objects.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any, Optional

from .lazy_records import LazyRecords
from .model import InputName, Parameter
from .name_records import NAME_HEAD, NameRecords

class ParamTable(MutableMapping):
    """``ParamTable(records, file, present, count)``: parameter id -> :class:`Parameter`, made
    on first use. ``present`` is a bitset of the ids named (membership without the objects);
    ``count`` is how many distinct ids there are (fewer than records: an id named twice, a
    problem the reader reported, and the mapping keeps the later record's name). A parameter
    can also be made alone (:meth:`one`: the reader's tensor records); it is then the mapping's."""

    __slots__ = ("_records", "_file", "_present", "_count", "_items", "_some", "_where")

    def __init__(self, records: NameRecords, file: Any, present: bytearray, count: int):
        self._records, self._file, self._present, self._count = records, file, present, count
        self._items: Optional[dict] = None
        self._some: dict = {}                   # parameters made alone, before the mapping is
        self._where: Optional[array] = None     # id -> its record (the last), made on demand

    def _record_of(self, pid: int) -> int:
        """The index of the (last) record naming ``pid``, which the mapping names: the first
        call indexes the records by id (4 bytes per id up to the largest)."""
        where = self._where
        if where is None:
            starts, code, head = self._records.starts, self._records.code, NAME_HEAD.unpack_from
            largest = max(head(code, s)[0] for s in starts)
            where = self._where = array("i", bytes(4 * (largest + 1)))
            for i, s in enumerate(starts):
                where[head(code, s)[0]] = i
        return where[pid]

    def name_of(self, pid: int) -> Optional[str]:
        """Parameter ``pid``'s name (None if DATA does not name it), without making parameters."""
        if self._items is not None:
            p = self._items.get(pid)
            return None if p is None else p.name
        return self._records.record(self._record_of(pid))[2] if pid in self else None

    def made(self) -> dict:
        """The parameters as a dict, made now if they were not."""
        return self._dict()

    def one(self, pid: int) -> Optional[Parameter]:
        """Parameter ``pid`` (None if DATA does not name it), made alone if the mapping is not
        made: a file of 65k names and a few tensors makes a few Parameters."""
        if self._items is not None:
            return self._items.get(pid)
        p = self._some.get(pid)
        if p is None and pid in self:
            name = self._records.record(self._record_of(pid))[2]
            p = self._some[pid] = Parameter(pid, name, _file=self._file)
        return p

    def _dict(self) -> dict:
        items = self._items
        if items is None:
            file, some = self._file, self._some
            items = {}
            for _offset, pid, name in self._records:
                p = some.get(pid)       # (one made alone is the mapping's; a later record of an id wins)
                items[pid] = p if p is not None else Parameter(pid, name, _file=file)
            self._items, self._some = items, {}
        return items

    def items_once(self) -> Iterator[tuple[int, Parameter]]:
        """(id, parameter) in order, made afresh and not kept unless made already (the
        mapping's own once made)."""
        if self._items is not None or self._count != len(self._records):
            return iter(self._dict().items())
        file, some = self._file, self._some
        return ((pid, some.get(pid) or Parameter(pid, name, _file=file)) for _offset, pid, name in self._records)

    def names_once(self) -> Iterator[tuple[int, str]]:
        """(id, name) in order, without making any parameter."""
        if self._items is not None or self._count != len(self._records):
            return ((pid, p.name) for pid, p in self._dict().items())
        return ((pid, name) for _offset, pid, name in self._records)

    def __contains__(self, pid: object) -> bool:
        if self._items is not None:
            return pid in self._items
        return isinstance(pid, int) and 0 <= pid < 65536 and bool(self._present[pid >> 3] & (1 << (pid & 7)))

    def __len__(self) -> int:
        if self._items is not None:
            return len(self._items)
        return self._count

    def __getitem__(self, pid: int) -> Parameter:
        return self._dict()[pid]

    def get(self, pid: int, default: Any = None) -> Any:
        return self._dict().get(pid, default)

    def __setitem__(self, pid: int, p: Parameter) -> None:
        self._dict()[pid] = p

    def __delitem__(self, pid: int) -> None:
        del self._dict()[pid]

    def __iter__(self) -> Iterator[int]:
        return iter(self._dict())

    def keys(self):
        return self._dict().keys()

    def values(self):
        return self._dict().values()

    def items(self):
        return self._dict().items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._dict() == dict(other.items())
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"ParamTable({len(self)} parameters)"


class InputNameTable(LazyRecords):
    """DATA block 2: :class:`InputName` objects made when the list is first asked for."""

    __slots__ = ("_records",)

    def __init__(self, records: NameRecords):
        super().__init__()
        self._records = records

    def _count(self) -> int:
        return len(self._records)

    def _walk(self) -> Iterator[InputName]:
        return (InputName(index, name) for _offset, index, name in self._records)


def parameter_items(params: Mapping) -> Iterator[tuple[int, Parameter]]:
    """A file's (id, parameter) pairs without keeping them: a read file's made one at a time,
    a built or used mapping's as they are."""
    return params.items_once() if isinstance(params, ParamTable) else iter(params.items())


def parameter_names(params: Mapping) -> Iterator[tuple[int, str]]:
    """A file's (id, name) pairs in order, without making parameters."""
    if isinstance(params, ParamTable):
        return params.names_once()
    return ((pid, p.name) for pid, p in params.items())


def parameter_name(params: Mapping, pid: int) -> Optional[str]:
    """Parameter ``pid``'s name, or None when the file does not name it (a read file's
    parameters are not made for it)."""
    if isinstance(params, ParamTable):
        return params.name_of(pid)
    p = params.get(pid)
    return None if p is None else p.name


def _unmade(params: Mapping) -> bool:
    """A read file's mapping not made yet: nothing has been set on a parameter not made alone
    (only a tensor record or a weights file gives one a shape, and either makes it)."""
    return isinstance(params, ParamTable) and params._items is None


def made_parameter(params: Mapping, pid: int) -> Optional[Parameter]:
    """Parameter ``pid`` if its object exists, else None (see :func:`_unmade`)."""
    return params._some.get(pid) if _unmade(params) else params.get(pid)


def made_parameters(params: Mapping) -> Iterable[Parameter]:
    """The parameters whose objects exist: all of them, or those of a read file made alone."""
    return list(params._some.values()) if _unmade(params) else params.values()
