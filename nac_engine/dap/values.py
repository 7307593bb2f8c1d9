"""Tensors as DAP variables: a one-line summary, and children an editor pages through.

A tensor variable's value reads ``f32[1,12,16,64] min -2.1 max 2.0 mean 0.0094 NaN 0``; its
children are three named ones (shape, dtype, stats) and one indexed child per row of the first
dimension (a sub-tensor, or an element of a 1-D tensor), paged by DAP's ``start``/``count``.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..runtime.tick_result import TickResult, as_numpy

#: Children sent for a request without ``count`` (an editor that does not page).
UNPAGED_LIMIT = 1000
#: Most bytes one readMemory answer carries (an editor's memory view asks page by page).
READ_LIMIT = 16 << 20

_SHORT = {"float32": "f32", "float16": "f16", "float64": "f64", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
          "complex64": "c64", "complex128": "c128"}


def dtype_of(v: Any) -> str:
    """The value's dtype name as torch or numpy says it (bfloat16 stays bfloat16)."""
    dt = getattr(v, "dtype", None)
    if dt is None:
        return type(v).__name__
    return str(dt).replace("torch.", "")


def is_tensor(v: Any) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype")


def _num(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.4g}"


def _array(v: Any) -> Optional[np.ndarray]:
    arr = as_numpy(v)
    return arr if arr.dtype.kind in "biufc" else None


#: A vector this short is shown by its values (``i64[4] [1, 12, 16, 64]``: a shape, a bias of a toy
#: model, two softmax scores), not by its statistics.
INLINE_VALUES = 8


def summary(v: Any) -> str:
    """``f32[2,3] min -1 max 2 mean 0.5 NaN 0`` for a tensor (``f32[2] [0.3, 0.7]`` for a short
    vector); the value's text otherwise."""
    if v is None:
        return "None"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(summary(x) for x in v[:4]) + (", …" if len(v) > 4 else "") + ")"
    if not is_tensor(v):
        return repr(v)[:200]
    dtype = dtype_of(v)
    head = f"{_SHORT.get(dtype, dtype)}[{','.join(str(int(d)) for d in v.shape)}]"
    arr = _array(v)
    if arr is None:
        return head
    if arr.ndim == 0:
        return f"{head} {arr.item()!r}"
    if arr.ndim == 1 and arr.size <= INLINE_VALUES:
        return f"{head} [{', '.join(element_text(x) for x in arr.tolist())}]"
    r = TickResult(-1, "", arr)
    text = f"{head} min {_num(r.min)} max {_num(r.max)} mean {_num(r.mean)} NaN {r.nan_count}"
    return text + (f" Inf {r.inf_count}" if r.inf_count else "")


def stats_text(v: Any) -> str:
    arr = _array(v)
    if arr is None:
        return "not numeric"
    r = TickResult(-1, "", arr)
    return (f"min {_num(r.min)} max {_num(r.max)} mean {_num(r.mean)} std {_num(r.std)} "
            f"NaN {r.nan_count} Inf {r.inf_count} zeros {r.zero_count}")


def raw_bytes(v: Any, offset: int, count: int) -> tuple[bytes, int]:
    """Bytes ``offset`` .. ``offset + count`` of the tensor's elements in C order, as the engine
    holds them (bfloat16: its two-byte words), at most :data:`READ_LIMIT`; and the tensor's size.
    Only that range is copied."""
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, torch.Tensor):
        t = v.detach().cpu().contiguous()
        arr = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()
    else:
        arr = np.ascontiguousarray(as_numpy(v))
    view = memoryview(arr).cast("B") if arr.size else memoryview(b"")
    count = min(count, READ_LIMIT)
    return bytes(view[offset:offset + count]), len(view)


def element_text(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return repr(x)


def rows(v: Any) -> int:
    """How many indexed children: the first dimension's length (0 for a scalar)."""
    shape = getattr(v, "shape", ())
    return int(shape[0]) if len(shape) else 0


def row(v: Any, i: int) -> Any:
    """Row ``i`` of the first dimension: a sub-tensor, or a Python number for a 1-D tensor."""
    x = v[i]
    if len(getattr(x, "shape", ())) == 0:
        return as_numpy(x).item()
    return x
