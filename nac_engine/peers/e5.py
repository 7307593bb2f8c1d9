"""Apple E5 dispatch descriptor (seed 002): a FlatBuffer with the root table ``E5Program``.

The seed recovers the root table — ``symbol_names: [string]``, ``build_info: BuildInfo``,
``sections: [Section]``, ``format_version: int`` (observed 4), at table offsets 4, 8, 12, 16 — and the twelve-member
``OpType`` enumeration; the vtable of a real descriptor starts ``0c00 1400 0400 0800``. It names
``BuildInfo`` as key/value pairs and ``Section`` as an operation's argument frame plus attribute
reference, without their field lists, so this decoder reads those two tables as this project's
reading of the seed (documented in ``SECTION_FIELDS`` / ``BUILD_INFO_FIELDS``) and shows any other
field it finds as raw. No public sample exists: the tests build descriptors with
``flatbuffers.Builder`` by this schema.

Reads go through the ``flatbuffers`` library's ``Table``; every offset and length is checked
against the buffer before the library touches it (the library itself trusts its input), so a
hostile file gives a :class:`~nac_engine.errors.NacFormatError`, never an ``IndexError``.
"""
from __future__ import annotations

import struct
from typing import Any, Optional

from flatbuffers.table import Table

from ..errors import NacFormatError
from .base import DetailItem, PeerEdge, PeerFile, PeerGraph, PeerNode, mark_gaps

FORMAT = "e5"
EXTENSIONS = (".e5", ".e5prog")

OP_TYPES = ("Cast", "AneInference", "EirInference", "CpuInference", "BnnsCpuInference", "MlcCpuInference",
            "MpsGraphInference", "E5MinimalCpu", "Quant", "Dequant", "Barrier", "JitCall")
#: root table fields: (voffset, name)
ROOT_FIELDS = ((4, "symbol_names"), (6, "build_info"), (8, "sections"), (10, "format_version"))
#: Section (this project's reading): name, op_type (OpType), arg_frame (bytes), op_attrs (bytes),
#: symbol indices of its operands (into symbol_names)
SECTION_FIELDS = ((4, "name"), (6, "op_type"), (8, "arg_frame"), (10, "op_attrs"), (12, "operands"))
#: BuildInfo (this project's reading): parallel key and value string vectors
BUILD_INFO_FIELDS = ((4, "keys"), (6, "values"))
MAX_VECTOR = 1 << 20
EXPECTED_VTABLE_HEAD = bytes.fromhex("0c001400")


def sniff(head: bytes) -> bool:
    """The root table's vtable as a real descriptor has it: 12 bytes long, a 20-byte table,
    its four fields at 4, 8, 12 and 16 in some order."""
    if len(head) < 8:
        return False
    root = struct.unpack_from("<I", head, 0)[0]
    if not 4 <= root <= len(head) - 4:
        return False
    vt = root - struct.unpack_from("<i", head, root)[0]
    if not 0 <= vt <= len(head) - 12:
        return False
    if head[vt:vt + 4] != EXPECTED_VTABLE_HEAD:
        return False
    return sorted(struct.unpack_from("<4H", head, vt + 4)) == [4, 8, 12, 16]


