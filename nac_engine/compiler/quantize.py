"""Weight quantisation at compile time, in the encodings the reference runtime reads (research §10).

API
---
``quantize_parameters(nac, method) -> list[QuantReport]`` rewrites every eligible parameter of
``nac`` in place (its ``TensorMeta`` and stored values) and sets the header's method.
``method``: ``"none"``, ``"fp16"``, ``"int8_tensor"``, ``"int8_channel"``, ``"block_fp8"``
(case-insensitive; ``None`` means ``"none"``). One :class:`QuantReport` per parameter, in DATA
order, with the error of the values the runtime will use (decoded by the reader's own
:func:`nac_engine.format.quant.dequantize`) against the float original.

Encodings (what the reference compiler writes; the first three were checked byte for byte
against the corpus, see the tests):

* eligible = floating tensors (float32/64/16, bfloat16) that are not already quantised;
  integer and bool tensors are left exactly as they are. Like the reference, 1-D tensors
  (biases, LayerNorm/BatchNorm parameters and statistics) are quantised too.
* Not eligible either, and kept as they are (their report says why in ``skipped``): tensors
  holding inf or NaN under the int8 encodings — a ``-inf`` attention mask would get an infinite
  scale and decode to NaN — and any tensor whose decoded values would be non-finite where the
  original is finite (float16 overflowing past 65504; ``finfo(float32).min`` times its int8
  scale rounding past float32's range). float16 stores inf and NaN exactly, so a ``-inf`` mask
  is still FP16. The formulas below have no such case: applied to a mask they give an infinite
  scale, NaN outputs and an external file that cannot be written. Keeping these few tensors
  float keeps the model right, internal and external alike, and costs only their bytes.
* ``fp16`` (header method 1): cast to float16, stored dtype 2 with per-tensor quant code **0**.
* ``int8_tensor`` (2): ``scale = max|w| / 127`` (``1e-9`` when 0), ``q = round(w / scale)``
  clamped to [-127, 127], int8 with the original shape, quant 2 and the float32 scale.
* ``int8_channel`` (3): one scale per index of axis 0 (``max|w|`` over the other axes / 127,
  0 → 1e-9), same clamp, quant 3, axis 0. Tensors of rank ≤ 1 use the ``int8_tensor``
  encoding (quant code 2) while the header still says 3, as the reference does.
* ``block_fp8`` (4): despite the name, int8 values with one float32 scale per 64-element
  block of the flattened tensor zero-padded to a multiple of 64: ``scale = max|block| / 127``
  (0 → **1.0**), ``q = round(x / scale)`` clamped to **[-128, 127]``; stored rank 1 with the
  padded length, quant 4, block size 64, the original shape and the scales. No float8 type is
  involved, so none is used here.

Arithmetic is float32 PyTorch (``round`` is half to even), as in the reference; the inputs are
cast to float32 first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..format import layout as L
from ..format.deferred_values import DeferredValues
from ..format.model import NacFile, Parameter, TensorMeta
from ..format.quant import bf16_to_f32, dequantize

METHODS = {"none": L.QUANT_NONE, "fp16": L.QUANT_FP16, "int8_tensor": L.QUANT_INT8_TENSOR,
           "int8_channel": L.QUANT_INT8_CHANNEL, "block_fp8": L.QUANT_BLOCK_FP8}
FLOAT_DTYPES = frozenset({0, 1, 2, 3})       # float32, float64, float16, bfloat16
BLOCK = 64
_INT8_ZERO_SCALE = 1e-9                      # what the reference puts in place of a 0 scale
_BLOCK_ZERO_SCALE = 1.0                      # ... and for an all-zero block


@dataclass(frozen=True)
class QuantReport:
    name: str
    method: str              # the requested method
    shape: tuple             # logical shape
    max_abs_error: float     # max |decoded - original|
    rel_error: float         # max_abs_error / max |original| (0 for an all-zero tensor)
    stored_bytes: int        # bytes of the stored values (metadata not counted)
    float_bytes: int         # bytes the tensor took before quantisation
    stored_as: str = "none"  # the encoding actually used: none, FP16, INT8_TENSOR, ...
    skipped: str = ""        # why an eligible-looking float tensor was kept as it is ("" if not)


def method_code(method: Optional[str]) -> int:
    key = "none" if method is None else str(method).lower()
    if key not in METHODS:
        raise ValueError(f"unknown quantisation method {method!r} (known: {', '.join(METHODS)})")
    return METHODS[key]


def _original(p: Parameter) -> np.ndarray:
    """The parameter's values as stored, floats widened exactly (bfloat16 → float32)."""
    raw = np.asarray(p.raw())
    if p.meta.dtype == 3:
        return bf16_to_f32(raw)
    return raw


