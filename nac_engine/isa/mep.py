"""MEP bytecode, the "execution recipe" stored in the ORCH section: decode, encode, text.

Facts: research note upstream_format.md §12 (instruction set, jump convention), seed 000 §9
(section framing). Every instruction is one opcode byte followed by its operands; multi-byte
integers are little-endian. Operand kinds:

* ``k``    u8 context key (a variable slot of the MEP register machine)
* ``u8``   small integer or enumeration (dtype, op selector, model id ...)
* ``c16``  u16 id in the ORCH constant pool
* ``i16``  signed jump, relative to the end of the instruction (the byte after the i16)
* ``keys`` u8 count n, then n keys; held as a Python ``list[int]``
* ``raw``  opaque operand bytes of an opcode the interpreter only knows the length of

TENSOR_MANIPULATE and TENSOR_INFO end in a tail whose fields depend on their ``op`` operand.

Decoding never raises on bad bytes: an unknown opcode, an unknown ``op`` selector, or an
instruction cut off by the end of the stream stops decoding; the remaining bytes become one
``.bytes`` pseudo-instruction and the reason goes to the problems list. So
``encode_mep(decode_mep(b)[0]) == b`` for *any* ``b``.

Text grammar (one instruction per line; ``format_mep`` writes it, ``parse_mep`` reads it)::

    line     := [ip ":"] mnemonic {operand} [";" comment]
    ip       := decimal byte offset of the instruction in the bytecode
    mnemonic := NAME from MEP_OPCODES  |  "OP_0x" hex hex  |  ".bytes"
    operand  := name "=" value          every operand of the layout, named, once each
    value    := "k" decimal             context key              out=k3
              | decimal | enum-name     u8                       model=0   op=argmax
              | "#" decimal             constant-pool id (c16)   path=#0
              | "@" ["-"] decimal       jump, as the ABSOLUTE ip it lands on   jump=@12
              | "[" [key {"," key}] "]" key list; its count byte is implied  in=[k1, k2]
              | 'x"' {hex hex} '"'      raw bytes                raw=x"0a0b0c"

Example: ``4: RES_LOAD_ARRAY out=k0 name=#1 ; "sample_input"``. Operand names are fixed per
opcode (see ``MEP_OPCODES``) and may appear in any order. ``u8`` fields with a known value
set print the name (``op=argmax``) and accept either the name or the number. The comment
after ``;`` is ignored by the parser; ``format_mep`` puts pool values there. Without the
``ip:`` prefix, ``parse_mep`` uses its ``ip`` argument (needed to turn ``@target`` back
into a relative jump). ``.bytes`` takes a single ``data=x"..."`` operand.
"""
from __future__ import annotations

import functools
import itertools
import json
import re
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Union

import numpy as np

from ..errors import NacFormatError
from ..spans import Span

SECTION = "ORCH/bytecode"
RAW_MNEMONIC = ".bytes"


# -- operand layout --------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    name: str
    kind: str                                  # "k" | "u8" | "c16" | "i16" | "keys" | "raw"
    size: int = 0                              # byte count, for "raw" only
    names: Optional[Mapping[int, str]] = None  # u8 values that print as a word


@dataclass(frozen=True)
class OpTail:
    """Fields that follow only for some values of the instruction's ``op`` operand."""
    by_op: Mapping[int, tuple]
    default: Optional[tuple] = None            # None: any other op has no known layout


Layout = tuple  # of Field | OpTail

_FIXED_SIZE = {"k": 1, "u8": 1, "c16": 2, "i16": 2}


def _k(name): return Field(name, "k")
def _u8(name, names=None): return Field(name, "u8", names=names)
def _c16(name): return Field(name, "c16")
def _jump(): return Field("jump", "i16")
def _keys(name): return Field(name, "keys")
def _raw(size): return Field("raw", "raw", size)


_MATH_UNARY = {0: "softmax", 1: "sqrt", 2: "abs", 3: "neg", 4: "exp", 5: "reciprocal"}
_MATH_BINARY = {0: "add", 1: "sub", 2: "mul", 3: "div", 4: "pow", 5: "max", 6: "min"}
_COMPARE = {0: "eq", 1: "ne", 2: "gt", 3: "lt"}
_DTYPE = {0: "f32", 1: "f64", 2: "f16", 5: "i64", 7: "i8"}

