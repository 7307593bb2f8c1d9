"""``.ternsig`` assembly source ⇄ TVMR v1 binary.

``assemble(text)`` follows the seed's source form and ternsig's ``assembler.rs`` (sections ``.meta``,
``.requires``, ``.registers``, ``.program``/``.code``; ``.aliases``/``.config`` skipped; ``;`` comments;
``label:``; lower-case core mnemonics with their aliases; ``ext.MNEMONIC`` for extensions), with the
byte layouts the real assembler gives each mnemonic (``load_input`` → ``[r, FF, 0, 0]``,
``sigmoid`` gain ×16 in D, branch targets u16 BE in C:D …), and serialises like ``binary.rs``.

``disassemble(file)`` prints that form back so that ``assemble(disassemble(f)) == f.data`` for every
file whose layout the writer could have produced. Where the canonical text would not give the same
bytes back, it falls back to forms the real tool ignores or this project adds: ``.meta`` keys
``checksum`` (``xxh64`` or a literal) and ``tvmr_flags``/``tvmr_version``, ``flags=``/``keyhex=`` on a
register, and ``.insn EXT, OPCODE, A, B, C, D`` for an instruction no mnemonic reproduces.
"""
from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING, Optional

from ...errors import NacFormatError
from . import isa
from .layout import CHECKSUMS, HEADER_SIZE

if TYPE_CHECKING:      # the reader's TvmrFile lists itself through this module
    from .format import TvmrFile

FF = 0xFF


class TvmrAsmError(NacFormatError):
    """A line of assembly source that cannot be assembled (``offset`` is the 1-based line number)."""

    def __init__(self, line: int, reason: str):
        super().__init__(f"line {line}", line, reason)

    def __str__(self) -> str:
        return f"line {self.offset}: {self.reason}" if self.offset else self.reason


# -- core mnemonic forms ---------------------------------------------------------------------------------
# A form is (opcode, template): four byte slots, each a constant or an operand reference:
#   ("r", i) register operand i, ("i", i) immediate byte, ("w", i) u16 BE over this and the next slot,
#   ("l", i) a label or instruction index (u16 BE over two slots), ("o", i, default) optional immediate,
#   ("g", i) optional sigmoid gain (float × 16, default 64).
def _r(i): return ("r", i)
def _i(i): return ("i", i)
def _w(i): return ("w", i)
def _l(i): return ("l", i)
def _o(i, d): return ("o", i, d)


CORE_FORMS: dict[str, tuple[int, tuple]] = {
    "nop": (0x0000, (FF, FF, 0, 0)), "halt": (0x0001, (FF, FF, 0, 0)),
    "load_input": (0x1007, (_r(0), FF, 0, 0)), "store_output": (0x1008, (FF, _r(0), 0, 0)),
    "copy_reg": (0x1004, (_r(0), _r(1), 0, 0)), "zero_reg": (0x1006, (_r(0), FF, 0, 0)),
    "load_target": (0x1009, (_r(0), FF, 0, 0)),
    "ternary_matmul": (0x4000, (_r(0), _r(1), _r(2), 0)), "ternary_batch_matmul": (0x4013, (_r(0), _r(1), _r(2), 0)),
    "add": (0x3001, (_r(0), _r(1), _r(2), 0)), "sub": (0x300E, (_r(0), _r(1), _r(2), 0)),
    "mul": (0x3002, (_r(0), _r(1), _r(2), 0)), "cmp_gt": (0x300F, (_r(0), _r(1), _r(2), 0)),
    "relu": (0x3003, (_r(0), _r(1), 0, 0)), "gelu": (0x3007, (_r(0), _r(1), 0, 0)),
    "tanh": (0x3005, (_r(0), _r(1), 0, 0)), "softmax": (0x3006, (_r(0), _r(1), 0, 0)),
    "max_reduce": (0x3010, (_r(0), _r(1), 0, 0)), "argmax": (0x400D, (_r(0), _r(1), 0, 0)),
    "sigmoid": (0x3004, (_r(0), _r(1), 0, ("g", 2))),
    "shift": (0x3009, (_r(0), _r(1), _i(2), 0)),
    "clamp": (0x300A, (_r(0), _r(1), _i(2), _i(3))),
    "mastery_update": (0x5012, (_r(0), _r(1), _r(2), _o(3, 15))),
    "mastery_commit": (0x5013, (_r(0), FF, 0, _o(1, 50))),
    "dequantize": (0x4002, (_r(0), _r(1), _w(2), None)),
    "ternary_add_bias": (0x4009, (_r(0), _r(1), _r(2), 0)),
    "embed_lookup": (0x400A, (_r(0), _r(1), _r(2), 0)),
    "embed_sequence": (0x4014, (_r(0), _r(1), _i(2), 0)),
    "reduce_avg": (0x400B, (_r(0), _r(1), _i(2), _i(3))),
    "reduce_mean": (0x4015, (_r(0), _r(1), _i(2), 0)),
    "slice": (0x400C, (_r(0), _r(1), _i(2), _i(3))),
    "concat": (0x400E, (_r(0), _r(1), _r(2), 0)),
    "squeeze": (0x400F, (_r(0), _r(1), _o(2, 0), 0)), "unsqueeze": (0x4010, (_r(0), _r(1), _o(2, 0), 0)),
    "transpose": (0x4011, (_r(0), _r(1), _o(2, 0), _o(3, 1))),
    "gate_update": (0x4012, (_r(0), _r(1), _r(2), _r(3))),
    "loop": (0x6000, (FF, FF, _w(0), None)), "end_loop": (0x6001, (FF, FF, 0, 0)), "break": (0x6002, (FF, FF, 0, 0)),
    "jump": (0x6008, (FF, FF, _l(0), None)), "call": (0x6006, (FF, FF, _l(0), None)),
    "return": (0x6007, (FF, FF, 0, 0)),
    "if_zero": (0x6009, (_r(0), FF, _l(1), None)), "if_nonzero": (0x600A, (_r(0), FF, _l(1), None)),
}
ALIASES = {"copy": "copy_reg", "mov": "copy_reg", "zero": "zero_reg", "cat": "concat", "narrow": "slice",
           "mean_dim": "reduce_mean", "mark_elig": "mark_eligibility"}


