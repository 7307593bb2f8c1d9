"""Bounds-checked little-endian reader that records a span for every field it reads.

Every length or count is checked against the bytes that remain *before* anything is
allocated, so a hostile count of 2**32-1 costs a comparison, not memory.
"""
from __future__ import annotations

import struct
from typing import Any, Optional

from ..errors import NacFormatError
from ..spans import Span

_STRUCTS: dict[str, struct.Struct] = {}


def _st(fmt: str) -> struct.Struct:
    s = _STRUCTS.get(fmt)
    if s is None:
        s = _STRUCTS[fmt] = struct.Struct("<" + fmt)
    return s


_SCALARS = {"u8": "B", "i8": "b", "u16": "H", "i16": "h", "u32": "I", "i32": "i",
            "u64": "Q", "i64": "q", "f32": "f", "f64": "d"}
_KIND_STRUCTS = {kind: _st(code) for kind, code in _SCALARS.items()}


class Cursor:
    """Reads ``buf[pos:limit]``; ``section`` names the region in errors."""

    def __init__(self, buf, pos: int, limit: int, section: str, span: Optional[Span] = None, base: int = 0):
        # ``buf`` holds the file from absolute offset ``base`` on: a window read with
        # pread keeps absolute offsets in spans and errors.
        self.buf = buf
        self.base = base
        self.pos = pos
        self.limit = limit
        self.section = section
        self.span = span

    # -- errors ----------------------------------------------------------------------
    def error(self, reason: str, offset: Optional[int] = None) -> NacFormatError:
        return NacFormatError(self.section, self.pos if offset is None else offset, reason)

    @property
    def remaining(self) -> int:
        return self.limit - self.pos

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.limit - self.pos:
            raise self.error(f"truncated: {what} needs {n} bytes, {max(self.limit - self.pos, 0)} left")

    def check_count(self, count: int, min_record: int, what: str) -> None:
        """Reject a count whose smallest possible encoding does not fit in what remains."""
        if count * min_record > self.limit - self.pos:
            raise self.error(f"{what} count {count} needs at least {count * min_record} bytes, "
                             f"{self.limit - self.pos} left")

    # -- reads ---------------------------------------------------------------------------
    def scalar(self, kind: str, name: Optional[str] = None, parent: Optional[Span] = None) -> Any:
        st = _KIND_STRUCTS[kind]
        pos, size = self.pos, st.size
        if size > self.limit - pos:
            self.need(size, name or kind)
        (v,) = st.unpack_from(self.buf, pos - self.base)
        if name is not None:
            (parent or self.span).add(pos, size, name, kind, v)
        self.pos = pos + size
        return v

    def array(self, kind: str, n: int, name: Optional[str] = None, parent: Optional[Span] = None) -> tuple:
        code = _SCALARS[kind]
        size = _KIND_STRUCTS[kind].size
        if n * size > self.limit - self.pos or n < 0:
            self.need(n * size, name or kind)
        vals = _st(f"{n}{code}").unpack_from(self.buf, self.pos - self.base) if n else ()
        if name is not None:
            p = parent or self.span
            for i, v in enumerate(vals):
                p.add(self.pos + i * size, size, f"{name}[{i}]", kind, v)
        self.pos += n * size
        return vals

    def raw(self, n: int, name: Optional[str] = None, type: str = "bytes", value: Any = None,
            parent: Optional[Span] = None) -> memoryview:
        self.need(n, name or "bytes")
        mv = memoryview(self.buf)[self.pos - self.base:self.pos - self.base + n]
        if name is not None:
            (parent or self.span).add(self.pos, n, name, type, bytes(mv[:32]) if value is None else value)
        self.pos += n
        return mv

    def text(self, n: int, name: Optional[str] = None, parent: Optional[Span] = None) -> str:
        start = self.pos
        mv = self.raw(n)
        try:
            s = bytes(mv).decode("utf-8")
        except UnicodeDecodeError as e:
            self.pos = start
            raise self.error(f"{name or 'string'} is not valid UTF-8 ({e.reason})", start) from None
        if name is not None:
            (parent or self.span).add(start, n, name, "utf8", s)
        return s

    def tag(self, expected: bytes, parent: Optional[Span] = None) -> None:
        start = self.pos
        got = bytes(self.raw(len(expected)))
        if got != expected:
            self.pos = start
            raise self.error(f"expected tag {expected.decode()!r}, found {got!r}", start)
        (parent or self.span).add(start, len(expected), "tag", "tag", expected.decode())