MEP_OPCODES: dict[int, tuple[str, Layout]] = {
    0x02: ("SRC_USER_PROMPT", (_k("out"), _u8("data_type", {0: "str", 1: "int", 2: "float"}), _c16("prompt"))),
    0x03: ("OP_0x03", (_raw(3),)),
    0x04: ("SRC_CONSTANT", (_k("out"), _c16("const"))),
    0x05: ("SRC_EXEC_MODE", (_k("out"),)),
    0x10: ("RES_LOAD_MODEL", (_u8("model"), _c16("path"))),
    0x11: ("RES_LOAD_DATAFILE", (_k("out"), _u8("file_type", {2: "npy"}), _c16("path"))),
    0x12: ("RES_LOAD_EXTERN", (_k("out"), _u8("res_type", {0: "tokenizer"}), _c16("resource"))),
    0x13: ("RES_LOAD_DYNAMIC", (_k("out"), _k("path"), _u8("file_type", {2: "npy", 3: "image"}))),
    0x14: ("RES_LOAD_ARRAY", (_k("out"), _c16("name"))),
    0x18: ("OP_0x18", (_raw(3),)),
    0x1F: ("RES_UNLOAD", (_u8("res_type", {0: "model"}), _u8("id"))),
    0x20: ("PREPROC_ENCODE", (_k("tokenizer"), _k("in"), _k("out"))),
    0x21: ("PREPROC_DECODE", (_k("tokenizer"), _k("in"), _k("out"))),
    0x22: ("PREPROC_GET_ID", (_k("tokenizer"), _c16("token"), _k("out"))),
    0x2A: ("STRING_FORMAT", (_k("out"), _c16("fmt"), _keys("args"))),
    0x30: ("TENSOR_CREATE", (_k("out"), _u8("dtype", _DTYPE),
                             _u8("kind", {0: "value", 1: "arange", 2: "ones", 3: "zeros"}), _k("in"))),
    0x31: ("OP_0x31", (_raw(5),)),
    0x38: ("TENSOR_MANIPULATE", (_u8("op", {1: "pad", 2: "unsqueeze", 3: "squeeze"}), _k("out"), _k("in"),
                                 OpTail({1: (_k("pad_width"), _k("value")), 2: (_k("dim"),), 3: (_k("dim"),)}))),
    0x39: ("TENSOR_COMBINE", (_u8("op", {0: "concat"}), _k("out"), _keys("in"), _k("axis"))),
    0x3A: ("TENSOR_INFO", (_u8("op", {0: "shape", 1: "dim", 2: "item"}), _k("out"), _k("in"),
                           OpTail({1: (_k("dim"),)}, default=()))),
    0x3B: ("TENSOR_EXTRACT", (_k("out"), _k("tensor"), _k("index"))),
    0x59: ("SYS_COPY", (_k("out"), _k("in"))),
    0x5F: ("SYS_DEBUG_PRINT", (_k("var"), _c16("msg"))),
    0x60: ("MATH_UNARY", (_u8("op", _MATH_UNARY), _k("out"), _k("in"))),
    0x61: ("MATH_BINARY", (_u8("op", _MATH_BINARY), _k("out"), _k("a"), _k("b"))),
    0x62: ("MATH_AGGREGATE", (_u8("op", {0: "argmax"}), _k("out"), _k("in"))),
    0x68: ("LOGIC_COMPARE", (_u8("op", _COMPARE), _k("out"), _k("a"), _k("b"))),
    0x70: ("ANALYSIS_TOP_K", (_k("logits"), _k("k"), _k("out_idx"), _k("out_vals"))),
    0x71: ("ANALYSIS_SAMPLE", (_k("logits"), _k("temp"), _k("topk"), _k("out"))),
    0x80: ("MODEL_RUN_STATIC", (_u8("model"), _keys("in"), _keys("out"))),
    # total length 12 + n_in + n_tgt; pool id 0 in the head names means "none"
    0x82: ("MODEL_TRAIN_STEP", (_u8("model"), _u8("loss", {0: "ce", 1: "mse"}), _keys("in"), _keys("targets"),
                                _k("loss_out"), _k("lr"), _k("logits"), _c16("head_weight"), _c16("head_bias"))),
    0x83: ("MODEL_ZERO_GRAD", (_u8("model"),)),
    0x85: ("MODEL_SAVE_WEIGHTS", (_u8("model"), _k("path"), _u8("save_type"))),
    0xA0: ("FLOW_LOOP_START", (_k("counter"),)),
    0xA1: ("FLOW_LOOP_END", (_jump(),)),
    0xA8: ("FLOW_BRANCH_IF", (_k("cond"), _jump())),
    0xA9: ("FLOW_BREAK_LOOP_IF", (_k("cond"), _jump())),
    0xE0: ("SERIALIZE_OBJECT", (_k("out"), _k("in"), _u8("fmt", {0: "str", 1: "json", 2: "png"}))),
    0xE1: ("OP_0xE1", (_raw(3),)),
    0xF0: ("IO_WRITE", (_k("in"), _u8("dest", {0: "stdout", 1: "stderr", 2: "file"}), _k("dest_path"),
                        _u8("mode", {0: "overwrite", 1: "append", 2: "stream"}))),
    0xFE: ("EXEC_RETURN", (_keys("values"),)),
    0xFF: ("EXEC_HALT", ()),
}
MEP_MNEMONICS = {name: op for op, (name, _) in MEP_OPCODES.items()}


# -- instructions ----------------------------------------------------------------------------
@dataclass(slots=True)      # a 1 MB stream holds ~240k of these
class MepInstruction:
    ip: int                       # byte offset within the bytecode
    opcode: Optional[int]         # None for the ``.bytes`` pseudo-instruction
    mnemonic: str
    operands: list                # [(name, value)]: int, list[int] for keys, bytes for raw/data
    length: int                   # bytes, opcode included

    @property
    def end(self) -> int:
        return self.ip + self.length

    @property
    def jump_target(self) -> Optional[int]:
        """Absolute ip a jump lands on (jumps are stored relative to the instruction end)."""
        for name, value in self.operands:
            if name == "jump":
                return self.end + value
        return None

    def operand(self, name: str) -> Any:
        return dict(self.operands)[name]


