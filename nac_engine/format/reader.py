"""bytes → :class:`NacFile`, recording a byte span for every field.

Sections are located through the header's offset table, sorted by offset (the physical
order is kept: v1.6 writes RSRC before ORCH although its slot comes after), and each is
bounded by the next section's start. Tables are decoded before OPS because instruction
lengths depend on PERM signatures and the header's output count.

``strict=True`` raises the first :class:`NacFormatError`; ``strict=False`` records
problems in ``nacfile.problems`` and keeps everything that decoded (the Studio opens
broken files this way).
"""
from __future__ import annotations

import functools
import math
import mmap
import os
import struct
import sys
from array import array
from typing import Optional

import numpy as np

from ..errors import NacFormatError, problem_kind
from ..files import open_regular
from ..isa.mep import decode_mep
from ..isa.tisa import decode_tisa
from ..isa.optable import (CONST_CODES, OP_CONTROL_FLOW, OP_CONVERGENCE, OP_INPUT, OP_OUTPUT,
                           SYSTEM_OPS)
from . import layout as L
from .cursor import Cursor
from .gc_pause import collector_paused
from .mapped import read_at
from .mmap_table import RECORD_HEAD, MmapTable
from .array_table import ArrayTable, array_head, u32s as _u32s
from .const_table import ConstRecords, ConstTable, PoolTable, decode_constant
from .name_records import ID_TEXT_HEAD as _ID_TEXT_HEAD, NAME_HEAD as _NAME_HEAD, IdTextTable, NameRecords, byte_ids
from .name_tables import InputNameTable, ParamTable, parameter_name
from .resource_table import ResourceTable
from .instruction_table import InstructionTable, i16s as _i16s
from .model import (Constant, Instruction, NacFile,
                    NamedArray, Orch, Parameter, Proc, TensorMeta)
from ..spans import UNPARSED, Span

# Ops whose signature may be missing: the reference reader then assumes one constant and
# one D value (research §3.3). Only a defensive path; kept for files in the wild.
_GETITEM_LIKE = frozenset({"getitem", "operator.getitem", "aten.select.int"})
_KNOWN_SYSTEM = frozenset(SYSTEM_OPS) | {0}
_I16 = struct.Struct("<h")
_BIG_ENDIAN = sys.byteorder == "big"
_FLAGGED = -(1 << 62)           # an encoding's verdict when the field-by-field decoder must name a problem
_SOUND = 1 << 20                # added to a walk length: the instruction needs no verdict
_VERDICTS_MAX = 1 << 16         # distinct encodings whose verdict is kept (all-distinct: crafted)


class _OpsLayout:
    """How long an OPS/TRNG instruction is, from its A and B bytes (and C's count when C is
    counted), and the start walk that checks each instruction by its encoding's verdict."""

    def __init__(self, nac: NacFile, count: int, trng: bool):
        self.count, self.trng = count, trng
        self.names = names = nac.op_names
        self.n_out = nac.header.num_outputs
        # Per signature ID: (len, has constants) — instruction lengths depend only on these.
        # Only IDs 0..255 can be named by an instruction's B byte (a PERM may hold 65,536).
        self.sig_info = {b: (len(s), any(ch in CONST_CODES for ch in s)) for b, s in byte_ids(nac.perms).items()}
        # regular ops whose signature may be missing: then one counted constant and one D
        self.getitem_ops = frozenset(a for a, name in names.items() if 10 <= a < 256 and name in _GETITEM_LIKE)
        self._walk_info: dict = {}      # A | B << 8 -> :meth:`_walk_length`
        self._cache: dict = {}          # (A, B) -> :meth:`layout`
        self._verdicts: dict = {}       # encoding -> :meth:`_verdict`
        self._words: Optional[tuple] = None

    def layout(self, a: int, b: int) -> tuple:
        """(fixed C length, D length, C counted) of one instruction."""
        key = (a, b)
        got = self._cache.get(key)
        if got is None:
            c_fix = d = 0
            counted = False
            if a >= 10:
                info = self.sig_info.get(b)
                if info is not None and info[0]:
                    d, counted = info[0], info[1]
                elif a in self.getitem_ops:        # no signature: one constant and one D
                    d, counted = 1, True
            elif a == OP_INPUT:
                c_fix = 2 if 1 <= b <= 5 else 0
            elif a == OP_OUTPUT:
                c_fix, d = (self.n_out + 1, self.n_out) if b < 2 else (2, 2) if b == 3 else (0, 1) if b == 4 \
                    else (0, 0)
            elif a == OP_CONTROL_FLOW:
                c_fix, d = 3, 1
            elif a == OP_CONVERGENCE:
                d, counted = 1, True
            got = self._cache[key] = (c_fix, d, counted)
        return got

    def _ab_sound(self, a: int, b: int) -> bool:
        """Whether A and B alone name no problem: a known op, and a regular op's signature in
        PERM (or none needed)."""
        if a >= 10:
            return a in self.names and (not b or b in self.sig_info or a in self.getitem_ops)
        return a in _KNOWN_SYSTEM

    def _verdict(self, code: bytes) -> int:
        """What one encoding allows: the lowest D offset (an instruction ``i`` is sound when
        ``i + verdict >= 0``), or ``_FLAGGED`` when the field-by-field decoder would name a
        problem whatever its index (unknown op, signature not in PERM, a later D, constant
        slots unlike C's count)."""
        a, b = code[0], code[1]
        if not self._ab_sound(a, b):
            return _FLAGGED
        c_fix, d_len, counted = self.layout(a, b)
        if not d_len or a == OP_CONVERGENCE:
            return 0
        k = code[2] | code[3] << 8 if counted else c_fix - 1     # (a negative count stops the walk first)
        d = _i16s(d_len).unpack_from(code, 4 + 2 * k)
        if max(d) > 0 or (a >= 10 and counted and d.count(0) != k):
            return _FLAGGED
        return min(d)

    def walk(self, code: bytes, p: int, n: int, starts: array) -> int:
        """Append to ``starts`` the starts of up to ``n`` instructions from offset ``p`` of
        ``code``; return where the walk stopped: after the ``n``-th, or at an instruction the
        field-by-field decoder must look at (a problem, cut off by the end, a negative C
        count). An instruction is checked by its encoding's verdict, made once per distinct
        encoding. Every start is even (an instruction is a whole number of i16 values), so
        the walk reads (A, B) as one u16."""
        if self._words is None or self._words[0] is not code:
            even = code[:len(code) & ~1]
            words = array("H", even)          # A | B << 8 at each even offset
            counts = array("h", even)         # the same bytes as i16 (C's count)
            if _BIG_ENDIAN:
                words.byteswap()
                counts.byteswap()
            self._words = (code, words, counts)   # a walk resumed after a problem reuses them
        _code, words, counts = self._words
        end = len(words)
        info, verdicts = self._walk_info, self._verdicts
        append = starts.append
        i = len(starts)
        w = p >> 1                        # in i16 words from here on
        try:
            for i in range(i, i + n):
                ab = words[w]                 # IndexError past the end: the walk stops there
                try:
                    length = info[ab]
                except KeyError:
                    length = info[ab] = self._walk_length(ab & 0xFF, ab >> 8)
                if length > _SOUND:           # sound whatever its other bytes and its index
                    q = w + length - _SOUND
                    if q > end:
                        break
                    append(w << 1)
                    w = q
                    continue
                if length > 0:
                    q = w + length
                    if q > end:
                        break
                else:                         # C counted: -length words besides C's values
                    k = counts[w + 1]
                    if k < 0:
                        break
                    q = w - length + k
                    if q > end:
                        break
                key = code[w << 1:q << 1]
                try:
                    low = verdicts[key]
                except KeyError:
                    if len(verdicts) >= _VERDICTS_MAX:
                        verdicts.clear()
                    low = verdicts[key] = self._verdict(key)
                if i + low < 0:
                    break
                append(w << 1)
                w = q
        except IndexError:
            pass
        return w << 1

    def end_walk(self) -> None:
        """Drop what only the walk needs: the table keeps :meth:`layout` (and so this object)
        for as long as the file is open, and a section of distinct encodings fills the verdicts."""
        self._verdicts, self._words = {}, None

    def _walk_length(self, a: int, b: int) -> int:
        """An instruction's length in i16 words when C is not counted (plus ``_SOUND`` when
        its A and B alone make it sound); when it is, minus the length without C's values
        (count included)."""
        c_fix, d, counted = self.layout(a, b)
        if counted:
            return -(2 + d)
        # an instruction without D whose A and B name no problem needs no verdict
        return 1 + c_fix + d + (_SOUND if not d and self._ab_sound(a, b) else 0)


