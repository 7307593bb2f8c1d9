"""Collect every problem in a file instead of stopping at the first.

Structural problems come from a lenient read; the checks here are about meaning: does
every reference (constant, parameter, producer, MMAP target) land on something that
exists, and is the file executable as written.
"""
from __future__ import annotations

import os
from typing import Union

import numpy as np

from ..errors import NacFormatError
from ..isa.optable import OP_INPUT, OP_OUTPUT
from . import layout as L
from .instruction_table import InstructionTable, byte_words, distinct_encodings
from .lazy_records import walk_records
from .name_tables import made_parameter, made_parameters, parameter_name
from .model import NacFile
from .reader import ProblemList, read
from .tensor_rules import MAX_RANK, tensor_problems
from .weights import external_weight_problems


def verify(source: Union[str, bytes, NacFile]) -> list[NacFormatError]:
    """All problems found, in file order. An empty list means the file is clean."""
    if isinstance(source, NacFile):
        nac, own = source, False
    else:
        try:
            nac, own = read(source, strict=False), True
        except OSError as e:
            return [NacFormatError("file", 0, str(e))]
    try:
        problems = list(nac.problems) + _semantic(nac)
    finally:
        if own:
            nac.close()
    seen, unique = set(), []
    for p in problems:
        key = (p.section, p.offset, p.reason)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return sorted(unique, key=lambda p: p.offset)


def _instruction_problems(nac: NacFile, ins, names: dict, out: list) -> None:
    """What is wrong with one instruction's references (constants, parameters, op id 0)."""
    add = lambda sec, off, why: out.append(NacFormatError(sec, off, why))  # noqa: E731
    if ins.a == 0:
        add("OPS", ins.offset, f"instruction {ins.index}: op id 0 (<NONE>) — the writer could not encode "
                               f"this node; it cannot be executed")
    if ins.a == OP_INPUT:
        if ins.b == 1 and ins.c and len(ins.c) > 1:
            pid = ins.c[1]
            if pid not in nac.params:      # (membership: a read file's parameters are not made for it)
                add("OPS", ins.offset, f"instruction {ins.index}: loads parameter id {pid}, "
                                       f"which DATA does not name")
            elif nac.header.weights_internal and getattr(made_parameter(nac.params, pid), "meta", None) is None:
                add("OPS", ins.offset, f"instruction {ins.index}: parameter {parameter_name(nac.params, pid)!r} "
                                       f"has no tensor in DATA block 3")
        elif ins.b == 3 and ins.c and len(ins.c) > 1 and ins.c[1] not in nac.constants:
            add("OPS", ins.offset, f"instruction {ins.index}: lifted constant id {ins.c[1]} is not in CNST")
    elif ins.a >= 10 and ins.c and ins.a in names:
        for j, cid in enumerate(ins.const_ids):
            if cid not in nac.constants:
                add("OPS", ins.offset + 4 + 2 * j,
                    f"instruction {ins.index} ({names[ins.a]}): constant id {cid} is not in CNST")


def _has_problem(nac: NacFile, ins, names: dict) -> bool:
    found: list = []
    _instruction_problems(nac, ins, names, found)
    return bool(found)


#: Instructions whose encodings are told apart at once (bounds verify's temporaries).
_CHUNK = 1 << 12


