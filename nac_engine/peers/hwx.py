"""Apple Neural Engine ``.hwx`` program containers (seed 002, research note §4.3).

A Mach-O-shaped file (magic 0xBEEFFACE): header, load commands (segments and their sections,
``LC_LOADFVMLIB`` / cmd 0x40 I/O names, ``LC_THREAD`` states, the ``LC_IDENT`` compiler banner with
its flags, ``LC_SYMTAB`` with stabs type and tensor-layout strings), and in ``__TEXT,__text`` the task
descriptors (TDs). On H13 (cpusubtype 4, the generation of every public sample) TDs form a linked
list — ``next_pointer`` at TD+0x1C, relative to ``__text`` — each a 0x28-byte header followed by
register-write packets: a word whose bits [31:26] are count−1 and [25:0] a register byte address,
then ``count`` values. Registers are named by the block they fall in (block bases per generation
from the note) and a word offset; the few fields whose bit positions were checked against the
samples' known shapes carry names (``FIELDS``). Every register written is listed, named or not.
The op kind of each TD is inferred from which engines it enables, and marked as inferred.
Later generations (H14+) keep the container; their packet streams are listed as raw words.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Optional

from ..errors import NacFormatError
from .base import DetailItem, PeerEdge, PeerFile, PeerGraph, PeerNode, PeerWarning, decode_into

FORMAT = "hwx"
EXTENSIONS = (".hwx",)
MAGIC = 0xBEEFFACE

GENERATIONS = {1: ("H11", 5), 3: ("H12", 6), 4: ("H13", 7), 5: ("H14", 11), 6: ("H15", 8), 7: ("H16", 17),
               9: ("H17", 19), 10: ("H18", 20), 11: ("H18G/H19", 24)}
#: H13 register blocks (byte address bases), from the research note's table
H13_BLOCKS = (("Common", 0x0), ("L2", 0x4800), ("PE", 0x8800), ("NE", 0xC800), ("TileDMASrc", 0x13800),
              ("TileDMADst", 0x17800), ("KernelDMASrc", 0x1F800))
#: Named H13 fields: (block, word) -> [(field, low bit, width)]. Positions checked on the samples:
#: InDim/OutDim give relu's 77 elements, Cin/Cout gemm's 512 and conv's 3, ChCfg fp16 = 2.
FIELDS = {
    ("Common", 0): [("InDim.Win", 0, 15), ("InDim.Hin", 16, 15)],
    ("Common", 2): [("ChCfg.InFmt", 0, 2), ("ChCfg.OutFmt", 4, 2)],
    ("Common", 3): [("Cin", 0, 17)],
    ("Common", 4): [("Cout", 0, 17)],
    ("Common", 5): [("OutDim.Wout", 0, 15), ("OutDim.Hout", 16, 15)],
    ("Common", 7): [("ConvCfg.Kw", 0, 5), ("ConvCfg.Kh", 5, 5)],
}
FORMATS = {0: "int8", 1: "uint8", 2: "fp16"}
TD_SIZE_H13 = 0x274
TD_HEADER = 0x28
MAX_TDS = 4096
MAX_LOAD_COMMANDS = 4096
MAX_SYMBOLS = 1 << 16

LC = {0x19: "LC_SEGMENT_64", 0x6: "LC_LOADFVMLIB", 0x4: "LC_THREAD", 0x8: "LC_IDENT", 0x2: "LC_SYMTAB",
      0x31: "LC_NOTE", 0x40: "LC_ANE_PORT (0x40)"}
N_STAB_NAMES = {0x20: "N_GSYM", 0x80: "N_LSYM", 0x24: "N_FUN", 0x26: "N_STSYM"}


def sniff(head: bytes) -> bool:
    return len(head) >= 4 and struct.unpack_from("<I", head, 0)[0] == MAGIC


@dataclass
class Register:
    address: int
    value: int
    block: str
    word: int
    fields: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.block}+{self.word * 4:#x}"


@dataclass
class TaskDescriptor:
    index: int
    offset: int                 # file offset
    header: dict[str, int]
    packets: list[tuple[int, int, int]] = field(default_factory=list)   # (file offset, address, count)
    registers: list[Register] = field(default_factory=list)
    kind: str = "other"
    shape: dict[str, Any] = field(default_factory=dict)


class HwxFile(PeerFile):
    format = FORMAT
    title = "Apple Neural Engine hwx"

    def __init__(self, data: bytes, path: Optional[str] = None):
        super().__init__(data, path)
        self.cpusubtype: Optional[int] = None
        self.segments: list[dict] = []
        self.sections: list[dict] = []
        self.ports: list[str] = []
        self.threads: list[dict] = []
        self.ident: Optional[str] = None
        self.symbols: list[dict] = []
        self.tds: list[TaskDescriptor] = []

    @property
    def generation(self) -> str:
        return GENERATIONS.get(self.cpusubtype, (f"unknown ({self.cpusubtype})", None))[0]

    @property
    def compiler(self) -> Optional[str]:
        if not self.ident:
            return None
        return next((ln.strip() for ln in self.ident.splitlines() if "compiler" in ln), None)

    @property
    def compile_flags(self) -> list[str]:
        return [ln.strip() for ln in (self.ident or "").splitlines() if ln.strip().startswith("-")]

    def section(self, seg: str, sect: str) -> Optional[dict]:
        return next((s for s in self.sections if s["segment"] == seg and s["name"] == sect), None)

    def summary(self) -> dict[str, Any]:
        return {"format": FORMAT, "file": self.path, "size": self.size, "generation": self.generation,
                "cpusubtype": self.cpusubtype, "compiler": self.compiler, "flags": self.compile_flags,
                "segments": [s["name"] for s in self.segments], "ports": self.ports,
                "task_descriptors": len(self.tds),
                "registers_written": sum(len(t.registers) for t in self.tds),
                "tds": [{"index": t.index, "kind": t.kind, "inferred": True, **t.shape} for t in self.tds],
                "tensors": [s["layout"] for s in self.symbols if s.get("layout")],
                "problems": len(self.problems)}

    def format_summary(self) -> str:
        s = self.summary()
        lines = [f"{self.path or '<bytes>'}: Apple Neural Engine hwx, {s['size']:,} bytes, {s['generation']}",
                 f"  compiler    {s['compiler']}  {' '.join(s['flags'][:6])}{' …' if len(s['flags']) > 6 else ''}",
                 f"  segments    {', '.join(s['segments'])}",
                 f"  ports       {', '.join(self.ports)}"]
        for t in self.tds:
            lines.append(f"  TD {t.index:<3}      {t.kind} (inferred): {_td_text(t.shape)}; {len(t.packets)} packets, "
                         f"{len(t.registers)} registers")
        for tns in s["tensors"]:
            lines.append(f"  tensor      {_tensor_text(tns)}")
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)

    def output_ports(self) -> set:
        """The ports the program writes. The ``@output`` marker is on the port's own name in the
        tinygrad-era files; compilers since write the bare name in the load command (cmd 0x40) and
        keep the marker on the buffer's symbol or thread name (``probs@output``): a port is an
        output when any of them marks it."""
        marked = {p for p in self.ports if "@output" in p}
        names = [str(s.get("name", "")) for s in self.symbols] + [str(t.get("name", "")) for t in self.threads]
        bare = {n.split("@output", 1)[0] for n in names if "@output" in n}
        return marked | {p for p in self.ports if p in bare}

    def graph(self) -> Optional[PeerGraph]:
        """Input ports -> one node per TD in chain order -> output ports."""
        if not self.tds:
            return None
        g = PeerGraph()
        nid = 0
        outputs = self.output_ports()
        ins = [p for p in self.ports if p not in outputs]
        outs = [p for p in self.ports if p in outputs]
        layouts = {s["layout"]["name"]: s["layout"] for s in self.symbols if s.get("layout")}

        def port_label(p: str, fallback: str) -> str:
            lay = layouts.get(p)
            return f"{lay.get('element_type', '?')}{lay['shape']}" if lay else fallback

        for p in ins:
            g.nodes.append(PeerNode(nid, p, "input", {"port": p, "detail": port_label(p, "")}))
            nid += 1
        prev = list(range(nid))
        first = True
        for t in self.tds:
            span = (t.offset, TD_SIZE_H13) if self.cpusubtype == 4 else None
            g.nodes.append(PeerNode(nid, f"TD {t.index}: {t.kind}", t.kind if t.kind in ("conv", "elementwise")
                                    else "other", {"kind": t.kind, **t.shape, "registers": len(t.registers),
                                                   "detail": " → ".join(x for x in (_shape_label(t.shape, "in"),
                                                                                    _shape_label(t.shape, "out")) if x)},
                                    span=span, inferred=True))
            for p in prev:
                label = port_label(ins[p], _shape_label(t.shape, "in")) if first and p < len(ins) \
                    else _shape_label(t.shape, "in")
                g.edges.append(PeerEdge(p, nid, label))
            prev = [nid]
            first = False
            nid += 1
        for p in outs:
            g.nodes.append(PeerNode(nid, p, "output", {"port": p, "detail": port_label(p, "")}))
            for q in prev:
                g.edges.append(PeerEdge(q, nid, port_label(p, _shape_label(self.tds[-1].shape, "out"))))
            nid += 1
        return g

    def details(self) -> list[DetailItem]:
        out = [DetailItem("ident", self.ident), DetailItem("ports", None, [DetailItem(p) for p in self.ports])]
        for t in self.tds:
            out.append(DetailItem(f"TD {t.index}", f"{t.kind} (inferred)",
                                  [DetailItem("header", None, [DetailItem(k, v) for k, v in t.header.items()])]
                                  + [DetailItem(r.name, f"{r.value:#010x}",
                                                [DetailItem(k, v) for k, v in r.fields.items()]) for r in t.registers],
                                  (t.offset, TD_SIZE_H13)))
        out.append(DetailItem("symbols", len(self.symbols),
                              [DetailItem(s["name"], _tensor_text(s["layout"]) if s.get("layout") else None,
                                          [DetailItem(k, f"{v:#x}" if k == "value" and isinstance(v, int) else v)
                                           for k, v in s.items() if k not in ("name", "layout")])
                               for s in self.symbols]))
        return out

    def disassemble(self) -> Optional[str]:
        lines = [f"; {self.generation} {self.compiler or ''}"]
        for t in self.tds:
            lines.append(f"td {t.index} @ {t.offset:#x}  ; {t.kind} (inferred): {_td_text(t.shape)}")
            for k, v in t.header.items():
                lines.append(f"  .header {k} = {v:#x}")
            for r in t.registers:
                named = " ".join(f"{k}={v}" for k, v in r.fields.items())
                lines.append(f"  {r.name:<20} = {r.value:#010x}{'  ; ' + named if named else ''}")
        return "\n".join(lines) + "\n"


def _td_text(shape: dict) -> str:
    """A TD's shape registers as text: ``fp16[C1 H1 W77] → fp16[C1 H1 W77], kernel 1×1``."""
    parts = [" → ".join(x for x in (_shape_label(shape, "in"), _shape_label(shape, "out")) if x)]
    if "Kh" in shape and "Kw" in shape:
        parts.append(f"kernel {shape['Kh']}×{shape['Kw']}")
    return ", ".join(p for p in parts if p) or "no shape registers"