class ProblemList:
    """What a lenient read (or verify) found. A hostile file can repeat one defect hundreds of
    thousands of times (a CMAP of duplicate ids): past :data:`PROBLEMS_PER_KIND` of one kind
    (same section, same reason but for its numbers) they are counted, and one closing problem
    says how many more there were, so problems cost bounded memory."""

    def __init__(self, strict: bool):
        self.strict = strict
        self.items: list[NacFormatError] = []
        self._kinds: dict = {}

    def add(self, err: NacFormatError) -> None:
        if self.strict:
            raise err
        if self._kept(err.section, err.offset, err.reason):
            self.items.append(err)

    append = add

    def extend(self, errors) -> None:
        for err in errors:
            self.add(err)

    def report(self, section: str, offset: int, reason: str) -> None:
        """:meth:`add` of ``NacFormatError(section, offset, reason)``, made only if it is kept."""
        if self.strict:
            raise NacFormatError(section, offset, reason)
        if self._kept(section, offset, reason):
            self.items.append(NacFormatError(section, offset, reason))

    def _kept(self, section: str, offset: int, reason: str) -> bool:
        # the kind without its numbers: digits dropped (bytes.translate: str.translate looks
        # up each character, 1.8 µs a reason; the text with the numbers as # is made once per
        # kind, for the closing problem)
        key = (section.split("/")[0], reason.encode("utf-8", "surrogatepass").translate(None, _DIGITS))
        seen = self._kinds.get(key)
        if seen is None:
            self._kinds[key] = [1, 0]
        elif seen[0] < PROBLEMS_PER_KIND:
            seen[0] += 1
        else:
            if not seen[1]:
                seen.append((section, offset, reason))  # the first one left out: where the count starts
            seen[1] += 1
            return False
        return True

    def finish(self) -> None:
        for (_kind, _text), (_kept, more, *first) in self._kinds.items():
            if more:
                section, offset, reason = first[0]
                self.items.append(NacFormatError(section, offset, f"… and {more:,} more like this "
                                                 f"({problem_kind(NacFormatError(section, offset, reason))[1]})"))


#: Problems of one kind kept by a lenient read before the rest are only counted.
PROBLEMS_PER_KIND = 1000
_DIGITS = b"0123456789"


# --------------------------------------------------------------------------- entry point
#: Files up to this size are read into memory whole (a private copy nothing another program does
#: to the file can reach, and that a run may use weights from in place); bigger ones are mapped.
WHOLE_READ_MAX = 64 << 20
_ZEROS = [bytes(n) for n in range(64)]        # alignment padding, one object per length
#: Alignment of the private copy's first byte (what torch's CPU allocator gives).
ALIGNMENT = 64


def read(source, *, strict: bool = True, weights: Optional[str] = None) -> NacFile:
    """Decode a ``.nac`` from a path or a bytes-like object.

    A path up to :data:`WHOLE_READ_MAX` bytes is read whole into a private buffer aligned to
    64 bytes (``nacfile.private_buffer``); a bigger one is memory-mapped, and its weights are
    read when first used, through the size-checked path (:mod:`.mapped`). ``weights``
    overrides the external ``.safetensors`` location (default: same directory and base name).
    """
    path = None
    closer = None
    fh = None
    private = False
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = source
    else:
        path = os.fspath(source)
        fh = open_regular(path, buffering=0)
        size = os.fstat(fh.fileno()).st_size
        if size <= WHOLE_READ_MAX:
            buf = _read_whole(fh, size)
            private = True
        else:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            # Weights are touched sparsely (a tensor at a time, often never): without this
            # the kernel reads ahead megabytes around every record header we look at.
            if hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
                mm.madvise(mmap.MADV_RANDOM)
            buf = mm
            fd = os.dup(fh.fileno())     # after the decode, the file's bytes are read with pread

            def closer(mm=mm, fd=fd):
                os.close(fd)
                mm.close()
    nac = NacFile()
    nac._buf = buf
    nac._closer = closer
    nac._fd = fd if closer is not None else None
    nac.path = path
    nac.private_buffer = private
    try:
        with collector_paused():
            problems = ProblemList(strict)
            _Reader(nac, buf, problems, fh.fileno() if closer is not None else None).run()
            problems.finish()
    except BaseException:
        nac.close()
        raise
    finally:
        if fh is not None:
            fh.close()
    if path is not None and not nac.header.weights_internal:
        nac.weights_path = weights or os.path.splitext(path)[0] + ".safetensors"
    elif weights:
        nac.weights_path = weights
    return nac


def _read_whole(fh, size: int) -> memoryview:
    """The file's bytes in a buffer whose first byte is 64-byte aligned. A file that shrank since
    its size was asked gives the bytes it still has."""
    raw = np.empty(size + ALIGNMENT, np.uint8)
    shift = (-raw.__array_interface__["data"][0]) % ALIGNMENT
    view = memoryview(raw[shift:shift + size]).cast("B")
    got = 0
    while got < size:
        n = fh.readinto(view[got:])
        if not n:
            break
        got += n
    return view[:got] if got < size else view


