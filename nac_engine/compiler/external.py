"""Write a compiled file: the ``.nac`` and, for external weights, ``<base>.safetensors`` beside it.

API
---
``write_compiled(nac, path) -> list[str]`` writes ``path`` (atomically) and, when
``nac.header.weights_internal`` is False, the weights first to ``<base>.safetensors`` (also
atomically: temp file in the same directory, fsync, rename), so a written ``.nac`` never names
weights that are not there yet. Returns the paths written, weights first.

The safetensors file (research §11)
-----------------------------------
* One tensor per parameter, keyed by its DATA name, holding the *stored* values: int8 for the
  INT8 and BLOCK_FP8 encodings (BLOCK_FP8 flat and padded), float16 for FP16, otherwise the
  parameter's own dtype. bfloat16 is widened to float32 — exactly, but the dtype changes —
  because our reader (and the reference runtime) read these files through NumPy, which has no
  bfloat16.
* Quantisation parameters go to a single ``__metadata__`` key, ``"metadata"``, holding the JSON
  object ``{tensor name: {"quant_type": ..., ...}}`` with the reference compiler's per-tensor
  fields (``scale``; ``axis`` + ``scales``; ``block_size`` + ``original_shape`` + ``scales``).
  That is the one key the reference *runtime* reads; the reference *compiler* writes one key
  per tensor instead, which its own runtime never finds, so its quantised external files load
  as raw int8 (research §11). Our reader reads all three conventions, this one included.
  Unquantised and FP16 tensors get no entry (their dtype says everything).
* Scales are written with 9 significant digits, which recovers every float32 exactly; a
  non-finite scale is refused (JSON cannot carry it portably). safetensors readers refuse a
  header over 100 MB, so a file whose header would exceed that is refused before writing
  (keep such weights internal).
* Written by ``format.safetensors_file.write_safetensors``, one tensor at a time in DATA order:
  the header comes from the metadata, and each weight is read (a deferred one from its
  checkpoint, ``compiler/deferred.py``) only when its turn comes, so memory holds one weight.

Note: the reference runtime prefers a ``<base>.safetensors`` beside an *internal-weights*
``.nac`` over the file's own DATA, without dequantising. Writing internal weights therefore
leaves any such neighbour alone but the reference runtime would read it; ours does not.
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..format import layout as L
from ..format.model import NacFile, Parameter
from ..format.quant import bf16_to_f32
from ..format.safetensors_file import Pending, dtype_name, header_bytes, write_safetensors
from ..format.writer import atomic_produce, atomic_write, encode

METADATA_KEY = "metadata"


def weights_path_for(path: str) -> str:
    """``model.nac`` → ``model.safetensors`` (what the reader looks for)."""
    return os.path.splitext(os.fspath(path))[0] + ".safetensors"


def _scales(values, name: str) -> list:
    arr = np.asarray(values, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"parameter {name!r} has a non-finite quantisation scale; it cannot be stored externally")
    return [float(f"{x:.9g}") for x in arr.tolist()]


def quant_entry(p: Parameter) -> dict | None:
    """The JSON description of ``p``'s quantisation, or None when its dtype says it all."""
    m = p.meta
    if m.quant == L.QUANT_INT8_TENSOR:
        return {"quant_type": "INT8_TENSOR", "scale": _scales([np.float32(m.scale)], p.name)[0]}
    if m.quant == L.QUANT_INT8_CHANNEL:
        return {"quant_type": "INT8_CHANNEL", "scales": _scales(m.scales, p.name), "axis": int(m.axis or 0)}
    if m.quant == L.QUANT_BLOCK_FP8:
        return {"quant_type": "BLOCK_FP8", "block_size": int(m.block_size or 64),
                "original_shape": [int(d) for d in (m.original_shape or ())],
                "scales": _scales(m.scales, p.name)}
    if m.quant != L.QUANT_NONE:
        raise ValueError(f"parameter {p.name!r}: quantisation code {m.quant} has no external form")
    return None


def _stored(p: Parameter) -> np.ndarray:
    arr = np.asarray(p.raw())
    if p.meta.dtype == 3:                          # bfloat16 bits → float32 (exact)
        arr = bf16_to_f32(arr)
    return np.ascontiguousarray(arr.reshape(p.meta.shape))


def safetensors_entries(nac: NacFile) -> tuple[list, dict]:
    """(:class:`Pending` tensors in DATA order, ``__metadata__``) for ``nac``'s parameters: the
    header comes from the metadata alone; each tensor's values are read when it is written."""
    entries, quant, names = [], {}, set()
    for p in nac.params.values():
        if p.name in names:
            raise ValueError(f"two parameters are named {p.name!r}; safetensors keys must be unique")
        names.add(p.name)
        if p.meta is None:
            p.raw()                                # loads the meta of an external tensor
        m = p.meta
        if m.dtype == 3:
            dtype = "F32"
        elif m.dtype in L.NUMPY_STORAGE:
            dtype = dtype_name(L.storage_dtype(m.dtype))
        else:
            raise ValueError(f"parameter {p.name!r}: dtype code {m.dtype} has no safetensors equivalent")
        entries.append(Pending(p.name, dtype, tuple(m.shape), lambda p=p: _stored(p)))
        entry = quant_entry(p)
        if entry is not None:
            quant[p.name] = entry
    metadata = {METADATA_KEY: json.dumps(quant, separators=(",", ":"))} if quant else {}
    header_bytes(entries, metadata)                # refuses an oversized header before anything is written
    return entries, metadata


def write_compiled(nac: NacFile, path, progress=None) -> list[str]:
    """Write ``nac`` to ``path`` and its external weights beside it (module docstring).
    ``progress(name, nbytes)`` is called after each weight is written."""
    path = os.fspath(path)
    data = encode(nac)                 # encode first: a file that cannot be encoded writes nothing
    written = []
    if not nac.header.weights_internal:
        entries, metadata = safetensors_entries(nac)
        weights = weights_path_for(path)
        atomic_produce(weights, lambda fh, _tmp: write_safetensors(fh, entries, metadata, progress),
                       prefix=".nac-weights-")
        written.append(weights)
    atomic_write(path, data)
    written.append(path)
    return written


__all__ = ["write_compiled", "weights_path_for", "safetensors_entries", "quant_entry", "METADATA_KEY"]
