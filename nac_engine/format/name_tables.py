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

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Optional

from .lazy_records import LazyIdMap, LazyRecords
from .model import InputName, Parameter
from .name_records import NAME_HEAD, NameRecords

class ParamTable(LazyIdMap):
    """``ParamTable(records, file, present, count)``: parameter id -> :class:`Parameter` over
    DATA's name records (see :class:`~.lazy_records.LazyIdMap`: a lookup makes one, the
    reader's tensor records among them; iterating makes them all)."""

    __slots__ = ("_records", "_file")

    def __init__(self, records: NameRecords, file: Any, present: bytearray, count: int):
        super().__init__(present, count)
        self._records, self._file = records, file

    def _n(self) -> int:
        return len(self._records)

    def _ids(self) -> Iterator[int]:
        code, head = self._records.code, NAME_HEAD.unpack_from
        return (head(code, s)[0] for s in self._records.starts)

    def _make(self, i: int) -> Parameter:
        _offset, pid, name = self._records.record(i)
        return Parameter(pid, name, _file=self._file)

    def name_of(self, pid: int) -> Optional[str]:
        """Parameter ``pid``'s name (None if DATA does not name it), without making parameters."""
        if self._dict is not None:
            p = self._dict.get(pid)
            return None if p is None else p.name
        return self._records.record(self._record_of(pid))[2] if pid in self else None

    def names_once(self) -> Iterator[tuple[int, str]]:
        """(id, name) in order, without making any parameter."""
        if self._dict is not None or self._distinct != len(self._records):
            return ((pid, p.name) for pid, p in self.made().items())
        return ((pid, name) for _offset, pid, name in self._records)


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
    return ((p.id, p) for p in params.walk()) if isinstance(params, ParamTable) else iter(params.items())


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
    return isinstance(params, ParamTable) and params._dict is None


def made_parameter(params: Mapping, pid: int) -> Optional[Parameter]:
    """Parameter ``pid`` if its object exists, else None (see :func:`_unmade`)."""
    return params._some.get(pid) if _unmade(params) else params.get(pid)


def made_parameters(params: Mapping) -> Iterable[Parameter]:
    """The parameters whose objects exist: all of them, or those of a read file made alone."""
    return list(params._some.values()) if _unmade(params) else params.values()
