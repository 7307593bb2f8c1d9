"""NacFile → assembly text: directives for the tables, one line per instruction.

The text holds everything the file holds except tensor/resource/array payloads, which the
assembler takes from the original file or a ``.safetensors`` (by name). Directives:

    .version V                 .header k=v ...              .layout TAG ...
    .cmap ID NAME              .perm ID "SIG"               .const ID TYPE LITERAL [len=N]
    .param ID NAME             .tensor ID DTYPE [SHAPE] [quant=... ...]
    .input INDEX NAME          (only when DATA's input names are not derivable from the lines)
    .ops / .trng               instruction lines follow (see textops)
    .mmap                      @TICK: ACTION vT, ...
    .orch / .mep TEXT / .bytecode HEX / .pool ID TYPE LITERAL
    .proc HEX                  .rsrc NAME SIZE              .array NAME DTYPE [SHAPE] SIZE
    .trailing REGION HEX       bytes a reader could not attribute, kept for exactness
"""
from __future__ import annotations

import json
import math
from typing import Optional

import numpy as np

from ..format import layout as L
from ..format.const_table import constant_values, pool_values
from ..format.instruction_table import InstructionTable, byte_words, distinct_encodings
from ..format.lazy_records import walk_records
from ..format.name_tables import made_parameter, parameter_names
from ..format.source_map import module_paths
from ..format.model import Constant, NacFile, TensorMeta
from .literals import format_f32, format_literal, format_name
from ..isa.mep import MepStream, decode_mep, encode_instruction, format_mep, format_mep_blocks, parse_mep
from ..isa.optable import OP_INPUT
from ..isa.tisa import format_tisa
from .textops import Tables, const_literal, format_instruction, instruction_template

_WRAP = 64  # hex bytes per line


def disassemble(nac: NacFile, *, mmap_comments: bool = False, source_name: Optional[str] = None) -> str:
    return "\n".join(iter_disassembly(nac, mmap_comments=mmap_comments, source_name=source_name)) + "\n"


def iter_disassembly(nac: NacFile, *, mmap_comments: bool = False, source_name: Optional[str] = None):
    h = nac.header
    t = Tables(nac)
    yield f"; NAC v{h.version} disassembly" + (f" of {source_name}" if source_name else "") + \
          f" — {len(nac.instructions)} instructions, {len(nac.params)} parameters"
    yield f".version {h.version}"
    yield ".header " + " ".join(_header_fields(nac))
    if nac.layout:
        yield ".layout " + " ".join(nac.layout)
    for oid, name in nac.cmap.items():
        yield f".cmap {oid} {format_name(name)}"
    for sid, sig in nac.perms.items():
        yield f".perm {sid} {json.dumps(sig)}"
    for c in constant_values(nac.constants):
        yield ".const " + _const_directive(c, const_literal(c))
    for pid, name in parameter_names(nac.params):
        yield f".param {pid} {format_name(name)}"
    yield from _tensor_lines(nac)
    count = len(nac.instructions)     # a name for an index past the program labels nothing
    names = {n.index: n.name for n in walk_records(nac.input_names) if n.index < count}
    derivable = _inputs_derivable(nac)
    if not derivable:
        for n in walk_records(nac.input_names):
            yield f".input {n.index} {format_name(n.name)}"
    by_tick = nac.mmap_by_tick() if mmap_comments else {}
    modules = module_paths(nac)
    yield ".ops"
    tick_notes = {}      # tick -> notes that depend on the tick, not on the encoding
    if not derivable:
        for tick, name in names.items():
            tick_notes.setdefault(tick, []).append(f"input {name!r}")
    for tick, cmds in by_tick.items():
        tick_notes.setdefault(tick, []).append(", ".join(f"{_short(c.name)} v{c.target}" for c in cmds))
    for tick, path in modules.items():
        if path:
            tick_notes.setdefault(tick, []).append("in " + path)
    yield from _ops_lines(nac, t, names if derivable else {}, tick_notes)
    yield ".mmap"
    yield from _mmap_lines(nac.mmap)
    if nac.orch is not None:
        yield from _orch_lines(nac)
    if nac.proc is not None:
        if nac.proc.decoded is not None:
            try:
                for ln in format_tisa(nac.proc.decoded):
                    yield "; " + ln
            except Exception:   # listing is a comment only; never fail the disassembly for it
                pass
        yield from _hex_lines(".proc", nac.proc.manifest)
    for r in walk_records(nac.rsrc):
        yield f".rsrc {format_name(r.name)} {r.data_length if r._payload is None else len(r._payload)}"
    for a in walk_records(nac.arrs):
        yield (f".array {format_name(a.name)} {L.dtype_name(a.dtype)} {list(a.shape)} "
               f"{a.data_length if a._payload is None else len(a._payload)}")
    if nac.trng is not None:
        yield ".trng"
        for ins in nac.trng:
            yield format_instruction(ins, t, {})
    for region, data in nac.trailing.items():
        yield from _hex_lines(f".trailing {region}", data)