def _tensor_text(layout: dict) -> str:
    """A port's buffer layout as text: ``image: float16[1, 1, 1, 77], strides n 192 c 192 h 192 w 2``."""
    dims = layout.get("dims") or []
    strides = " ".join(f"{d.get('axis', '?')} {d.get('stride', '?')}" for d in dims)
    text = f"{layout.get('name', '?')}: {layout.get('element_type', '?')}{list(layout.get('shape') or [])}"
    return f"{text}, strides {strides}" if strides else text


def _shape_label(shape: dict, side: str) -> str:
    keys = ("Cin", "Hin", "Win") if side == "in" else ("Cout", "Hout", "Wout")
    if not all(k in shape for k in keys):
        return ""
    fmt = shape.get("in_fmt" if side == "in" else "out_fmt", "?")
    return f"{fmt}[C{shape[keys[0]]} H{shape[keys[1]]} W{shape[keys[2]]}]"


# ------------------------------------------------------------------------------ decoding
def decode(data: bytes, path: Optional[str] = None, strict: bool = False) -> HwxFile:
    return decode_into(HwxFile(bytes(data), path), _decode, strict)


def _u32(d: bytes, off: int, section: str) -> int:
    if off < 0 or off + 4 > len(d):
        raise NacFormatError(section, max(0, min(off, len(d))), "runs past the end of the file")
    return struct.unpack_from("<I", d, off)[0]


