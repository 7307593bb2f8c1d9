"""TVMR v1 binary reader (seed 004; ``binary.rs`` layout per research note §2.3) and legacy TERN detection.

Layout: 48-byte header (all LE), extension table (``ext_count`` × 8 bytes), variable-length register
definitions up to ``instr_offset``, then ``instr_count`` × 8-byte instructions (ExtID and opcode BE).
Every count and offset is checked against the file size before anything is sized from it, so a
hostile header costs nothing; every problem is a :class:`NacFormatError` naming section and offset.

Checksum: the seed says xxhash64 over ext table ‖ register definitions ‖ instructions; the real
writer computes a home-made rotate-multiply hash instead (``tvmr_hash`` below). Both are computed;
``checksum_kind`` says which one the stored value matched ("tvmr-binary.rs", "xxh64" or None).
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ...errors import NacFormatError
from ..base import PeerFile, PeerWarning, mark_gaps
from . import isa

# the fixed layout and the checksums are shared with the assembler; re-exported here
from .layout import (CHECKSUMS, HEADER_SIZE, LEGACY_HEADER_SIZE, LEGACY_MAGIC, MAGIC, MASK64,  # noqa: F401
                     tvmr_hash, xxh64)

_HDR = struct.Struct("<4sHHIIIIIIQ8s")


@dataclass
class ExtEntry:
    ext_id: int
    version: tuple[int, int, int]
    offset: int

    @property
    def name(self) -> str:
        return isa.ext_name(self.ext_id)


@dataclass
class RegDef:
    reg: int
    type_id: int
    flags: int
    dims: list[int]
    key: bytes
    offset: int
    size: int

    @property
    def name(self) -> str:
        return isa.reg_name(self.reg)

    @property
    def type_name(self) -> str:
        return isa.TYPES.get(self.type_id, f"type{self.type_id:#06x}")

    @property
    def key_text(self) -> str:
        return self.key.decode("utf-8", "replace")

    @property
    def frozen(self) -> bool:
        return bool(self.flags & 2)


@dataclass(slots=True)
class Instr:
    index: int
    offset: int
    ext_id: int
    opcode: int
    operands: bytes

    @property
    def op(self) -> Optional[isa.Op]:
        return isa.lookup(self.ext_id, self.opcode)

    @property
    def mnemonic(self) -> str:
        op = self.op
        if op is None:
            return f"?{self.ext_id:04x}:{self.opcode:04x}"
        return op.mnemonic if self.ext_id == 0 else f"{isa.ext_name(self.ext_id)}.{op.mnemonic}"

    @property
    def raw(self) -> bytes:
        return struct.pack(">HH", self.ext_id, self.opcode) + self.operands


class InstrTable(Sequence):
    """The program's 8-byte instruction records as a read-only sequence over the file's bytes: an
    :class:`Instr` is made when one is asked for, so a 1 MB program costs no object per instruction
    (issue 15 §5: <= 20 B of RAM per file byte). Whole-program passes use :meth:`columns`."""

    __slots__ = ("_data", "_start", "_count", "_columns")

    def __init__(self, data: bytes = b"", start: int = 0, count: int = 0):
        self._data, self._start, self._count = data, start, count
        self._columns = None

    def __len__(self) -> int:
        return self._count

    def _make(self, k: int) -> Instr:
        off = self._start + 8 * k
        d = self._data
        return Instr(k, off, (d[off] << 8) | d[off + 1], (d[off + 2] << 8) | d[off + 3], d[off + 4:off + 8])

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self._make(j) for j in range(*k.indices(self._count))]
        k = k.__index__()
        if k < 0:
            k += self._count
        if not 0 <= k < self._count:
            raise IndexError(f"instruction {k} of {self._count}")
        return self._make(k)

    def __iter__(self):
        d, start = self._data, self._start
        for k, (ext_id, opc) in enumerate(struct.iter_unpack(">HH4x", d[start:start + 8 * self._count])):
            off = start + 8 * k
            yield Instr(k, off, ext_id, opc, d[off + 4:off + 8])

    def words(self) -> list[int]:
        """Each instruction's 8 bytes as one big-endian integer (a key for per-distinct-record work)."""
        import numpy as np
        return np.frombuffer(self._data, ">u8", self._count, self._start).tolist()

    def columns(self):
        """``(ext_ids, opcodes, operands)`` as numpy arrays (uint16, uint16, uint8 of shape (n, 4)),
        views of the file's bytes; memoised."""
        if self._columns is None:
            import numpy as np
            rec = np.frombuffer(self._data, np.dtype([("ext", ">u2"), ("op", ">u2"), ("b", "u1", (4,))]),
                                self._count, self._start)
            self._columns = (rec["ext"].astype(np.uint16), rec["op"].astype(np.uint16), rec["b"])
        return self._columns


