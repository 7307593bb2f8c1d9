"""What a tensor's metadata must satisfy before its payload is touched.

One set of rules for ``verify`` (every problem, listed) and for the lazy paths
(``Parameter.raw()/array()``, external weights: the first problem, raised), so a file that
``verify`` passes never fails later for a format reason. All arithmetic is on Python ints:
numpy's int64 products wrap (2**32 × 2**32 "is" 0 elements) and would make a huge shape match
an empty payload.
"""
from __future__ import annotations

import math
from typing import Optional

from . import layout as L
from .tensor_meta import TensorMeta

#: numpy's NPY_MAXDIMS: a higher rank cannot become an array at all.
MAX_RANK = 64


def tensor_problems(meta: TensorMeta, data_length: Optional[int], stored_count: Optional[int] = None) -> list[str]:
    """Reasons ``meta`` cannot describe its payload (empty: it can). ``data_length`` is the
    payload's size in bytes (internal tensors); ``stored_count`` the number of stored values
    when the payload's own container says it (external safetensors)."""
    out: list[str] = []
    shape = tuple(meta.shape)
    if len(shape) > MAX_RANK:
        return [f"rank {len(shape)} is above {MAX_RANK}, the most an array can have"]
    if meta.dtype not in L.NUMPY_STORAGE:
        return [f"unknown dtype code {meta.dtype}"]
    count = math.prod(shape)
    itemsize = L.storage_dtype(meta.dtype).itemsize
    if data_length is not None and count * itemsize != data_length:
        out.append(f"shape {_short(shape)} of {meta.dtype_name} needs {count * itemsize} bytes, "
                   f"the payload holds {data_length}")
        return out
    if stored_count is not None and count != stored_count:
        out.append(f"shape {_short(shape)} holds {count} values, the payload {stored_count}")
        return out
    q = meta.quant
    if q == L.QUANT_INT8_CHANNEL:
        scales = 0 if meta.scales is None else int(meta.scales.size)
        axis = meta.axis or 0
        if shape and not 0 <= axis < len(shape):
            out.append(f"INT8_CHANNEL axis {axis} is outside the tensor's rank {len(shape)}")
        elif scales != (shape[axis] if shape else 1):
            out.append(f"INT8_CHANNEL has {scales} scales for {shape[axis] if shape else 1} channels "
                       f"(axis {axis} of {_short(shape)})")
    elif q == L.QUANT_INT8_TENSOR:
        if meta.scale is None:
            out.append("INT8_TENSOR without a scale")
    elif q == L.QUANT_BLOCK_FP8:
        block = meta.block_size or 0
        scales = 0 if meta.scales is None else int(meta.scales.size)
        if block <= 0:
            out.append(f"BLOCK_FP8 block size {block} is not positive")
        elif count % block or count // block != scales:
            out.append(f"BLOCK_FP8 payload of {count} values does not split into {scales} blocks of {block}")
        original = tuple(meta.original_shape) if meta.original_shape is not None else (count,)
        if len(original) > MAX_RANK:
            out.append(f"BLOCK_FP8 original rank {len(original)} is above {MAX_RANK}")
        elif math.prod(original) > count:
            out.append(f"BLOCK_FP8 original shape {_short(original)} holds more values than the {count} stored")
    elif q not in (0, L.QUANT_FP16):
        out.append(f"unknown quantisation code {q}")
    return out


def _short(shape: tuple, limit: int = 8) -> str:
    """A shape for a message: a rank-255 shape printed in full is noise."""
    if len(shape) <= limit:
        return str(list(shape))
    return "[" + ", ".join(map(str, shape[:limit])) + f", … ({len(shape)} dims)]"