class _Reader:
    """Bounds-checked access to one table through ``flatbuffers.table.Table``; records spans."""

    def __init__(self, f: "E5File"):
        self.f = f
        self.buf = f.data
        self.n = len(f.data)
        self.claimed: list[tuple[int, int, str, str, Any]] = []
        self.vsize: dict[int, int] = {}

    def need(self, off: int, size: int, what: str) -> None:
        if off < 0 or size < 0 or off + size > self.n:
            raise NacFormatError(what, max(0, min(off, self.n)), f"{size} bytes at {off} run past the end of the "
                                                                 f"{self.n}-byte file")

    def claim(self, off: int, size: int, name: str, type_: str, value: Any = None) -> None:
        self.claimed.append((off, size, name, type_, value))

    def table(self, pos: int, what: str) -> Table:
        self.need(pos, 4, what)
        vt = pos - struct.unpack_from("<i", self.buf, pos)[0]
        self.need(vt, 4, f"{what}/vtable")
        vsize, tsize = struct.unpack_from("<HH", self.buf, vt)
        if vsize < 4 or vsize % 2:
            raise NacFormatError(f"{what}/vtable", vt, f"vtable size {vsize} is not an even number ≥ 4")
        self.need(vt, vsize, f"{what}/vtable")
        self.need(pos, max(tsize, 4), what)
        self.claim(vt, vsize, f"{what}/vtable", "vtable", f"{(vsize - 4) // 2} fields, table {tsize} bytes")
        self.claim(pos, 4, f"{what}/soffset", "soffset", vt - pos)
        self.vsize[pos] = vsize               # the checked vtable length, for field lookups below
        return Table(self.buf, pos)

    def field(self, t: Table, voff: int, what: str) -> int:
        """Offset of a field inside the table (0: absent), checked against the table's size."""
        if voff >= self.vsize[t.Pos]:
            return 0
        o = t.Offset(voff)        # reads the vtable slot, inside the checked vtable
        if o:
            self.need(t.Pos + o, 1, what)
        return o

    def scalar(self, t: Table, voff: int, fmt: str, what: str, default=None):
        o = self.field(t, voff, what)
        if not o:
            return default
        size = struct.calcsize("<" + fmt)
        self.need(t.Pos + o, size, what)
        value = struct.unpack_from("<" + fmt, self.buf, t.Pos + o)[0]
        self.claim(t.Pos + o, size, what, fmt, value)
        return value

    def target(self, t: Table, o: int, what: str) -> int:
        self.need(t.Pos + o, 4, what)
        self.claim(t.Pos + o, 4, f"{what}/offset", "uoffset")
        dest = t.Pos + o + struct.unpack_from("<I", self.buf, t.Pos + o)[0]
        self.need(dest, 4, what)
        return dest

    def string_at(self, pos: int, what: str) -> str:
        self.need(pos, 4, what)
        n = struct.unpack_from("<I", self.buf, pos)[0]
        self.need(pos + 4, n + 1, what)
        raw = bytes(self.buf[pos + 4:pos + 4 + n])
        text = raw.decode("utf-8", "replace")
        self.claim(pos, 4 + n + 1, what, "string", text[:200])
        return text

    def string(self, t: Table, voff: int, what: str) -> Optional[str]:
        o = self.field(t, voff, what)
        return self.string_at(self.target(t, o, what), what) if o else None

    def vector(self, t: Table, voff: int, elem: int, what: str) -> Optional[tuple[int, int]]:
        """(first element position, count) of a vector field, bounds-checked."""
        o = self.field(t, voff, what)
        if not o:
            return None
        pos = self.target(t, o, what)
        n = struct.unpack_from("<I", self.buf, pos)[0]
        if n > MAX_VECTOR:
            raise NacFormatError(what, pos, f"vector of {n:,} elements (limit {MAX_VECTOR:,})")
        self.need(pos + 4, n * elem, what)
        self.claim(pos, 4, f"{what}/length", "u32", n)
        return pos + 4, n

    def byte_vector(self, t: Table, voff: int, what: str) -> Optional[bytes]:
        v = self.vector(t, voff, 1, what)
        if v is None:
            return None
        pos, n = v
        self.claim(pos, n, what, f"u8[{n}]", f"{n} bytes")
        return bytes(self.buf[pos:pos + n])

    def string_vector(self, t: Table, voff: int, what: str) -> Optional[list[str]]:
        v = self.vector(t, voff, 4, what)
        if v is None:
            return None
        pos, n = v
        out = []
        for i in range(n):
            p = pos + 4 * i
            self.claim(p, 4, f"{what}[{i}]/offset", "uoffset")
            out.append(self.string_at(p + struct.unpack_from("<I", self.buf, p)[0], f"{what}[{i}]"))
        return out

    def table_vector(self, t: Table, voff: int, what: str) -> list[Table]:
        v = self.vector(t, voff, 4, what)
        if v is None:
            return []
        pos, n = v
        out = []
        for i in range(n):
            p = pos + 4 * i
            self.claim(p, 4, f"{what}[{i}]/offset", "uoffset")
            out.append(self.table(p + struct.unpack_from("<I", self.buf, p)[0], f"{what}[{i}]"))
        return out


class E5File(PeerFile):
    format = FORMAT
    title = "Apple E5 dispatch descriptor"

    def __init__(self, data: bytes, path: Optional[str] = None):
        super().__init__(data, path)
        self.symbol_names: list[str] = []
        self.build_info: dict[str, str] = {}
        self.sections: list[dict[str, Any]] = []
        self.format_version: Optional[int] = None

    def summary(self) -> dict[str, Any]:
        return {"format": FORMAT, "file": self.path, "size": self.size, "format_version": self.format_version,
                "symbols": len(self.symbol_names), "sections": len(self.sections),
                "operations": [s.get("op_type_name") for s in self.sections], "build_info": self.build_info,
                "problems": len(self.problems)}

    def format_summary(self) -> str:
        s = self.summary()
        lines = [f"{self.path or '<bytes>'}: Apple E5 dispatch descriptor, {s['size']:,} bytes, "
                 f"format_version {s['format_version']}",
                 f"  symbols     {', '.join(self.symbol_names[:12])}{' …' if len(self.symbol_names) > 12 else ''}"]
        for k, v in self.build_info.items():
            lines.append(f"  build       {k} = {v}")
        for i, sec in enumerate(self.sections):
            lines.append(f"  section[{i}]  {sec.get('name')}: {sec.get('op_type_name')}, "
                         f"arg_frame {len(sec.get('arg_frame') or b'')} B, op_attrs {len(sec.get('op_attrs') or b'')} B")
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)

    def graph(self) -> Optional[PeerGraph]:
        """One node per section (operation) in order; operands named by symbol connect them."""
        if not self.sections:
            return None
        g = PeerGraph()
        producer: dict[str, int] = {}
        for i, sec in enumerate(self.sections):
            kind = {"AneInference": "matmul", "Cast": "elementwise", "Quant": "elementwise",
                    "Dequant": "elementwise", "Barrier": "control"}.get(sec.get("op_type_name"), "other")
            g.nodes.append(PeerNode(i, f"{sec.get('name') or f'section {i}'} ({sec.get('op_type_name')})", kind,
                                    {k: v for k, v in sec.items() if k not in ("arg_frame", "op_attrs")}))
            for sym in sec.get("operand_names", []):
                if sym in producer and producer[sym] != i:
                    g.edges.append(PeerEdge(producer[sym], i, sym))
            for sym in sec.get("operand_names", []):
                producer[sym] = i
        return g

    def details(self) -> list[DetailItem]:
        return [DetailItem("symbol_names", len(self.symbol_names),
                           [DetailItem(f"[{i}]", s) for i, s in enumerate(self.symbol_names)]),
                DetailItem("build_info", len(self.build_info), [DetailItem.of(k, v) for k, v in self.build_info.items()]),
                DetailItem("sections", len(self.sections),
                           [DetailItem(f"[{i}] {s.get('name')}", s.get("op_type_name"),
                                       [DetailItem.of(k, v if not isinstance(v, bytes) else v.hex()[:128])
                                        for k, v in s.items()]) for i, s in enumerate(self.sections)]),
                DetailItem("format_version", self.format_version)]