def _generic_form(op: isa.Op) -> tuple:
    """Every other core op: its operand pattern, register/immediate bytes in order, padding zero."""
    n = 0
    slots = []
    for k in op.kinds:
        if k == "R":
            slots.append(_r(n)); n += 1
        elif k == "I":
            slots.append(_i(n)); n += 1
        else:
            slots.append(0)
    return tuple(slots)


for _opc, _op in isa.CORE.items():
    _name = _op.mnemonic.lower()
    if _name not in CORE_FORMS:
        CORE_FORMS[_name] = (_opc, _generic_form(_op))
#: opcode -> the mnemonics that encode it, preferred first
FORMS_BY_OPCODE: dict[int, list[str]] = {}
for _name, (_opc, _t) in CORE_FORMS.items():
    FORMS_BY_OPCODE.setdefault(_opc, []).append(_name)


# -- assembling ---------------------------------------------------------------------------------------------
def _int(text: str, line: int, lo: int, hi: int, what: str = "number") -> int:
    t = text.strip()
    if len(t) > 24:
        raise TvmrAsmError(line, f"{what} {t[:24]}… is too long")
    try:
        v = int(t, 16) if t.lower().startswith(("0x", "-0x")) else int(t, 10)
    except ValueError:
        raise TvmrAsmError(line, f"invalid {what}: {t!r}") from None
    if not lo <= v <= hi:
        raise TvmrAsmError(line, f"{what} {v} is outside [{lo}, {hi}]")
    return v


def _reg(text: Optional[str], line: int) -> int:
    if text is None:
        raise TvmrAsmError(line, "missing register operand")
    r = isa.parse_reg(text)
    if r is None:
        raise TvmrAsmError(line, f"invalid register: {text!r}")
    return r


def _reg_or_imm(text: str, line: int) -> int:
    r = isa.parse_reg(text)
    if r is not None:
        return r
    if "=" in text:
        text = text.split("=", 1)[1]
    return _int(text, line, -128, 255, "operand") & 0xFF


class _Program:
    def __init__(self):
        self.meta: dict[str, str] = {}
        self.requires: list[tuple[str, int, tuple[int, int, int]]] = []
        self.regs: list[bytes] = []
        self.instrs: list[bytearray] = []
        self.labels: dict[str, int] = {}
        self.fixups: list[tuple[int, str, int]] = []


def _parse_meta(p: _Program, line: str, n: int) -> None:
    parts = line.split(None, 1)
    p.meta[parts[0].lower()] = parts[1].strip().strip('"') if len(parts) > 1 else ""