def _int8_tensor(w: torch.Tensor) -> tuple[np.ndarray, TensorMeta]:
    scale = w.abs().max() / 127 if w.numel() else torch.tensor(0.0)
    if scale.item() == 0:
        scale = torch.tensor(_INT8_ZERO_SCALE, dtype=torch.float32)
    q = torch.round(w / scale).clamp(-127, 127).to(torch.int8)
    s = float(np.float32(scale.item()))
    return q.numpy(), TensorMeta(7, tuple(w.shape), L.QUANT_INT8_TENSOR, scale=s)


def _int8_channel(w: torch.Tensor) -> tuple[np.ndarray, TensorMeta]:
    if w.dim() <= 1:
        return _int8_tensor(w)
    rows = w.abs().reshape(w.shape[0], int(np.prod(w.shape[1:])))
    scales = rows.amax(dim=1) / 127 if rows.numel() else torch.zeros(w.shape[0])
    scales = torch.where(scales == 0, torch.tensor(_INT8_ZERO_SCALE, dtype=torch.float32), scales)
    q = torch.round(w / scales.reshape((-1,) + (1,) * (w.dim() - 1))).clamp(-127, 127).to(torch.int8)
    return q.numpy(), TensorMeta(7, tuple(w.shape), L.QUANT_INT8_CHANNEL, axis=0,
                                 scales=scales.numpy().astype("<f4"))