def _decode(f: HwxFile) -> None:
    d = f.data
    if len(d) < 32:
        raise NacFormatError("header", len(d), f"file is {len(d)} bytes; the Mach-O header is 32")
    magic, cputype, sub, ftype, ncmds, sizeofcmds, flags, _res = struct.unpack_from("<8I", d, 0)
    if magic != MAGIC:
        raise NacFormatError("header", 0, f"magic {magic:#010x} is not 0xbeefface")
    f.cpusubtype = sub
    hdr = f.root.add(0, 32, "header", "mach_header_64")
    for i, (name, v) in enumerate(zip(("magic", "cputype", "cpusubtype", "filetype", "ncmds", "sizeofcmds",
                                       "flags", "reserved"), (magic, cputype, sub, ftype, ncmds, sizeofcmds,
                                                              flags, _res))):
        hdr.add(4 * i, 4, name, "u32", v)
    if sub not in GENERATIONS:
        f.problems.append(PeerWarning("header", 8, f"cpusubtype {sub} is no known ANE generation"))
    if ncmds > MAX_LOAD_COMMANDS:
        raise NacFormatError("header", 16, f"{ncmds:,} load commands (limit {MAX_LOAD_COMMANDS:,})")
    if 32 + sizeofcmds > len(d):
        raise NacFormatError("header", 20, f"sizeofcmds {sizeofcmds:,} runs past the end of the file")
    cmds = f.root.add(32, sizeofcmds, "load_commands", "load commands", ncmds)
    off = 32
    for i in range(ncmds):
        if off + 8 > 32 + sizeofcmds:
            f.problems.append(NacFormatError("load_commands", off, f"command {i} starts past sizeofcmds"))
            break
        cmd, size = struct.unpack_from("<II", d, off)
        if size < 8 or off + size > 32 + sizeofcmds:
            f.problems.append(NacFormatError(f"load_commands/cmd[{i}]", off + 4, f"cmdsize {size} is out of range"))
            break
        span = cmds.add(off, size, f"cmd[{i}]", LC.get(cmd, f"cmd {cmd:#x}"))
        span.add(off, 4, "cmd", "u32", cmd)
        span.add(off + 4, 4, "cmdsize", "u32", size)
        try:
            _load_command(f, cmd, off, size, span, i)
        except NacFormatError as e:
            f.problems.append(e)
        off += size
    _file_sections(f)
    if f.cpusubtype == 4:
        _tds_h13(f)
    else:
        text = f.section("__TEXT", "__text")
        if text is not None:
            f.problems.append(PeerWarning("__TEXT,__text", text["offset"], f"{f.generation}: task descriptors "
                                          "are listed as raw bytes (register streams decoded for H13 only)"))


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _load_command(f: HwxFile, cmd: int, off: int, size: int, span, i: int) -> None:
    d = f.data
    body = d[off + 8:off + size]
    if cmd == 0x19:
        if size < 72:
            raise NacFormatError(f"cmd[{i}]", off, "LC_SEGMENT_64 shorter than 72 bytes")
        name = _cstr(d[off + 8:off + 24])
        vmaddr, vmsize, fileoff, filesize, maxprot, initprot, nsects, flags = struct.unpack_from("<4Q4I", d, off + 24)
        span.add(off + 8, 64, "segment", "segment_command_64", name)
        seg = {"name": name, "vmaddr": vmaddr, "vmsize": vmsize, "fileoff": fileoff, "filesize": filesize,
               "maxprot": maxprot, "initprot": initprot, "nsects": nsects}
        f.segments.append(seg)
        if 72 + 80 * nsects > size:
            raise NacFormatError(f"cmd[{i}]", off, f"{nsects} sections do not fit a {size}-byte command")
        for k in range(nsects):
            so = off + 72 + 80 * k
            sname, sseg = _cstr(d[so:so + 16]), _cstr(d[so + 16:so + 32])
            addr, ssize, soff, align, reloff, nreloc, sflags = struct.unpack_from("<QQIIIII", d, so + 32)
            span.add(so, 80, f"section[{k}]", "section_64", f"{sseg},{sname}")
            f.sections.append({"segment": sseg, "name": sname, "addr": addr, "size": ssize, "offset": soff,
                               "flags": sflags, "in_file": bool(soff) and seg["filesize"] > 0})
    elif cmd == 0x6:      # LC_LOADFVMLIB: name offset, minor version, header addr
        name_off = _u32(d, off + 8, f"cmd[{i}]")
        name = _cstr(d[off + name_off:off + size]) if 8 <= name_off < size else ""
        span.add(off + 8, size - 8, "fvmlib", "fvmlib", name)
        f.ports.append(name)
    elif cmd == 0x40:     # {cmd, size, name_off=0x18, 0, u64 vmaddr, name}
        name_off = _u32(d, off + 8, f"cmd[{i}]")
        name = _cstr(d[off + name_off:off + size]) if 8 <= name_off < size else ""
        span.add(off + 8, size - 8, "port", "ANE port", name)
        f.ports.append(name)
    elif cmd == 0x4:      # LC_THREAD: one (flavor, count, state[count]); the rest of the command names it
        if size < 16:
            raise NacFormatError(f"cmd[{i}]", off, "LC_THREAD shorter than its flavor and count")
        flavor, count = struct.unpack_from("<II", d, off + 8)
        n = 8 + 4 * count
        if 8 + n > size:
            raise NacFormatError(f"cmd[{i}]", off + 12, f"thread state of {count:,} words overruns the "
                                                        f"{size}-byte command")
        span.add(off + 8, n, "state", f"flavor {flavor}", f"{count} words")
        tail = d[off + 8 + n:off + size]
        name = _cstr(tail) if tail[:1].isalnum() else ""
        if tail:
            span.add(off + 8 + n, len(tail), "tail", "string" if name else "bytes", name or f"{len(tail)} bytes")
        f.threads.append({"flavor": flavor, "count": count, "name": name})
    elif cmd == 0x8:
        f.ident = _cstr(body)
        span.add(off + 8, size - 8, "ident", "string", f.ident.splitlines()[1] if "\n" in f.ident else f.ident)
    elif cmd == 0x2:
        symoff, nsyms, stroff, strsize = struct.unpack_from("<4I", d, off + 8)
        span.add(off + 8, 16, "symtab", "symtab_command", f"{nsyms} symbols")
        _symbols(f, symoff, nsyms, stroff, strsize)
    else:
        span.add(off + 8, size - 8, "body", "bytes", f"{size - 8} bytes")