def _semantic(nac: NacFile) -> list[NacFormatError]:
    out = ProblemList(strict=False)       # a defect repeated per record is counted past a point
    add = out.report
    n = len(nac.instructions)
    names = nac.op_names
    instrs = nac.instructions
    encoded = instrs.encoded() if isinstance(instrs, InstructionTable) else None
    if encoded is None:
        for ins in instrs:
            _instruction_problems(nac, ins, names, out)
        inputs_b0 = {i.index for i in instrs if i.a == OP_INPUT and i.b == 0}
        has_output = any(i.a == OP_OUTPUT and i.b == 0 for i in instrs)
    else:
        # an instruction's problems depend on its encoding alone: one of each distinct encoding
        # is judged (a program repeats a few hundred), and all of those that have a problem
        # (each message names its instruction). A chunk of instructions at a time: the keys
        # cost 8 bytes per instruction each, 4 per file byte for 2-byte instructions.
        words, code = byte_words(encoded.code), encoded.code
        judged: dict = {}           # encoding -> has a problem (bounded: a crafted file's are all new)
        for c0 in range(0, n, _CHUNK):
            starts, ends = encoded.starts[c0:c0 + _CHUNK], encoded.ends[c0:c0 + _CHUNK]
            first, inverse = distinct_encodings(words, starts, ends, np.arange(c0, c0 + len(starts), dtype=np.int64))
            bad = []
            for u, j in enumerate(first.tolist()):
                key = code[int(starts[j]):int(ends[j])]
                verdict = judged.get(key)
                if verdict is None:
                    verdict = _has_problem(nac, instrs.decode(c0 + j), names)
                    if len(judged) > 65536:
                        judged.clear()
                    judged[key] = verdict
                if verdict:
                    bad.append(u)
            for j in np.flatnonzero(np.isin(inverse, bad)).tolist() if bad else ():
                _instruction_problems(nac, instrs.decode(c0 + j), names, out)
        a, b = encoded.column(0), encoded.column(1)
        inputs_b0 = set(np.flatnonzero((a == OP_INPUT) & (b == 0)).tolist()) if nac.input_names else set()
        has_output = bool(((a == OP_OUTPUT) & (b == 0)).any())
    if n and not has_output:
        add("OPS", (instrs.decode(n - 1) if encoded is not None else instrs[-1]).offset, "no <OUTPUT B=0> instruction: the program returns nothing")
    for arr in walk_records(nac.arrs):
        problem = arr.problem()
        if problem:
            add("ARRS", max(arr.data_offset, 0), problem)
    for rec in walk_records(nac.input_names):
        if rec.index not in inputs_b0:
            add("DATA/inputs", 0, f"input name {rec.name!r} points to instruction {rec.index}, "
                                  f"which is not a user-data <INPUT B=0>")
    # Every command, one record at a time (a read schedule's records are made as they are
    # walked and not kept: a hostile one packs a record into 3 bytes).
    valid = (L.MMAP_SAVE_RESULT, L.MMAP_FREE, L.MMAP_FORWARD, L.MMAP_PRELOAD)
    for rec in walk_records(nac.mmap):
        if all(c.action in valid and not (n and c.target >= n) for c in rec.commands):
            continue
        for c in rec.commands:
            if c.action not in valid:
                add("MMAP", rec.offset, f"tick {rec.tick}: action code {c.action} "
                                        f"({L.MMAP_ACTION_NAMES.get(c.action, 'unknown')}) is not defined by v1.6")
            if n and c.target >= n:
                add("MMAP", rec.offset, f"tick {rec.tick}: {c.name} targets instruction {c.target}, "
                                        f"beyond the last ({n - 1})")
    if not nac.header.weights_internal and nac.params:
        if nac.weights_path is None:
            add("DATA", 0, "weights are external but the file was not opened from a path, so no "
                           ".safetensors can be found")
        elif not os.path.exists(nac.weights_path):
            add("DATA", 0, f"weights are external and {nac.weights_path} does not exist")
        else:
            out.extend(external_weight_problems(nac))
    # an unquantised tensor's problems depend on its dtype, shape and byte count only: judged
    # once per distinct triple (a file with 25k tensors repeats a few hundred)
    plain: dict = {}
    unknown_dtype = []      # reported after the unparsed bytes, as they always were
    dtype_names = L.DTYPE_NAMES
    for p in made_parameters(nac.params):        # (an unmade parameter has no tensor)
        m = p.meta
        if m is None:
            continue
        if m.dtype not in dtype_names:
            unknown_dtype.append(p)
            continue
        # payloads whose byte count does not match are the reader's problem (already listed)
        if p.data_offset < 0:
            continue
        key = (m.dtype, m.shape, p.data_length) if m.quant == 0 and m.scales is None else None
        whys = plain.get(key) if key is not None else None
        if whys is None:
            whys = (tensor_problems(m, p.data_length)
                    if len(m.shape) > MAX_RANK or m.stored_nbytes == p.data_length else [])
            if key is not None and len(plain) < 65536:
                plain[key] = whys
        for why in whys:
            add("DATA/tensors", p.data_offset, f"parameter {p.name!r}: {why}")
    if nac.spans is not None:
        for sec in nac.spans.children:
            # eager children only: the reader records unparsed tails as it reads, and building
            # a lazy section's record spans (millions for a big MMAP) would cost far more
            for leaf in ([sec] if sec.name == "unparsed" else
                         [k for k in sec.eager_children if k.name == "unparsed"]):
                add(sec.name if sec.name != "unparsed" else "file", leaf.offset,
                    f"{leaf.length} bytes here belong to no decoded field")
    for p in unknown_dtype:
        add("DATA/tensors", p.data_offset, f"parameter {p.name!r}: unknown dtype code {p.meta.dtype}")
    out.finish()
    return out.items
