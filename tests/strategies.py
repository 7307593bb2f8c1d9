"""Hypothesis strategies that build random NAC programs from the model classes.

``nac_files(valid=True)`` builds files a careful writer would produce: every reference
lands (C constant ids are in CNST, <INPUT B=1> params exist and carry tensors, D offsets
point to earlier instructions, MMAP targets exist, input names name <INPUT B=0>), so
``verify`` has nothing to say about them except, for external weights opened from bytes,
that no ``.safetensors`` can be found. ``valid=False`` adds encodings that still decode
but that ``verify`` may flag (A=0 instructions, unknown MMAP actions and dtypes, dangling
ids, non-zero reserved/padding bytes, extra metadata bytes, bytes after a section...).

Floats are drawn exactly representable in their field (float32 for list_f32, scales and
INT8 scales; float64 for float64 constants) and never NaN, so ``==`` compares them.
"""
from __future__ import annotations

import struct

import numpy as np
from hypothesis import strategies as st

from nac_engine.format import layout as L
from nac_engine.format.model import (Constant, Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile,
                                     NamedArray, Orch, Parameter, Proc, Resource, TensorMeta)
from nac_engine.isa.optable import CONST_CODES, TENSOR_CODES, custom_op_start, standard_ops

VERSIONS = ("1.6", "1.8")
SIG_ALPHABET = "QKVMBWTPSAfibsc"
I16 = st.integers(-0x8000, 0x7FFF)
U16 = st.integers(0, 0xFFFF)
F32 = st.floats(width=32, allow_nan=False)
F64 = st.floats(allow_nan=False)
TEXT = st.text(st.characters(codec="utf-8"), max_size=10)
ASCII_NAME = st.text("abcdefghijklmnopqrstuvwxyz0123456789_.", min_size=1, max_size=16)
# Op names the reader treats specially when their signature is missing (research §3.3)
GETITEM_LIKE = frozenset({"getitem", "operator.getitem", "aten.select.int"})


def _sorted_unique(values):
    return sorted(set(values))


# --------------------------------------------------------------------------- constants
@st.composite
def constant(draw, cid: int, valid: bool = True) -> Constant:
    """One CNST/ORCH-pool record of any of the 7 types, stored as the reader returns it."""
    t = draw(st.integers(0, 6))
    if t == L.CONST_NULL:
        return Constant(cid, t, None, 0 if valid else draw(st.just(0) | U16))
    if t == L.CONST_BOOL:
        return Constant(cid, t, draw(st.booleans()), 1 if valid else draw(st.just(1) | U16))
    if t == L.CONST_INT64:
        return Constant(cid, t, draw(st.integers(-2 ** 63, 2 ** 63 - 1)))
    if t == L.CONST_FLOAT64:
        return Constant(cid, t, draw(F64))
    if t == L.CONST_STRING:
        return Constant(cid, t, draw(TEXT))
    if t == L.CONST_LIST_I32:
        return Constant(cid, t, tuple(draw(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), max_size=6))))
    return Constant(cid, t, tuple(draw(st.lists(F32, max_size=6))))


@st.composite
def constant_table(draw, valid: bool = True) -> dict:
    """IDs in file order; at least one id <= 0x7FFF so C (int16) can reference it."""
    small = draw(st.lists(st.integers(0, 0x7FFF), min_size=1, max_size=6, unique=True))
    big = draw(st.lists(st.integers(0x8000, 0xFFFF), max_size=2, unique=True))
    ids = draw(st.permutations(small + big))
    return {cid: draw(constant(cid, valid)) for cid in ids}