def _symbols(f: HwxFile, symoff: int, nsyms: int, stroff: int, strsize: int) -> None:
    d = f.data
    if nsyms > MAX_SYMBOLS or symoff + 16 * nsyms > len(d) or stroff + strsize > len(d):
        raise NacFormatError("LC_SYMTAB", symoff, f"symbol table ({nsyms} entries at {symoff}, strings "
                                                  f"{strsize} B at {stroff}) runs past the end of the file")
    f.root.add(symoff, 16 * nsyms, "symbols", "nlist_64[]", nsyms)
    f.root.add(stroff, strsize, "strings", "string table", strsize)
    for k in range(nsyms):
        strx, ntype, nsect, ndesc, value = struct.unpack_from("<IBBHQ", d, symoff + 16 * k)
        name = _cstr(d[stroff + strx:stroff + strsize]) if strx < strsize else ""
        sym = {"name": name, "type": N_STAB_NAMES.get(ntype, f"{ntype:#x}"), "sect": nsect, "value": value}
        if ntype == 0x20 and ":" in name:
            sym["layout"] = parse_layout(name)
        f.symbols.append(sym)


def parse_layout(stab: str) -> dict[str, Any]:
    """A stabs tensor layout (``image:t11=ar1;0;1;12=s192n:ar1;0;1;13=s192c:…;15=s2w:5``): the tensor
    name, and per dimension (n, c, h, w) its extent and byte stride; the element type id last."""
    name, _, rest = stab.partition(":")
    out: dict[str, Any] = {"name": name}
    dims = []
    for part in rest.split("ar1;0;")[1:]:
        # "<extent>;<type id>=s<byte stride><axis>:" — the range's upper bound is the extent
        # (relu.hwx's 77-wide row is "0;77"), and the last one ends with ":<element type id>"
        head, _, tail = part.partition(";")
        if not head.isdigit():
            continue
        stride, axis = None, None
        if "=s" in tail:
            st = tail.split("=s", 1)[1]
            n = len(st) - len(st.lstrip("0123456789"))
            stride = int(st[:n]) if n else None
            axis = st[n:n + 1] or None
            if ":" in st[n:]:
                elem = st[n:].split(":", 1)[1]
                if elem.isdigit():
                    out["element_type"] = {"5": "float16"}.get(elem, f"t{elem}")
        dims.append({"axis": axis, "extent": int(head), "stride": stride})
    out["dims"] = dims
    out["shape"] = [x["extent"] for x in dims]
    return out