class _Undecodable(Exception):
    """Internal: the instruction at the current ip cannot be decoded (reason in args[0])."""


def _resolve_tail(tail: OpTail, mnemonic: str, op: Any) -> tuple:
    fields = tail.by_op.get(op, tail.default)
    if fields is None:
        raise _Undecodable(f"{mnemonic} op {op} has no known operand layout")
    return fields


def _decode_one(buf: bytes, ip: int, want_leaves: bool = True) -> tuple[MepInstruction, list]:
    """One instruction at ``ip`` plus (with ``want_leaves``) its leaf fields as
    (ip, size, name, type, value). The read path skips the leaves: spans are built lazily."""
    opcode = buf[ip]
    entry = MEP_OPCODES.get(opcode)
    if entry is None:
        raise _Undecodable(f"unknown MEP opcode 0x{opcode:02X}")
    mnemonic, layout = entry
    leaves = [(ip, 1, "opcode", "opcode", mnemonic)] if want_leaves else None
    operands: list = []
    pos = ip + 1
    end = len(buf)
    fields = layout
    i = 0
    while i < len(fields):
        f = fields[i]
        i += 1
        if isinstance(f, OpTail):
            fields = tuple(_resolve_tail(f, mnemonic, dict(operands).get("op"))) + tuple(fields[i:])
            i = 0
            continue
        kind = f.kind
        if kind == "keys":
            if pos + 1 > end:
                raise _Undecodable(f"truncated {mnemonic}: n_{f.name} needs 1 bytes at ip {pos}, {end - pos} left")
            n = buf[pos]
            if pos + 1 + n > end:
                raise _Undecodable(f"truncated {mnemonic}: {f.name} needs {n} bytes at ip {pos + 1}, "
                                   f"{end - pos - 1} left")
            keys = list(buf[pos + 1:pos + 1 + n])
            if want_leaves:
                leaves.append((pos, 1, f"n_{f.name}", "u8", n))
                leaves.extend((pos + 1 + j, 1, f"{f.name}[{j}]", "k", key) for j, key in enumerate(keys))
            operands.append((f.name, keys))
            pos += 1 + n
            continue
        size = f.size if kind == "raw" else _FIXED_SIZE[kind]
        if pos + size > end:
            raise _Undecodable(f"truncated {mnemonic}: {f.name} needs {size} bytes at ip {pos}, {end - pos} left")
        if kind == "raw":
            value = bytes(buf[pos:pos + size])
        elif kind == "c16":
            value = buf[pos] | buf[pos + 1] << 8
        elif kind == "i16":
            value = buf[pos] | buf[pos + 1] << 8
            value -= (value & 0x8000) << 1
        else:
            value = buf[pos]
        if want_leaves:
            leaves.append((pos, size, f.name, "bytes" if kind == "raw" else kind, value))
        operands.append((f.name, value))
        pos += size
    return MepInstruction(ip, opcode, mnemonic, operands, pos - ip), leaves


def decode_mep(bytecode: bytes, base_offset: int = 0, span: Optional[Span] = None
               ) -> tuple["MepStream", list[NacFormatError]]:
    """Decode a whole bytecode stream; never raises on bad bytes (see module docstring).

    ``base_offset`` is the absolute file offset of ``bytecode[0]``; it places problems and
    spans. With ``span``, each instruction becomes a child ``insn[i]`` whose leaves cover
    its bytes exactly once (opcode, each operand field, each count byte and list element).

    The result is a :class:`MepStream`: the bytes plus one start offset per instruction,
    found by a length-only pass (one table look-up per fixed-length instruction), so a 1 MB
    stream costs ~4 bytes per instruction instead of a Python object per instruction and
    per operand; instructions are decoded when they are read.
    """
    buf = bytes(bytecode)
    ips = array("I")
    problems: list[NacFormatError] = []
    tail = None
    ip, end = 0, len(buf)
    append = ips.append
    while ip < end:
        # length only (no operand objects): a table look-up per fixed-length opcode, the
        # layout's plan for the others
        n = _FIXED_LENGTH[buf[ip]]
        if n < 0:
            n = _plan_length(_PLAN_OF[buf[ip]], buf, ip, end)
        if n <= 0 or ip + n > end:
            # unknown opcode, unknown op selector or cut off: the full decoder says which
            try:
                n = _decode_one(buf, ip, want_leaves=False)[0].length
            except _Undecodable as e:
                problems.append(NacFormatError(SECTION, base_offset + ip, e.args[0]))
                tail = MepInstruction(ip, None, RAW_MNEMONIC, [("data", buf[ip:])], end - ip)
                break
        append(ip)
        ip += n
    instructions = MepStream(buf, ips, tail)
    if span is not None:
        # Spans are built when first asked for (the structure view, `nac span`), not at read:
        # eagerly they were most of a big stream's decode time and memory.
        count = len(instructions)
        span.set_index(count, lambda i: base_offset + instructions[i].ip if i == count - 1 and tail is not None
                       else base_offset + ips[i], functools.partial(_instruction_span, buf, base_offset, instructions, span))
    return instructions, problems