# --------------------------------------------------------------------------- tensors
@st.composite
def tensor_meta(draw, valid: bool = True) -> TensorMeta:
    """Metadata of every quant encoding (research §10.1); shapes stay tiny."""
    quant = draw(st.sampled_from([0, 0, 1, 2, 3, 4] + ([] if valid else [5, 0xFF])))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    if quant in (0, 5, 0xFF):
        dtype = draw(st.integers(0, 9) if valid else st.sampled_from(list(range(10)) + [L.DTYPE_UNKNOWN]))
        meta = TensorMeta(dtype, shape, quant)
    elif quant == L.QUANT_FP16:
        meta = TensorMeta(2, shape, quant)
    elif quant == L.QUANT_INT8_TENSOR:
        bits = struct.pack("<f", draw(F32))
        meta = TensorMeta(7, shape, quant, scale=struct.unpack("<f", bits)[0], scale_bits=bits)
    elif quant == L.QUANT_INT8_CHANNEL:
        shape = (draw(st.integers(1, 4)),) + shape[1:]
        n = shape[0] if valid else draw(st.integers(0, 5))
        scales = np.array(draw(st.lists(F32, min_size=n, max_size=n)), dtype="<f4")
        meta = TensorMeta(7, shape, quant, axis=0 if valid else draw(st.integers(0, 255)), scales=scales)
    else:
        original = tuple(draw(st.lists(st.integers(1, 5), max_size=3)))
        count = int(np.prod(original, dtype=np.int64)) if original else 1
        blocks = max(1, -(-count // 64))
        scales = np.array(draw(st.lists(F32, min_size=blocks, max_size=blocks)), dtype="<f4")
        meta = TensorMeta(7, (blocks * 64,), quant, block_size=64, original_shape=original, scales=scales)
    if not valid and draw(st.integers(0, 4)) == 0:
        meta.extra = draw(st.binary(min_size=1, max_size=4))
    return meta


def payload_for(draw, meta: TensorMeta) -> bytes:
    n = meta.stored_nbytes
    return draw(st.binary(min_size=n, max_size=n))


# --------------------------------------------------------------------------- small sections
def _tisa_record(opcode: int, payload: bytes) -> bytes:
    return struct.pack("<BI", opcode, len(payload)) + payload


@st.composite
def tisa_manifest(draw) -> bytes:
    """A manifest the TISA decoder reads without problems (research §13.1)."""
    recs = []
    for kind in draw(st.lists(st.sampled_from(["lower", "byte", "unigram", "wordpiece", "bpe", "prepend"]),
                              max_size=4)):
        if kind == "lower":
            recs.append(_tisa_record(0x01, b""))
        elif kind == "byte":
            recs.append(_tisa_record(0x15, b""))
        elif kind == "unigram":
            recs.append(_tisa_record(0x22, b""))
        else:
            text = draw(st.text(st.characters(codec="utf-8"), max_size=6)).encode()
            if kind == "prepend":
                recs.append(_tisa_record(0x07, struct.pack("<H", len(text)) + text))
            else:
                recs.append(_tisa_record(0x21 if kind == "wordpiece" else 0x20, bytes([len(text)]) + text))
    return b"TISA\x01" + b"".join(recs)


@st.composite
def mep_bytecode(draw, pool_ids: list) -> bytes:
    """A MEP program that decodes cleanly (research §12.4)."""
    key = st.integers(0, 255)
    cid = st.sampled_from(pool_ids) if pool_ids else U16
    out = []
    for kind in draw(st.lists(st.sampled_from(["const", "copy", "binary", "array", "run", "return", "halt"]),
                              max_size=6)):
        if kind == "const":
            out.append(struct.pack("<BBH", 0x04, draw(key), draw(cid)))
        elif kind == "copy":
            out.append(bytes([0x59, draw(key), draw(key)]))
        elif kind == "binary":
            out.append(bytes([0x61, draw(st.integers(0, 6)), draw(key), draw(key), draw(key)]))
        elif kind == "array":
            out.append(struct.pack("<BBH", 0x14, draw(key), draw(cid)))
        elif kind == "run":
            ins = draw(st.lists(key, max_size=3))
            outs = draw(st.lists(key, max_size=3))
            out.append(bytes([0x80, draw(key), len(ins), *ins, len(outs), *outs]))
        elif kind == "return":
            vals = draw(st.lists(key, max_size=3))
            out.append(bytes([0xFE, len(vals), *vals]))
        else:
            out.append(b"\xff")
    return b"".join(out)


@st.composite
def orch(draw, valid: bool = True) -> Orch:
    ids = draw(st.lists(U16, max_size=4, unique=True))
    pool = [draw(constant(i, valid)) for i in ids]
    return Orch(draw(mep_bytecode(ids)), pool)


@st.composite
def named_array(draw) -> NamedArray:
    dtype = draw(st.integers(0, 9))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    n = (int(np.prod(shape, dtype=np.int64)) if shape else 1) * L.storage_dtype(dtype).itemsize
    return NamedArray(draw(TEXT), dtype, shape, _payload=draw(st.binary(min_size=n, max_size=n)))


@st.composite
def resource(draw) -> Resource:
    return Resource(draw(TEXT), _payload=draw(st.binary(max_size=24)))


# --------------------------------------------------------------------------- instructions
@st.composite
def _regular(draw, i: int, ops: list, perms: dict, const_ids: list, valid: bool) -> Instruction:
    """A regular op (A >= 10): D per signature character, C iff the signature has
    constant codes, with C[0] = the number of zero D slots."""
    a = draw(st.sampled_from(ops))
    usable = [sid for sid in perms if sid <= 255]
    b = draw(st.sampled_from(usable)) if usable and draw(st.integers(0, 5)) else 0
    sig = perms.get(b, "")
    d = []
    for ch in sig:
        if ch in TENSOR_CODES or draw(st.integers(0, 4)) == 0:
            d.append(-draw(st.integers(1, i)))          # producer (a constant code may be dynamic)
        else:
            d.append(0)                                  # constant slot: next id from C
    c = None
    if any(ch in CONST_CODES for ch in sig):
        k = d.count(0)
        ids = st.sampled_from(const_ids) if (valid or draw(st.booleans())) else st.integers(0, 0x7FFF)
        c = (k,) + tuple(draw(ids) for _ in range(k))
    return Instruction(i, a, b, c, tuple(d) or None)


@st.composite
def program(draw, version: str, perms: dict, cmap: dict, constants: dict, params: dict, n_out: int,
            valid: bool = True) -> list:
    """OPS: starts with <INPUT B=0>, ends with <OUTPUT B=0> (n_out results)."""
    ops = sorted(a for a in set(standard_ops(version)) | set(cmap) if a <= 255)
    const_ids = [cid for cid in constants if cid <= 0x7FFF]
    param_ids = [pid for pid, p in params.items() if pid <= 0x7FFF]
    kinds = ["input", "op", "op", "op", "state", "control", "convergence", "subreturn"]
    if param_ids:
        kinds += ["param", "param"]
    if const_ids:
        kinds.append("lifted")
    if not valid:
        kinds += ["none", "bad-param", "input-b6", "output-b7"]
    out = [Instruction(0, 2, 0, None, None)]
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=14)):
        i = len(out)
        if kind == "input":
            ins = Instruction(i, 2, 0, None, None)
        elif kind == "param":
            ins = Instruction(i, 2, 1, (1, draw(st.sampled_from(param_ids))), None)
        elif kind == "bad-param":
            ins = Instruction(i, 2, 1, (draw(I16), draw(I16)), None)
        elif kind == "state":
            ins = Instruction(i, 2, 2, (1, draw(st.integers(0, 0x7FFF))), None)
        elif kind == "lifted":
            ins = Instruction(i, 2, 3, (1, draw(st.sampled_from(const_ids))), None)
        elif kind == "input-b6":
            ins = Instruction(i, 2, draw(st.integers(6, 255)), None, None)
        elif kind == "op":
            ins = draw(_regular(i, ops, perms, const_ids, valid))
        elif kind == "control":
            ins = Instruction(i, 6, draw(st.integers(0, 255)), (3, draw(I16), draw(I16)),
                              (-draw(st.integers(1, i)),))
        elif kind == "convergence":
            k = draw(st.integers(0, 3))
            ins = Instruction(i, 7, draw(st.integers(0, 100)), (k,) + tuple(draw(I16) for _ in range(k)),
                              (draw(I16),))
        elif kind == "subreturn":
            ins = Instruction(i, 3, 1, (n_out,) + (0,) * n_out,
                              tuple(-draw(st.integers(1, i)) for _ in range(n_out)) or None)
        elif kind == "output-b7":
            ins = Instruction(i, 3, 7, None, None)
        else:   # "none": A=0, the reference's <NONE>
            ins = Instruction(i, 0, 0, None, None)
        out.append(ins)
    i = len(out)
    c = (n_out,) + ((0,) * n_out if valid else tuple(draw(I16) for _ in range(n_out)))
    out.append(Instruction(i, 3, 0, c, tuple(-draw(st.integers(1, i)) for _ in range(n_out)) or None))
    return out


