"""Lazy access to parameter data: memory-mapped internal tensors or external safetensors.

Nothing here runs at open time. Internal tensors are zero-copy views of the mapped file.
External quantised weights carry their quantisation in the safetensors ``__metadata__``;
three conventions exist in the wild (research §11) and all are read: one JSON key per
tensor (what the reference compiler writes), a single ``metadata`` key, ``nac_quant_meta``.
"""
from __future__ import annotations

import functools
import math
import os
from typing import TYPE_CHECKING, Optional

import numpy as np

from . import layout as L
from ..errors import NacFormatError
from . import bounded_json
from .mapped import is_mapped, read_at
from .safetensors_file import SafetensorsFile
from .deferred_values import DeferredValues
from .tensor_meta import TensorMeta
from .quant import dequantize
from .tensor_rules import tensor_problems

if TYPE_CHECKING:     # the model calls into this module for its lazy weights
    from .model import NacFile, Parameter

_QUANT_BY_NAME = {"FP16": L.QUANT_FP16, "INT8_TENSOR": L.QUANT_INT8_TENSOR,
                  "INT8_CHANNEL": L.QUANT_INT8_CHANNEL, "BLOCK_FP8": L.QUANT_BLOCK_FP8}
_NP_TO_CODE = {"float32": 0, "float64": 1, "float16": 2, "int32": 4, "int64": 5, "int16": 6,
               "int8": 7, "uint8": 8, "bool": 9}


class MissingWeightsError(NacFormatError, LookupError):
    """A parameter whose values are nowhere: no tensor record, or no .safetensors to read."""