class MepStream(Sequence):
    """A decoded stream, held compactly: the bytecode, each instruction's start (u32), and
    the undecodable ``.bytes`` tail if any. Indexing and iteration decode an instruction
    from its bytes (decoding is deterministic, so equal reads give equal instructions);
    the tail is one kept object. Compares equal to a list of the same instructions."""

    __slots__ = ("bytecode", "starts", "tail")

    def __init__(self, bytecode: bytes, starts: array, tail: Optional[MepInstruction] = None):
        self.bytecode = bytecode
        self.starts = starts
        self.tail = tail

    def __len__(self) -> int:
        return len(self.starts) + (self.tail is not None)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("MEP instruction index out of range")
        if index == len(self.starts):
            return self.tail
        return _decode_one(self.bytecode, self.starts[index], want_leaves=False)[0]

    def __iter__(self):
        buf = self.bytecode
        for ip in self.starts:
            yield _decode_one(buf, ip, want_leaves=False)[0]
        if self.tail is not None:
            yield self.tail

    def __eq__(self, other):
        if isinstance(other, MepStream):
            return (self.bytecode == other.bytecode and self.starts == other.starts
                    and self.tail == other.tail)
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None   # type: ignore[assignment]

    def decode_at(self, ip: int) -> MepInstruction:
        """The instruction starting at byte ``ip`` (one of ``starts``, or the tail's)."""
        if self.tail is not None and ip == self.tail.ip:
            return self.tail
        return _decode_one(self.bytecode, ip, want_leaves=False)[0]

    def spans(self):
        """(start, end) of each decoded instruction (the tail excluded), without decoding."""
        starts = self.starts
        limit = self.tail.ip if self.tail is not None else len(self.bytecode)
        return zip(starts, itertools.chain(itertools.islice(starts, 1, None), (limit,)))

    def ends(self, i0: int, i1: int) -> np.ndarray:
        """End offsets of instructions ``i0 .. i1 - 1`` (the tail excluded)."""
        ends = np.frombuffer(self.starts, dtype=np.uint32)[i0 + 1:i1 + 1].astype(np.int64)
        if i1 >= len(self.starts):
            ends = np.append(ends, self.tail.ip if self.tail is not None else len(self.bytecode))
        return ends

    def encoding_keys(self, i0: int, i1: int) -> np.ndarray:
        """One uint64 per instruction ``i0 .. i1 - 1`` that identifies its bytes: the bytes
        themselves, little-endian, for an instruction of up to 8 bytes (a decodable instruction
        is never a prefix of another, so zero padding cannot collide), 0 for a longer one
        (no instruction's key is 0: opcode 0x00 does not exist). The 8 bytes at every offset
        are one unaligned little-endian u64 view of the instructions' bytes (and 8 of padding),
        gathered at each start and masked to its length."""
        starts = np.frombuffer(self.starts, dtype=np.uint32)[i0:i1]
        if not len(starts):
            return np.zeros(0, dtype=np.uint64)
        ends = self.ends(i0, i1)
        lo, hi = int(starts[0]), int(ends[-1])
        window = self.bytecode[lo:hi] + bytes(8)
        words = np.ndarray((hi - lo,), dtype="<u8", buffer=window, strides=(1,))
        keys = words[starts - np.uint32(lo)]
        keys &= _KEY_MASKS[np.minimum(ends - starts, 9)]
        return keys

    def distinct_encodings(self, limit: int) -> tuple[set, bool]:
        """The distinct byte strings of the decoded instructions (the tail excluded) and True,
        when there are at most about ``limit`` of them; else some of them and False. Keys are
        made :data:`_KEY_CHUNK` instructions at a time, so the temporaries stay bounded however
        short the instructions (8 bytes of key per 2-byte instruction was 21 B per stream byte)."""
        buf, starts = self.bytecode, self.starts
        n = len(starts)
        if n > 4 * limit and _count_distinct(self.encoding_keys(0, 4 * limit)) > limit:
            return set(), False         # as many in the first instructions: no need to look further
        end_of = self.tail.ip if self.tail is not None else len(buf)
        first: dict = {}                # key of up to 8 bytes -> an instruction with those bytes
        seen: set = set()               # the bytes of the longer instructions
        for i0 in range(0, n, _KEY_CHUNK):
            keys = self.encoding_keys(i0, min(n, i0 + _KEY_CHUNK))
            distinct, at = np.unique(keys, return_index=True)
            for key, i in zip(distinct.tolist(), at.tolist()):
                if key and key not in first:
                    first[key] = i0 + i
            for i in (np.flatnonzero(keys == 0) + i0).tolist():
                seen.add(buf[starts[i]:starts[i + 1] if i + 1 < n else end_of])
                if len(seen) > limit:
                    return seen, False
            if len(first) + len(seen) > limit:
                return seen, False
        for i in sorted(first.values()):
            seen.add(buf[starts[i]:starts[i + 1] if i + 1 < n else end_of])
        return seen, True

    def kind_representatives(self) -> list:
        """The bytes of the first instruction of each kind, in stream order (the tail excluded):
        its opcode and, for an opcode in ``OP_SELECTOR_OPCODES``, its ``op`` byte. One pass of
        numpy: a u16 kind per instruction and the least index of each of the 65536 kinds."""
        starts = np.frombuffer(self.starts, dtype=np.uint32)
        n = len(starts)
        if not n:
            return []
        code = np.frombuffer(self.bytecode, dtype=np.uint8)
        opcode = np.take(code, starts)
        selector = np.take(code, np.minimum(starts + 1, len(code) - 1)) & np.take(_SELECTOR_MASK, opcode)
        first = np.full(65536, n, dtype=np.int64)
        np.minimum.at(first, opcode.astype(np.uint16) << 8 | selector, np.arange(n))
        limit = self.tail.ip if self.tail is not None else len(self.bytecode)
        out = []
        for i in np.sort(first[first < n]).tolist():
            end = int(starts[i + 1]) if i + 1 < n else limit
            out.append(self.bytecode[int(starts[i]):end])
        return out

    def __repr__(self) -> str:
        return f"MepStream({len(self)} instructions, {len(self.bytecode)} bytes)"