@st.composite
def trng_program(draw, version: str, perms: dict, cmap: dict, constants: dict, params: dict, n_ops: int) -> list:
    """TRNG (v1.7+): inputs B=3/4/5, backward ops, fused SGD steps, end marker (research §14)."""
    ops = sorted(a for a in set(standard_ops(version)) | set(cmap) if a <= 255)
    const_ids = [cid for cid in constants if cid <= 0x7FFF]
    param_ids = [pid for pid in params if pid <= 0x7FFF] or [1]
    out = [Instruction(0, 2, 3, (1, draw(st.sampled_from(const_ids))), None)]
    for kind in draw(st.lists(st.sampled_from(["saved", "target", "op", "op", "sgd"]), max_size=6)):
        i = len(out)
        if kind == "saved":
            ins = Instruction(i, 2, 4, (1, draw(st.integers(0, n_ops - 1))), None)
        elif kind == "target":
            ins = Instruction(i, 2, 5, (1, draw(st.integers(0, 3))), None)
        elif kind == "op":
            ins = draw(_regular(i, ops, perms, const_ids, True))
        else:
            ins = Instruction(i, 3, 3, (1, draw(st.sampled_from(param_ids))),
                              (-draw(st.integers(1, i)), -draw(st.integers(1, i))))
        out.append(ins)
    out.append(Instruction(len(out), 3, 4, None, (0,)))
    return out


