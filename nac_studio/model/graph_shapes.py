"""Tensor shapes and dtypes for the graph's edges (no Qt here).

Two sources, cheapest first:

* :func:`file_shapes`: what the file states. A parameter load's result is its tensor
  (dtype and shape from the tensor record): known at once, no torch.
* :func:`propagated_shapes`: every instruction's result from the simulator's meta-device
  shape pass (:func:`nac_engine.runtime.shapes.program_shapes`), fed the input shapes the file's
  input signature records. It imports torch and runs the program's kernels on ``meta``,
  so the Studio runs it in a background task; a file without an input signature, or whose
  shapes cannot be propagated, keeps the file's shapes only.

Labels are short: ``f32[1,16,768]``, ``i64[1,16]``; several outputs are joined by ``, ``.
"""
from __future__ import annotations

from typing import Callable, Optional

_SHORT_DTYPE = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
                "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
                "complex64": "c64", "complex128": "c128"}
MAX_LABEL = 40


def shape_label(dtype: str, shape) -> str:
    """``float32``, (1, 16, 768) → ``f32[1,16,768]``."""
    dt = _SHORT_DTYPE.get(str(dtype).replace("torch.", ""), str(dtype))
    return f"{dt}[{','.join(str(int(d)) for d in shape)}]"


def file_shapes(nac) -> dict[int, str]:
    """Tick → label for what the file states (parameter loads)."""
    from nac_engine.isa.optable import OP_INPUT
    out: dict[int, str] = {}
    for ins in nac.instructions:
        if ins.a == OP_INPUT and ins.b == 1:
            p = nac.param_for(ins)
            if p is not None and p.shape is not None:
                out[ins.index] = shape_label(p.dtype, p.shape)
    return out


def propagated_shapes(nac, progress: Optional[Callable[[int, int], None]] = None) -> dict[int, str]:
    """Tick → label of every instruction's result from the meta shape pass (torch), using
    the input signature's shapes. Empty when the file records no input signature.
    ``progress(done, total)`` may raise to stop (a cancelled task)."""
    from nac_engine.format.input_signature import read_input_signature
    from nac_engine.runtime.shapes import InputSpec, program_shapes
    specs = read_input_signature(nac)
    if not specs:
        return {}
    inputs = {s.name: InputSpec(tuple(s.shape), s.dtype) for s in specs if s.kind == "input"}
    prog = program_shapes(nac, inputs=inputs, progress=progress)
    out: dict[int, str] = {}
    for info in prog.instructions:
        if not info.outputs:
            continue
        text = ", ".join(shape_label(t.dtype, t.shape) for t in info.outputs[:3])
        if len(info.outputs) > 3:
            text += f", … ({len(info.outputs)})"
        out[info.tick] = text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "…"
    return out


def node_shape_labels(graph, shapes: dict[int, str]) -> dict[int, str]:
    """Node index → the label of the value it produces (what its out-edges carry), for the
    instruction and parameter nodes of ``graph`` that have one and feed something."""
    if not shapes or not len(graph.edges):
        return {}
    sources = set(graph.edges[:, 0].tolist())
    out = {}
    for i in sources:
        nd = graph.nodes[i]
        if nd.kind in ("instruction", "param", "input") and nd.tick in shapes:
            out[i] = shapes[nd.tick]
    return out