# Length-only decoding: per opcode, its total length when fixed (> 0), 0 when unknown, -1 when
# it needs a plan: the steps of its layout, each a fixed byte count (> 0), _KEYS (a count byte
# and that many keys) or (_TAIL, at, {op: tail bytes}, default bytes or None) with the op
# selector at ``ip + at``.
_KEYS = -1
_TAIL = -2
def _count_distinct(keys: np.ndarray) -> int:
    """Distinct non-zero keys (a longer encoding's key is 0: not counted, so never too many)."""
    ordered = np.sort(keys)
    ordered = ordered[int(np.searchsorted(ordered, 0, side="right")):]
    return int(np.count_nonzero(ordered[1:] != ordered[:-1])) + 1 if len(ordered) else 0


# an encoding key's mask by instruction length (0 past 8 bytes: such keys are 0)
_KEY_MASKS = np.array([(1 << 8 * n) - 1 for n in range(9)] + [0], dtype=np.uint64)


def _plan_of(layout: tuple) -> tuple:
    steps: list = []
    fixed_prefix: Optional[int] = 1    # bytes from ip while every field so far is fixed
    op_at = None
    for f in layout:
        if isinstance(f, OpTail):
            def tail_len(fields):
                if fields is None or any(g.kind == "keys" for g in fields):
                    return None
                return sum(g.size if g.kind == "raw" else _FIXED_SIZE[g.kind] for g in fields)
            by_op = {op: tail_len(fs) for op, fs in f.by_op.items()}
            if op_at is None or None in by_op.values():
                raise ValueError("op-dependent tail without a fixed op selector")   # table bug
            steps.append((_TAIL, op_at, by_op, tail_len(f.default)))
            fixed_prefix = None
        elif f.kind == "keys":
            steps.append(_KEYS)
            fixed_prefix = None
        else:
            size = f.size if f.kind == "raw" else _FIXED_SIZE[f.kind]
            if f.name == "op" and fixed_prefix is not None:
                op_at = fixed_prefix
            if steps and isinstance(steps[-1], int) and steps[-1] > 0:
                steps[-1] += size
            else:
                steps.append(size)
            if fixed_prefix is not None:
                fixed_prefix += size
    return tuple(steps)


def _plan_length(plan: tuple, buf: bytes, ip: int, end: int) -> int:
    """The length of the instruction at ``ip`` by its opcode's plan; 0 where the plan cannot
    tell (a key list or op selector past the end, an unknown op selector)."""
    p = ip + 1
    for step in plan:
        if type(step) is int:
            if step == _KEYS:
                if p >= end:
                    return 0
                p += 1 + buf[p]
            else:
                p += step
        else:
            sel = ip + step[1]
            if sel >= end or step[2][buf[sel]] < 0:
                return 0
            p += step[2][buf[sel]]
    return p - ip


def _length_tables() -> tuple[list, dict]:
    """Per opcode: its length when fixed, 0 when unknown, -1 when it needs a plan; and the
    plans by opcode, whose op-dependent tail lengths become 256-entry lists (-1: none)."""
    fixed = [0] * 256
    plans: dict = {}
    for opcode, (_, layout) in sorted(MEP_OPCODES.items()):
        plan = _plan_of(layout)
        if all(type(s) is int and s > 0 for s in plan):
            fixed[opcode] = 1 + sum(plan)
            continue
        fixed[opcode] = -1
        steps = []
        for step in plan:
            if isinstance(step, tuple):
                tail = [-1 if step[3] is None else step[3]] * 256
                for op, n in step[2].items():
                    tail[op] = n
                step = (_TAIL, step[1], tail)
            steps.append(step)
        plans[opcode] = tuple(steps)
    return fixed, plans


