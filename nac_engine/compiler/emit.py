"""Stage 5: instruction order, ABCD encoding and the NacFile.

Order: user inputs first (forward-signature order), then the ops in graph order, each preceded by
the ``<INPUT B=1>`` of any parameter it is the first to read (so a weight loads right before its
first use), then ``<OUTPUT B=0>``. System instructions follow the reference encoding the codec's
text form reads: ``<INPUT B=1>`` C = ``[1, param_id]``, ``<OUTPUT>`` C = ``[n, 0, …]``.

Every field is range-checked here, with the instruction named, before anything is written: D is
int16 (a producer at most 32767 instructions back), MMAP ticks and DATA input indices are u16.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..format.model import Header, InputName, Instruction, NacFile, Parameter, TensorMeta
from ..isa.optable import OP_CONTROL_FLOW, OP_INPUT, OP_OUTPUT
from .canonicalize import CanonicalOp
from .deferred import DeferredPayload, DeferredWeight
from .errors import CompileError
from .graph import Graph, Node, spec_nbytes
from .tables import I16_MAX, Tables, assign

U16_MAX = 0xFFFF
_DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3, torch.int32: 4,
                torch.int64: 5, torch.int16: 6, torch.int8: 7, torch.uint8: 8, torch.bool: 9}


@dataclass
class Emitted:
    nac: NacFile
    value_nbytes: dict[int, int] = field(default_factory=dict)   # tick -> bytes its result occupies
    tick_of: dict[int, int] = field(default_factory=dict)        # graph node id -> instruction index
    tables: Tables = None


def tensor_payload(name: str, t) -> tuple[TensorMeta, Any]:
    """DATA block-3 metadata and the little-endian bytes (as an array view, no copy when possible;
    for a deferred weight, a payload that reads them when the file is written)."""
    if isinstance(t, DeferredWeight):
        meta = _meta(name, t.shape, t.dtype)
        return meta, DeferredPayload(t, lambda v: tensor_payload(name, v)[1])
    meta = _meta(name, tuple(t.shape), t.dtype)
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        arr = t.view(torch.int16).numpy().view(np.uint16)
    else:
        arr = t.numpy()
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return meta, arr


def _meta(name: str, shape: tuple, dtype: torch.dtype) -> TensorMeta:
    code = _DTYPE_CODES.get(dtype)
    if code is None:
        raise CompileError(f"parameter {name!r} has dtype {dtype}, which NAC's DATA dtype table "
                           f"(float32/64/16, bfloat16, int64/32/16/8, uint8, bool) cannot store", stage="emit")
    for i, s in enumerate(shape):
        if s > 0xFFFFFFFF:
            raise CompileError(f"parameter {name!r}: dim {i} = {s} does not fit DATA's u32 shape field", stage="emit")
    if len(shape) > 0xFF:
        raise CompileError(f"parameter {name!r}: rank {len(shape)} does not fit DATA's u8 rank field", stage="emit")
    return TensorMeta(code, tuple(int(s) for s in shape), 0)


def emit(graph: Graph, ops: list[CanonicalOp], *, version: str, weights_internal: bool = True,
         d_model: int = 0) -> Emitted:
    canon = {op.node.id: op for op in ops}
    order: list[Node] = list(graph.inputs)
    placed = {n.id for n in order}
    for pos, node in enumerate(graph.nodes):
        if node.kind == "control":
            # <CONTROL_FLOW>: every parameter its blocks read loads before it (a load inside one
            # block would be a placeholder for the other, control_flow.py)
            for later in graph.nodes[pos + 1:]:
                for src in later.inputs():
                    if src.kind == "param" and src.id not in placed:
                        order.append(src)
                        placed.add(src.id)
        if node.kind in ("control", "branch_return"):
            order.append(node)
            placed.add(node.id)
            continue
        if node.kind != "op":
            continue
        for a in canon[node.id].args:
            if a.is_ref and a.node.kind == "param" and a.node.id not in placed:
                order.append(a.node)
                placed.add(a.node.id)
        order.append(node)
        placed.add(node.id)
    for out in graph.outputs:          # a parameter returned as is, read by no op
        if out.id not in placed and not any(n.kind == "control" for n in order):
            order.append(out)
            placed.add(out.id)
    branched = any(n.kind == "control" for n in order)
    n_instr = len(order) + (0 if branched else 1)     # each block ends with its own <OUTPUT>
    if n_instr - 1 > U16_MAX:
        raise CompileError(f"{n_instr} instructions: MMAP ticks and DATA input indices are u16, so a program "
                           f"can have at most {U16_MAX + 1}", stage="emit")

    tables = assign(version, ops)
    tick_of = {n.id: i for i, n in enumerate(order)}
    nac = NacFile(Header(version=version, weights_internal=weights_internal,
                         num_inputs=len(graph.inputs), num_outputs=len(graph.outputs)))
    nac.align_tensors = True          # weights at 64-byte offsets: a reader maps them without a copy
    if not 0 <= d_model <= U16_MAX:
        raise CompileError(f"d_model {d_model} does not fit the header's u16 field", stage="emit")
    nac.header.d_model = d_model
    out = Emitted(nac, tables=tables, tick_of=tick_of)
    instructions: list[Instruction] = []
    for i, node in enumerate(order):
        if node.kind == "input":
            instructions.append(Instruction(i, OP_INPUT, 0, None, None))
            nac.input_names.append(InputName(i, node.name))
        elif node.kind == "param":
            pid = len(nac.params) + 1
            if pid > I16_MAX:
                raise CompileError(f"more than {I16_MAX} parameters: <INPUT B=1> holds the id in int16 C "
                                   f"(parameter {node.name!r} at instruction {i})", stage="emit")
            meta, arr = tensor_payload(node.name, node.tensor)
            nac.params[pid] = Parameter(pid, node.name, meta, _payload=arr, data_length=meta.stored_nbytes,
                                        _file=nac)
            nac.tensor_order.append(pid)
            instructions.append(Instruction(i, OP_INPUT, 1, (1, pid), None))
        elif node.kind == "control":
            t_end, f_end = tick_of[node.target.true_end.id], tick_of[node.target.false_end.id]
            instructions.append(Instruction(i, OP_CONTROL_FLOW, 0, (3, t_end - i, f_end - t_end),
                                            (_offset(tick_of[node.args[0].id], i, "<CONTROL_FLOW>"),)))
        elif node.kind == "branch_return":
            d = tuple(_offset(tick_of[n.id], i, "<OUTPUT>") for n in node.args)
            instructions.append(Instruction(i, OP_OUTPUT, 0, (len(d),) + (0,) * len(d), d))
        else:
            instructions.append(_regular(i, canon[node.id], tables, tick_of))
        out.value_nbytes[i] = spec_nbytes(node.spec)
    if not branched:
        last = len(order)
        d = tuple(_offset(tick_of[n.id], last, "<OUTPUT>") for n in graph.outputs)
        instructions.append(Instruction(last, OP_OUTPUT, 0, (len(d),) + (0,) * len(d), d))
    nac.instructions = instructions
    nac.cmap = dict(tables.cmap)
    nac.perms = dict(tables.perms)
    nac.constants = dict(tables.constants)
    return out


def _offset(producer: int, consumer: int, what: str) -> int:
    off = producer - consumer
    if off < -I16_MAX - 1:
        raise CompileError(f"instruction {consumer} ({what}) reads instruction {producer}, {-off} instructions "
                           f"back; D is int16, so a producer can be at most {I16_MAX + 1} back", stage="emit")
    return off


def _regular(i: int, op: CanonicalOp, t: Tables, tick_of: dict) -> Instruction:
    a = t.op_ids[op.name]
    sig = op.signature
    if not sig:
        return Instruction(i, a, 0, None, None)
    b = t.perm_ids[sig]
    what = f"{op.node.name} ({op.name})"
    d, cids = [], []
    for arg in op.args:
        if arg.is_ref:
            d.append(_offset(tick_of[arg.node.id], i, what))
        else:
            d.append(0)
            cids.append(t.const_id(arg.value, what))
    c = (len(cids),) + tuple(cids) if cids else None
    return Instruction(i, a, b, c, tuple(d))