@dataclass
class Header:
    version: int = 1
    flags: int = 0
    ext_offset: int = HEADER_SIZE
    ext_count: int = 0
    reg_offset: int = HEADER_SIZE
    reg_count: int = 0
    instr_offset: int = HEADER_SIZE
    instr_count: int = 0
    checksum: int = 0
    reserved: bytes = b"\0" * 8


class TvmrFile(PeerFile):
    format = "tvmr"
    title = "TVMR (Ternsig VM) binary"

    def __init__(self, data: bytes, path: Optional[str] = None):
        super().__init__(data, path)
        self.header = Header()
        self.legacy = False
        self.extensions: list[ExtEntry] = []
        self.registers: list[RegDef] = []
        self.instructions: InstrTable = InstrTable()
        self.checksum_kind: Optional[str] = None
        self.checksums: dict[str, int] = {}

    # -- PeerFile -----------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        s = super().summary()
        h = self.header
        s.update({"legacy_tern": self.legacy, "version": h.version, "flags": h.flags,
                  "extensions": [{"ext_id": e.ext_id, "name": e.name, "version": ".".join(map(str, e.version))}
                                 for e in self.extensions],
                  "registers": len(self.registers), "instructions": len(self.instructions),
                  "checksum": f"{h.checksum:016x}", "checksum_matched": self.checksum_kind,
                  "ops": self.op_histogram()})
        return s

    def op_histogram(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if not self.instructions:
            return out
        import numpy as np
        ext, opc, _ = self.instructions.columns()
        keys, first, counts = np.unique((ext.astype(np.uint32) << 16) | opc, return_index=True, return_counts=True)
        for k, n in sorted(zip(first.tolist(), counts.tolist())):      # first-seen order, as a loop would count
            m = self.instructions[k].mnemonic
            out[m] = out.get(m, 0) + n
        return out

    def format_summary(self) -> str:
        s = self.summary()
        lines = [f"{'format':>14}: tvmr{' (legacy TERN header)' if self.legacy else ''}",
                 f"{'file':>14}: {self.path}", f"{'size':>14}: {self.size:,} bytes",
                 f"{'version':>14}: {s['version']}  flags {s['flags']:#06x}",
                 f"{'extensions':>14}: " + (", ".join(f"{e['name']} {e['ext_id']:#06x}" for e in s["extensions"])
                                            or "none (core ISA only)"),
                 f"{'registers':>14}: {s['registers']}",
                 f"{'instructions':>14}: {s['instructions']}",
                 f"{'checksum':>14}: {s['checksum']} ({'matches ' + s['checksum_matched'] if s['checksum_matched'] else 'matches neither variant'})",
                 f"{'problems':>14}: {len(self.problems)}"]
        ops = ", ".join(f"{k}×{v}" for k, v in sorted(s["ops"].items(), key=lambda kv: -kv[1]))
        if ops:
            lines.append(f"{'ops':>14}: {ops}")
        return "\n".join(lines)

    def verify(self) -> list[NacFormatError]:
        from .checks import semantic_checks
        return list(self.problems) + semantic_checks(self)

    def disassemble(self) -> Optional[str]:
        text = getattr(self, "_text", None)       # memoised: the Studio's text pane and line map both read it
        if text is None:
            from .asm import disassemble
            text = self._text = disassemble(self)
        return text

    # -- instruction <-> byte offset <-> line of the text form (a debugger's and an editor's map) ---
    def instruction_at(self, offset: int) -> Optional[int]:
        """Index of the instruction whose 8 bytes hold ``offset`` (``None``: not in the instructions)."""
        if not self.instructions:
            return None
        first = self.instructions[0].offset
        k = (offset - first) // 8
        if offset < first or k >= len(self.instructions) or self.instructions[k].offset != first + 8 * k:
            return None
        return k

    def _text_lines(self) -> tuple[list[int], dict[int, int]]:
        """1-based line of each instruction in :meth:`disassemble`'s text, and its inverse (memoised:
        the text depends only on the decoded file)."""
        cached = getattr(self, "_line_map", None)
        if cached is None:
            from .asm import instruction_lines
            by_index = instruction_lines(self.disassemble(), len(self.instructions))
            cached = self._line_map = (by_index, {line: k for k, line in enumerate(by_index)})
        return cached

    def line_of_offset(self, offset: int) -> Optional[int]:
        """The text form's line (1-based) of the instruction holding byte ``offset``."""
        k = self.instruction_at(offset)
        lines = self._text_lines()[0] if k is not None else []
        return lines[k] if k is not None and k < len(lines) else None

    def offset_of_line(self, line: int) -> Optional[int]:
        """The byte offset of the instruction printed on ``line`` (1-based) of the text form."""
        k = self._text_lines()[1].get(line)
        return self.instructions[k].offset if k is not None else None

    def graph(self):
        from .dataflow import build_graph
        return build_graph(self)

    def details(self):
        from ..base import DetailItem
        from .dataflow import basic_blocks
        ck = DetailItem("checksum", f"{self.header.checksum:016x}",
                        [DetailItem(k, f"{v:016x}" + ("  (matches)" if k == self.checksum_kind else ""))
                         for k, v in self.checksums.items()], span=(32, 8) if not self.legacy else (20, 8))
        blocks = DetailItem("basic blocks", len(basic_blocks(self)) if self.instructions else 0,
                            [DetailItem(f"block {b}", f"instructions {s}..{e}",
                                        span=(self.instructions[s].offset, 8 * (e - s + 1)))
                             for b, (s, e) in enumerate(basic_blocks(self))] if self.instructions else [])
        return [ck, blocks]

    def machine(self, inputs=None, weights=None, seed: int = 0):
        """A stepping interpreter over this program (``step()``, ``registers_at(tick)``) for a debugger."""
        from .interp import TvmrMachine
        return TvmrMachine(self, inputs=inputs, weights=weights, seed=seed)

    def register(self, reg: int) -> Optional[RegDef]:
        for r in self.registers:
            if r.reg == reg:
                return r
        return None


def sniff(head: bytes) -> bool:
    return head[:4] in (MAGIC, LEGACY_MAGIC)


def decode(data: bytes, path: Optional[str] = None, strict: bool = False) -> TvmrFile:
    f = TvmrFile(bytes(data), path)
    try:
        if f.data[:4] == LEGACY_MAGIC:
            _decode_legacy(f)
        else:
            _decode_v1(f)
    except NacFormatError as e:
        if strict:
            raise
        f.problems.append(e)
    except (struct.error, IndexError, ValueError, OverflowError) as e:   # never escape raw
        err = NacFormatError("tvmr", 0, f"malformed file: {type(e).__name__}: {str(e)[:200]}")
        if strict:
            raise err from None
        f.problems.append(err)
    if strict:
        errors = [p for p in f.problems if getattr(p, "severity", "error") == "error"]
        if errors:
            raise errors[0]
    f.root._children = sorted(f.root._children or [], key=lambda s: s.offset)
    mark_gaps(f.root, f.size)
    return f


def _decode_v1(f: TvmrFile) -> None:
    d = f.data
    n = len(d)
    if n < HEADER_SIZE:
        raise NacFormatError("header", 0, f"{n} bytes is shorter than the 48-byte TVMR header")
    if d[:4] != MAGIC:
        raise NacFormatError("header", 0, f"magic {d[:4]!r} is neither 'TVMR' nor legacy 'TERN'")
    (_, ver, flags, eo, ec, ro, rc, io, ic, ck, res) = _HDR.unpack_from(d, 0)
    f.header = Header(ver, flags, eo, ec, ro, rc, io, ic, ck, res)
    hs = f.root.add(0, HEADER_SIZE, "header", "TvmrHeader")
    for off, size, name, typ, val in ((0, 4, "magic", "char[4]", "TVMR"), (4, 2, "version", "u16", ver),
                                      (6, 2, "flags", "u16", flags), (8, 4, "ext_table_offset", "u32", eo),
                                      (12, 4, "ext_table_count", "u32", ec), (16, 4, "reg_defs_offset", "u32", ro),
                                      (20, 4, "reg_defs_count", "u32", rc), (24, 4, "instr_offset", "u32", io),
                                      (28, 4, "instr_count", "u32", ic), (32, 8, "checksum", "u64", f"{ck:016x}"),
                                      (40, 8, "reserved", "u8[8]", res.hex())):
        hs.add(off, size, name, typ, val)
    if ver != 1:
        f.problems.append(NacFormatError("header/version", 4, f"version {ver}; this reader knows version 1"))
    if flags & 0b11:
        f.problems.append(NacFormatError("header/flags", 6, f"flags {flags:#x}: compressed/encrypted payloads are "
                                                            "not described by the spec and are shown raw"))
    if res != b"\0" * 8:
        f.problems.append(PeerWarning("header/reserved", 40, "reserved bytes are not zero"))
    # Bounds before sizing anything from the counts.
    if not HEADER_SIZE <= eo <= n or ec > (n - eo) // 8:
        raise NacFormatError("header/ext_table", 8, f"extension table at {eo} with {ec} entries runs past the "
                                                    f"{n}-byte file")
    ext_end = eo + 8 * ec
    if not ext_end <= ro <= n:
        raise NacFormatError("header/reg_defs_offset", 16, f"register definitions at {ro} are outside "
                                                           f"[{ext_end}, {n}]")
    if not ro <= io <= n or ic > (n - io) // 8:
        raise NacFormatError("header/instructions", 24, f"{ic} instructions at {io} run past the {n}-byte file "
                                                        f"(or start before the register definitions at {ro})")
    if rc > io - ro:   # each definition takes at least 6 bytes; one byte is the loosest safe bound
        raise NacFormatError("header/reg_defs_count", 20, f"{rc} register definitions cannot fit in {io - ro} bytes")
    # Extension table.
    if ec:
        es = f.root.add(eo, 8 * ec, "extensions", f"ExtEntry[{ec}]")
        for k in range(ec):
            off = eo + 8 * k
            ext_id, a, b, c = struct.unpack_from("<4H", d, off)
            e = ExtEntry(ext_id, (a, b, c), off)
            f.extensions.append(e)
            es.add(off, 8, f"ext[{k}] {e.name}", "ExtEntry", f"{ext_id:#06x} v{a}.{b}.{c}")
            if ext_id == 0 or ext_id == 0xFFFF:
                f.problems.append(NacFormatError(f"extensions[{k}]", off, f"ext_id {ext_id:#06x} is reserved "
                                                                          "(0 is the core ISA, 0xFFFF reserved)"))
    # Register definitions.
    pos = ro
    rs = f.root.add(ro, io - ro, "registers", f"RegDef[{rc}]") if io > ro or rc else None
    for k in range(rc):
        start = pos
        if pos + 5 > io:
            raise NacFormatError(f"registers[{k}]", pos, "register definition runs past the instructions")
        reg, tid, fl, nd = struct.unpack_from("<BHBB", d, pos)
        pos += 5
        if pos + 2 * nd + 1 > io:
            raise NacFormatError(f"registers[{k}]", start, f"{nd} dims run past the register definitions")
        dims = list(struct.unpack_from(f"<{nd}H", d, pos))
        pos += 2 * nd
        kl = d[pos]
        pos += 1
        if pos + kl > io:
            raise NacFormatError(f"registers[{k}]", start, f"{kl}-byte thermogram key runs past the definitions")
        key = d[pos:pos + kl]
        pos += kl
        r = RegDef(reg, tid, fl, dims, key, start, pos - start)
        f.registers.append(r)
        s = rs.add(start, pos - start, f"{r.name}: {isa.TYPE_TO_ASM.get(tid, r.type_name)}{dims}", "RegDef",
                   r.key_text or None)
        s.add(start, 1, "register_id", "u8", f"{r.name} ({isa.BANK_NAMES[reg >> 6]} bank)")
        s.add(start + 1, 2, "type_id", "u16", f"{tid:#06x} {r.type_name}")
        s.add(start + 3, 1, "flags", "u8", f"{fl:#04x}" + (" allocated" if fl & 1 else "") + (" frozen" if fl & 2 else ""))
        s.add(start + 4, 1, "ndims", "u8", nd)
        if nd:
            s.add(start + 5, 2 * nd, "dims", f"u16[{nd}]", dims)
        s.add(start + 5 + 2 * nd, 1, "key_len", "u8", kl)
        if kl:
            s.add(start + 6 + 2 * nd, kl, "thermogram_key", f"utf8[{kl}]", r.key_text)
            try:
                key.decode("utf-8")
            except UnicodeDecodeError as e:
                f.problems.append(NacFormatError(f"registers[{k}]/thermogram_key", start + 6 + 2 * nd + e.start,
                                                 "thermogram key is not UTF-8"))
        if tid not in isa.TYPES and tid < 0x0200:
            f.problems.append(PeerWarning(f"registers[{k}]/type_id", start + 1, f"type id {tid:#06x} is not a "
                                                                                 "defined primitive or domain type"))
    if rs is not None and pos < io:
        rs.add(pos, io - pos, "trailing", "unparsed")
        f.problems.append(NacFormatError("registers", pos, f"{io - pos} bytes after the {rc} register definitions "
                                                           "before the instructions"))
    # Instructions.
    if ic:
        ins = f.root.add(io, 8 * ic, "instructions", f"Instr[{ic}]")
        f.instructions = InstrTable(d, io, ic)
        ins.set_builder(lambda span, f=f: _instr_spans(f, span))
    # Checksum: both variants over ext table ‖ reg defs ‖ instructions.
    payload = d[eo:ext_end] + d[ro:io + 8 * ic]
    f.checksums = {k: fn(payload) for k, fn in CHECKSUMS.items()}
    for kind, value in f.checksums.items():
        if value == ck:
            f.checksum_kind = kind
            break
    else:
        f.problems.append(NacFormatError("header/checksum", 32, f"checksum {ck:016x} matches neither the writer's "
                                                                f"hash ({f.checksums['tvmr-binary.rs']:016x}) nor "
                                                                f"xxhash64 ({f.checksums['xxh64']:016x})"))
    if ck and f.checksum_kind == "xxh64":
        f.problems.append(PeerWarning("header/checksum", 32, "checksum is xxhash64 as the seed says; the real "
                                                             "ternsig reader (binary.rs) would reject it"))
    end = io + 8 * ic
    if end < n:
        f.problems.append(PeerWarning("file", end, f"{n - end} bytes after the last instruction"))


def _instr_spans(f: TvmrFile, span) -> None:
    for i in f.instructions:
        op = i.op
        s = span.add(i.offset, 8, f"[{i.index}] {i.mnemonic}", "Instr", i.raw.hex())
        s.add(i.offset, 2, "ext_id", "u16be", f"{i.ext_id:#06x} {isa.ext_name(i.ext_id)}")
        s.add(i.offset + 2, 2, "opcode", "u16be", f"{i.opcode:#06x} {op.mnemonic if op else '?'}")
        s.add(i.offset + 4, 4, "operands", op.pattern if op else "u8[4]", i.operands.hex())


def _decode_legacy(f: TvmrFile) -> None:
    """Legacy ``TERN`` container, detected and reported. Two layouts exist and both are tried:
    the reader's (``deserialize_legacy``: four bank counts at 8, instr_count u32 at 12, reg_def_size u32
    at 16, checksum u64 at 20) and the legacy writer's (``to_binary``: three bank counts at 8,
    instr_count u32 at 11, init_count u32 at 15, no checksum), which the reader cannot load. Register
    definitions are ``[reg][dtype u8][ndims][dims u16...][key_len][key]`` with the 1-byte legacy dtypes."""
    d = f.data
    n = len(d)
    f.legacy = True
    if n < LEGACY_HEADER_SIZE:
        raise NacFormatError("header", 0, f"{n} bytes is shorter than the 32-byte legacy TERN header")
    ver, flags, hot, cold, par, shp, ic, rsz, ck = struct.unpack_from("<HHBBBBIIQ", d, 4)
    reader_fits = rsz <= n - LEGACY_HEADER_SIZE and ic <= (n - LEGACY_HEADER_SIZE - rsz) // 8 and \
        LEGACY_HEADER_SIZE + rsz + 8 * ic == n
    w_ic, w_init = struct.unpack_from("<II", d, 11)
    writer_regs = None
    if not reader_fits:
        try:
            writer_regs, w_end = _legacy_regs(d, LEGACY_HEADER_SIZE, hot + cold + par, n)
        except NacFormatError:
            writer_regs = None
        if writer_regs is not None and w_end + 8 * w_ic != n:
            writer_regs = None
    if writer_regs is not None:
        layout = "legacy writer (to_binary: instr_count at 11, no checksum; the ternsig reader rejects it)"
        f.header = Header(version=ver, flags=flags, instr_count=w_ic, checksum=0)
        hs = f.root.add(0, LEGACY_HEADER_SIZE, "legacy_header", "TernHeader(writer)")
        for off, size, name, typ, val in ((0, 4, "magic", "char[4]", "TERN"), (4, 2, "version", "u16", ver),
                                          (6, 2, "flags", "u16", flags), (8, 1, "hot_count", "u8", hot),
                                          (9, 1, "cold_count", "u8", cold), (10, 1, "param_count", "u8", par),
                                          (11, 4, "instr_count", "u32", w_ic), (15, 4, "init_count", "u32", w_init),
                                          (19, 13, "padding", "u8[13]", d[19:32].hex())):
            hs.add(off, size, name, typ, val)
        io, ic = w_end, w_ic
    else:
        layout = "legacy reader (deserialize_legacy: instr_count at 12, reg_def_size at 16, checksum at 20)"
        f.header = Header(version=ver, flags=flags, instr_count=ic, checksum=ck)
        hs = f.root.add(0, LEGACY_HEADER_SIZE, "legacy_header", "TernHeader(reader)")
        for off, size, name, typ, val in ((0, 4, "magic", "char[4]", "TERN"), (4, 2, "version", "u16", ver),
                                          (6, 2, "flags", "u16", flags), (8, 1, "hot_count", "u8", hot),
                                          (9, 1, "cold_count", "u8", cold), (10, 1, "param_count", "u8", par),
                                          (11, 1, "shape_count", "u8", shp), (12, 4, "instr_count", "u32", ic),
                                          (16, 4, "reg_def_size", "u32", rsz),
                                          (20, 8, "checksum", "u64", f"{ck:016x}"),
                                          (28, 4, "reserved", "u8[4]", d[28:32].hex())):
            hs.add(off, size, name, typ, val)
        if rsz > n - LEGACY_HEADER_SIZE or ic > (n - LEGACY_HEADER_SIZE - rsz) // 8:
            raise NacFormatError("legacy_header", 12, f"{rsz}-byte register definitions and {ic} instructions do "
                                                      f"not fit the {n}-byte file in either legacy layout")
        io = LEGACY_HEADER_SIZE + rsz
        try:
            writer_regs, end = _legacy_regs(d, LEGACY_HEADER_SIZE, hot + cold + par + shp, io)
            if end != io:
                writer_regs = None
        except NacFormatError:
            writer_regs = None
        if writer_regs is None and rsz:
            f.root.add(LEGACY_HEADER_SIZE, rsz, "legacy_registers", "unparsed")
    f.problems.append(PeerWarning("header/magic", 0, f"legacy TERN format, {layout}: detected and shown; "
                                                     "assembling its text writes TVMR v1"))
    if writer_regs:
        rs = f.root.add(LEGACY_HEADER_SIZE, io - LEGACY_HEADER_SIZE, "registers", f"LegacyRegDef[{len(writer_regs)}]")
        for r, dt in writer_regs:
            f.registers.append(r)
            rs.add(r.offset, r.size, f"{r.name}: {isa.LEGACY_DTYPES.get(dt, f'dtype{dt}')}{r.dims}", "LegacyRegDef",
                   r.key_text or None)
    if ic:
        ins = f.root.add(io, 8 * ic, "instructions", f"Instr[{ic}]")
        f.instructions = InstrTable(d, io, ic)
        ins.set_builder(lambda span, f=f: _instr_spans(f, span))


def _legacy_regs(d: bytes, pos: int, count: int, limit: int) -> tuple[list, int]:
    out = []
    for k in range(count):
        start = pos
        if pos + 3 > limit:
            raise NacFormatError(f"registers[{k}]", pos, "legacy register definition runs past its section")
        reg, dt, nd = d[pos], d[pos + 1], d[pos + 2]
        pos += 3
        if pos + 2 * nd + 1 > limit:
            raise NacFormatError(f"registers[{k}]", start, "legacy dims run past the section")
        dims = list(struct.unpack_from(f"<{nd}H", d, pos))
        pos += 2 * nd
        kl = d[pos]
        pos += 1
        if pos + kl > limit:
            raise NacFormatError(f"registers[{k}]", start, "legacy thermogram key runs past the section")
        key = d[pos:pos + kl]
        pos += kl
        tid = isa.ASM_TYPES.get(isa.LEGACY_DTYPES.get(dt, ""), 0)
        out.append((RegDef(reg, tid, 1, dims, key, start, pos - start), dt))
    return out, pos
