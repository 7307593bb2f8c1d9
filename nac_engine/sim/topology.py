"""Single-layer NAC programs for comparison runs (SCALE-Sim's GEMM and conv topologies).

``gemm_program(M, K, N)`` and ``conv_program(H, W, C_in, C_out, k)`` build, with the codec
alone, a NacFile ``<INPUT> x · param W · op · <OUTPUT>`` with a schedule that preloads the
weight, frees what was read and saves nothing (the result is the output). They return the
file and the input shapes to simulate it with.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..format.model import (Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile, Parameter,
                            TensorMeta)
from ..runtime.shapes import InputSpec

_CMAP_BASE = 32


def _param(nac: NacFile, pid: int, name: str, shape: tuple, with_data: bool) -> None:
    data = np.zeros(shape, dtype="<f4") if with_data else None
    nbytes = int(np.prod(shape)) * 4
    nac.params[pid] = Parameter(pid, name, TensorMeta(0, tuple(shape), 0), _payload=data,
                                data_length=nbytes, _file=nac)
    nac.tensor_order.append(pid)


def _single_layer(op: str, x_shape: tuple, params: list, consts: list, sig_tail: str,
                  with_data: bool) -> tuple[NacFile, dict]:
    nac = NacFile(Header(version="1.8", num_inputs=1, num_outputs=1, d_model=0))
    nac.cmap = {_CMAP_BASE: op}
    ins = [Instruction(0, 2, 0, None, None)]
    nac.input_names = [InputName(0, "x")]
    for n, (name, shape) in enumerate(params, start=1):
        _param(nac, n, name, shape, with_data)
        ins.append(Instruction(n, 2, 1, (1, n), None))
    i = len(ins)
    sig = "T" * (1 + len(params)) + sig_tail
    nac.perms = {1: sig}
    for cid, (ctype, value) in enumerate(consts, start=2):
        from ..format.model import Constant
        nac.constants[cid] = Constant(cid, ctype, value)
    c = (len(consts),) + tuple(range(2, 2 + len(consts))) if consts else None
    d = (-i,) + tuple(n - i for n in range(1, 1 + len(params))) + (0,) * len(consts)
    ins.append(Instruction(i, _CMAP_BASE, 1, c, d))
    ins.append(Instruction(i + 1, 3, 0, (1, 0), (-1,)))
    nac.instructions = ins
    frees = [MmapCommand(20, t) for t in range(0, i)]
    nac.mmap = [MmapRecord(0, [MmapCommand(10, 0)] + [MmapCommand(40, n) for n in range(1, i)]),
                MmapRecord(i, frees)]
    return nac, {"x": InputSpec(tuple(x_shape), "float32")}


def gemm_program(m: int, k: int, n: int, *, op: str = "mm", with_data: bool = True) -> tuple[NacFile, dict]:
    """``x[M,K] @ W[K,N]`` (``op="mm"``) or ``linear(x[M,K], W[N,K])`` (``op="linear"``)."""
    if op == "mm":
        return _single_layer("aten.mm.default", (m, k), [("w", (k, n))], [], "", with_data)
    if op == "linear":
        return _single_layer("aten.linear.default", (m, k), [("w", (n, k))], [], "", with_data)
    raise ValueError(f"op must be 'mm' or 'linear', not {op!r}")


def conv_program(h: int, w: int, cin: int, cout: int, kh: int, kw: Optional[int] = None, *,
                 stride: int = 1, padding: int = 0, batch: int = 1, with_data: bool = True
                 ) -> tuple[NacFile, dict]:
    """``conv2d(x[batch, C_in, H, W], W[C_out, C_in, kh, kw], bias, stride, padding)``."""
    kw = kh if kw is None else kw
    from ..format import layout as L
    consts = [(L.CONST_LIST_I32, (stride, stride)), (L.CONST_LIST_I32, (padding, padding))]
    return _single_layer("aten.conv2d.default", (batch, cin, h, w),
                         [("weight", (cout, cin, kh, kw)), ("bias", (cout,))], consts, "SS", with_data)


# --------------------------------------------------------------------------- a GPT-2-shaped program
class _Builder:
    """Appends instructions to a NacFile, interning op names, signatures and constants."""

    def __init__(self, with_data: bool):
        self.nac = NacFile(Header(version="1.8", num_outputs=1))
        self.with_data = with_data
        self.ins: list[Instruction] = []
        self._ops: dict[str, int] = {}
        self._perms: dict[str, int] = {}
        self._consts: dict[tuple, int] = {}

    def _op(self, name: str) -> int:
        if name not in self._ops:
            self._ops[name] = _CMAP_BASE + len(self._ops)
            self.nac.cmap[self._ops[name]] = name
        return self._ops[name]

    def _perm(self, sig: str) -> int:
        if sig not in self._perms:
            self._perms[sig] = len(self._perms) + 1
            self.nac.perms[self._perms[sig]] = sig
        return self._perms[sig]

    def _const(self, value) -> int:
        from ..format import layout as L
        from ..format.model import Constant
        if isinstance(value, bool):
            ctype = L.CONST_BOOL
        elif isinstance(value, int):
            ctype = L.CONST_INT64
        elif isinstance(value, float):
            ctype = L.CONST_FLOAT64
        elif isinstance(value, str):
            ctype = L.CONST_STRING
        else:
            value, ctype = tuple(value), L.CONST_LIST_I32
        key = (ctype, value)
        if key not in self._consts:
            cid = self._consts[key] = len(self._consts) + 2
            self.nac.constants[cid] = Constant(cid, ctype, value)
        return self._consts[key]

    def input(self, name: str) -> int:
        i = len(self.ins)
        self.ins.append(Instruction(i, 2, 0, None, None))
        self.nac.input_names.append(InputName(i, name))
        self.nac.header.num_inputs += 1
        return i

    def param(self, name: str, shape: tuple) -> int:
        pid = len(self.nac.params) + 1
        _param(self.nac, pid, name, shape, self.with_data)
        i = len(self.ins)
        self.ins.append(Instruction(i, 2, 1, (1, pid), None))
        return i

    def op(self, name: str, *args) -> int:
        """``args``: producer ticks (int wrapped in a 1-tuple ``(tick,)``) or constant values."""
        i = len(self.ins)
        sig, d, c = "", [], []
        for a in args:
            if isinstance(a, tuple) and len(a) == 1 and isinstance(a[0], int) and not isinstance(a[0], bool):
                sig += "T"
                d.append(a[0] - i)
            else:
                sig += "f" if isinstance(a, float) else "i" if isinstance(a, int) else "s" \
                    if isinstance(a, str) else "S"
                d.append(0)
                c.append(self._const(a))
        self.ins.append(Instruction(i, self._op(name), self._perm(sig), (len(c), *c) if c else None,
                                    tuple(d)))
        return i

    def output(self, v: int) -> NacFile:
        i = len(self.ins)
        self.ins.append(Instruction(i, 3, 0, (1, 0), (v - i,)))
        self.nac.instructions = self.ins
        return self.nac


def transformer_program(layers: int = 2, d_model: int = 64, heads: int = 2, seq: int = 16, *,
                        vocab: int = 100, ffn: Optional[int] = None, with_data: bool = False,
                        schedule: Optional[str] = "min-peak", preload_lookahead: int = 2
                        ) -> tuple[NacFile, dict]:
    """A GPT-2-shaped decoder (pre-LN blocks, causal mask as an input, tied LM head), built
    with the codec; the MMAP schedule comes from the compiler's planner
    (:func:`nac_engine.compiler.schedule.plan_mmap`, ``schedule`` = its mode; None = no MMAP).
    Parameters carry no data unless ``with_data`` (the simulator needs only their shapes).
    Returns the file and its input shapes."""
    ffn = ffn or 4 * d_model
    dh = d_model // heads
    b = _Builder(with_data)
    ids = b.input("input_ids")
    pos = b.input("position_ids")
    mask = b.input("causal_mask")
    wte = b.param("wte.weight", (vocab, d_model))
    h = b.op("aten.embedding.default", (wte,), (ids,))
    wpe = b.param("wpe.weight", (max(seq, 1), d_model))
    p = b.op("aten.embedding.default", (wpe,), (pos,))
    h = b.op("aten.add.Tensor", (h,), (p,))

    def ln(x, name):
        w = b.param(f"{name}.weight", (d_model,))
        bias = b.param(f"{name}.bias", (d_model,))
        return b.op("aten.layer_norm.default", (x,), [d_model], (w,), (bias,), 1e-5)

    def linear(x, name, n_out, n_in):
        w = b.param(f"{name}.weight", (n_out, n_in))
        bias = b.param(f"{name}.bias", (n_out,))
        return b.op("aten.linear.default", (x,), (w,), (bias,))

    for layer in range(layers):
        pre = f"h.{layer}"
        a = ln(h, f"{pre}.ln_1")
        q = b.op("aten.transpose.int", (b.op("aten.view.default", (linear(a, f"{pre}.attn.q", d_model, d_model),),
                                              [1, seq, heads, dh]),), 1, 2)
        k = b.op("aten.permute.default", (b.op("aten.view.default", (linear(a, f"{pre}.attn.k", d_model, d_model),),
                                               [1, seq, heads, dh]),), [0, 2, 3, 1])
        v = b.op("aten.transpose.int", (b.op("aten.view.default", (linear(a, f"{pre}.attn.v", d_model, d_model),),
                                              [1, seq, heads, dh]),), 1, 2)
        s = b.op("aten.div.Tensor", (b.op("aten.matmul.default", (q,), (k,)),), float(dh) ** 0.5)
        s = b.op("aten.softmax.int", (b.op("aten.add.Tensor", (s,), (mask,)),), -1)
        o = b.op("aten.transpose.int", (b.op("aten.matmul.default", (s,), (v,)),), 1, 2)
        o = b.op("aten.reshape.default", (o,), [1, seq, d_model])
        h = b.op("aten.add.Tensor", (h,), (linear(o, f"{pre}.attn.proj", d_model, d_model),))
        m = linear(ln(h, f"{pre}.ln_2"), f"{pre}.mlp.fc", ffn, d_model)
        m = linear(b.op("aten.gelu.default", (m,)), f"{pre}.mlp.proj", d_model, ffn)
        h = b.op("aten.add.Tensor", (h,), (m,))
    h = ln(h, "ln_f")
    logits = b.op("aten.linear.default", (h,), (wte,))
    nac = b.output(logits)
    nac.header.d_model = d_model
    inputs = {"input_ids": InputSpec((1, seq), "int64"), "position_ids": InputSpec((1, seq), "int64"),
              "causal_mask": InputSpec((1, 1, seq, seq), "float32")}
    if schedule is not None:
        from ..compiler.schedule import plan_mmap
        from ..runtime.shapes import program_shapes
        prog = program_shapes(nac, inputs=inputs)
        sizes = {x.tick: sum(t.numel * 4 for t in x.outputs) for x in prog.instructions}
        nac.mmap = plan_mmap(nac, sizes, mode=schedule, preload_lookahead=preload_lookahead).records
    return nac, inputs