class _Reader:
    def __init__(self, nac: NacFile, buf, problems: ProblemList, fd: Optional[int] = None):
        self.nac = nac
        self.fd = fd
        self.buf = buf
        self.size = len(buf)
        self.p = problems
        self.root = Span(0, self.size, "", "file", None)
        nac.spans = self.root
        nac.problems = problems.items

    # ------------------------------------------------------------------ top level
    def run(self) -> None:
        hdr_span = self.root.add(0, 0, "header", "header")
        try:
            layout, offsets = self._header(hdr_span)
        except NacFormatError as e:
            self.p.add(e)
            hdr_span.length = max(hdr_span.length, 0)
            self._cover_rest(hdr_span.end if hdr_span.length else 0)
            return
        self.nac.header_decoded = True
        regions = self._locate(layout, offsets)
        # Region bounds in physical order; the header's region runs to the first section.
        bounds = [(0, layout.size, "header", hdr_span)]
        for i, (off, tag) in enumerate(regions):
            end = regions[i + 1][0] if i + 1 < len(regions) else self.size
            sp = self.root.add(off, end - off, tag, "section")
            bounds.append((off, end, tag, sp))
        header_limit = regions[0][0] if regions else self.size
        self.nac.layout = [tag for _, tag in regions]
        self._trailing("header", hdr_span, layout.size, header_limit, parent=self.root, own=False)
        by_tag = {tag: (start, end, sp) for start, end, tag, sp in bounds[1:]}
        # Decode order: tables first, OPS/TRNG need them.
        for tag in ("CMAP", "CNST", "PERM", "OPS", "MMAP", "DATA", "PROC", "ORCH", "RSRC", "TRNG", "ARRS"):
            if tag in by_tag:
                start, end, sp = by_tag[tag]
                self._section(tag, start, end, sp)
        self.root._children.sort(key=lambda s: s.offset)

    def _cover_rest(self, start: int) -> None:
        if start < self.size:
            self.root.add(start, self.size - start, UNPARSED, UNPARSED, None)

    # ------------------------------------------------------------------ header
    def _header(self, sp: Span):
        cur = Cursor(self.buf, 0, self.size, "header", sp)
        if self.size < 12:
            raise cur.error(f"file is {self.size} bytes; a NAC header needs at least 88")
        magic = bytes(self.buf[0:3])
        if magic != L.MAGIC:
            raise cur.error(f"not a NAC file: magic is {magic!r}, expected b'NAC'", 0)
        vbyte = self.buf[3]
        if vbyte == 1:
            layout = L.V16
            if self.size >= 20 and struct.unpack_from("<Q", self.buf, 12)[0] == 90:
                raise cur.error("pre-v1.6 container (90-byte header, 2025-12/2026-01) is not supported", 12)
        elif vbyte == 2:
            if self.size < 20:
                raise cur.error("truncated header: v1.7/v1.8 needs at least 92 bytes", self.size)
            first = struct.unpack_from("<Q", self.buf, 12)[0]
            if first == 92:
                layout = L.V17
            elif first == 100:
                layout = L.V18
            else:
                raise cur.error(f"version byte 2 but MMAP offset {first} is neither 92 (v1.7) nor 100 (v1.8)", 12)
        else:
            raise cur.error(f"unsupported version byte {vbyte} (1 = v1.6, 2 = v1.7/v1.8)", 3)
        if self.size < layout.size:
            raise cur.error(f"truncated header: v{layout.version} needs {layout.size} bytes, file has {self.size}",
                            self.size)
        sp.length = layout.size
        sp.value = f"v{layout.version}"
        h = self.nac.header
        h.version = layout.version
        cur.raw(3, "magic", "magic", "NAC")
        cur.scalar("u8", "version")
        flags = cur.scalar("u8", "flags")
        h.weights_internal = bool(flags & 0x80)
        h.quant_method = flags & layout.quant_mask
        h.trng_flag = bool(flags & layout.trng_flag)
        h.num_inputs = cur.scalar("u16", "num_inputs")
        h.num_outputs = cur.scalar("u16", "num_outputs")
        h.reserved = cur.scalar("u8", "reserved")
        h.d_model = cur.scalar("u16", "d_model")
        tbl = sp.add(12, 8 * len(layout.slots), "offsets", "u64[]")
        offsets = {}
        for tag in layout.slots:
            offsets[tag] = cur.scalar("u64", tag, parent=tbl)
        if layout.version == "1.6":
            h.padding = bytes(cur.raw(4, "padding", "pad"))
        return layout, offsets

    def _locate(self, layout: L.HeaderLayout, offsets: dict) -> list:
        regions = []
        seen: dict[int, str] = {}
        for slot, (tag, off) in enumerate(offsets.items()):
            if off == 0:
                continue
            where = 12 + 8 * slot
            if off < layout.size or off + 4 > self.size:
                self.p.add(NacFormatError("header", where,
                                          f"{tag} offset {off} is outside the file's sections "
                                          f"[{layout.size}, {self.size - 4}]"))
                continue
            if off in seen:
                self.p.add(NacFormatError("header", where, f"{tag} starts at {off}, where {seen[off]} starts too"))
                continue
            seen[off] = tag
            regions.append((off, tag))
        regions.sort()
        return regions

    # ------------------------------------------------------------------ sections
    def _section(self, tag: str, start: int, end: int, sp: Span) -> None:
        cur = Cursor(self.buf, start, end, tag, sp)
        decode = getattr(self, "_sec_" + tag)
        try:
            cur.tag(L.tag_bytes(tag))
            decode(cur, sp)
        except NacFormatError as e:
            self.p.add(e)
        self._trailing(tag, sp, cur.pos, end)

    def _trailing(self, region: str, sp: Span, pos: int, end: int, parent: Optional[Span] = None,
                  own: bool = True) -> None:
        if pos < end:
            self.nac.trailing[region] = bytes(self.buf[pos:end])
            (sp if own else parent).add(pos, end - pos, UNPARSED, UNPARSED, f"{end - pos} bytes after {region}")

    # MMAP ---------------------------------------------------------------------------
    def _sec_MMAP(self, cur: Cursor, sp: Span) -> None:
        # Where each record starts, checked to fit; the record objects are made when the
        # schedule is first asked for (MmapTable): a hostile one packs a record into 3 bytes.
        n = cur.scalar("u32", "count")
        cur.check_count(n, 3, "MMAP record")
        buf, head = self.buf, RECORD_HEAD.unpack_from
        ninstr = len(self.nac.instructions)
        first = start = cur.pos
        limit = cur.limit
        starts = array("Q")
        append = starts.append
        try:
            for _ in range(n):
                if limit - start < 3:
                    cur.pos = start
                    cur.need(3, "MMAP record header")
                tick, count = head(buf, start)
                end = start + 3 + 3 * count
                if end > limit:
                    cur.pos = start
                    cur.need(3 + 3 * count, f"MMAP record for tick {tick}")
                append(start - first)
                if ninstr and tick >= ninstr:
                    self.p.add(NacFormatError("MMAP", start, f"tick {tick} is beyond the last instruction ({ninstr - 1})"))
                start = end
        finally:
            cur.pos = start
            table = self.nac.mmap = MmapTable(bytes(buf[first:start]), first, starts)
            _mmap_spans(sp, table)

    # OPS / TRNG ---------------------------------------------------------------------
    def _sec_OPS(self, cur: Cursor, sp: Span) -> None:
        def store(table):
            self.nac.instructions = table
        self._instructions(cur, sp, False, store)

    def _sec_TRNG(self, cur: Cursor, sp: Span) -> None:
        def store(table):
            self.nac.trng = table
        self.nac.trng = []
        self._instructions(cur, sp, True, store)

    def _instructions(self, cur: Cursor, sp: Span, trng: bool, store) -> None:
        """Instruction starts found by a walk (:meth:`_OpsLayout.walk`) that checks each
        distinct encoding once; an instruction it stops at goes through
        :meth:`_decode_instruction`, which names the problem. ``store`` receives the :class:`InstructionTable` (also when a fault
        ends the section early: what decoded is kept)."""
        n = cur.scalar("u32", "count")
        cur.check_count(n, 2, "instruction")
        first = cur.pos
        code = bytes(self.buf[first:cur.limit])
        lay = _OpsLayout(self.nac, n, trng)
        starts = array("I")
        p = 0
        size = len(code)
        end = first
        try:
            while True:
                p = lay.walk(code, p, n - len(starts), starts)
                if len(starts) >= n:
                    break
                # the walk stopped at p: this instruction is decoded field by field, which
                # names what is wrong with it (and raises when it ends the section)
                _ins, q = self._decode_instruction(len(starts), first + p, first + size, lay)
                starts.append(p)
                p = q - first
            end = first + p
        except NacFormatError:
            end = self._fault_pos
            raise
        finally:
            lay.end_walk()
            cur.pos = end
            s = np.frombuffer(starts, dtype=np.uint32).astype(np.int64)
            ends = np.empty_like(s)
            ends[:-1] = s[1:]
            if len(s):
                ends[-1] = p
            table = InstructionTable(code, first, s, ends, lay.layout)
            store(table)
            sp.set_index(len(table), lambda i: table.decode(i).offset,
                         lambda i: _instruction_span(sp, table.decode(i), self.nac))

    def _decode_instruction(self, i: int, pos: int, limit: int, lay: "_OpsLayout") -> tuple:
        """Instruction ``i`` at file offset ``pos``, field by field, every problem named
        (recorded, or raised when it ends the section); returns it and where the next starts."""
        section = "TRNG" if lay.trng else "OPS"
        buf = self.buf
        names = lay.names
        problems = self.p
        self._fault_pos = pos
        start = pos
        if pos + 2 > limit:
            raise NacFormatError(section, pos, f"truncated: instruction {i} of {lay.count} starts at the section end")
        a = buf[pos]
        b = buf[pos + 1]
        pos += 2
        self._fault_pos = pos
        c_len = d_len = 0
        c_counted = False
        if a >= 10:
            info = lay.sig_info.get(b)
            if info is not None and info[0]:
                d_len = info[0]
                c_counted = info[1]
            elif names.get(a) in _GETITEM_LIKE:
                c_counted, d_len = True, 1
            elif b != 0 and info is None:
                problems.report(section, start + 1, f"instruction {i}: signature B={b} is not in PERM")
            if a not in names:
                problems.report(section, start, f"instruction {i}: unknown op id A={a} "
                                f"(not a standard op of v{self.nac.version} and not in CMAP)")
        else:
            c_len, d_len, c_counted = lay.layout(a, b)
            if a not in _KNOWN_SYSTEM:
                problems.report(section, start, f"instruction {i}: unknown system op id A={a}")
        c = None
        if c_counted:
            if pos + 2 > limit:
                raise NacFormatError(section, pos, f"truncated: instruction {i} C count")
            k = _I16.unpack_from(buf, pos)[0]
            if k < 0:
                raise NacFormatError(section, pos, f"instruction {i}: negative constant count {k} in C")
            if pos + 2 + 2 * k > limit:
                raise NacFormatError(section, pos, f"truncated: instruction {i} C declares {k} constant ids, "
                                     f"{(limit - pos - 2) // 2} fit")
            c = (k,) + struct.unpack_from(f"<{k}h", buf, pos + 2) if k else (0,)
            pos += 2 + 2 * k
        elif c_len:
            if pos + 2 * c_len > limit:
                raise NacFormatError(section, pos, f"truncated: instruction {i} C needs {2 * c_len} bytes")
            c = struct.unpack_from(f"<{c_len}h", buf, pos)
            pos += 2 * c_len
        self._fault_pos = pos
        d = None
        if d_len:
            if pos + 2 * d_len > limit:
                raise NacFormatError(section, pos, f"truncated: instruction {i} D needs {2 * d_len} bytes")
            d = struct.unpack_from(f"<{d_len}h", buf, pos)
            dpos = pos
            pos += 2 * d_len
            if a != OP_CONVERGENCE:
                for j, dv in enumerate(d):
                    if dv > 0 or i + dv < 0:
                        problems.report(section, dpos + 2 * j,
                                        f"instruction {i}: D[{j}] = {dv} points to instruction {i + dv}, "
                                        f"which is not an earlier instruction")
                if a >= 10 and c_counted and c is not None:
                    zeros = d.count(0)
                    if zeros != c[0]:
                        problems.report(section, start + 2, f"instruction {i}: C holds {c[0]} constant ids "
                                                            f"but D has {zeros} constant slots")
        self._fault_pos = pos
        return Instruction(i, a, b, c, d, start), pos

    # CMAP / PERM / CNST -------------------------------------------------------------
    def _sec_CMAP(self, cur: Cursor, sp: Span) -> None:
        try:
            self._id_table(cur, sp, "cmap", ("op", "cmap", "name"), "op id {} is defined twice")
        finally:
            self.nac.invalidate()

    def _sec_PERM(self, cur: Cursor, sp: Span) -> None:
        def check(start: int, sid: int, s: str) -> None:
            if not _PERM_CODES.issuperset(s):
                bad = sorted(set(s) - _PERM_CODES)
                self.p.add(NacFormatError("PERM", start + 3, f"signature {sid} {s!r} has unknown codes {bad}"))
        self._id_table(cur, sp, "perms", ("sig", "perm", "signature"), "signature id {} is defined twice", check)

    def _id_table(self, cur: Cursor, sp: Span, attr: str, names: tuple, twice_reason: str, check=None) -> None:
        """CMAP's and PERM's records (id u16, length u8, UTF-8 text) as ``nac.<attr>``, id -> text:
        a dict when every id is below 256 (every real file), else an :class:`IdTextTable` over
        the records. What was read before a record that fails stays. Record spans are made on
        first access, one record at a time for ``span_at``; a record that fails is read again
        field by field, which records its spans and raises. ``check(start, id, text)`` is called
        for each record."""
        label, kind, field = names
        n = cur.scalar("u32", "count")
        cur.check_count(n, 3, f"{cur.section} record")
        buf, base, limit = cur.buf, cur.base, cur.limit
        first = end = cur.pos
        starts = array("I" if limit - first < 1 << 32 else "Q")     # each record's start, from the first's
        quote = kind == "perm"

        def make(i: int) -> Span:
            rs = first + starts[i]
            ident, ln = _ID_TEXT_HEAD.unpack_from(buf, rs - base)
            text = str(buf[rs + 3 - base:rs + 3 + ln - base], "utf-8")
            rec = sp.detached(rs, 3 + ln, f"{label}[{i}]", kind, f"{ident} = {text!r}" if quote else f"{ident} = {text}")
            rec.add(rs, 2, "id", "u16", ident)
            rec.add(rs + 2, 1, "length", "u8", ln)
            rec.add(rs + 3, ln, field, "utf8", text)
            return rec

        sp.set_index(starts.__len__, lambda i: first + starts[i], make)
        head = _ID_TEXT_HEAD.unpack_from
        low: dict = {}
        present = bytearray(8192)           # one bit per u16 id met
        distinct = 0
        try:
            for i in range(n):
                rs = cur.pos
                text = None
                if rs + 3 <= limit:
                    ident, ln = head(buf, rs - base)
                    if rs + 3 + ln <= limit:
                        try:
                            text = str(buf[rs + 3 - base:rs + 3 + ln - base], "utf-8")
                        except UnicodeDecodeError:
                            pass
                if text is None:        # the field-by-field read says what is wrong, and where
                    rec = sp.add(rs, 0, f"{label}[{i}]", kind)
                    cur.scalar("u16", "id", rec)
                    ln = cur.scalar("u8", "length", rec)
                    cur.text(ln, field, rec)
                    raise cur.error(f"{label}[{i}] cannot be read", rs)     # (not reached: text() raised)
                if present[ident >> 3] & (1 << (ident & 7)):
                    self.p.report(cur.section, rs, twice_reason.format(ident))     # (strict: raises)
                else:
                    present[ident >> 3] |= 1 << (ident & 7)
                    distinct += 1
                starts.append(rs - first)
                cur.pos = end = rs + 3 + ln
                if check is not None:
                    check(rs, ident, text)
                if ident < 256:
                    low[ident] = text
        finally:
            setattr(self.nac, attr, low if distinct == len(low) else IdTextTable(
                NameRecords(bytes(buf[first - base:end - base]), first, starts, _ID_TEXT_HEAD), distinct, low))

    def _sec_CNST(self, cur: Cursor, sp: Span) -> None:
        n = cur.scalar("u32", "count")
        cur.check_count(n, 5, "CNST record")

        def store(records: ConstRecords, present: bytearray, distinct: int) -> None:
            self.nac.constants = ConstTable(records, present, distinct)
        self._const_records(cur, sp, n, store, twice="constant id {} is defined twice")

    def _const_records(self, cur: Cursor, sp: Span, n: int, store, twice: Optional[str] = None) -> None:
        """``n`` CNST-format records (CNST's, ORCH's pool), each checked and none kept:
        ``store(records, ids bitset, distinct ids)`` receives them (also when a fault ends the
        section early: the records before it). Checked by decode_constant; one it leaves
        (something wrong) by read_constant, which names the problem. Record spans are built on
        first access (65k constants made 5 spans each); a record that fails gets the spans of
        the fields it read. ``twice``: the problem of an id met again (None: allowed)."""
        buf, base, limit = cur.buf, cur.base, cur.limit
        first = good_end = cur.pos
        good = 0                        # records read whole
        starts = array("I" if limit - first < 1 << 32 else "Q")   # each record's start, from the first's
        present = bytearray(8192)       # a bit per u16 id
        distinct = 0
        sink = _NoSpans()
        try:
            for i in range(n):
                pos = cur.pos
                starts.append(pos - first)
                const, end = decode_constant(buf, pos - base, limit - base)
                if const is None:
                    const = read_constant(cur, sink, "")
                else:
                    cur.pos = end + base
                good, good_end = i + 1, cur.pos
                cid = const.id
                if present[cid >> 3] & (1 << (cid & 7)):
                    if twice is not None:
                        self.p.report(cur.section, cur.pos, twice.format(cid))
                else:
                    present[cid >> 3] |= 1 << (cid & 7)
                    distinct += 1
        finally:
            code = bytes(buf[first - base:good_end - base])
            section = cur.section

            def careful(offset: int) -> Constant:
                return read_constant(Cursor(code, offset, first + len(code), section, None, first), _NoSpans(), "")
            store(ConstRecords(code, first, starts, good, careful), present, distinct)
            sp.set_index(len(starts), lambda i: first + starts[i],
                         functools.partial(_constant_span, self.nac, sp, starts, first, cur.limit))

    # DATA ---------------------------------------------------------------------------
    def _sec_DATA(self, cur: Cursor, sp: Span) -> None:
        # Record spans are built on first access from what this pass kept (each record's start
        # and values; a tensor's header and metadata bytes, read by pread): 25k tensors made
        # 14 spans each. A record that fails gets its spans at once, from a second read.
        nac = self.nac
        sink = _NoSpans()
        b1 = sp.add(cur.pos, 0, "names", "block1")
        n = cur.scalar("u32", "count", b1)
        cur.check_count(n, 4, "parameter name")
        present = bytearray(8192)         # a bit per u16 id

        def params(records: NameRecords, distinct: int) -> None:
            nac.params = ParamTable(records, nac, present, distinct)
        self._name_block(cur, b1, n, "param", "id", "{} = {}", present, params)
        b2 = sp.add(cur.pos, 0, "inputs", "block2")
        m = cur.scalar("u32", "count", b2)
        cur.check_count(m, 4, "input name")

        def inputs(records: NameRecords, _distinct: int) -> None:
            nac.input_names = InputNameTable(records)
        self._name_block(cur, b2, m, "input", "index", "v{} = {}", None, inputs)
        if not nac.header.weights_internal:
            return
        b3 = sp.add(cur.pos, 0, "tensors", "block3")
        start = cur.pos
        kept_at = array("Q")      # each record read: its start (its bytes are read again for its spans)
        _tensor_spans(b3, nac, kept_at)
        self._ahead = (0, b"")
        try:
            t = cur.scalar("u32", "count", b3)
            cur.check_count(t, 14, "tensor record")
            # A plain (unquantised) record whose header and metadata are in the read-ahead is
            # decoded here, inline; anything else goes through _tensor_record, field by field.
            # A tensor's Parameter: when every name has a tensor record (a compiled file), all
            # are made at once (cheaper); else each alone, as its record comes (a hostile file
            # names 65k in 4 bytes each and has a few tensors: those few are made)
            param_of = nac.params.made().get if t >= len(nac.params) else nac.params.one
            order, limit = nac.tensor_order, cur.limit
            # equal shapes share one tuple (25k tensors repeat a few hundred); a parameter whose
            # data_offset is set already had its tensor record (no set of ids beside them)
            shapes: dict = {}
            head, itemsizes, fd = _TENSOR_HEAD.unpack_from, _ITEMSIZE, self.fd
            for i in range(t):
                rs = cur.pos
                a0, ahead = self._ahead if fd is not None else (0, self.buf)
                off = rs - a0
                if (off < 0 or off + 16 > len(ahead)) and fd is not None and rs + 16 <= limit:
                    a0, ahead = self._ahead = (rs, os.pread(fd, 4096, rs))
                    off = 0
                if 0 <= off and off + 16 <= len(ahead) and rs + 16 <= limit:
                    pid, meta_len, data_len = head(ahead, off)
                    rank = ahead[off + 15]
                    meta_end = off + 14 + meta_len
                    param = param_of(pid)
                    core = 3 + 4 * rank           # a plain tensor's fields; then alignment padding
                    pad = meta_len - core
                    if 0 <= pad < 64 and meta_end <= len(ahead) and ahead[off + 14 + core - 1] == 0 \
                            and (not pad or not any(ahead[meta_end - pad:meta_end])) \
                            and rs + 14 + meta_len + data_len <= limit and param is not None \
                            and param.data_offset < 0:
                        shape = _u32s(rank).unpack_from(ahead, off + 16)
                        shape = shapes.setdefault(shape, shape) if len(shapes) < 65536 else shape
                        meta = TensorMeta(ahead[off + 14], shape, 0)
                        if pad:
                            meta.extra = _ZEROS[pad]
                        param.meta, param.data_offset, param.data_length = meta, rs + 14 + meta_len, data_len
                        order.append(pid)
                        cur.pos = rs + 14 + meta_len + data_len
                        itemsize = itemsizes.get(meta.dtype)
                        if itemsize is not None and math.prod(shape) * itemsize != data_len:
                            self.p.add(NacFormatError(
                                "DATA/tensors", rs, f"tensor {param.name}: shape {list(shape)} of "
                                f"{meta.dtype_name} needs {math.prod(shape) * itemsize} bytes, record holds {data_len}"))
                        kept_at.append(rs)
                        continue
                try:
                    self._tensor_record(cur, sink, i)
                    kept_at.append(rs)
                except NacFormatError:
                    cur.pos = rs      # again, recording the spans of the fields before the fault
                    self._tensor_record(cur, b3, i, model=False)
                    raise
        finally:
            b3.length = cur.pos - start

    def _name_block(self, cur: Cursor, block: Span, n: int, kind: str, key: str, value: str,
                    present: Optional[bytearray], store) -> None:
        """Check ``n`` name records (u16 key, u16 length, UTF-8 name) and keep where each starts;
        with ``present``, each key is a parameter id, marked there, and one named twice is a
        problem. ``store(records, distinct keys)`` receives the :class:`NameRecords` (also when
        a fault ends the block: what decoded is kept)."""
        buf, base, limit = cur.buf, cur.base, cur.limit
        first = cur.pos
        starts = array("Q")
        append, rec_head = starts.append, _NAME_HEAD.unpack_from
        distinct = 0
        try:
            for _ in range(n):
                rs = cur.pos
                cur.need(4, key)
                ident, ln = rec_head(buf, rs - base)
                cur.pos = rs + 4
                try:
                    if rs + 4 + ln > limit:
                        raise ValueError
                    str(buf[rs + 4 - base:rs + 4 + ln - base], "utf-8")
                    cur.pos += ln
                except ValueError:       # (UnicodeDecodeError too) the cursor says what and where
                    cur.text(ln, "name", _NoSpans())
                append(rs - first)
                if present is not None:
                    bit = 1 << (ident & 7)
                    if present[ident >> 3] & bit:
                        self.p.add(NacFormatError("DATA/names", rs, f"parameter id {ident} is named twice"))
                    else:
                        present[ident >> 3] |= bit
                        distinct += 1
        except NacFormatError:
            cur.pos = rs
            _name_record_spans(cur, block, len(starts), kind, key, value)
            raise
        finally:
            block.length = cur.pos - block.offset
            records = NameRecords(bytes(buf[first - base:cur.pos - base]), first, starts)
            _name_spans(block, records, kind, key, value)
            store(records, distinct)

    def _record_bytes(self, offset: int, n: int) -> bytes:
        """Small reads between tensors go through pread: touching the mapping would fault in
        (and count as resident) a whole huge page of weights per record header. One read of
        at least 4 KB serves the header, the metadata and, for small tensors, the records after."""
        if self.fd is None:
            return bytes(self.buf[offset:offset + n])
        a0, ahead = self._ahead
        if a0 <= offset and offset + n <= a0 + len(ahead):
            return ahead[offset - a0:offset - a0 + n]
        ahead = os.pread(self.fd, max(n, 4096), offset)
        self._ahead = (offset, ahead)
        return ahead[:n]

    def _tensor_record(self, cur: Cursor, parent, i: int, model: bool = True) -> bytes:
        """One block-3 record; returns its header and metadata bytes. ``model=False`` only
        records spans (the second read of a failing record)."""
        rs = cur.pos
        cur.section = "DATA/tensors"
        if not model:
            rec = parent.add(rs, 0, f"tensor[{i}]", "tensor")
        if cur.limit - rs < 14:      # (the message is built only when it is needed)
            cur.need(14, f"tensor {i} record header")
        head = self._record_bytes(rs, 14)
        pid, meta_len, data_len = _TENSOR_HEAD.unpack(head)
        cur.pos = rs + 14
        if not model and meta_len > cur.remaining:
            _tensor_record_spans(self.nac, rec, rs, i, head, data_len, complete=False)
        if meta_len > cur.limit - cur.pos:
            cur.need(meta_len, f"tensor {i} metadata")
        blob = head + self._record_bytes(cur.pos, meta_len)
        if not model:
            _tensor_record_spans(self.nac, rec, rs, i, blob, data_len, complete=False)
            cur.pos += meta_len
            cur.need(data_len, f"tensor {i} data ({data_len} bytes)")
            return blob
        rank = blob[15] if meta_len >= 2 else -1
        pad = meta_len - (3 + 4 * rank)          # alignment padding after a plain tensor's fields
        if rank >= 0 and 0 <= pad < 64 and blob[len(blob) - pad - 1] == L.QUANT_NONE \
                and not any(blob[len(blob) - pad:]):
            meta = TensorMeta(blob[14], _u32s(rank).unpack_from(blob, 16), L.QUANT_NONE)   # one unpack
            if pad:
                meta.extra = _ZEROS[pad]
        else:
            meta = read_tensor_meta(Cursor(blob, cur.pos, cur.pos + meta_len, "DATA/meta", parent, base=rs))
        cur.pos += meta_len
        if data_len > cur.limit - cur.pos:
            cur.need(data_len, f"tensor {i} data ({data_len} bytes)")
        nac = self.nac
        param = nac.params.one(pid)
        if param is None:
            self.p.add(NacFormatError("DATA/tensors", rs, f"tensor {i} has parameter id {pid}, which block 1 does not name"))
            param = nac.params[pid] = Parameter(pid, f"<unnamed {pid}>", _file=nac)
        if param.data_offset >= 0:
            self.p.add(NacFormatError("DATA/tensors", rs, f"parameter id {pid} has two tensor records"))
        param.meta, param.data_offset, param.data_length = meta, cur.pos, data_len
        nac.tensor_order.append(pid)
        cur.pos += data_len
        itemsize = _ITEMSIZE.get(meta.dtype)      # meta.stored_nbytes without building a dtype
        expect = math.prod(meta.shape) * (itemsize or 1)
        if itemsize is not None and expect != data_len:
            self.p.add(NacFormatError("DATA/tensors", rs, f"tensor {param.name}: shape {list(meta.shape)} of "
                                      f"{meta.dtype_name} needs {expect} bytes, record holds {data_len}"))
        return blob

    # PROC / ORCH / RSRC / ARRS --------------------------------------------------------
    def _sec_PROC(self, cur: Cursor, sp: Span) -> None:
        n = cur.scalar("u32", "length")
        start = cur.pos
        data = bytes(cur.raw(n))
        man = sp.add(start, n, "manifest", "tisa")
        decoded = None
        if n:   # an empty manifest is just empty, not a malformed TISA stream
            # records and their field spans are decoded again when asked for (the listing, the
            # structure view, `nac span`)
            decoded, _ = decode_tisa(data, start, man, report=self.p.report)
        self.nac.proc = Proc(data, decoded)

    def _sec_ORCH(self, cur: Cursor, sp: Span) -> None:
        blen = cur.scalar("u32", "bytecode_length")
        ccount = cur.scalar("u32", "const_count")
        start = cur.pos
        code = bytes(cur.raw(blen))
        bsp = sp.add(start, blen, "bytecode", "mep")
        orch = Orch(code)
        self.nac.orch = orch
        if blen:
            orch.instructions, problems = decode_mep(code, start, bsp)
            for pr in problems:
                self.p.add(pr)
        cur.check_count(ccount, 5, "ORCH pool constant")
        pool = sp.add(cur.pos, 0, "pool", "pool")
        ps = cur.pos

        def store(records: ConstRecords, present: bytearray, distinct: int) -> None:
            orch.pool = PoolTable(records, present, distinct)
        try:
            self._const_records(cur, pool, ccount, store)
        finally:
            pool.length = cur.pos - ps

    def _sec_RSRC(self, cur: Cursor, sp: Span) -> None:
        n = cur.scalar("u32", "count")
        cur.check_count(n, 6, "RSRC file")
        # each entry's head kept (its payload stays in the file), the Resource objects made on
        # first use; record spans built on first access from the table, a failing record's at
        # once, from a second read
        heads, at, starts = bytearray(), array("Q"), array("Q")
        table = self.nac.rsrc = ResourceTable(heads, at, starts, self.nac)
        _resource_spans(sp, table)
        sink = _NoSpans()
        buf, base, limit = cur.buf, cur.base, cur.limit
        u16, u32 = _U16.unpack_from, _U32.unpack_from
        for i in range(n):
            rs = cur.pos
            try:
                name = None
                if rs + 2 <= limit:     # the common case inline; the cursor names any fault
                    ln = u16(buf, rs - base)[0]
                    if rs + 6 + ln <= limit:
                        try:
                            name = str(buf[rs + 2 - base:rs + 2 + ln - base], "utf-8")
                        except UnicodeDecodeError:
                            pass
                if name is None:
                    ln = cur.scalar("u16")
                    name = cur.text(ln, "name", sink)
                    dl = cur.scalar("u32")
                else:
                    dl = u32(buf, rs + 2 + ln - base)[0]
                    cur.pos = rs + 6 + ln
                if dl > limit - cur.pos:
                    cur.need(dl, f"resource {name!r} data")
            except NacFormatError:
                cur.pos = rs
                rec = sp.add(rs, 0, f"file[{i}]", "resource")
                ln = cur.scalar("u16", "name_length", rec)
                name = cur.text(ln, "name", rec)
                cur.scalar("u32", "data_length", rec)
                raise      # pragma: no cover - the second read fails where the first did
            at.append(len(heads))
            heads += buf[rs - base:cur.pos - base]
            starts.append(rs)
            cur.pos += dl

    def _sec_ARRS(self, cur: Cursor, sp: Span) -> None:
        n = cur.scalar("u32", "count")
        cur.check_count(n, 12, "ARRS array")
        # each entry's head kept (its data stays in the file), the NamedArray objects made on
        # first use; record spans built on first access, a failing record's at once
        heads, at, starts = bytearray(), array("Q"), array("Q")
        nac, limit = self.nac, cur.limit
        nac.arrs = ArrayTable(heads, at, starts, nac)
        sp.set_index(starts.__len__, starts.__getitem__,
                     lambda i: _array_span(nac, sp, starts[i], limit, i))
        buf, base = cur.buf, cur.base
        for i in range(n):
            rs = cur.pos
            head = array_head(buf, rs - base, limit - base)
            if head is None or head[3] > limit - rs - head[4]:
                _read_array(cur, sp.add(rs, 0, f"array[{i}]", "array"), nac)    # names the fault
                raise cur.error(f"array[{i}] cannot be read", rs)      # (not reached: it raised)
            at.append(len(heads))
            heads += buf[rs - base:rs - base + head[4]]
            starts.append(rs)
            cur.pos = rs + head[4] + head[3]