def _ops_lines(nac: NacFile, t: Tables, input_names: dict, tick_notes: dict):
    """One line per instruction. A read file's instructions are formatted from their bytes, in
    blocks of ``_OPS_BLOCK`` ticks. A block that repeats its encodings (any real program) goes
    by encoding: each distinct encoding's line is made (and read back) once, as a template over
    the tick (textops.instruction_template); the block's encodings are told apart with numpy,
    and its lines are one %-format of its templates joined. A block of mostly distinct
    encodings (only a crafted one) has each line made on its own: a template would be used once."""
    instrs = nac.instructions
    encoded = instrs.encoded() if isinstance(instrs, InstructionTable) else None
    if encoded is None:
        for ins in instrs:
            yield _ops_line(nac, ins, t, input_names, tick_notes)
        return
    words = byte_words(encoded.code)
    templates: dict = {}       # encoding -> (%-template with its notes, deltas, min delta, template)
    n = len(encoded.starts)
    noted = np.zeros(n, dtype=bool)        # ticks with notes of their own: made line by line
    if tick_notes:
        ids = np.fromiter(tick_notes, dtype=np.int64, count=len(tick_notes))
        noted[ids[(ids >= 0) & (ids < n)]] = True
    block = min(_OPS_BLOCK, max(_OPS_BLOCK_MIN, n // 16))     # a block's text: a bounded part of the file's
    for b0 in range(0, n, block):
        b1 = min(n, b0 + block)
        if _repetitive(words, encoded, b0, b1):
            ticks = np.arange(b0, b1, dtype=np.int64)
            yield _general_lines(nac, t, encoded, words, templates, ticks, input_names, tick_notes, noted)
        else:
            yield "\n".join([_line(nac, t, ins, input_names, tick_notes) for ins in instrs.decode_range(b0, b1)])


def _repetitive(words: np.ndarray, encoded, b0: int, b1: int) -> bool:
    """Does the block repeat its encodings (a program's few hundred, as a real file or a repeated
    crafted one)? Then its lines are cheaper by encoding (a template per encoding, rows gathered)
    than one by one. Judged on the block's first ``_SAMPLE`` lines; either way the text is the same."""
    s1 = min(b1, b0 + _SAMPLE)
    first, _ = distinct_encodings(words, encoded.starts[b0:s1], encoded.ends[b0:s1], np.arange(b0, s1, dtype=np.int64))
    return len(first) * TEMPLATE_REPEATS <= s1 - b0


def _general_lines(nac: NacFile, t: Tables, encoded, words, templates: dict, ticks: np.ndarray,
                   input_names: dict, tick_notes: dict, noted: np.ndarray) -> str:
    """The lines of instructions ``ticks`` (ascending) by encoding (see :func:`_ops_lines`),
    joined by newlines; ``noted``: per tick of the file, whether it has notes of its own."""
    instrs, code = nac.instructions, encoded.code
    starts, ends = encoded.starts[ticks], encoded.ends[ticks]
    first, inverse = distinct_encodings(words, starts, ends, ticks)
    entries = []
    for f in first.tolist():
        key = code[int(starts[f]):int(ends[f])]
        entry = templates.get(key, _MISSING)
        if entry is _MISSING:
            entry = _template_entry(nac, t, instrs.decode(int(ticks[f])), input_names)
            if len(templates) > 65536:     # all-distinct encodings (crafted): keep it bounded
                templates.clear()
            templates[key] = entry
        entries.append(entry)
    nslots = np.array([len(en[1]) if en else 1 for en in entries], dtype=np.int64)
    min_delta = np.array([en[2] if en else 0 for en in entries], dtype=np.int64)
    special = np.array([en is None for en in entries])[inverse] | (ticks + min_delta[inverse] < 0)
    special |= noted[ticks]
    fmts = [en[0] if en else "%s" for en in entries]
    lines = list(map(fmts.__getitem__, inverse.tolist()))
    count = np.where(special, 1, nslots[inverse])
    widest = int(nslots.max()) if nslots.size else 1
    deltas = np.zeros((len(entries), widest), dtype=np.int64)
    for u, en in enumerate(entries):
        if en:
            deltas[u, :len(en[1])] = en[1]
    values = (ticks[:, None] + deltas[inverse])[np.arange(widest) < count[:, None]]
    args = values.tolist()
    if special.any():
        slot = np.cumsum(count) - count
        for i in np.flatnonzero(special).tolist():
            lines[i] = "%s"
            args[int(slot[i])] = _special_line(nac, t, instrs, int(ticks[i]), entries[inverse[i]],
                                               input_names, tick_notes)
    return "\n".join(lines) % tuple(args)


#: A block whose sampled lines repeat each encoding this many times or more on average goes by
#: encoding (tests set it to 1 or out of reach to make every block go one way).
TEMPLATE_REPEATS = 2
_SAMPLE = 128
_OPS_BLOCK = 4096      # lines formatted at once
_OPS_BLOCK_MIN = 512   # ... and at least this many, for a small section
_MISSING = object()


def _template_entry(nac: NacFile, t: Tables, ins, input_names: dict):
    """(%-template with the encoding's notes, deltas, min delta, LineTemplate) or None."""
    tpl = instruction_template(ins, t, input_names)
    if tpl is None:
        return None
    notes = tpl.notes + _param_note(nac, ins)
    suffix = ("   ; " + "; ".join(notes)).replace("%", "%%") if notes else ""
    fmt = tpl.text + suffix
    return (fmt, tpl.deltas, tpl.min_delta, tpl, notes)


def _special_line(nac: NacFile, t: Tables, instrs, j: int, entry, input_names: dict, tick_notes: dict) -> str:
    if entry is None or j + entry[2] < 0:
        return _ops_line(nac, instrs.decode(j), t, input_names, tick_notes)
    tpl, notes = entry[3], list(entry[4]) + tick_notes.get(j, [])
    line = tpl.text % tuple(j + x for x in tpl.deltas)
    return line + ("   ; " + "; ".join(notes) if notes else "")


def _line(nac: NacFile, t: Tables, ins, input_names: dict, tick_notes: dict) -> str:
    """_ops_line's text, from the instruction's template when it has one (see _ops_lines)."""
    tpl = instruction_template(ins, t, input_names)
    if tpl is None:
        return _ops_line(nac, ins, t, input_names, tick_notes)
    notes = tpl.notes + _param_note(nac, ins) + tuple(tick_notes.get(ins.index, ()))
    line = tpl.text % tuple(map(ins.index.__add__, tpl.deltas))
    return line + ("   ; " + "; ".join(notes) if notes else "")


def _ops_line(nac: NacFile, ins, t: Tables, input_names: dict, tick_notes: dict) -> str:
    note: list = []
    line = format_instruction(ins, t, input_names, notes_out=note)
    note.extend(_param_note(nac, ins))
    note.extend(tick_notes.get(ins.index, ()))
    return line + ("   ; " + "; ".join(note) if note else "")


def _param_note(nac: NacFile, ins) -> tuple:
    """A parameter load's note: its tensor's dtype and shape (none while a read file's
    parameters are unmade: only a tensor record or a weights file gives one a shape)."""
    if not (ins.a == OP_INPUT and ins.b == 1 and ins.c and len(ins.c) >= 2):
        return ()
    p = made_parameter(nac.params, ins.c[1])
    return (f"{p.dtype}{list(p.shape)}",) if p is not None and p.meta is not None else ()


def _mmap_lines(records):
    """``@TICK: ACTION vT, ...`` per record (records made one at a time: :func:`walk_records`).
    A read schedule shares one object per distinct command, so each command's text is made once
    and looked up by identity (a 4 MB schedule holds 1.3M commands and a few thousand distinct
    ones); commands made elsewhere get their text made."""
    texts: dict = {}       # id(command) -> text
    kept: list = []        # ... and the commands themselves: no id is reused while it is a key
    for rec in walk_records(records):
        cmds = rec.commands
        parts = list(map(texts.get, map(id, cmds)))
        if None in parts:
            for j, part in enumerate(parts):
                if part is None:
                    c = cmds[j]
                    parts[j] = texts[id(c)] = f"{c.name} v{c.target}"
                    kept.append(c)
            if len(texts) > 65536:     # commands not shared (hostile, or built in memory): bounded
                texts.clear()
                kept.clear()
        yield f"@{rec.tick}: " + ", ".join(parts)


_SHORT = {"SAVE_RESULT": "SAVE", "PRELOAD": "PRELOAD", "FREE": "FREE", "FORWARD": "FORWARD"}


def _short(name: str) -> str:
    return _SHORT.get(name, name)


def _header_fields(nac: NacFile) -> list[str]:
    h = nac.header
    out = [f"quant={L.QUANT_NAMES.get(h.quant_method, h.quant_method)}",
           f"weights={'internal' if h.weights_internal else 'external'}",
           f"inputs={h.num_inputs}", f"outputs={h.num_outputs}", f"d_model={h.d_model}"]
    if h.trng_flag:
        out.append("trng=1")
    if h.reserved:
        out.append(f"reserved={h.reserved}")
    if h.version == "1.6" and h.padding != b"\0\0\0\0":
        out.append(f"padding={h.padding.hex()}")
    return out


def _inputs_derivable(nac: NacFile) -> bool:
    instrs = nac.instructions
    encoded = instrs.encoded() if isinstance(instrs, InstructionTable) else None
    if encoded is not None:     # a bare <INPUT B=0> is the two bytes 02 00
        bare = (encoded.column(0) == 2) & (encoded.column(1) == 0) & (encoded.ends - encoded.starts == 2)
        expect = np.flatnonzero(bare).tolist()
    else:
        expect = [i.index for i in instrs if i.a == 2 and i.b == 0 and i.c is None and i.d is None]
    expect, last = set(expect), -1
    for n in walk_records(nac.input_names):     # strictly increasing, each a bare <INPUT>
        if n.index <= last or n.index not in expect:
            return False
        last = n.index
    return True


def _const_directive(c: Constant, literal: Optional[str] = None) -> str:
    """``literal``: ``format_literal(c.type, c.value)`` when the caller has it already."""
    s = f"{c.id} {L.CONST_TYPE_NAMES.get(c.type, c.type)} "
    if c.type not in L.CONST_TYPE_NAMES:
        s += "None"
    else:
        s += literal if literal is not None else format_literal(c.type, c.value)
    if c.type in (L.CONST_NULL, L.CONST_BOOL):
        default = 0 if c.type == L.CONST_NULL else 1
        if c.length_field is not None and c.length_field != default:
            s += f" len={c.length_field}"
    return s


def _tensor_lines(nac: NacFile):
    """``.tensor ID META    ; N bytes`` in tensor order. The text after the id is made once per
    metadata and byte count: a file with 25k tensors repeats a few hundred."""
    texts: dict = {}
    params = nac.params
    for pid in nac.tensor_order:
        p = made_parameter(params, pid)       # (a tensor's parameter is made at read)
        if p is None or p.meta is None:
            continue
        m = p.meta
        key = (m.dtype, m.shape, p.data_length) if not (m.quant or m.extra) else None
        tail = texts.get(key) if key is not None else None
        if tail is None:
            tail = f" {format_meta(m)}    ; {p.data_length} bytes"
            if key is not None and len(texts) < 65536:
                texts[key] = tail
        yield f".tensor {pid}{tail}"


def format_meta(m: TensorMeta) -> str:
    s = f"{L.dtype_name(m.dtype)} {list(m.shape)}"
    if m.quant == L.QUANT_INT8_TENSOR:
        s += " quant=INT8_TENSOR scale=" + _f32_bits_text(m.scale_bits)
    elif m.quant == L.QUANT_INT8_CHANNEL:
        s += f" quant=INT8_CHANNEL axis={m.axis} scales=" + _scales_text(m.scales)
    elif m.quant == L.QUANT_BLOCK_FP8:
        s += (f" quant=BLOCK_FP8 block={m.block_size} orig={list(m.original_shape or ())} scales="
              + _scales_text(m.scales))
    elif m.quant:
        s += f" quant={m.quant}"
    if m.extra and not any(m.extra):
        s += f" pad={len(m.extra)}"           # alignment padding (format/writer.py TENSOR_ALIGN)
    elif m.extra:
        s += f" extra={m.extra.hex()}"
    return s.replace(", ", ",")


def _f32_bits_text(bits: Optional[bytes]) -> str:
    v = float(np.frombuffer(bits, "<f4")[0]) if bits else 0.0
    return "0x" + bits[::-1].hex() if bits and math.isnan(v) else format_f32(v)


def _scales_text(scales) -> str:
    arr = np.asarray(scales, dtype="<f4")
    if np.isnan(arr).any():
        return "hex:" + arr.tobytes().hex()
    return "[" + ",".join(format_f32(float(x)) for x in arr) + "]"


#: Up to this many distinct instruction encodings are each checked (re-encoded, and their line
#: parsed back); a stream with more (only a crafted one) checks one per (opcode, op) after that.
EXACT_TEXT_CHECK = 20_000
#: ... and at most one per this many bytes of stream (never fewer than EXACT_TEXT_CHECK_MIN): a
#: check costs ~25 us (a parse); without the bound a crafted 1 MB stream of 19,000 distinct
#: encodings listed at 1 MB/s.
EXACT_TEXT_CHECK_BYTES = 600
EXACT_TEXT_CHECK_MIN = 256


def _text_reads_back(instrs: MepStream, pool: dict) -> bool:
    """Does each ``.mep`` line parse back to its instruction, and each instruction re-encode to
    its bytes? An instruction's text is a function of its bytes (pool values go into comments,
    which parsing ignores; a jump's absolute target is converted back with the ip, so checking
    it at ip 0 checks it anywhere), so each distinct encoding is checked once: a 1 MB stream
    repeating a program costs a set insertion per instruction. Past ``EXACT_TEXT_CHECK``
    distinct encodings, or one per ``EXACT_TEXT_CHECK_BYTES`` of stream (a crafted stream),
    one per (opcode, op) pair; the grammar's inversion
    for all the rest is what tests/isa/test_mep.py's property tests establish."""
    budget = min(EXACT_TEXT_CHECK, max(EXACT_TEXT_CHECK_MIN, len(instrs.bytecode) // EXACT_TEXT_CHECK_BYTES))
    encodings, complete = instrs.distinct_encodings(budget)
    if not complete:       # the first instruction of each (opcode, op) kind, found with numpy
        encodings = instrs.kind_representatives()
    for key in encodings:
        ins, problems = decode_mep(key)
        if problems or len(ins) != 1:
            return False
        ins = ins[0]
        if encode_instruction(ins) != key or parse_mep(format_mep(ins, pool)) != ins:
            return False
    return True


def _orch_lines(nac: NacFile):
    orch = nac.orch
    yield ".orch"
    readable = False
    if orch.bytecode:
        try:
            pool = pool_values(orch.pool)
            instrs = orch.instructions      # decoded by the reader from these bytes: not a second copy
            if not (isinstance(instrs, MepStream) and instrs.bytecode == orch.bytecode):
                instrs, _ = decode_mep(orch.bytecode)
            # a stream's instructions are its bytes cut at its starts (each distinct one is
            # re-encoded below); an undecodable tail makes the listing raw hex
            readable = instrs.tail is None
            readable = readable and _text_reads_back(instrs, pool)
        except Exception:   # fall back to hex: exactness matters more than the listing
            readable = False
        if not readable:
            yield from _hex_lines(".bytecode", orch.bytecode)
        else:
            yield from format_mep_blocks(instrs, pool, ".mep ")
    for c in walk_records(orch.pool):
        yield ".pool " + _const_directive(c)


def _hex_lines(directive: str, data: bytes):
    if not data:
        yield directive
    for i in range(0, len(data), _WRAP):
        yield f"{directive} {data[i:i + _WRAP].hex()}"