_FIXED_LENGTH, _PLAN_OF = _length_tables()


def _instruction_span(buf: bytes, base_offset: int, instructions, section: Span, i: int) -> Span:
    instr = instructions[i]
    node = section.detached(base_offset + instr.ip, instr.length, f"insn[{i}]", "mep", format_mep(instr, address=False))
    node.set_builder(functools.partial(_leaf_spans, buf, base_offset, instr))
    return node


def _leaf_spans(buf: bytes, base_offset: int, instr: MepInstruction, node: Span) -> None:
    """The instruction's fields, decoded again from its bytes (decoding is deterministic)."""
    if instr.opcode is None:
        leaves = [(instr.ip, instr.length, "data", "bytes", bytes(buf[instr.ip:instr.ip + instr.length]))]
    else:
        _, leaves = _decode_one(buf, instr.ip)
    for at, size, name, type_, value in leaves:
        node.add(base_offset + at, size, name, type_, value)


# -- encoding --------------------------------------------------------------------------------
def _layout_of(instr: MepInstruction) -> tuple[str, tuple]:
    """Flat field list of ``instr`` (op-dependent tails resolved from its ``op`` operand)."""
    entry = MEP_OPCODES.get(instr.opcode)
    if entry is None:
        raise ValueError(f"unknown MEP opcode {instr.opcode!r}")
    mnemonic, layout = entry
    fields: list[Field] = []
    for f in layout:
        if isinstance(f, OpTail):
            try:
                fields.extend(_resolve_tail(f, mnemonic, dict(instr.operands).get("op")))
            except _Undecodable as e:
                raise ValueError(e.args[0]) from None
        else:
            fields.append(f)
    return mnemonic, tuple(fields)


def _check_range(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"operand {name}={value!r} is not an integer in [{lo}, {hi}]")
    return value


def encode_instruction(instr: MepInstruction) -> bytes:
    if instr.mnemonic == RAW_MNEMONIC:
        (name, data), = instr.operands
        return bytes(data)
    mnemonic, fields = _layout_of(instr)
    names = [name for name, _ in instr.operands]
    if names != [f.name for f in fields]:
        raise ValueError(f"{mnemonic} takes operands {[f.name for f in fields]}, got {names}")
    out = bytearray([instr.opcode])
    for f, (name, value) in zip(fields, instr.operands):
        if f.kind == "keys":
            keys = list(value)
            _check_range(f"n_{name}", len(keys), 0, 255)
            out.append(len(keys))
            out.extend(_check_range(name, key, 0, 255) for key in keys)
        elif f.kind == "raw":
            if len(value) != f.size:
                raise ValueError(f"{mnemonic} {name} must be {f.size} bytes, got {len(value)}")
            out += bytes(value)
        elif f.kind == "c16":
            out += struct.pack("<H", _check_range(name, value, 0, 0xFFFF))
        elif f.kind == "i16":
            out += struct.pack("<h", _check_range(name, value, -0x8000, 0x7FFF))
        else:
            out.append(_check_range(name, value, 0, 255))
    return bytes(out)


def encode_mep(instructions: Iterable[MepInstruction]) -> bytes:
    """Bytes of an instruction list; the exact inverse of ``decode_mep``. Uses the operands
    (jumps stay relative), not ``ip``/``length``. Raises ValueError on operands out of range."""
    return b"".join(encode_instruction(i) for i in instructions)


# -- text ------------------------------------------------------------------------------------
def _show_pool(value: Any) -> str:
    if isinstance(value, (str, int, float, bool, list, tuple)) or value is None:
        try:
            return json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            pass
    return repr(value)


def _fields_for_text(instr: MepInstruction) -> tuple:
    if instr.mnemonic == RAW_MNEMONIC:
        return (Field("data", "raw", len(instr.operands[0][1])),)
    return _layout_of(instr)[1]


def format_mep(instr: MepInstruction, pool: Optional[Mapping[int, Any]] = None, *,
               address: bool = True) -> str:
    """One line of the text grammar; with ``pool``, pool values go into a ``;`` comment."""
    parts = [instr.mnemonic]
    comments = []
    for f, (name, value) in zip(_fields_for_text(instr), instr.operands):
        if f.kind == "k":
            text = f"k{value}"
        elif f.kind == "keys":
            text = "[" + ", ".join(f"k{key}" for key in value) + "]"
        elif f.kind == "c16":
            text = f"#{value}"
            if pool is not None:
                comments.append(_show_pool(pool[value]) if value in pool else f"#{value}=?")
        elif f.kind == "i16":
            text = f"@{instr.end + value}"
        elif f.kind == "raw":
            text = f'x"{bytes(value).hex()}"'
        else:
            text = (f.names or {}).get(value, str(value))
        parts.append(f"{name}={text}")
    line = " ".join(parts)
    if comments:
        line += " ; " + ", ".join(comments)
    return f"{instr.ip}: {line}" if address else line


#: Distinct instruction encodings whose text :func:`format_mep_blocks` keeps for reuse.
TEXT_CACHE_LIMIT = 1 << 14
_BLOCK = 4096        # instructions per block of text
_KEY_CHUNK = 1 << 12   # instructions whose encoding keys are made at once (distinct_encodings)