# --------------------------------------------------------------------------- whole files
def _present(nac: NacFile) -> dict:
    return {"PROC": nac.proc is not None, "ORCH": nac.orch is not None, "RSRC": nac.rsrc is not None,
            "TRNG": nac.trng is not None, "ARRS": nac.arrs is not None}


def written_sections(nac: NacFile, version: str) -> list:
    """Sections ``write(nac, version=version)`` emits, in file order.

    A file with a ``layout`` (same version) keeps that order and holds exactly the listed
    sections whose objects exist. A new file (or another version) gets the version's default
    order, with the sections the reference always writes (ORCH; ARRS in v1.8) even when
    absent from the model, and no RSRC for external weights without resources.
    """
    lay = L.LAYOUTS[version]
    present = _present(nac)
    if nac.layout and version == nac.header.version:
        return [t for t in nac.layout if present.get(t, True)]
    order = [t for t in lay.default_order if t in L.ALWAYS_WRITTEN[version] or present.get(t)]
    if "RSRC" in order and not nac.header.weights_internal and not nac.rsrc:
        order.remove("RSRC")
    return order


@st.composite
def nac_files(draw, valid: bool = True, versions=VERSIONS) -> NacFile:
    version = draw(st.sampled_from(versions))
    v18 = version != "1.6"
    internal = draw(st.booleans())
    qmask = L.LAYOUTS[version].quant_mask

    # tables ---------------------------------------------------------------------
    constants = draw(constant_table(valid))
    start = custom_op_start(version)
    cmap_ids = draw(st.lists(st.integers(start, 255), max_size=4, unique=True))
    if valid:
        cmap_ids.sort()                   # the reference writes CMAP in ascending ID order
    op_name = st.builds(lambda p, n: p + n, st.sampled_from(["aten.", "custom.", "x::"]), ASCII_NAME)
    cmap = {oid: draw(op_name.filter(lambda n: n not in GETITEM_LIKE)) for oid in cmap_ids}
    if not valid and draw(st.booleans()):
        cmap[draw(st.integers(256, 0xFFFF))] = "unused." + draw(TEXT)
    sids = draw(st.lists(st.integers(1, 255), min_size=1, max_size=6, unique=True))
    perms = {}
    if v18 and draw(st.integers(0, 3)):
        perms[0] = ""                     # the v1.8 writer always emits ID 0 = ""
    for sid in sids:
        perms[sid] = draw(st.text(SIG_ALPHABET, max_size=6))
    if draw(st.integers(0, 4)) == 0:
        perms[draw(st.integers(256, 0xFFFF))] = draw(st.text(SIG_ALPHABET, max_size=4))   # not reachable by B

    # parameters -------------------------------------------------------------------
    pids = draw(st.lists(st.integers(0, 0x7FFF), max_size=5, unique=True))
    params = {}
    for pid in pids:
        p = Parameter(pid, draw(TEXT))
        if internal:
            p.meta = draw(tensor_meta(valid))
            p._payload = payload_for(draw, p.meta)
        params[pid] = p
    tensor_order = draw(st.permutations(pids)) if internal else []

    # program ------------------------------------------------------------------------
    n_out = draw(st.integers(0, 3))
    instrs = draw(program(version, perms, cmap, constants, params, n_out, valid))
    n = len(instrs)
    b0 = [ins.index for ins in instrs if ins.a == 2 and ins.b == 0]
    input_names = [InputName(i, draw(TEXT)) for i in b0 if draw(st.booleans())]
    if not valid and draw(st.integers(0, 4)) == 0:
        input_names.append(InputName(draw(U16), draw(TEXT)))

    actions = st.sampled_from([10, 20, 30, 40]) if valid else st.integers(0, 255)
    targets = st.integers(0, n - 1) if valid else U16
    ticks = draw(st.lists(st.integers(0, n - 1), max_size=5, unique=True))
    mmap = [MmapRecord(t, [MmapCommand(draw(actions), draw(targets)) for _ in range(draw(st.integers(0, 4)))])
            for t in sorted(ticks)]

    # header ---------------------------------------------------------------------------
    header = Header(version=version,
                    quant_method=draw(st.sampled_from([0, 1, 2, 3, 4]) | st.integers(0, qmask)),
                    weights_internal=internal,
                    num_inputs=len(input_names) if valid else draw(U16),
                    num_outputs=n_out,
                    reserved=0 if valid else draw(st.integers(0, 255)),
                    d_model=draw(U16))
    if version == "1.6" and not valid:
        header.padding = draw(st.binary(min_size=4, max_size=4))

    nac = NacFile(header=header, mmap=mmap, instructions=instrs, cmap=cmap, constants=constants, perms=perms,
                  params=params, input_names=input_names, tensor_order=list(tensor_order))

    # optional sections ----------------------------------------------------------------
    if draw(st.booleans()):
        nac.proc = Proc(draw(tisa_manifest()))
    if draw(st.integers(0, 4)):
        nac.orch = draw(orch(valid))
    rsrc = draw(st.none() | st.lists(resource(), min_size=0 if internal else 1, max_size=3))
    nac.rsrc = rsrc
    if v18:
        nac.arrs = draw(st.none() | st.lists(named_array(), max_size=3))
        if draw(st.integers(0, 3)) == 0:
            nac.trng = draw(trng_program(version, perms, cmap, constants, params, n))
            nac.header.trng_flag = True

    # physical order and bytes a reader could not attribute ------------------------------
    order = written_sections(nac, version)
    if draw(st.booleans()):
        present = _present(nac)
        order = [t for t in order if present.get(t, True)]
        if v18:   # v1.7/v1.8 are told apart by the MMAP offset: MMAP must follow the header
            nac.layout = [order[0]] + list(draw(st.permutations(order[1:])))
        else:
            nac.layout = list(draw(st.permutations(order)))
    if not valid:
        for tag in draw(st.lists(st.sampled_from(order), max_size=2, unique=True)):
            nac.trailing[tag] = draw(st.binary(min_size=1, max_size=6))
        if version == "1.6" and draw(st.integers(0, 3)) == 0:
            # 2 bytes would put MMAP at 90, the pre-v1.6 header signature
            nac.trailing["header"] = draw(st.binary(min_size=3, max_size=6))
    return nac
