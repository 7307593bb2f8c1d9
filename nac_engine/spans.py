"""Byte-span tree: which decoded field owns every byte of a file.

The reader records a :class:`Span` for every field as it parses it (Kaitai-style debug
spans), so the hex view, the structure tree and ``nac span`` agree byte for byte and
nobody re-derives offsets. Spans of high-volume records (instructions) are materialised
on first access through a builder so that opening a file with 100k instructions stays
cheap; the builder uses the offsets the reader recorded, it does not re-parse.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Iterator, Optional

UNPARSED = "unparsed"


class Span:
    __slots__ = ("offset", "length", "name", "type", "value", "parent", "_children", "_builder", "_index", "_made")

    def __init__(self, offset: int, length: int, name: str, type: str = "", value: Any = None,
                 parent: Optional["Span"] = None):
        self.offset = offset
        self.length = length
        self.name = name
        self.type = type
        self.value = value
        self.parent = parent
        self._children: Optional[list[Span]] = None
        self._builder: Optional[Callable[["Span"], None]] = None
        self._index: Optional[tuple] = None
        self._made: Optional[dict] = None       # index -> child made alone by span_at (kept: one object each)

    # -- construction -------------------------------------------------------------------
    def add(self, offset: int, length: int, name: str, type: str = "", value: Any = None) -> "Span":
        child = Span(offset, length, name, type, value, self)
        if self._children is None:
            self._children = []
        self._children.append(child)
        return child

    def set_builder(self, builder: Callable[["Span"], None]) -> None:
        """Children are produced by ``builder(self)`` the first time they are asked for."""
        self._builder = builder

    def set_index(self, count, start_of: Callable[[int], int], make: Callable[[int], "Span"]) -> None:
        """Children made on first access from an index of records, and one at a time when only one
        is asked for: child ``i`` of ``count`` (an int, or a function giving it when asked: a list
        still being filled by the reader) (in
        offset order) starts at ``start_of(i)`` and is ``make(i)`` (a :meth:`detached` span).
        :meth:`span_at` then makes only the child it needs, found by binary search over the
        starts, so asking about one byte of a 4 MB section costs one record, not the section."""
        self._index = (count, start_of, make)

    def detached(self, offset: int, length: int, name: str, type: str = "", value: Any = None) -> "Span":
        """A child that knows its parent but is not in its list: what an index makes."""
        return Span(offset, length, name, type, value, self)

    def _indexed_child(self, offset: int) -> Optional["Span"]:
        for kid in self._children or ():        # the eager spans (tag, count, ...): a handful
            if kid.offset <= offset < kid.end:
                return kid
        count, start_of, make = self._index
        lo, hi = 0, count() if callable(count) else count
        while lo < hi:
            mid = (lo + hi) // 2
            if start_of(mid) <= offset:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return None
        if self._made is None:
            self._made = {}
        kid = self._made.get(lo - 1)
        if kid is None:
            kid = self._made[lo - 1] = make(lo - 1)
        return kid if kid.offset <= offset < kid.end else None

    # -- access ---------------------------------------------------------------------------
    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def children(self) -> list["Span"]:
        if self._index is not None:
            # the children span_at already made are these very objects (ids stay valid)
            (count, _, make), self._index = self._index, None
            made = self._made or {}
            self._children = (self._children or []) + [
                made[i] if i in made else make(i) for i in range(count() if callable(count) else count)]
            self._made = None
            if self._children:
                self._children.sort(key=lambda s: s.offset)
        if self._builder is not None:
            builder, self._builder = self._builder, None
            builder(self)
            if self._children:   # eager spans (tag, count, unparsed tail) interleave with built ones
                self._children.sort(key=lambda s: s.offset)
        return self._children or []

    @property
    def eager_children(self) -> list["Span"]:
        """The children recorded so far, without running a builder: the reader's eager spans
        (tag, count, unparsed tail) of a lazily built section, at no cost."""
        return self._children or []

    @property
    def has_children(self) -> bool:
        """Whether the span has (or will build, on first access) children, without building them."""
        return self._builder is not None or self._index is not None or bool(self._children)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def path(self) -> str:
        parts = []
        node: Optional[Span] = self
        while node is not None and node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return "/".join(reversed(parts))

    def find(self, path: str) -> Optional["Span"]:
        """Descendant by slash-separated path relative to this span."""
        node: Optional[Span] = self
        for part in path.split("/"):
            if node is None:
                return None
            node = next((c for c in node.children if c.name == part), None)
        return node

    def span_at(self, offset: int) -> Optional["Span"]:
        """Innermost span that contains ``offset`` (``None`` outside this span)."""
        if not (self.offset <= offset < self.end):
            return None
        node = self
        while True:
            if node._index is not None:     # not built yet: make the one child asked for
                kid = node._indexed_child(offset)
                if kid is None:
                    return node
                node = kid
                continue
            kids = node.children
            if not kids:
                return node
            starts = [k.offset for k in kids] if len(kids) < 64 else None
            if starts is not None:
                idx = bisect_right(starts, offset) - 1
            else:
                idx = _bisect_spans(kids, offset)
            if idx < 0:
                return node
            kid = kids[idx]
            if offset >= kid.end:
                return node
            node = kid

    def leaves(self) -> Iterator["Span"]:
        kids = self.children
        if not kids:
            yield self
            return
        for k in kids:
            yield from k.leaves()

    def walk(self) -> Iterator["Span"]:
        yield self
        for k in self.children:
            yield from k.walk()

    def to_dict(self) -> dict:
        return {"offset": self.offset, "length": self.length, "path": self.path,
                "type": self.type, "value": _jsonable(self.value)}

    def __repr__(self) -> str:
        return f"Span({self.path or '<root>'} @{self.offset}+{self.length} {self.type} = {self.value!r})"


def _bisect_spans(kids: list[Span], offset: int) -> int:
    lo, hi = 0, len(kids)
    while lo < hi:
        mid = (lo + hi) // 2
        if kids[mid].offset <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v[:64]).hex() + ("…" if len(v) > 64 else "")
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v[:64]]
    return str(v)