def _read_array(cur: Cursor, rec: Span, nac: NacFile) -> NamedArray:
    """One ARRS entry field by field, its spans under ``rec`` (as far as it reads)."""
    rs = cur.pos
    try:
        ln = cur.scalar("u16", "name_length", rec)
        name = rec.value = cur.text(ln, "name", rec)
        dt = cur.scalar("u8", "dtype", rec)
        rank = cur.scalar("u8", "rank", rec)
        shape = cur.array("u32", rank, "shape", rec)
        dl = cur.scalar("u64", "data_length", rec)
        cur.need(dl, f"array {name!r} data")
        rec.add(cur.pos, dl, "data", "array_data", f"{L.dtype_name(dt)}{list(shape)}")
        arr = NamedArray(name, dt, tuple(shape), cur.pos, dl, _file=nac)
        cur.pos += dl
        return arr
    finally:
        rec.length = cur.pos - rs


def _array_span(nac: NacFile, section: Span, start: int, end: int, i: int) -> Span:
    rec = section.detached(start, 0, f"array[{i}]", "array")
    _read_array(Cursor(nac._buf, start, end, "ARRS"), rec, nac)
    return rec


# --------------------------------------------------------------------------- shared records
def read_constant(cur: Cursor, parent: Span, label: str) -> Constant:
    """One CNST-format record (also used by the ORCH constant pool)."""
    rs = cur.pos
    rec = parent.add(rs, 0, label, "const")
    cid = cur.scalar("u16", "id", rec)
    typ = cur.scalar("u8", "type", rec)
    ln = cur.scalar("u16", "length", rec)
    length_field = None
    if typ == L.CONST_NULL:
        value, length_field = None, ln
    elif typ == L.CONST_BOOL:
        at = cur.pos
        byte = cur.scalar("u8", "value", rec)
        if byte > 1:
            raise cur.error(f"constant {cid}: bool byte is {byte}, expected 0 or 1", at)
        value, length_field = bool(byte), ln
    elif typ in (L.CONST_INT64, L.CONST_FLOAT64):
        if ln != 8:
            raise cur.error(f"constant {cid}: {L.CONST_TYPE_NAMES[typ]} with length {ln}, expected 8", rs + 3)
        value = cur.scalar("i64" if typ == L.CONST_INT64 else "f64", "value", rec)
    elif typ == L.CONST_STRING:
        value = cur.text(ln, "value", rec)
    elif typ == L.CONST_LIST_I32:
        value = cur.array("i32", ln)
        rec.add(cur.pos - 4 * ln, 4 * ln, "value", "i32[]", list(value)) if ln else None
    elif typ == L.CONST_LIST_F32:
        value = cur.array("f32", ln)
        rec.add(cur.pos - 4 * ln, 4 * ln, "value", "f32[]", list(value)) if ln else None
    else:
        raise cur.error(f"constant {cid}: unknown type code {typ}", rs + 2)
    rec.length, rec.value = cur.pos - rs, value
    return Constant(cid, typ, value, length_field)