def _file_sections(f: HwxFile) -> None:
    """Sections stored in the file become spans (the TD stream gets its own below)."""
    for s in f.sections:
        if not s["in_file"]:
            continue
        if s["offset"] + s["size"] > f.size:
            f.problems.append(NacFormatError(f"{s['segment']},{s['name']}", s["offset"],
                                             f"section of {s['size']:,} bytes runs past the end of the file"))
            s["in_file"] = False
            continue
        if (s["segment"], s["name"]) != ("__TEXT", "__text"):
            kind = "weights and lookup tables" if s["name"] in ("__const", "__kern_0") else "section data"
            f.root.add(s["offset"], s["size"], f"{s['segment']},{s['name']}", kind, f"{s['size']:,} bytes")


#: Byte size of the address window of each H13 register block (the bases are 0x4000 apart or more).
BLOCK_SPAN = 0x4000


def _packet_defect(addr: int, count: int, written: set, block: str) -> str:
    """Why a register-write header cannot be one (a corrupt packet otherwise reads as a run of
    writes and the rest of the TD as more packets): the address is not a word's, lies outside
    every register block, or the run leaves its block; or it writes a register this TD wrote
    (``written``)."""
    base = dict(H13_BLOCKS)[block]
    if addr % 4:
        return f"register address {addr:#x} is not word-aligned"
    if addr >= base + BLOCK_SPAN:
        return f"register address {addr:#x} is in no register block"
    if addr + 4 * count > base + BLOCK_SPAN or any(base < b <= addr + 4 * (count - 1) for _, b in H13_BLOCKS):
        return f"{count} writes from {addr:#x} run out of the {block} block"
    if any(addr + 4 * j in written for j in range(count)):
        return f"writes {addr:#x}..{addr + 4 * (count - 1):#x} again in the same TD"
    return ""