def _parse_requires(p: _Program, line: str, n: int) -> None:
    parts = line.split()
    name = parts[0].lower()
    if len(parts) > 1:
        ext_id = _int(parts[1], n, 0, 0xFFFF, "extension id")
    elif name in isa.EXT_BY_NAME:
        ext_id = isa.EXT_BY_NAME[name]
    else:
        raise TvmrAsmError(n, f"unknown extension: {name}")
    version = (1, 0, 0)
    if len(parts) > 2:
        vs = parts[2].split(".")
        if len(vs) != 3:
            raise TvmrAsmError(n, f"extension version {parts[2]!r} is not MAJOR.MINOR.PATCH")
        version = tuple(_int(v, n, 0, 0xFFFF, "version") for v in vs)
    if any(e == ext_id for _, e, _ in p.requires):
        raise TvmrAsmError(n, f"duplicate extension requirement: {name}")
    p.requires.append((name, ext_id, version))


_REGDEF = re.compile(r"^(?P<reg>[^:\s]+)\s*:\s*(?P<type>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(?P<dims>[^\]]*)\])?(?P<rest>.*)$")


def _parse_register(p: _Program, line: str, n: int) -> None:
    m = _REGDEF.match(line)
    if not m:
        raise TvmrAsmError(n, f"register definition {line!r} is not 'REG: type[dims] key=\"...\"'")
    reg = _reg(m.group("reg"), n)
    tname = m.group("type").lower()
    if tname in isa.ASM_TYPES:
        tid = isa.ASM_TYPES[tname]
    elif tname.startswith("type0x"):
        tid = _int(tname[4:], n, 0, 0xFFFF, "type id")
    else:
        raise TvmrAsmError(n, f"unknown dtype: {m.group('type')}")
    dims_text = m.group("dims")
    if dims_text is None:
        dims = [1]                                  # no brackets: shape [1], as assembler.rs does
    elif not dims_text.strip():
        dims = []
    else:
        dims = [_int(d, n, 0, 0xFFFF, "dimension") for d in dims_text.split(",")]
    if len(dims) > 255:
        raise TvmrAsmError(n, f"{len(dims)} dimensions; at most 255")
    rest = m.group("rest")
    key = b""
    km = re.search(r'(?<![A-Za-z])key="([^"]*)"', rest)
    if km:
        key = km.group(1).encode("utf-8")
    hm = re.search(r"keyhex=([0-9A-Fa-f]*)", rest)
    if hm:
        try:
            key = bytes.fromhex(hm.group(1))
        except ValueError:
            raise TvmrAsmError(n, "keyhex= is not an even number of hex digits") from None
    if len(key) > 255:
        raise TvmrAsmError(n, f"thermogram key is {len(key)} bytes; at most 255")
    flags = 1 | (2 if "frozen=true" in rest else 0)
    fm = re.search(r"flags=(\S+)", rest)
    if fm:
        flags = _int(fm.group(1), n, 0, 255, "flags")
    p.regs.append(struct.pack("<BHBB", reg, tid, flags, len(dims)) + struct.pack(f"<{len(dims)}H", *dims)
                  + bytes([len(key)]) + key)


def _encode_form(p: _Program, opcode: int, template: tuple, ops: list[str], n: int, mnemonic: str) -> bytearray:
    out = bytearray(struct.pack(">HH", 0, opcode)) + bytearray(4)
    used = set()
    for pos, slot in enumerate(template):
        if slot is None:
            continue
        if isinstance(slot, int):
            out[4 + pos] = slot
            continue
        kind, i = slot[0], slot[1]
        used.add(i)
        text = ops[i] if i < len(ops) else None
        if kind == "r":
            out[4 + pos] = _reg(text, n)
        elif kind == "i":
            if text is None:
                raise TvmrAsmError(n, f"{mnemonic}: missing immediate operand {i + 1}")
            out[4 + pos] = _reg_or_imm(text, n) if isa.parse_reg(text) is not None else \
                _int(text.split("=", 1)[-1], n, -128, 255, "immediate") & 0xFF
        elif kind == "o":
            out[4 + pos] = slot[2] if text is None else _int(text.split("=", 1)[-1], n, -128, 255, "immediate") & 0xFF
        elif kind == "g":
            if text is None:
                out[4 + pos] = 64
            else:
                try:
                    g = float(text.split("=", 1)[-1])
                except ValueError:
                    raise TvmrAsmError(n, f"invalid gain: {text!r}") from None
                if g != g:
                    raise TvmrAsmError(n, "gain is NaN")
                out[4 + pos] = int(min(max(g * 16.0, 0.0), 255.0))
        elif kind == "w":
            if text is None:
                raise TvmrAsmError(n, f"{mnemonic}: missing operand {i + 1}")
            out[4 + pos:6 + pos] = _int(text, n, 0, 0xFFFF, "immediate").to_bytes(2, "big")
        elif kind == "l":
            if text is None:
                raise TvmrAsmError(n, f"{mnemonic}: missing jump target")
            if re.fullmatch(r"\d+|0[xX][0-9A-Fa-f]+", text):
                out[4 + pos:6 + pos] = _int(text, n, 0, 0xFFFF, "jump target").to_bytes(2, "big")
            else:
                p.fixups.append((len(p.instrs), text, n))
                out[4 + pos:6 + pos] = b"\0\0"
    if len(ops) > (max(used) + 1 if used else 0):
        raise TvmrAsmError(n, f"{mnemonic}: too many operands ({len(ops)})")
    return out