_PERM_CODES = frozenset("QKVMBWTPSAfibsc")


def read_tensor_meta(cur: Cursor) -> TensorMeta:
    dt = cur.scalar("u8", "dtype")
    rank = cur.scalar("u8", "rank")
    shape = cur.array("u32", rank, "shape")
    q = cur.scalar("u8", "quant")
    meta = TensorMeta(dt, tuple(shape), q)
    if q == L.QUANT_INT8_TENSOR:
        meta.scale_bits = bytes(cur.raw(4, "scale", "f32"))
        meta.scale = float(np.frombuffer(meta.scale_bits, "<f4")[0])
        cur.span.children[-1].value = meta.scale
    elif q == L.QUANT_INT8_CHANNEL:
        meta.axis = cur.scalar("u8", "axis")
        n = cur.scalar("u32", "count")
        cur.need(4 * n, "channel scales")
        meta.scales = np.frombuffer(bytes(cur.raw(n * 4, "scales", "f32[]", f"{n} scales")), "<f4").copy()
    elif q == L.QUANT_BLOCK_FP8:
        meta.block_size = cur.scalar("u16", "block_size")
        orank = cur.scalar("u8", "original_rank")
        at = cur.pos
        meta.original_shape = tuple(cur.array("u32", orank, "original_shape"))
        stored = math.prod(meta.shape)
        if math.prod(meta.original_shape) > stored:
            # the values come from the stored blocks: a bigger original shape would make
            # every consumer (dequantiser, simulator, GUI) size buffers from a lie
            raise cur.error(f"BLOCK_FP8 original shape {list(meta.original_shape)} holds "
                            f"{math.prod(meta.original_shape)} values but only {stored} are stored", at)
        n = cur.scalar("u32", "count")
        cur.need(4 * n, "block scales")
        meta.scales = np.frombuffer(bytes(cur.raw(n * 4, "scales", "f32[]", f"{n} scales")), "<f4").copy()
    if cur.pos < cur.limit:
        n = cur.limit - cur.pos
        zeros = n < 64 and not any(cur.buf[cur.pos - cur.base:cur.limit - cur.base])
        # zero bytes that put the data on a 64-byte offset (format/writer.py TENSOR_ALIGN)
        meta.extra = bytes(cur.raw(n, "padding", "zeros", f"{n} bytes aligning the data")) if zeros else \
            bytes(cur.raw(n, UNPARSED, UNPARSED))
    return meta


