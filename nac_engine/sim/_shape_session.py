"""A Session that runs for shapes: parameters as meta tensors, outputs kept as tensors.

Kept apart from :mod:`.shapes` because it subclasses the interpreter (and so imports torch);
``shapes`` imports it only when a program is actually run.
"""
from __future__ import annotations

import torch

from ..format.layout import QUANT_NONE
from ..runtime.session import Session

_NATIVE = {"float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "float32": torch.float32, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
           "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}


class ShapeSession(Session):
    """``meta=True``: parameters are meta tensors of their TensorMeta shape, in the dtype the
    interpreter would give them (float32 when dequantised); no weight byte is read. External
    weights (no TensorMeta) are loaded once and turned into meta tensors."""

    def __init__(self, nacfile, inputs=None, feeds=None, *, states=None, meta: bool = True):
        super().__init__(nacfile, inputs=inputs, feeds=feeds, states=states,
                         device="meta" if meta else "cpu")
        self.meta = meta
        self.output_values: list = []

    def load_param(self, ins):
        if not self.meta:
            return super().load_param(ins)
        p = self.nac.param_for(ins)
        if p is None or p.meta is None:
            t = super().load_param(ins)
            return torch.empty(tuple(t.shape), dtype=t.dtype, device="meta")
        m = p.meta
        quantised = m.quant != QUANT_NONE or self.nac.header.quant_method != QUANT_NONE
        dt = _NATIVE.get(m.dtype_name, torch.float32)
        if quantised and (dt.is_floating_point or m.quant != QUANT_NONE):
            dt = torch.float32
        return torch.empty(tuple(m.logical_shape), dtype=dt, device="meta")

    def convert_outputs(self, values: list) -> list:
        # Meta tensors have no data to convert to numpy; the simulator reads output_values.
        return []
