"""MIND Core IR → NAC: one compiler graph node (or a few) per IR instruction, then the compiler's
own canonicalise → emit → MMAP planner, so the file is what ``nac compile`` would write.

Mapping: Input → ``<INPUT B=0>`` named after the Input's ``name``; constants → named parameters
(``const.v<id>``, ``<INPUT B=1>``); BinOp → ``nac.add/sub/mul`` (the standard ops); MatMul/Dot →
``nac.matmul`` (``torch.matmul`` has exactly the rank-1/rank-2 rules of Dot); Reshape, ExpandDims,
Squeeze → ``nac.view`` to the verified shape; Transpose → ``aten.permute``; Sum/Mean →
``aten.sum``/``aten.mean`` (integer sums keep their dtype explicitly: torch would widen to i64);
Index → ``aten.select`` per axis; Slice → ``aten.slice`` per sliced axis; Gather →
``aten.index_select`` on the flattened indices; Conv2d (NHWC × HWCF) → permute to NCHW/OIHW,
``aten.constant_pad_nd`` for the padding (Same splits like TensorFlow), ``aten.convolution``,
permute back; Relu/Neg/Exp/Log → ``aten.relu``/``nac.neg``/``aten.exp``/``aten.log``.

Refused, naming the IR line (:class:`ConvertError`): a module that does not verify, symbolic or
unknown dims, dtypes NAC cannot hold (u16/u32/u64), an integer Mean, negative Slice steps.

``ConvertResult.tick_lines`` maps every instruction tick of the NAC program to the IR line it came
from (several ticks can share one line: Conv2d is five instructions), ``tick_values`` to the IR
value id a tick computes (only the tick that produces the IR value itself).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .errors import MindError
from .ir import ALIAS, Instr, Module, TensorType

_TORCH_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i64": "int64",
                 "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "bool": "bool"}


class ConvertError(MindError):
    """A construct the converter refuses (or a module that does not verify), at its IR line."""


#: NAC stores each dimension as a u32 (seed 000, DATA tensor metadata and the shape table)
MAX_DIM = (1 << 32) - 1
#: the largest constant the converter materialises (it is written whole into the file)
MAX_CONSTANT_BYTES = 1 << 30


@dataclass
class ConvertResult:
    nac: Any                                   # NacFile
    tick_lines: dict = field(default_factory=dict)     # NAC tick -> IR line
    tick_values: dict = field(default_factory=dict)    # NAC tick -> IR value id it produces
    value_ticks: dict = field(default_factory=dict)    # IR value id -> NAC tick
    output_line: int = 0

    def line_of_tick(self, tick: int) -> Optional[int]:
        return self.tick_lines.get(tick)


def _refuse(ins: Instr, reason: str) -> ConvertError:
    return ConvertError(ins.line, ins.column, ins.offset, f"cannot convert {ins.label()}: {reason}", length=ins.length)


def convert_module(module: Module, *, version: str = "1.6", mmap: str = "min-peak",
                   preload_lookahead: int = 2, source_name: Optional[str] = None,
                   source_text: Optional[bytes] = None, debug_info: bool = True) -> ConvertResult:
    """``module`` (verified clean) as a NAC program. With ``debug_info`` the file gets the input
    signature and a source map whose entries name ``source_name`` and the IR line of each tick
    (with the line's text when ``source_text`` is given)."""
    import torch

    from ...compiler.canonicalize import canonicalize as canonical_ops
    from ...compiler.emit import emit
    from ...compiler.errors import CompileError
    from ...compiler.graph import Graph, TensorSpec
    from ...compiler.schedule import plan_mmap
    from ...runtime.mmap_check import check_schedule
    from .verifier import flat_data, verify_module
    from .evaluator import conv_pads

    ver = verify_module(module)
    if ver.problems:
        p = ver.problems[0]
        raise ConvertError(p.line, p.column, p.offset, f"the module does not verify: {p.reason}", code=p.code,
                           rule=p.rule)
    aten = torch.ops.aten
    g = Graph()
    node_of: dict[int, Any] = {}
    line_of_node: dict[int, int] = {}
    value_node: dict[int, int] = {}

    def dtype_of(ins: Instr, t: TensorType):
        name = _TORCH_DTYPES.get(t.dtype)
        if name is None:
            raise _refuse(ins, f"NAC has no {t.dtype} tensors")
        return getattr(torch, name)

    def _lower(ins: Instr, t: TensorType, dt) -> None:
        args = [node_of[v] for v in ins.operands]
        in_types = [ver.types[v] for v in ins.operands]
        p = ins.params
        made: list = []

        def op(target, *a, out_shape=None, out_dtype=None, **kw):
            """Append ``target(*a, **kw)``; its result is ``out_shape``/``out_dtype`` (default: the IR type)."""
            n = g.new_node("op", f"v{ins.vid}_{len(made)}", target=target, args=a, kwargs=kw,
                           spec=TensorSpec(tuple(t.shape if out_shape is None else out_shape), out_dtype or dt))
            g.append(n)
            made.append(n)
            return n

        if ins.opcode == "Input":
            n = g.append(g.new_node("input", str(ins.attrs["name"]), spec=TensorSpec(tuple(t.shape), dt)))
            made.append(n)
        elif ins.opcode in ("ConstI64", "ConstF32", "ConstF64", "ConstTensor"):
            if "fill" in p:
                tensor = torch.full(tuple(t.shape), p["fill"], dtype=dt)
            else:
                vals = [p["value"]] if "value" in p else flat_data(p["data"])
                tensor = torch.tensor(vals, dtype=dt).reshape(t.shape)
            n = g.append(g.new_node("param", f"const.v{ins.vid}", spec=TensorSpec(tuple(t.shape), dt),
                                    tensor=tensor, origin="constant"))
            made.append(n)
        elif ins.opcode == "BinOp":
            target = {"Add": aten.add.Tensor, "Sub": aten.sub.Tensor, "Mul": aten.mul.Tensor}.get(p["op"])
            if target is None:
                raise _refuse(ins, f"BinOp {p['op']} is not Core v1")
            op(target, *args)
        elif ins.opcode in ("Sum", "Mean"):
            if ins.opcode == "Mean" and t.dtype not in ("f16", "bf16", "f32", "f64"):
                raise _refuse(ins, "an integer Mean (torch has no integer mean)")
            kw = {"dtype": dt} if ins.opcode == "Sum" and not dt.is_floating_point else {}
            if not p["axes"]:
                op(aten.sum.default if ins.opcode == "Sum" else aten.mean.default, args[0], **kw)
            else:
                target = aten.sum.dim_IntList if ins.opcode == "Sum" else aten.mean.dim
                op(target, args[0], list(p["axes"]), bool(p["keepdims"]), **kw)
        elif ins.opcode in ("Reshape", "ExpandDims", "Squeeze"):
            op(aten.reshape.default, args[0], list(t.shape))
        elif ins.opcode == "Transpose":
            op(aten.permute.default, args[0], list(p["permutation"]))
        elif ins.opcode == "Index":
            x = args[0]
            if not p["indices"]:
                op(aten.clone.default, x)
            shape = list(in_types[0].shape)
            for k in p["indices"]:
                shape = shape[1:]
                x = op(aten.select.int, x, 0, int(k), out_shape=tuple(shape))
        elif ins.opcode == "Slice":
            if any(s < 0 for s in p["steps"]):
                raise _refuse(ins, "negative Slice steps (torch slices forward only)")
            x = args[0]
            shape = list(in_types[0].shape)
            from .verifier import slice_len
            for dim, (s, e, k) in enumerate(zip(p["starts"], p["ends"], p["steps"])):
                if slice_len(shape[dim], s, e, k) == shape[dim] and k == 1 and s in (0, None):
                    continue
                shape[dim] = slice_len(shape[dim], s, e, k)
                x = op(aten.slice.Tensor, x, dim, int(s), int(e), int(k), out_shape=tuple(shape))
            if not made:
                op(aten.clone.default, x)
        elif ins.opcode == "Gather":
            x, idx = args
            it = in_types[1]
            flat = idx
            if it.rank != 1:
                flat = op(aten.reshape.default, idx, [-1], out_shape=(it.numel(),), out_dtype=dtype_of(ins, it))
            sel = op(aten.index_select.default, x, 0, flat, out_shape=(it.numel(),) + tuple(in_types[0].shape[1:]))
            if it.rank != 1:
                op(aten.reshape.default, sel, list(t.shape))
        elif ins.opcode in ("Dot", "MatMul"):
            op(aten.matmul.default, *args)
        elif ins.opcode == "Conv2d":
            xt, ft = in_types
            (pt, pb), (pl, pr) = conv_pads(xt.shape, ft.shape, p["strides"], p["padding"])
            n, h, w, c = xt.shape
            kh, kw_, _, co = ft.shape
            x = op(aten.permute.default, args[0], [0, 3, 1, 2], out_shape=(n, c, h, w))
            if pt or pb or pl or pr:
                h, w = h + pt + pb, w + pl + pr
                x = op(aten.constant_pad_nd.default, x, [pl, pr, pt, pb], 0.0, out_shape=(n, c, h, w))
            f = op(aten.permute.default, args[1], [3, 2, 0, 1], out_shape=(co, c, kh, kw_))
            ho, wo = t.shape[1], t.shape[2]
            y = op(aten.convolution.default, x, f, None, list(p["strides"]), [0, 0], [1, 1], False, [0, 0], 1,
                   out_shape=(n, co, ho, wo))
            op(aten.permute.default, y, [0, 2, 3, 1])
        elif ins.opcode in ("Relu", "Neg", "Exp", "Log"):
            op({"Relu": aten.relu.default, "Neg": aten.neg.default, "Exp": aten.exp.default,
                "Log": aten.log.default}[ins.opcode], args[0])
        else:
            raise _refuse(ins, "no NAC lowering for this opcode")
        for n in made:
            line_of_node[n.id] = ins.line
        node_of[ins.vid] = made[-1]
        value_node[ins.vid] = made[-1].id
    for ins in module.instrs:
        if ins.opcode == ALIAS:
            node_of[ins.vid] = node_of[ins.operands[0]]
            continue
        t = ver.types[ins.vid]
        if t is None or not t.static:
            raise _refuse(ins, "its shape is not static")
        dt = dtype_of(ins, t)
        if any(d > MAX_DIM for d in t.shape):
            raise _refuse(ins, f"its shape {list(t.shape)} has a dimension above {MAX_DIM:,} (NAC stores dims as u32)")
        if ins.opcode == "ConstTensor" and t.numel() * dt.itemsize > MAX_CONSTANT_BYTES:
            raise _refuse(ins, f"a constant of {t.numel() * dt.itemsize:,} bytes is more than the "
                               f"{MAX_CONSTANT_BYTES:,} this converter writes")
        try:
            _lower(ins, t, dt)
        except ConvertError:
            raise
        except (OverflowError, MemoryError, ValueError, RuntimeError) as e:     # torch refusing a size
            raise _refuse(ins, f"{type(e).__name__}: {e}") from None

    g.outputs = [node_of[v] for v in module.outputs]
    # a constant no op reads is placed by emit only when it is an output: keep the rest out
    used = {s.id for n in g.nodes if n.kind == "op" for s in n.inputs()} | {n.id for n in g.outputs}
    g.nodes = [n for n in g.nodes if n.kind != "param" or n.id in used]
    try:
        emitted = emit(g, canonical_ops(g), version=version)
        nac = emitted.nac
        plan = plan_mmap(nac, emitted.value_nbytes, mode=mmap, preload_lookahead=preload_lookahead)
    except CompileError as e:    # a limit of the NAC format (65,536 ticks, …): the module as a whole
        raise ConvertError(module.outputs_line, module.outputs_column, module.outputs_offset,
                           f"the module does not fit a NAC program: {e}") from None
    nac.mmap = plan.records
    lint = check_schedule(nac)
    if lint.violations:      # the planner's own invariant; never expected
        first = lint.violations[0]
        raise ConvertError(0, 0, 0, f"internal error: MMAP plan violation at tick {first.tick}: {first.message}")
    res = ConvertResult(nac, output_line=module.outputs_line)
    for nid, tick in emitted.tick_of.items():
        if nid in line_of_node:
            res.tick_lines[tick] = line_of_node[nid]
    res.tick_lines[len(nac.instructions) - 1] = module.outputs_line
    for vid, nid in value_node.items():
        tick = emitted.tick_of.get(nid)
        if tick is not None:
            res.tick_values.setdefault(tick, vid)
            res.value_ticks[vid] = tick
    if debug_info:
        _attach_debug_info(res, module, ver.types, source_name, source_text)
    return res


def _attach_debug_info(res: ConvertResult, module: Module, types: dict, source_name: Optional[str],
                       source_text: Optional[bytes]) -> None:
    """Input signature (names, shapes, dtypes, a value range for random runs) and the source map."""
    from ...format.input_signature import InputSpec, encode_input_signature, set_input_signature
    from ...format.source_map import SourceEntry, set_source_map
    from .evaluator import NP_DTYPES
    specs = []
    for ins in module.inputs():
        t = types[ins.vid]
        dt = NP_DTYPES[t.dtype]().dtype
        lo, hi = (-2.0, 2.0) if dt.kind == "f" else (0.0, 1.0) if dt.kind == "b" else (0.0, 3.0)
        specs.append(InputSpec(str(ins.attrs["name"]), tuple(t.shape), dt.name, "input", lo, hi))
        try:
            encode_input_signature(specs[-1:])      # the signature's own bounds, at the Input's line
        except ValueError as e:
            raise _refuse(ins, f"its input signature cannot be recorded: {e}") from None
    set_input_signature(res.nac, specs)
    lines = source_text.split(b"\n") if source_text is not None else None
    by_line = {i.line: i for i in module.instrs}
    entries = []
    for tick, line in sorted(res.tick_lines.items()):
        ins = by_line.get(line)
        node = f"%{ins.vid} {ins.label()}" if ins is not None else "outputs"
        code = None
        if lines is not None and 0 < line <= len(lines):
            code = lines[line - 1].decode("utf-8", "replace").rstrip("\r")
        entries.append(SourceEntry(tick, "", node, source_name, line if line > 0 else None, code))
    set_source_map(res.nac, entries)


def convert_file(path: str, **kw) -> ConvertResult:
    import os

    from .. import open_peer
    peer = open_peer(path, "mind")
    kw.setdefault("source_name", os.path.basename(path))
    kw.setdefault("source_text", peer.data)
    return convert_module(peer.module, **kw)