# --------------------------------------------------------------------------- lazy span builders
class _NoSpans:
    """Stands in for a Span while a section is first decoded: records nothing."""
    __slots__ = ("length", "value")

    def add(self, *_args, **_kw) -> "_NoSpans":
        return self

    @property
    def children(self) -> list:
        return [self]


_U16, _U32 = struct.Struct("<H"), struct.Struct("<I")
_ITEMSIZE = {code: np.dtype(s).itemsize for code, s in L.NUMPY_STORAGE.items()}
_TENSOR_HEAD = struct.Struct("<HIQ")       # DATA tensor record: param id, meta length, data length


def _name_spans(block: Span, records: NameRecords, kind: str, key: str, value: str) -> None:
    """DATA block 1/2 record spans from the records the reader kept."""
    def make(i: int) -> Span:
        rs, ident, name = records.record(i)
        ln = len(name.encode("utf-8"))
        rec = block.detached(rs, 4 + ln, f"{kind}[{i}]", kind, value.format(ident, name))
        rec.add(rs, 2, key, "u16", ident)
        rec.add(rs + 2, 2, "length", "u16", ln)
        rec.add(rs + 4, ln, "name", "utf8", name)
        return rec
    block.set_index(records.__len__, lambda i: records.base + records.starts[i], make)