def _block_fp8(w: torch.Tensor) -> tuple[np.ndarray, TensorMeta]:
    flat = w.reshape(-1)
    padded = -(-flat.numel() // BLOCK) * BLOCK
    rows = torch.nn.functional.pad(flat, (0, padded - flat.numel())).reshape(-1, BLOCK)
    scales = rows.abs().amax(dim=1) / 127
    scales = torch.where(scales == 0, torch.tensor(_BLOCK_ZERO_SCALE, dtype=torch.float32), scales)
    q = torch.round(rows / scales[:, None]).clamp(-128, 127).to(torch.int8).reshape(-1)
    return q.numpy(), TensorMeta(7, (padded,), L.QUANT_BLOCK_FP8, block_size=BLOCK,
                                 original_shape=tuple(w.shape), scales=scales.numpy().astype("<f4"))


def _fp16(w: torch.Tensor) -> tuple[np.ndarray, TensorMeta]:
    return w.to(torch.float16).numpy().astype("<f2"), TensorMeta(2, tuple(w.shape), L.QUANT_NONE)


_ENCODERS = {L.QUANT_FP16: _fp16, L.QUANT_INT8_TENSOR: _int8_tensor,
             L.QUANT_INT8_CHANNEL: _int8_channel, L.QUANT_BLOCK_FP8: _block_fp8}


def _stored_as(meta: TensorMeta) -> str:
    if meta.quant == L.QUANT_NONE:
        return "FP16" if meta.dtype == 2 else "none"
    return L.QUANT_NAMES[meta.quant]


def quantize_parameters(nac: NacFile, method: Optional[str]) -> list[QuantReport]:
    """Quantise ``nac``'s parameters in place (module docstring); returns one report each."""
    code = method_code(method)
    name = "none" if method is None else str(method).lower()
    if nac.header.quant_method != L.QUANT_NONE:
        raise ValueError(f"the parameters are already quantised ({nac.header.quant_name}); "
                         "quantise the float model instead")
    reports, encoded = [], []
    for p in nac.params.values():
        orig = _original(p)            # loads external tensors (and their meta) if needed
        meta = p.meta
        if meta.quant != L.QUANT_NONE:
            raise ValueError(f"parameter {p.name!r} is already quantised ({L.QUANT_NAMES[meta.quant]})")
        float_bytes = int(orig.size) * L.storage_dtype(meta.dtype).itemsize
        if code == L.QUANT_NONE or meta.dtype not in FLOAT_DTYPES:
            reports.append(QuantReport(p.name, name, tuple(meta.logical_shape), 0.0, 0.0, meta.stored_nbytes,
                                       float_bytes, _stored_as(meta)))
            continue
        ref = orig                    # compared in float64 chunk by chunk (_max_error): no whole copy
        finite = np.isfinite(ref)
        skipped = ""
        if code != L.QUANT_FP16 and not finite.all():
            skipped = (f"{_count_non_finite(ref)}: an int8 scale cannot represent them "
                       f"(kept {L.dtype_name(meta.dtype)})")
        else:
            # torch wants writable memory: a copy unless the values are already this compile's own
            w = torch.from_numpy(orig if orig.dtype == np.float32 and orig.flags.writeable and
                                 orig.flags.c_contiguous else np.array(orig, dtype=np.float32))
            stored, new_meta = _ENCODERS[code](w)
            stored = np.ascontiguousarray(stored)
            with np.errstate(over="ignore"):   # an overflow is detected just below and reported
                decoded = dequantize(stored, new_meta)
            if decoded.shape != ref.shape:
                raise RuntimeError(f"{p.name!r}: the reader decodes {L.QUANT_NAMES[new_meta.quant]} to shape "
                                   f"{decoded.shape}, not {ref.shape}; refusing to write a file we misread")
            overflow = int(np.count_nonzero(finite & ~np.isfinite(decoded)))
            if overflow:
                skipped = (f"{overflow} finite value(s) would decode as inf (max |x| = "
                           f"{np.max(np.abs(ref[finite])):.4g}; kept {L.dtype_name(meta.dtype)})")
        if skipped:
            reports.append(QuantReport(p.name, name, tuple(meta.logical_shape), 0.0, 0.0, meta.stored_nbytes,
                                       float_bytes, _stored_as(meta), skipped))
            continue
        stored_bytes = int(stored.nbytes)
        if isinstance(p._payload, DeferredValues):    # encoded again when written (EncodedOnWrite)
            stored = EncodedOnWrite(p._payload, _ENCODERS[code], meta.dtype == 3)
        encoded.append((p, stored, new_meta))
        err, top = _max_error(decoded, ref, finite)
        reports.append(QuantReport(p.name, name, tuple(new_meta.logical_shape), err, err / top if top else 0.0,
                                   stored_bytes, float_bytes, _stored_as(new_meta)))
    for p, stored, new_meta in encoded:    # only once every tensor encoded: no half-quantised file
        _set_stored(p, stored, new_meta)
    nac.header.quant_method = code
    return reports


def _count_non_finite(ref: np.ndarray) -> str:
    kinds = [(int(np.count_nonzero(np.isposinf(ref))), "+inf"), (int(np.count_nonzero(np.isneginf(ref))), "-inf"),
             (int(np.count_nonzero(np.isnan(ref))), "NaN")]
    return "non-finite values (" + ", ".join(f"{n} {k}" for n, k in kinds if n) + ")"


_ERROR_CHUNK = 1 << 22          # elements compared at a time, in float64


def _max_error(decoded: np.ndarray, ref: np.ndarray, finite: np.ndarray) -> tuple[float, float]:
    """(max |decoded - original|, max |original|) over the finite values, in float64; an inf or
    NaN that does not decode to itself (same sign; NaN to NaN) makes the error infinite. Chunked,
    so a large weight is never widened whole."""
    if not ref.size:
        return 0.0, 0.0
    d, r, f = decoded.reshape(-1), ref.reshape(-1), finite.reshape(-1)
    err = top = 0.0
    for s in range(0, r.size, _ERROR_CHUNK):
        dc = d[s:s + _ERROR_CHUNK].astype(np.float64)
        rc = r[s:s + _ERROR_CHUNK].astype(np.float64)
        fc = f[s:s + _ERROR_CHUNK]
        if fc.all():
            err = max(err, float(np.max(np.abs(dc - rc))))
            top = max(top, float(np.max(np.abs(rc))))
            continue
        if fc.any():
            err = max(err, float(np.max(np.abs(dc[fc] - rc[fc]))))
            top = max(top, float(np.max(np.abs(rc[fc]))))
        special = ~fc
        same = (dc[special] == rc[special]) | (np.isnan(dc[special]) & np.isnan(rc[special]))
        if not same.all():
            err = float("inf")
    return err, top


class EncodedOnWrite(DeferredValues):
    """A deferred weight's quantised values, encoded again each time they are read (when the file
    is written). The first encoding gave the report and the metadata (scales) and was dropped: a
    large model's encoded weights together would not fit in memory. The arithmetic is the same
    float32 PyTorch, so the values are the same."""

    def __init__(self, source: DeferredValues, encoder, bfloat16: bool):
        self._source = source
        self._encoder = encoder
        self._bfloat16 = bfloat16

    def load(self) -> np.ndarray:
        orig = self._source.load()
        if self._bfloat16:
            orig = bf16_to_f32(orig)
        stored, _ = self._encoder(torch.from_numpy(np.array(orig, dtype=np.float32)))
        return np.ascontiguousarray(stored)


def _set_stored(p: Parameter, stored, meta: TensorMeta) -> None:
    """Point the parameter at new stored values (the writer and ``raw()`` read ``_payload``)."""
    p.meta = meta
    p._payload = stored
    p.data_offset = -1
    p.data_length = int(meta.stored_nbytes)


__all__ = ["QuantReport", "METHODS", "quantize_parameters", "method_code"]
