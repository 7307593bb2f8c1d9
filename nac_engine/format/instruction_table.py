"""OPS/TRNG instructions held as the section's bytes plus one start offset per instruction.

A 1 MB OPS section holds ~100k instructions; an :class:`Instruction` object each (with its
index, offset and C/D tuples) was most of ``read``'s time and memory. The reader keeps the
bytes it validated and where each instruction starts; :class:`InstructionTable` is a list-like
sequence that makes the Instruction objects the first time they are asked for (all at once,
equal encodings sharing their C/D tuples) and then behaves as that list. Bulk readers that
need no objects (``verify``, ``dis``, the writer) use :meth:`InstructionTable.encoded`.
"""
from __future__ import annotations

import functools
import struct
from typing import Callable, NamedTuple, Optional

import numpy as np

from .lazy_records import LazyRecords
from .model import Instruction

#: (a, b) -> (fixed C length in i16 values, D length, C counted by its first value)
LayoutOf = Callable[[int, int], tuple]


class EncodedInstructions(NamedTuple):
    """The bytes behind an unedited table: instruction ``i`` is ``code[starts[i]:ends[i]]``
    and sits at file offset ``base + starts[i]``."""
    code: bytes
    base: int
    starts: np.ndarray     # int64, relative to code
    ends: np.ndarray

    def keys(self):
        """Each instruction's encoding (bytes), in order: equal bytes decode to equal A/B/C/D."""
        code = self.code
        return map(code.__getitem__, map(slice, self.starts.tolist(), self.ends.tolist()))

    def column(self, field_offset: int) -> np.ndarray:
        """Byte ``field_offset`` (0 = A, 1 = B) of every instruction, as uint8."""
        return np.frombuffer(self.code, dtype=np.uint8)[self.starts + field_offset]


def byte_words(code: bytes) -> np.ndarray:
    """``words[i]``: the 8 bytes of ``code`` from ``i`` as a little-endian uint64 (zeros past
    the end), for every ``i <= len(code)``: a view of one padded copy, not 8 bytes per byte."""
    padded = code + bytes(16)
    return np.ndarray((len(code) + 9,), dtype="<u8", buffer=padded, strides=(1,))


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))   # odd multipliers
_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)


def distinct_encodings(words: np.ndarray, starts: np.ndarray, ends: np.ndarray, ticks: np.ndarray):
    """(first index, inverse) of the distinct encodings among instructions ``ticks`` (their
    ``starts``/``ends``; ``words``: :func:`byte_words` of the code), as numpy's unique gives them.
    An encoding is told by its first 16 bytes (two words, the bytes past its end masked off)
    and its length; a longer one gets a key of its own (its tick), looked up by its bytes by
    the caller. The three are hashed to one uint64 for the sort, and the groups checked
    against the three (a collision: the block's keys are sorted as rows instead)."""
    length = ends - starts
    lo = words[starts] & _LOW_BYTES[np.minimum(length, 8)]
    hi = words[starts + 8] & _LOW_BYTES[np.clip(length - 8, 0, 8)]
    size = np.minimum(length, 255).astype(np.uint64)
    long_ = np.flatnonzero(length > _KEY_BYTES)
    if long_.size:
        lo[long_] = ticks[long_]
        hi[long_] = 0
    mixed = (lo * _MIX[0]) ^ (hi * _MIX[1]) ^ size
    _, first, inverse = np.unique(mixed, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    rep = first[inverse]
    if (lo[rep] == lo).all() and (hi[rep] == hi).all() and (size[rep] == size).all():
        return first, inverse
    rows = np.column_stack((lo, hi, size)).astype("<u8")
    _, first, inverse = np.unique(rows.view("V24").ravel(), return_index=True, return_inverse=True)
    return first, inverse.ravel()


_KEY_BYTES = 16        # instruction bytes compared by numpy; longer encodings are keyed one by one
_I16 = struct.Struct("<h")


@functools.lru_cache(maxsize=256)
def i16s(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}h")

class InstructionTable(LazyRecords):
    """The instructions of a decoded section, made on first access (see module docstring)."""

    __slots__ = ("_code", "_base", "_starts", "_ends", "_layout")

    def __init__(self, code: bytes, base: int, starts: np.ndarray, ends: np.ndarray, layout: LayoutOf):
        super().__init__()
        self._code = code
        self._base = base
        self._starts = starts
        self._ends = ends
        self._layout = layout

    # -- bulk access without objects ------------------------------------------------------
    def encoded(self) -> Optional[EncodedInstructions]:
        """The section's bytes and instruction bounds, or None once the list was edited."""
        if self._edited:
            return None
        return EncodedInstructions(self._code, self._base, self._starts, self._ends)

    def decode(self, i: int) -> Instruction:
        """Instruction ``i`` made afresh from its bytes, without making the others (a new
        object each call: use indexing for the list's own)."""
        if self._items is not None:
            return self._items[i]
        s = int(self._starts[i])
        return Instruction(i, *self._fields(s), self._base + s)

    def decode_range(self, i0: int, i1: int) -> list:
        """Instructions ``i0`` to ``i1 - 1``, as :meth:`decode` makes them."""
        if self._items is not None:
            return self._items[i0:i1]
        fields, base = self._fields, self._base
        return [Instruction(i, *fields(s), base + s) for i, s in enumerate(self._starts[i0:i1].tolist(), i0)]

    def _fields(self, s: int) -> tuple:
        code = self._code
        a, b = code[s], code[s + 1]
        c_len, d_len, counted = self._layout(a, b)
        p = s + 2
        c = d = None
        if counted:
            c_len = _I16.unpack_from(code, p)[0] + 1
        if c_len:
            c = i16s(c_len).unpack_from(code, p)
            p += 2 * c_len
        if d_len:
            d = i16s(d_len).unpack_from(code, p)
        return a, b, c, d

    def _count(self) -> int:
        return len(self._starts)

    def _materialise(self) -> list:
        code, base, fields_of = self._code, self._base, self._fields
        fields: dict = {}      # encoding -> (a, b, c, d): a program repeats a few hundred
        out = []
        append = out.append
        for i, (s, e) in enumerate(zip(self._starts.tolist(), self._ends.tolist())):
            key = code[s:e]
            abcd = fields.get(key)
            if abcd is None:
                abcd = fields_of(s)
                if len(fields) > 65536:     # all-distinct (crafted): keep it bounded
                    fields.clear()
                fields[key] = abcd
            append(Instruction(i, *abcd, base + s))
        return out

    def __repr__(self) -> str:
        return f"InstructionTable({len(self)} instructions)"