def format_mep_blocks(instrs: Sequence, pool: Optional[Mapping[int, Any]] = None, prefix: str = ""):
    """``format_mep(i, pool)`` of each instruction, each after ``prefix``, in blocks of lines joined
    by newlines. A :class:`MepStream` is formatted from its bytes: a fixed-layout opcode by one
    unpack and %-format, any other by ``format_mep`` (one decode and format), each distinct
    encoding once up to ``TEXT_CACHE_LIMIT`` of them."""
    if not isinstance(instrs, MepStream):
        instrs = list(instrs)
        for i in range(0, len(instrs), _BLOCK):
            yield "\n".join(prefix + format_mep(ins, pool) for ins in instrs[i:i + _BLOCK])
        return
    buf = instrs.bytecode
    cache: dict = {}          # encoding -> text after the address (not for jumps: it names the target)

    def line_text(ip: int, end: int) -> str:
        fixed = _FIXED_TEXT.get(buf[ip])
        if fixed is not None and fixed.jumps:          # names its target: no two texts alike
            return fixed(buf, ip, pool)
        key = buf[ip:end]                              # the stream's starts say where it ends
        text = cache.get(key)
        if text is None:
            text = fixed(buf, ip, pool) if fixed is not None else \
                format_mep(instrs.decode_at(ip), pool, address=False)
            if len(cache) < TEXT_CACHE_LIMIT:
                cache[key] = text
        return text

    starts = instrs.starts
    n = len(starts)
    stop = instrs.tail.ip if instrs.tail is not None else len(buf)
    for b0 in range(0, n, _BLOCK):
        b1 = min(n, b0 + _BLOCK)
        ends = starts[b0 + 1:b1 + 1].tolist() + ([stop] if b1 == n else [])
        yield "\n".join(f"{prefix}{ip}: {line_text(ip, end)}" for ip, end in zip(starts[b0:b1], ends))
    if instrs.tail is not None:
        yield prefix + format_mep(instrs.tail, pool)


class _FixedText:
    """``format_mep(..., address=False)`` for one fixed-layout opcode straight from its bytes:
    one unpack and one %-format (a stream of all-different instructions decodes nothing)."""

    def __init__(self, mnemonic: str, layout: tuple):
        codes, parts, self.kinds = "<", [mnemonic.replace("%", "%%")], []
        for f in layout:
            code, text, kind = {"k": ("B", "k%d", None), "c16": ("H", "#%d", "pool"), "i16": ("h", "@%d", "jump"),
                                "raw": (f"{f.size}s", 'x"%s"', "hex")}.get(f.kind, ("B", "%d", None))
            if f.kind == "u8" and f.names:
                text, kind = "%s", tuple(f.names.get(v, str(v)) for v in range(256))
            codes += code
            parts.append(f"{f.name}={text}")
            self.kinds.append(kind)
        self.unpack = struct.Struct(codes).unpack_from
        self.template = " ".join(parts)
        self.special = tuple((k, kind) for k, kind in enumerate(self.kinds) if kind is not None)
        self.jumps = any(kind == "jump" for kind in self.kinds)
        self.length = struct.calcsize(codes) + 1

    def __call__(self, buf: bytes, ip: int, pool: Optional[Mapping[int, Any]]) -> str:
        values = self.unpack(buf, ip + 1)
        if not self.special:
            return self.template % values
        values = list(values)
        comments = []
        for k, kind in self.special:        # the plain fields stay as unpacked
            value = values[k]
            if kind == "pool":
                if pool is not None:
                    comments.append(_show_pool(pool[value]) if value in pool else f"#{value}=?")
            elif kind == "jump":
                values[k] = ip + self.length + value
            elif kind == "hex":
                values[k] = value.hex()
            else:
                values[k] = kind[value]
        text = self.template % tuple(values)
        return text + " ; " + ", ".join(comments) if comments else text


def _fixed_texts() -> dict:
    out = {}
    for opcode, (mnemonic, layout) in MEP_OPCODES.items():
        if all(isinstance(f, Field) and f.kind != "keys" for f in layout):
            out[opcode] = _FixedText(mnemonic, layout)
    return out


#: Opcodes whose first operand is an ``op`` selector (their layout may depend on it).
OP_SELECTOR_OPCODES = frozenset(op for op, (_, layout) in MEP_OPCODES.items()
                                if layout and isinstance(layout[0], Field) and layout[0].name == "op")
_SELECTOR_MASK = np.array([0xFF if op in OP_SELECTOR_OPCODES else 0 for op in range(256)], dtype=np.uint8)
_JUMP_OPCODES = frozenset(op for op, (_, layout) in MEP_OPCODES.items()
                          if any(isinstance(f, Field) and f.kind == "i16" for f in layout))


_LINE = re.compile(r"\s*(?:(\d+)\s*:)?\s*(\S+)(.*)", re.S)
_OPERAND = re.compile(r"\s*(\w+)\s*=\s*(\[[^\]]*\]|x\"[^\"]*\"|[^\s\[\]\"]+)")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")


