"""Single-layer NAC programs for comparison runs (SCALE-Sim's GEMM and conv topologies).

``gemm_program(M, K, N)`` and ``conv_program(H, W, C_in, C_out, k)`` build, with the codec
alone, a NacFile ``<INPUT> x · param W · op · <OUTPUT>`` with a schedule that preloads the
weight, frees what was read and saves nothing (the result is the output). They return the
file and the input shapes to simulate it with. ``read_topology_csv`` turns a SCALE-Sim
topology file (conv rows ``Layer, IFMAP H, IFMAP W, Filter H, Filter W, Channels, Num Filter,
Strides`` or, with ``gemm=True``, rows ``Layer, M, N, K``) into such programs; SCALE-Sim does
not pad, so its IFMAP sizes are taken as already padded.
"""
from __future__ import annotations

import csv
from typing import Optional

import numpy as np

from ..format.model import (Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile, Parameter,
                            TensorMeta)
from .shapes import InputSpec

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


def read_topology_csv(path: str, *, gemm: bool = False, with_data: bool = False) -> list:
    """``[(layer name, NacFile, inputs)]`` for each row of a SCALE-Sim topology CSV."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    for lineno, row in enumerate(rows[1:], start=2):
        cells = [c.strip() for c in row if c.strip() != ""]
        try:
            if gemm:
                name, m, n, k = cells[0], *map(int, cells[1:4])
                nac, inputs = gemm_program(m, k, n, with_data=with_data)
            else:
                name, ih, iw, fh, fw, ch, nf, st = cells[0], *map(int, cells[1:8])
                nac, inputs = conv_program(ih, iw, ch, nf, fh, fw, stride=st, with_data=with_data)
        except (ValueError, IndexError):
            raise ValueError(f"{path}:{lineno}: expected "
                             + ("Layer, M, N, K" if gemm else "Layer, IFMAP H, IFMAP W, Filter H, Filter W, "
                                "Channels, Num Filter, Strides") + f"; got {row!r}") from None
        out.append((name, nac, inputs))
    return out
