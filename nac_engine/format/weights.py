"""Lazy access to parameter data: memory-mapped internal tensors or external safetensors.

Nothing here runs at open time. Internal tensors are zero-copy views of the mapped file.
External quantised weights carry their quantisation in the safetensors ``__metadata__``;
three conventions exist in the wild (research §11) and all are read: one JSON key per
tensor (what the reference compiler writes), a single ``metadata`` key, ``nac_quant_meta``.
"""
from __future__ import annotations

import json
import math
from typing import Optional

import numpy as np

from . import layout as L
from ..errors import NacFormatError
from .model import NacFile, Parameter, TensorMeta
from .quant import dequantize

_QUANT_BY_NAME = {"FP16": L.QUANT_FP16, "INT8_TENSOR": L.QUANT_INT8_TENSOR,
                  "INT8_CHANNEL": L.QUANT_INT8_CHANNEL, "BLOCK_FP8": L.QUANT_BLOCK_FP8}
_NP_TO_CODE = {"float32": 0, "float64": 1, "float16": 2, "int32": 4, "int64": 5, "int16": 6,
               "int8": 7, "uint8": 8, "bool": 9}


def raw_tensor(p: Parameter) -> np.ndarray:
    nac: NacFile = p._file
    if p._payload is not None:
        pl = p._payload
        if isinstance(pl, np.ndarray):
            return pl
        dt = L.storage_dtype(p.meta.dtype)
        return np.frombuffer(pl, dtype=dt).reshape(p.meta.shape)
    if p.meta is not None and p.data_offset >= 0:
        dt = L.storage_dtype(p.meta.dtype)
        count = p.data_length // dt.itemsize
        arr = np.frombuffer(nac._buf, dtype=dt, count=count, offset=p.data_offset)
        expect = int(np.prod(p.meta.shape, dtype=np.int64)) if p.meta.shape else 1
        return arr.reshape(p.meta.shape) if arr.size == expect else arr
    if nac is not None and nac.weights_path:
        arr, meta = _external(nac, p)
        return arr
    raise LookupError(f"no data for parameter {p.name!r}: weights are external and no .safetensors is known")


def dequantized_tensor(p: Parameter) -> np.ndarray:
    stored = raw_tensor(p)
    if p.meta is None:
        return stored
    return dequantize(stored, p.meta)


def _external(nac: NacFile, p: Parameter):
    from safetensors import safe_open
    with safe_open(nac.weights_path, framework="numpy") as f:
        if p.name not in f.keys():
            raise LookupError(f"parameter {p.name!r} is not in {nac.weights_path}")
        arr = f.get_tensor(p.name)
        if p.meta is None:
            p.meta = external_meta(arr, _quant_entry(f.metadata() or {}, p.name), p.name)
    return arr, p.meta


def _quant_entry(md: dict, name: str) -> Optional[dict]:
    def parse(s):
        try:
            return json.loads(s)
        except (TypeError, ValueError):
            return None
    if name in md:
        return parse(md[name])
    for key in ("metadata", "nac_quant_meta"):
        if key in md:
            blob = parse(md[key])
            if isinstance(blob, dict) and isinstance(blob.get(name), dict):
                return blob[name]
    return None


def external_meta(arr: np.ndarray, q: Optional[dict], name: str = "") -> TensorMeta:
    """TensorMeta of an external tensor from its quantisation entry. The entry is untrusted
    JSON: a malformed one is a NacFormatError naming the tensor, never a stray TypeError."""
    try:
        return _external_meta(arr, q)
    except NacFormatError:
        raise
    except (TypeError, ValueError, OverflowError, AttributeError) as e:
        raise NacFormatError(f"weights/{name}", 0, f"malformed quantisation metadata: {e}") from None


def _external_meta(arr: np.ndarray, q: Optional[dict]) -> TensorMeta:
    code = _NP_TO_CODE.get(arr.dtype.name, L.DTYPE_UNKNOWN)
    meta = TensorMeta(code, tuple(arr.shape), 0)
    if not q:
        return meta
    kind = q.get("quant_type")
    if kind is None and "quant_code" in q:
        kind = L.QUANT_NAMES.get(int(q["quant_code"]))
    meta.quant = _QUANT_BY_NAME.get(str(kind).upper(), 0)
    if meta.quant == L.QUANT_INT8_TENSOR:
        meta.scale = float(q.get("scale", 1.0))
    elif meta.quant == L.QUANT_INT8_CHANNEL:
        meta.axis = int(q.get("axis", 0))
        meta.scales = np.asarray(q.get("scales", []), np.float32)
    elif meta.quant == L.QUANT_BLOCK_FP8:
        meta.block_size = int(q.get("block_size", 64))
        shape = next((q[k] for k in ("original_shape", "orig_shape") if q.get(k) is not None), arr.shape)
        meta.original_shape = tuple(int(d) for d in shape)   # () is a real shape: a scalar
        if any(d < 0 for d in meta.original_shape) or math.prod(meta.original_shape) > arr.size:
            raise ValueError(f"BLOCK_FP8 original shape {list(meta.original_shape)} does not fit the "
                             f"{arr.size} stored values")
        meta.scales = np.asarray(q.get("scales") or q.get("block_scales") or [], np.float32)
    elif meta.quant == L.QUANT_FP16:
        meta.quant = 0
    return meta