def raw_tensor(p: Parameter) -> np.ndarray:
    nac: NacFile = p._file
    if p._payload is not None:
        pl = p._payload
        if isinstance(pl, np.ndarray):
            return pl
        if isinstance(pl, DeferredValues):
            return pl.load()
        dt = L.storage_dtype(p.meta.dtype)
        return np.frombuffer(pl, dtype=dt).reshape(p.meta.shape)
    if p.meta is not None and p.data_offset >= 0:
        problems = tensor_problems(p.meta, p.data_length)
        if problems:
            raise NacFormatError("DATA/tensors", p.data_offset, f"tensor {p.name!r}: {problems[0]}")
        dt = L.storage_dtype(p.meta.dtype)
        if is_mapped(nac):          # a copy read with pread: no view of the mapping to fault on later
            data = read_at(nac, p.data_offset, p.data_length, "DATA/tensors", f"tensor {p.name!r}")
            return data.view(dt).reshape(p.meta.shape)
        if p.data_offset + p.data_length > len(nac._buf):
            raise NacFormatError("DATA/tensors", p.data_offset, f"tensor {p.name!r}: bytes lie past the end of the file")
        arr = np.frombuffer(nac._buf, dtype=dt, count=p.data_length // dt.itemsize, offset=p.data_offset)
        return arr.reshape(p.meta.shape)
    if nac is not None and nac.weights_path:
        arr, meta = _external(nac, p)
        return arr
    raise MissingWeightsError("DATA", 0, f"no data for parameter {p.name!r}: it has no tensor record and "
                                         "no .safetensors is known")


def dequantized_tensor(p: Parameter) -> np.ndarray:
    stored = raw_tensor(p)
    if p.meta is None:
        return stored
    return dequantize(stored, p.meta)


def _opened(path: str) -> tuple[Optional[SafetensorsFile], Optional[str]]:
    """(the parsed header, None), or (None, why it cannot be read): one stat and one cache lookup."""
    try:
        return weights_file(path), None
    except FileNotFoundError:
        return None, (f"weights are external and {path} does not exist: put the .safetensors written with "
                      "the .nac beside it (same base name)")
    except OSError as e:
        return None, f"{path}: {e.strerror or e}"
    except NacFormatError as e:
        return None, e.reason


def weights_file(path: str) -> SafetensorsFile:
    """The parsed header of external weights ``path``, parsed once per version of the file (a run
    reads every tensor of it; a file replaced on disk is parsed again)."""
    st = os.stat(path)
    return _weights_file(os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _weights_file(path: str, _ino: int, _size: int, _mtime: int) -> SafetensorsFile:
    return SafetensorsFile(path)


def _external(nac: NacFile, p: Parameter):
    path = nac.weights_path
    f, problem = _opened(path)
    if problem:
        raise MissingWeightsError("DATA", 0, problem) if "does not exist" in problem else \
            NacFormatError("weights", 0, problem)
    if p.name not in f:
        raise MissingWeightsError("weights", 0, f"parameter {p.name!r} is not in {path}")
    if p.meta is None:
        p.meta = _checked_meta(f, p.name)
    return f.read(p.name), p.meta


def _checked_meta(f: SafetensorsFile, name: str) -> TensorMeta:
    e = f.entries[name]
    meta = external_meta(_ShapeOnly(e.dtype, e.shape), _quant_entry(f.metadata, name), name)
    problems = tensor_problems(meta, None, stored_count=_ShapeOnly(e.dtype, e.shape).size)
    if problems:
        raise NacFormatError(f"weights/{name}", e.begin, problems[0])
    return meta


def external_metas(nac: NacFile) -> int:
    """Set the TensorMeta of each external parameter that has none from the .safetensors header,
    reading no tensor data (a shape pass needs shapes, not 13 GB of weights); returns how many.
    Parameters the file does not hold, or holds with bad metadata, are left for ``raw_tensor`` to
    report at their use."""
    path = nac.weights_path
    f = _opened(path)[0] if path and not nac.header.weights_internal else None
    if f is None:
        return 0
    n = 0
    for p in nac.params.values():
        if p.meta is None and p.name in f:
            try:
                p.meta = _checked_meta(f, p.name)
                n += 1
            except NacFormatError:
                continue
    return n


def external_raw_tensors(nac: NacFile, params) -> dict:
    """id -> (``raw_tensor``, TensorMeta) of each of ``params`` that the external .safetensors
    holds (a session loading every weight before a run). ``p.meta`` is left for the caller to
    set, as ``raw_tensor`` would. A parameter ``raw_tensor`` would refuse is left out:
    ``raw_tensor`` raises its error at the parameter's tick."""
    path = nac.weights_path
    f = _opened(path)[0] if path else None
    if f is None:
        return {}
    out = {}
    for p in params:
        try:
            meta = p.meta if p.meta is not None else _checked_meta(f, p.name)
            out[p.id] = (f.read(p.name), meta)
        except (KeyError, NacFormatError):
            continue
    return out


@functools.lru_cache(maxsize=8)
def _parse_quant_json(text):
    """One parse per metadata blob, not one per tensor (a blob for every tensor is read N times)."""
    try:
        return bounded_json.loads(text, what="quantisation metadata"), None
    except (ValueError, TypeError) as e:
        return None, str(e)


def _quant_entry(md: dict, name: str) -> Optional[dict]:
    def parse(s):
        if not isinstance(s, str):
            return None
        value, error = _parse_quant_json(s)
        if error and "levels deep" in error:
            raise NacFormatError(f"weights/{name}", 0, f"malformed quantisation metadata: {error}")
        return value
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


def external_weight_problems(nac: NacFile) -> list[NacFormatError]:
    """What ``verify`` finds in a file's external .safetensors: a header that cannot be read, a
    parameter it does not hold, quantisation metadata that is malformed or does not fit the
    stored tensor. Reads the header only, never the tensors' data."""
    path = nac.weights_path
    f, problem = _opened(path)
    if problem:
        return [NacFormatError("weights", 0, problem)]
    out = []
    for p in nac.params.values():
        if p.name not in f:
            out.append(NacFormatError("weights", 0, f"parameter {p.name!r} is not in {path}"))
            continue
        try:
            _checked_meta(f, p.name)
        except NacFormatError as e:
            out.append(e)
    return out


class _ShapeOnly:
    """What external_meta reads of an array (dtype name, shape, size), without its data."""
    _NAMES = {"F32": "float32", "F64": "float64", "F16": "float16", "I32": "int32", "I64": "int64",
              "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool", "BF16": "bfloat16"}

    def __init__(self, st_dtype: str, shape: tuple):
        self.dtype = np.dtype("V1") if st_dtype not in self._NAMES or st_dtype == "BF16" else \
            np.dtype(self._NAMES[st_dtype])
        self.shape = shape
        self.size = math.prod(shape)