def _name_record_spans(cur: Cursor, block: Span, i: int, kind: str, key: str, value: str) -> None:
    """The spans of a failing name record's fields, read again up to the fault."""
    rec = block.add(cur.pos, 0, f"{kind}[{i}]", kind)
    rs = cur.pos
    ident = cur.scalar("u16", key, rec)
    ln = cur.scalar("u16", "length", rec)
    name = cur.text(ln, "name", rec)
    rec.length, rec.value = cur.pos - rs, value.format(ident, name)


def _resource_spans(section: Span, records: ResourceTable) -> None:
    """RSRC record spans from the table (a record is its name's length, the name, the data's
    length and the data, which starts at ``data_offset``)."""
    start_of = records.start_of

    def make(i: int) -> Span:
        r = records.record(i)
        name, dl, rs = r.name, r.data_length, start_of(i)
        ln = r.data_offset - 6 - rs
        rec = section.detached(rs, 6 + ln + dl, f"file[{i}]", "resource", name)
        rec.add(rs, 2, "name_length", "u16", ln)
        rec.add(rs + 2, ln, "name", "utf8", name)
        rec.add(rs + 2 + ln, 4, "data_length", "u32", dl)
        rec.add(rs + 6 + ln, dl, "data", "bytes", f"{dl} bytes")
        return rec
    section.set_index(records.__len__, start_of, make)