def _parse_instruction(p: _Program, line: str, n: int) -> None:
    if line.endswith(":"):
        label = line[:-1].strip()
        if not label or label in p.labels:
            raise TvmrAsmError(n, f"empty or duplicate label {label!r}")
        p.labels[label] = len(p.instrs)
        return
    parts = line.split(None, 1)
    mnemonic = parts[0].lower()
    ops = [o.strip() for o in parts[1].split(",")] if len(parts) > 1 and parts[1].strip() else []
    if mnemonic == ".insn":
        if len(ops) != 6:
            raise TvmrAsmError(n, ".insn takes EXT, OPCODE, A, B, C, D")
        ext, opc = (_int(o, n, 0, 0xFFFF, "id") for o in ops[:2])
        p.instrs.append(bytearray(struct.pack(">HH", ext, opc) + bytes(_int(o, n, 0, 255, "byte") for o in ops[2:])))
        return
    if mnemonic == "include":
        return
    mnemonic = ALIASES.get(mnemonic, mnemonic)
    if mnemonic in CORE_FORMS:
        opc, template = CORE_FORMS[mnemonic]
        p.instrs.append(_encode_form(p, opc, template, ops, n, mnemonic))
        return
    if "." in mnemonic:
        ext_name, _, mn = mnemonic.partition(".")
        ext_id = isa.EXT_BY_NAME.get(ext_name)
        if ext_id is None:
            ext_id = next((e for name, e, _ in p.requires if name == ext_name), None)
        table = isa.EXTENSIONS.get(ext_id, (None, {}))[1] if ext_id is not None else {}
        op = next((o for o in table.values() if o.mnemonic == mn.upper()), None)
        if op is None:
            raise TvmrAsmError(n, f"unknown extension mnemonic: {ext_name}.{mn}")
        if len(ops) > 4:
            raise TvmrAsmError(n, f"{mnemonic}: at most 4 operands")
        operands = bytes(_reg_or_imm(o, n) for o in ops) + bytes(4 - len(ops))
        p.instrs.append(bytearray(struct.pack(">HH", ext_id, op.opcode) + operands))
        return
    raise TvmrAsmError(n, f"unknown mnemonic: {mnemonic}")


MAX_SOURCE = 64 << 20


def assemble(text: str) -> bytes:
    """Assemble ``.ternsig`` source into TVMR v1 bytes (raises :class:`TvmrAsmError`)."""
    if len(text) > MAX_SOURCE:
        raise TvmrAsmError(0, f"{len(text):,} characters is more than the {MAX_SOURCE:,} this assembler reads")
    p = _Program()
    section = None
    handlers = {"meta": _parse_meta, "requires": _parse_requires, "registers": _parse_register,
                "program": _parse_instruction}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(";"):
            continue
        # key="..." may hold ';' only in keyhex form; the first ';' starts a comment, as in assembler.rs
        if ";" in line:
            line = line[:line.index(";")].strip()
            if not line:
                continue
        if line.startswith(".") and not line.lower().startswith(".insn"):
            d = line.lower()
            if d in (".meta", ".requires", ".registers"):
                section = d[1:]
            elif d in (".program", ".code"):
                section = "program"
            elif d in (".aliases", ".config", ".projection"):
                section = "skip"
            else:
                raise TvmrAsmError(n, f"unknown directive: {line}")
            continue
        if section is None:
            raise TvmrAsmError(n, "code outside of a section")
        if section == "skip":
            continue
        handlers[section](p, line, n)
    for idx, label, n in p.fixups:
        if label not in p.labels:
            raise TvmrAsmError(n, f"undefined label: {label}")
        tgt = p.labels[label]
        if tgt > 0xFFFF:
            raise TvmrAsmError(n, f"label {label} at instruction {tgt} does not fit u16")
        p.instrs[idx][6:8] = tgt.to_bytes(2, "big")
    return _serialise(p)