def decode(data: bytes, path: Optional[str] = None, strict: bool = False) -> E5File:
    f = E5File(bytes(data), path)
    r = _Reader(f)
    try:
        _decode(f, r)
    except NacFormatError as e:
        if strict:
            raise
        f.problems.append(e)
    except (struct.error, IndexError, ValueError, OverflowError) as e:   # belt and braces: never escape raw
        err = NacFormatError("E5Program", 0, f"malformed FlatBuffer: {type(e).__name__}: {str(e)[:200]}")
        if strict:
            raise err from None
        f.problems.append(err)
    _spans(f, r)
    return f


def _decode(f: E5File, r: _Reader) -> None:
    r.need(0, 8, "header")
    root = struct.unpack_from("<I", f.data, 0)[0]
    r.claim(0, 4, "root_offset", "uoffset", root)
    t = r.table(root, "E5Program")
    names = r.string_vector(t, 4, "E5Program/symbol_names")
    f.symbol_names = names or []
    o = r.field(t, 6, "E5Program/build_info")
    if o:
        bi = r.table(r.target(t, o, "E5Program/build_info"), "BuildInfo")
        keys = r.string_vector(bi, 4, "BuildInfo/keys") or []
        values = r.string_vector(bi, 6, "BuildInfo/values") or []
        if len(keys) != len(values):
            f.problems.append(NacFormatError("BuildInfo", bi.Pos, f"{len(keys)} keys but {len(values)} values"))
        f.build_info = dict(zip(keys, values))
    for i, st in enumerate(r.table_vector(t, 8, "E5Program/sections")):
        what = f"sections[{i}]"
        op = r.scalar(st, 6, "B", f"{what}/op_type")
        sec: dict[str, Any] = {"name": r.string(st, 4, f"{what}/name"), "op_type": op,
                               "op_type_name": OP_TYPES[op] if op is not None and op < len(OP_TYPES)
                               else f"unknown({op})"}
        if op is not None and op >= len(OP_TYPES):
            f.problems.append(NacFormatError(what, st.Pos, f"op_type {op} is not one of the {len(OP_TYPES)} "
                                                           "operation kinds"))
        sec["arg_frame"] = r.byte_vector(st, 8, f"{what}/arg_frame") or b""
        sec["op_attrs"] = r.byte_vector(st, 10, f"{what}/op_attrs") or b""
        v = r.vector(st, 12, 4, f"{what}/operands")
        if v is not None:
            pos, n = v
            idx = list(struct.unpack_from(f"<{n}I", f.data, pos))
            r.claim(pos, 4 * n, f"{what}/operands", f"u32[{n}]", idx)
            bad = [k for k in idx if k >= len(f.symbol_names)]
            if bad:
                f.problems.append(NacFormatError(what, pos, f"operand symbol index {bad[0]} is past the "
                                                            f"{len(f.symbol_names)} symbol names"))
            sec["operands"] = idx
            sec["operand_names"] = [f.symbol_names[k] for k in idx if k < len(f.symbol_names)]
        f.sections.append(sec)
    f.format_version = r.scalar(t, 10, "i", "E5Program/format_version")
    if f.format_version is not None and f.format_version != 4:
        f.problems.append(NacFormatError("E5Program/format_version", t.Pos, f"format_version {f.format_version}; "
                                                                            "real descriptors have 4"))


def _spans(f: E5File, r: _Reader) -> None:
    """Claimed ranges become spans, first claim wins where a builder shared bytes (deduplicated
    strings); unclaimed bytes (alignment padding, unknown fields) are marked as gaps."""
    end = -1
    for off, size, name, type_, value in sorted(r.claimed, key=lambda c: (c[0], -c[1])):
        if off < end or size <= 0:
            continue
        f.root.add(off, size, name, type_, value)
        end = off + size
    mark_gaps(f.root, f.size, f.data)
