"""numpy evaluation of a verified Core IR module: the oracle the NAC conversion is tested against.

Semantics (seed 001, and where it says implementation-defined, what we chose):
broadcasting is numpy's; Sum/Mean keep the input dtype (integer sums wrap like the seed's "may
overflow"; an integer Mean truncates toward zero); empty axes reduce everything to a scalar;
negative axes count from the end; Slice follows Python slicing (negative starts/ends count from
the end, negative steps reverse); Index and Gather indices out of range are an :class:`EvalError`
naming the line; Conv2d is NHWC × HWCF with Same padding split TensorFlow's way (the extra row
or column at the end); ``Log(x <= 0)`` gives numpy's -inf/NaN.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .errors import MindError
from .ir import ALIAS, Module
from .verifier import conv_out, verify_module

NP_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
             "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
             "u64": np.uint64, "bool": np.bool_}
#: refuse to materialise a value bigger than this many elements
MAX_ELEMENTS = 1 << 28


class EvalError(MindError):
    """A value the evaluator cannot compute (out-of-range index, too large), at its IR line."""

    def __init__(self, line: int, reason: str):
        super().__init__(line, 1, 0, reason)


def random_inputs(module: Module, seed: int = 0) -> dict:
    """Deterministic example inputs by Input name (floats in [-2, 2), ints in [0, 4))."""
    ver = verify_module(module)
    rng = np.random.default_rng(seed)
    out = {}
    for ins in module.inputs():
        t = ver.types.get(ins.vid)
        if t is None or not t.static:
            raise EvalError(ins.line, f"input %{ins.vid} has no static type")
        dt = NP_DTYPES.get(t.dtype)
        if dt is None:
            raise EvalError(ins.line, f"no numpy dtype for {t.dtype}")
        if t.numel() > MAX_ELEMENTS:
            raise EvalError(ins.line, f"input %{ins.vid} has {t.numel():,} elements (limit {MAX_ELEMENTS:,})")
        if np.issubdtype(dt, np.floating):
            out[str(ins.attrs["name"])] = (rng.random(t.shape) * 4 - 2).astype(dt)
        elif dt is np.bool_:
            out[str(ins.attrs["name"])] = rng.random(t.shape) < 0.5
        else:
            out[str(ins.attrs["name"])] = rng.integers(0, 4, size=t.shape).astype(dt)
    return out


def evaluate(module: Module, inputs: dict, *, keep_all: bool = False):
    """Outputs (list of numpy arrays) of ``module`` for ``inputs`` (by Input name); with
    ``keep_all`` also every value by id. The module must verify clean."""
    ver = verify_module(module)
    if ver.problems:
        p = ver.problems[0]
        raise EvalError(p.line, f"the module does not verify: {p.reason}")
    env: dict[int, np.ndarray] = {}
    for ins in module.instrs:
        t = ver.types[ins.vid]
        if t is not None and t.static and t.numel() > MAX_ELEMENTS:
            raise EvalError(ins.line, f"%{ins.vid} would hold {t.numel():,} elements (limit {MAX_ELEMENTS:,})")
        dt = NP_DTYPES.get(t.dtype) if t is not None else None
        if dt is None:
            raise EvalError(ins.line, f"no numpy dtype for %{ins.vid} ({t.dtype if t else 'unknown type'})")
        args = [env[v] for v in ins.operands]
        try:
            with np.errstate(all="ignore"):
                val = _op(ins, args, t, dt, inputs)
        except EvalError:
            raise
        except (IndexError, ValueError, OverflowError) as e:
            raise EvalError(ins.line, f"{ins.label()}: {e}") from None
        env[ins.vid] = np.asarray(val).astype(dt, copy=False).reshape(t.shape)
    outs = [env[v] for v in module.outputs]
    return (outs, env) if keep_all else outs


def _op(ins, args, t, dt, inputs):
    op, p = ins.opcode, ins.params
    if op == "Input":
        name = str(ins.attrs["name"])
        if name not in inputs:
            raise EvalError(ins.line, f"no value given for input {name!r}")
        x = np.asarray(inputs[name])
        if tuple(x.shape) != tuple(t.shape):
            raise EvalError(ins.line, f"input {name!r} has shape {list(x.shape)}, the module says {list(t.shape)}")
        return x.astype(dt)
    if op == ALIAS:
        return args[0]
    if op in ("ConstI64", "ConstF32", "ConstF64"):
        return np.array(p["value"], dtype=dt)
    if op == "ConstTensor" and "fill" in p:
        return np.full(tuple(t.shape), p["fill"], dtype=dt)
    if op == "ConstTensor":
        from .verifier import flat_data
        return np.array(flat_data(p["data"]), dtype=np.float64 if np.issubdtype(dt, np.floating) else object
                        ).astype(dt).reshape(t.shape)
    if op == "BinOp":
        a, b = args
        return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": _div}[p["op"]](a, b)
    if op in ("Sum", "Mean"):
        x = args[0]
        axes = tuple(a % x.ndim for a in p["axes"]) if p["axes"] else None
        keep = bool(p["keepdims"]) and axes is not None
        s = np.sum(x, axis=axes, keepdims=keep, dtype=dt)
        if op == "Sum":
            return s
        count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
        if np.issubdtype(dt, np.floating):
            return s / dt(count) if count else np.full(s.shape, np.nan, dt)
        return np.trunc(np.asarray(s, dtype=np.float64) / count) if count else s
    if op in ("Reshape", "ExpandDims", "Squeeze"):
        return args[0].reshape(t.shape)
    if op == "Transpose":
        return np.transpose(args[0], p["permutation"])
    if op == "Index":
        return args[0][tuple(p["indices"])]
    if op == "Slice":
        return args[0][tuple(slice(s, e, k) for s, e, k in zip(p["starts"], p["ends"], p["steps"]))]
    if op == "Gather":
        x, idx = args
        n = x.shape[0]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise EvalError(ins.line, f"Gather index out of range for a first axis of {n}")
        return np.take(x, idx.astype(np.int64), axis=0)
    if op in ("Dot", "MatMul"):
        return np.matmul(args[0], args[1])
    if op == "Conv2d":
        return conv2d_nhwc(args[0], args[1], p["strides"], p["padding"])
    if op == "Relu":
        return np.maximum(args[0], dt(0))
    if op == "Neg":
        return np.negative(args[0])
    if op == "Exp":
        return np.exp(args[0])
    if op == "Log":
        return np.log(args[0])
    raise EvalError(ins.line, f"no evaluator for {op}")


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        if np.any(b == 0):
            raise ValueError("integer division by zero")
        return np.trunc(a / b)
    return np.divide(a, b)


def same_padding(size: int, k: int, stride: int) -> tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def conv_pads(x_shape, f_shape, strides, padding) -> tuple:
    if padding == "Valid":
        return (0, 0), (0, 0)
    if padding == "Same":
        return tuple(same_padding(x_shape[1 + a], f_shape[a], strides[a]) for a in range(2))
    return tuple(tuple(p) for p in padding)


def conv2d_nhwc(x: np.ndarray, f: np.ndarray, strides, padding) -> np.ndarray:
    (pt, pb), (pl, pr) = conv_pads(x.shape, f.shape, strides, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    kh, kw, _, cout = f.shape
    sh, sw = strides
    ho = conv_out(x.shape[1], kh, sh, padding, 0)
    wo = conv_out(x.shape[2], kw, sw, padding, 1)
    out = np.zeros((x.shape[0], ho, wo, cout), dtype=np.result_type(x, f))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw, :]
            out += np.einsum("nhwc,cf->nhwf", patch, f[i, j])
    return out


def input_names(module: Module) -> list[Optional[str]]:
    return [str(i.attrs.get("name")) for i in module.inputs()]
