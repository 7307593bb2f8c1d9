"""A tensor record's binary metadata: dtype, shape and quantisation (DATA block 3).

Its own module so that the quantisation codecs and the tensor rules, which need only this
record, do not import the whole file model (which reaches them back through lazy weights)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import layout as L


@dataclass(slots=True)      # one per tensor record (files with 25k exist): no per-object __dict__
class TensorMeta:
    """DATA block 3 binary metadata (seed 000 §6.1.1 + the reference's quant tails, §10.1)."""
    dtype: int
    shape: tuple
    quant: int = 0
    scale: Optional[float] = None           # INT8_TENSOR (raw f32 kept in scale_bits)
    scale_bits: Optional[bytes] = None
    axis: Optional[int] = None              # INT8_CHANNEL
    scales: Optional[np.ndarray] = None     # INT8_CHANNEL / BLOCK_FP8, float32
    block_size: Optional[int] = None        # BLOCK_FP8
    original_shape: Optional[tuple] = None  # BLOCK_FP8
    extra: bytes = b""                      # metadata bytes after the known fields

    @property
    def dtype_name(self) -> str:
        return L.dtype_name(self.dtype)

    @property
    def logical_shape(self) -> tuple:
        return self.original_shape if self.quant == L.QUANT_BLOCK_FP8 and self.original_shape is not None else self.shape

    @property
    def stored_nbytes(self) -> int:
        # Python ints: numpy's int64 product wraps (2**32 x 2**32 would "need" 0 bytes)
        return math.prod(self.shape) * L.storage_dtype(self.dtype).itemsize
