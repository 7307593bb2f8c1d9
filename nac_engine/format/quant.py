"""Dequantisation of stored tensors, exactly as the reference writes them (research §10).

"BLOCK_FP8" is a misnomer kept from the format: int8 values with one float32 scale per
64-element block of the flattened, zero-padded tensor, not an 8-bit float encoding.
"""
from __future__ import annotations

import numpy as np

from . import layout as L
from .tensor_meta import TensorMeta


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def dequantize(stored: np.ndarray, meta: TensorMeta) -> np.ndarray:
    """Stored values (in their storage dtype and stored shape) → logical float32 tensor.

    Integer tensors without quantisation are returned unchanged (int buffers stay int). A scale
    that overflows the product (a damaged or hostile file) gives inf/NaN values, which the views
    count and ``verify`` names, without numpy's RuntimeWarning on the user's terminal.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _dequantize(stored, meta)


def _dequantize(stored: np.ndarray, meta: TensorMeta) -> np.ndarray:
    q = meta.quant
    if q == L.QUANT_INT8_TENSOR:
        scale = np.float32(meta.scale if meta.scale is not None else 1.0)
        return stored.astype(np.float32) * scale
    if q == L.QUANT_INT8_CHANNEL:
        scales = np.asarray(meta.scales, np.float32)
        axis = meta.axis or 0
        shape = [1] * stored.ndim
        if stored.ndim:
            shape[axis] = -1
        return stored.astype(np.float32) * scales.reshape(shape)
    if q == L.QUANT_BLOCK_FP8:
        block = int(meta.block_size or 64)
        flat = stored.reshape(-1).astype(np.float32)
        scales = np.asarray(meta.scales, np.float32)
        rows = flat.size // block if block else 0
        if rows * block != flat.size or rows != scales.size:
            raise ValueError(f"BLOCK_FP8 tensor of {flat.size} values does not split into "
                             f"{scales.size} blocks of {block}")
        values = (flat.reshape(rows, block) * scales[:, None]).reshape(-1)
        oshape = tuple(meta.original_shape) if meta.original_shape is not None else (values.size,)
        n = int(np.prod(oshape, dtype=np.int64))
        return values[:n].reshape(oshape)
    if meta.dtype == 3:   # bfloat16: widened to float32
        return bf16_to_f32(stored)
    if meta.dtype in (1, 2) or q == L.QUANT_FP16:
        return stored.astype(np.float32)
    return stored