def _block_of(addr: int) -> tuple[str, int]:
    best = ("Common", 0)
    for name, base in H13_BLOCKS:
        if addr >= base:
            best = (name, base)
    return best


def _tds_h13(f: HwxFile) -> None:
    text = f.section("__TEXT", "__text")
    if text is None or not text["in_file"]:
        f.problems.append(NacFormatError("__TEXT,__text", 0, "no task-descriptor section in the file"))
        return
    d = f.data
    start, end = text["offset"], text["offset"] + text["size"]
    tspan = f.root.add(start, text["size"], "__TEXT,__text", "task descriptors")
    rel = 0
    seen = set()
    while True:
        if rel in seen:
            f.problems.append(NacFormatError("__TEXT,__text", start + rel, "next_pointer loops back to an earlier TD"))
            break
        if len(f.tds) >= MAX_TDS:
            f.problems.append(NacFormatError("__TEXT,__text", start + rel, f"more than {MAX_TDS} TDs"))
            break
        seen.add(rel)
        off = start + rel
        if off + TD_HEADER > end:
            f.problems.append(NacFormatError("__TEXT,__text", off, "TD header runs past the section"))
            break
        words = struct.unpack_from("<10I", d, off)
        header = {"tid": words[0] & 0xFFFF, "nid": (words[0] >> 16) & 0xFF, "exe_cycles": words[1] & 0xFFFF,
                  "next_size": (words[1] >> 16) & 0x1FF, "log_events": words[2] & 0xFFFFFF,
                  "exceptions": words[3] & 0xFFFFFF, "debug_log_events": words[4] & 0xFFFFFF,
                  "debug_exceptions": words[5] & 0xFFFFFF, "flags": words[6], "next_pointer": words[7],
                  "base_enables": words[8], "kernel_bases": words[9]}
        td = TaskDescriptor(len(f.tds), off, header)
        td_end = min(off + TD_SIZE_H13, end)
        sp = tspan.add(off, td_end - off, f"td[{td.index}]", "task descriptor")
        hs = sp.add(off, TD_HEADER, "header", "TD header")
        for k, name in enumerate(("tid/nid", "exe_cycles/next_size", "log_events", "exceptions", "debug_log_events",
                                  "debug_exceptions", "flags", "next_pointer", "base_enables", "kernel_bases")):
            hs.add(off + 4 * k, 4, name, "u32", words[k])
        _packets(f, td, sp, off + TD_HEADER, td_end)
        f.tds.append(td)
        nxt = header["next_pointer"]
        if nxt == 0:
            break
        if nxt >= text["size"]:
            f.problems.append(NacFormatError(f"td[{td.index}]", off + 0x1C, f"next_pointer {nxt:#x} is past the "
                                                                             f"{text['size']:#x}-byte section"))
            break
        rel = nxt