def _parse_int(text: str, what: str) -> int:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    raise ValueError(f"{what}: expected a number, got {text!r}")


def _parse_key(text: str, what: str) -> int:
    text = text.strip()
    if not text.startswith("k"):
        raise ValueError(f"{what}: expected a context key like k3, got {text!r}")
    return _parse_int(text[1:], what)


def _parse_value(f: Field, text: str, mnemonic: str) -> Any:
    what = f"{mnemonic} {f.name}"
    if f.kind == "k":
        return _parse_key(text, what)
    if f.kind == "keys":
        if not (text.startswith("[") and text.endswith("]")):
            raise ValueError(f"{what}: expected a key list like [k1, k2], got {text!r}")
        inner = text[1:-1].strip()
        return [_parse_key(item, what) for item in inner.split(",")] if inner else []
    if f.kind == "c16":
        if not text.startswith("#"):
            raise ValueError(f"{what}: expected a pool id like #3, got {text!r}")
        return _parse_int(text[1:], what)
    if f.kind == "i16":
        if not text.startswith("@"):
            raise ValueError(f"{what}: expected an absolute jump target like @12, got {text!r}")
        return _parse_int(text[1:], what)       # absolute for now; made relative by the caller
    if f.kind == "raw":
        if not (text.startswith('x"') and text.endswith('"') and _HEX.fullmatch(text[2:-1])):
            raise ValueError(f'{what}: expected hex bytes like x"0a0b", got {text!r}')
        return bytes.fromhex(text[2:-1])
    by_name = {v: k for k, v in (f.names or {}).items()}
    return by_name[text] if text in by_name else _parse_int(text, what)


def parse_mep(line: str, ip: int = 0) -> MepInstruction:
    """Read one line of the text grammar (the inverse of ``format_mep``; comments ignored).

    ``ip`` is used when the line has no ``ip:`` prefix. Raises ValueError on bad text.
    """
    code = line.split(";", 1)[0]
    m = _LINE.fullmatch(code)
    if m is None or not m.group(2):
        raise ValueError(f"no instruction in {line!r}")
    if m.group(1) is not None:
        ip = int(m.group(1))
    mnemonic, rest = m.group(2), m.group(3)

    given: dict[str, str] = {}
    pos = 0
    while rest[pos:].strip():
        om = _OPERAND.match(rest, pos)
        if om is None:
            raise ValueError(f"cannot read operand at {rest[pos:].strip()!r} in {line!r}")
        if om.group(1) in given:
            raise ValueError(f"operand {om.group(1)} given twice in {line!r}")
        given[om.group(1)] = om.group(2)
        pos = om.end()

    if mnemonic == RAW_MNEMONIC:
        layout: tuple = (Field("data", "raw"),)
        opcode = None
    elif mnemonic in MEP_MNEMONICS:
        opcode = MEP_MNEMONICS[mnemonic]
        layout = MEP_OPCODES[opcode][1]
    else:
        raise ValueError(f"unknown MEP mnemonic {mnemonic!r}")

    operands: list = []
    pending = list(layout)
    while pending:
        f = pending.pop(0)
        if isinstance(f, OpTail):
            try:
                pending = list(_resolve_tail(f, mnemonic, dict(operands).get("op"))) + pending
            except _Undecodable as e:
                raise ValueError(e.args[0]) from None
            continue
        if f.name not in given:
            raise ValueError(f"{mnemonic} needs operand {f.name}= in {line!r}")
        value = _parse_value(f, given.pop(f.name), mnemonic)
        if f.kind == "raw" and f.size and len(value) != f.size:   # size 0: .bytes, any length
            raise ValueError(f"{mnemonic} {f.name} must be {f.size} bytes, got {len(value)}")
        operands.append((f.name, value))
    if given:
        raise ValueError(f"{mnemonic} has no operand(s) {sorted(given)} in {line!r}")

    instr = MepInstruction(ip, opcode, mnemonic, operands, 0)
    if opcode is None:
        instr.length = len(operands[0][1])
        return instr
    # Jump targets were read as absolute; storage is relative to the instruction's end,
    # which needs its length, which does not depend on the jump value.
    instr.operands = [(n, 0 if n == "jump" else v) for n, v in operands]
    instr.length = len(encode_instruction(instr))
    if any(n == "jump" for n, _ in operands):
        instr.operands = [(n, v - instr.end if n == "jump" else v) for n, v in operands]
        encode_instruction(instr)   # range-checks the relative jump
    return instr


def parse_mep_listing(text: Union[str, Iterable[str]]) -> list[MepInstruction]:
    """Several lines; blank and comment-only lines are skipped, ip runs on from the previous
    instruction unless a line gives its own ``ip:`` prefix."""
    lines = text.splitlines() if isinstance(text, str) else text
    out: list[MepInstruction] = []
    ip = 0
    for line in lines:
        if not line.split(";", 1)[0].strip():
            continue
        instr = parse_mep(line, ip)
        out.append(instr)
        ip = instr.end
    return out


_FIXED_TEXT = _fixed_texts()