def _serialise(p: _Program) -> bytes:
    et = b"".join(struct.pack("<4H", e, *v) for _, e, v in p.requires)
    rd = b"".join(p.regs)
    it = b"".join(bytes(i) for i in p.instrs)
    ro = HEADER_SIZE + len(et)
    io = ro + len(rd)
    ck_text = p.meta.get("checksum", "tvmr-binary.rs")
    if ck_text in CHECKSUMS:
        ck = CHECKSUMS[ck_text](et + rd + it)
    elif ck_text == "tvmr":
        ck = CHECKSUMS["tvmr-binary.rs"](et + rd + it)
    else:
        ck = _int(ck_text, 0, 0, (1 << 64) - 1, "checksum")
    version = _int(p.meta.get("tvmr_version", "1"), 0, 0, 0xFFFF, "tvmr_version")
    flags = _int(p.meta.get("tvmr_flags", "0"), 0, 0, 0xFFFF, "tvmr_flags")
    hdr = struct.pack("<4sHHIIIIIIQ8s", b"TVMR", version, flags, HEADER_SIZE, len(p.requires), ro, len(p.regs),
                      io, len(p.instrs), ck, b"\0" * 8)
    return hdr + et + rd + it


# -- disassembling ------------------------------------------------------------------------------------------
def _operand_text(slot, b: bytes, pos: int, labels: dict[int, str]) -> Optional[str]:
    kind = slot[0]
    if kind == "r":
        return isa.reg_name(b[pos])
    if kind in ("i", "o"):
        return str(b[pos])
    if kind == "g":
        return None if b[pos] == 64 else f"gain={b[pos] / 16:g}"
    v = int.from_bytes(b[pos:pos + 2], "big")
    if kind == "l" and v in labels:
        return labels[v]
    return str(v)


def _core_text(i, labels: dict[int, str]) -> Optional[str]:
    for name in FORMS_BY_OPCODE.get(i.opcode, []):
        _, template = CORE_FORMS[name]
        ok = True
        ops: dict[int, Optional[str]] = {}
        for pos, slot in enumerate(template):
            if slot is None:
                continue
            if isinstance(slot, int):
                if i.operands[pos] != slot:
                    ok = False
                    break
                continue
            ops[slot[1]] = _operand_text(slot, i.operands, pos, labels)
        if not ok:
            continue
        args = [ops[k] for k in sorted(ops)]
        while args and args[-1] is None:
            args.pop()
        if any(a is None for a in args):      # an optional operand before a given one
            continue
        # optional immediates at their default are still printed (the default is what assembles)
        return f"{name} {', '.join(args)}".rstrip()
    return None


def _ext_text(i) -> Optional[str]:
    op = i.op
    if op is None:
        return None
    kinds = op.kinds
    b = i.operands
    k = max([n + 1 for n in range(4) if b[n]] + [len(kinds.rstrip("_"))])
    args = [isa.reg_name(b[n]) if kinds[n] == "R" else str(b[n]) for n in range(k)]
    return f"{isa.ext_name(i.ext_id)}.{op.mnemonic.lower()} {', '.join(args)}".rstrip()


def _insn_text(i) -> str:
    return f".insn {i.ext_id:#06x}, {i.opcode:#06x}, " + ", ".join(f"{x:#04x}" for x in i.operands)


def _reg_line(r) -> str:
    tname = isa.TYPE_TO_ASM.get(r.type_id, f"type{r.type_id:#06x}")
    line = f"{r.name}: {tname}[{', '.join(map(str, r.dims))}]"
    if r.key:
        try:
            key = r.key.decode("utf-8")
            plain = all(c not in key for c in '";') and key.isprintable()
        except UnicodeDecodeError:
            plain = False
        line += f'  key="{key}"' if plain else f"  keyhex={r.key.hex()}"
    if r.flags == 3:
        line += "  frozen=true"
    elif r.flags != 1:
        line += f"  flags={r.flags:#04x}"
    return line