def _packets(f: HwxFile, td: TaskDescriptor, span, p: int, end: int) -> None:
    d = f.data
    k = 0
    written: set = set()          # register addresses this TD wrote so far
    while p + 4 <= end:
        w = struct.unpack_from("<I", d, p)[0]
        count, addr = (w >> 26) + 1, w & 0x3FFFFFF
        if p + 4 + 4 * count > end:
            if not d[p:end].strip(b"\0"):
                span.add(p, end - p, "padding", "zero bytes")
            else:
                f.problems.append(NacFormatError(f"td[{td.index}]/packet[{k}]", p, f"{count} values overrun the TD"))
            return
        block, base = _block_of(addr)
        bad = _packet_defect(addr, count, written, block)
        written.update(range(addr, addr + 4 * count, 4))
        if bad:
            f.problems.append(NacFormatError(f"td[{td.index}]/packet[{k}]", p, bad))
        ps = span.add(p, 4 + 4 * count, f"packet[{k}]", "register write", f"{block} {addr:#x} ×{count}")
        ps.add(p, 4, "header", "u32", f"count {count}, address {addr:#x}")
        td.packets.append((p, addr, count))
        for j in range(count):
            a = addr + 4 * j
            blk, b0 = _block_of(a)
            value = struct.unpack_from("<I", d, p + 4 + 4 * j)[0]
            reg = Register(a, value, blk, (a - b0) // 4)
            for fname, lo, width in FIELDS.get((blk, reg.word), ()):
                reg.fields[fname] = (value >> lo) & ((1 << width) - 1)
            td.registers.append(reg)
            ps.add(p + 4 + 4 * j, 4, reg.name, "register", value)
        p += 4 + 4 * count
        k += 1
    if p < end:
        span.add(p, end - p, "tail", "bytes")
    _infer(td)


def _infer(td: TaskDescriptor) -> None:
    """Shapes from the named Common fields; the kind from which engines the TD turns on: kernel DMA
    enabled (weights streamed) -> conv/matmul, else a configured planar engine -> elementwise,
    else the neural engine's non-linear path alone -> activation. Inferred, not read."""
    regs = {(r.block, r.word): r for r in td.registers}
    for r in td.registers:
        for k, v in r.fields.items():
            td.shape[k.split(".")[-1]] = v
    for key in ("InFmt", "OutFmt"):
        if key in td.shape:
            td.shape["in_fmt" if key == "InFmt" else "out_fmt"] = FORMATS.get(td.shape.pop(key), "?")
    kernel_on = any(r.block == "KernelDMASrc" and 2 <= r.word < 18 and r.value & 1 for r in td.registers)
    pe_on = any(r.block == "PE" and r.value for r in td.registers)
    ne_on = any(r.block == "NE" and r.value for r in td.registers)
    if kernel_on:
        td.kind = "conv"
    elif pe_on:
        td.kind = "elementwise"
    elif ne_on:
        td.kind = "activation"
    if ("Common", 7) in regs and td.kind == "conv":
        td.shape["opcode_word"] = f"{regs[('Common', 7)].value:#010x}"