def _tensor_spans(block: Span, nac: NacFile, kept_at: array) -> None:
    def make(i: int) -> Span:
        rs = kept_at[i]
        rec = block.detached(rs, 0, f"tensor[{i}]", "tensor")
        try:
            head = bytes(read_at(nac, rs, 14, "DATA/tensors", "tensor record"))      # read again: pread if mapped
            blob = head + bytes(read_at(nac, rs + 14, _TENSOR_HEAD.unpack_from(head)[1], "DATA/tensors",
                                        "tensor record"))
        except NacFormatError as e:       # the file shrank on disk since the read: say so, no fields
            rec.value = e.reason
            return rec
        _tensor_record_spans(nac, rec, rs, i, blob, _TENSOR_HEAD.unpack_from(blob)[2])
        return rec
    block.set_index(kept_at.__len__, kept_at.__getitem__, make)


def _tensor_record_spans(nac: NacFile, rec: Span, rs: int, i: int, blob: bytes, data_len: int,
                         complete: bool = True) -> None:
    """One tensor record's field spans under ``rec`` from its header and metadata bytes (``blob``,
    starting at file offset ``rs``); for a record that failed (``complete=False``), the fields
    before the fault (the header alone when ``blob`` holds no more)."""
    hc = Cursor(blob, rs, rs + 14, "DATA/tensors", rec, base=rs)
    pid = hc.scalar("u16", "param_id")
    meta_len = hc.scalar("u32", "meta_length")
    hc.scalar("u64", "data_length")
    if len(blob) == 14 and meta_len:
        return
    meta_sp = rec.add(rs + 14, meta_len, "meta", "meta")
    meta = read_tensor_meta(Cursor(blob, rs + 14, rs + 14 + meta_len, "DATA/meta", meta_sp, base=rs))
    if not complete:
        return
    label = f"{meta.dtype_name}{list(meta.shape)}"
    meta_sp.value = label
    rec.add(rs + 14 + meta_len, data_len, "data", "tensor_data", label)
    name = parameter_name(nac.params, pid)
    rec.length, rec.value = 14 + meta_len + data_len, f"{name if name is not None else pid}: {label}"


def _constant_span(nac: NacFile, section: Span, starts: array, first: int, end: int, i: int) -> Span:
    """Record ``i``'s spans alone (the ones before a fault, for the record that failed)."""
    scratch = Span(0, 0, "")
    try:
        read_constant(Cursor(nac._buf, first + starts[i], end, "CNST", scratch), scratch, f"const[{i}]")
    except NacFormatError:
        pass
    rec = scratch.children[0]
    rec.parent = section
    return rec


def _mmap_spans(section: Span, records: MmapTable) -> None:
    """MMAP's record spans, built on first access; ``span_at`` makes only the record it needs."""
    def make(i: int) -> Span:
        rec = records.record(i)
        r = section.detached(rec.offset, 3 + 3 * len(rec.commands), f"tick[{rec.tick}]", "mmap_record",
                             ", ".join(f"{c.name} {c.target}" for c in rec.commands))
        r.add(rec.offset, 2, "tick", "u16", rec.tick)
        r.add(rec.offset + 2, 1, "count", "u8", len(rec.commands))
        for j, c in enumerate(rec.commands):
            o = rec.offset + 3 + 3 * j
            cs = r.add(o, 3, f"cmd[{j}]", "mmap_command", f"{c.name} {c.target}")
            cs.add(o, 1, "action", "u8", c.name)
            cs.add(o + 1, 2, "target", "u16", c.target)
        return r

    section.set_index(len(records), records.offset, make)


def _instruction_span(section: Span, ins: Instruction, nac: NacFile) -> Span:
    s = section.detached(ins.offset, ins.nbytes, f"instr[{ins.index}]", "instruction", nac.instruction_name(ins))
    s.set_builder(_fields_of(ins))
    return s

def _fields_of(ins: Instruction):
    def build(s: Span) -> None:
        o = ins.offset
        s.add(o, 1, "A", "u8", ins.a)
        s.add(o + 1, 1, "B", "u8", ins.b)
        o += 2
        if ins.c:
            for j, v in enumerate(ins.c):
                s.add(o, 2, f"C[{j}]", "i16", v)
                o += 2
        if ins.d:
            for j, v in enumerate(ins.d):
                s.add(o, 2, f"D[{j}]", "i16", v)
                o += 2
    return build