def disassemble(f: TvmrFile) -> str:
    """The seed's assembly source form of a decoded file (assembles back with ``assemble``)."""
    h = f.header
    out = [f"; TVMR v{h.version} program{' read from a legacy TERN file' if f.legacy else ''}"
           + (f" from {f.path}" if f.path else ""),
           f"; {len(f.registers)} registers, {len(f.instructions)} instructions"]
    notes = []
    if not f.legacy:
        canonical = (h.ext_offset == HEADER_SIZE and h.reg_offset == HEADER_SIZE + 8 * h.ext_count
                     and h.reserved == b"\0" * 8 and h.instr_offset + 8 * h.instr_count == f.size)
        if not canonical:
            notes.append("; note: this file's layout (offsets, reserved bytes or trailing data) is not what the "
                         "writer produces; assembling this text gives the writer's layout")
    meta = []
    if f.checksum_kind == "xxh64":
        meta.append("    checksum xxh64")
    elif f.checksum_kind is None and not f.legacy:
        meta.append(f"    checksum {h.checksum:#018x}      ; matches neither checksum variant")
    if h.flags:
        meta.append(f"    tvmr_flags {h.flags:#06x}")
    if h.version != 1:
        meta.append(f"    tvmr_version {h.version}")
    out += notes
    if meta:
        out += ["", ".meta"] + meta
    if f.extensions:
        out += ["", ".requires"]
        for e in f.extensions:
            v = "" if e.version == (1, 0, 0) else f" {e.version[0]}.{e.version[1]}.{e.version[2]}"
            out.append(f"    {e.name if e.name not in ('user', 'unknown', 'reserved') else f'ext_{e.ext_id:04x}'} "
                       f"{e.ext_id:#06x}{v}")
    if f.registers:
        out += ["", ".registers"] + [f"    {_reg_line(r)}" for r in f.registers]
    out += ["", ".program"]
    n = len(f.instructions)
    labels = {}
    if n:
        import numpy as np
        ext, opc, b = f.instructions.columns()
        branch = (ext == 0) & np.isin(opc, [0x6006, 0x6008, 0x6009, 0x600A])
        for t in sorted(set(((b[branch, 2].astype(np.int64) << 8) | b[branch, 3]).tolist())):
            if t <= n:
                labels[t] = f"L{t}"
    by_label = {v: k for k, v in labels.items()}
    memo: dict[int, str] = {}          # instructions repeat: a line depends only on its bytes (and labels)
    append = out.append
    for k, word in enumerate(f.instructions.words()):
        if k in labels:
            append(f"{labels[k]}:")
        line = memo.get(word)
        if line is None:
            i = f.instructions[k]
            text = None
            if i.ext_id == 0:
                text = _core_text(i, labels)
            elif isa.EXT_BY_NAME.get(isa.ext_name(i.ext_id)) == i.ext_id:
                text = _ext_text(i)
            if text is not None and _reencodes(text, i, by_label):
                line = f"    {text}"
            else:
                line = f"    {_insn_text(i)}" + (f"    ; {i.mnemonic}" if i.op else "")
            memo[word] = line
        append(line)
    if n in labels:
        out.append(f"{labels[n]}:")
    return "\n".join(out) + "\n"


def instruction_lines(text: str, count: int) -> list[int]:
    """The 1-based line of each of ``count`` instructions in :func:`disassemble`'s ``text``: the
    indented lines after ``.program`` (labels are unindented, blank lines and comments skipped)."""
    out: list[int] = []
    in_program = False
    for n, line in enumerate(text.splitlines(), 1):
        if not in_program:
            in_program = line.strip() == ".program"
            continue
        if len(out) >= count:
            break
        body = line.strip()
        if line[:1] in (" ", "\t") and body and not body.startswith(";"):
            out.append(n)
    return out


def _reencodes(text: str, i, by_label: dict[str, int]) -> bool:
    p = _Program()
    p.labels = by_label
    try:
        _parse_instruction(p, text, 0)
    except TvmrAsmError:
        return False
    got = p.instrs[-1]
    for idx, label, _ in p.fixups:
        got[6:8] = p.labels[label].to_bytes(2, "big")
    return bytes(got) == i.raw
