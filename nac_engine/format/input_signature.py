"""The input signature: this project's RSRC extension recording what a compiled file expects.

``nac compile`` stores the example inputs' names, shapes, dtypes, kinds and value ranges as the
resource ``nac-studio/input-signature`` (UTF-8 JSON, ``{"version": 1, "inputs": [...]}``), so
``nac run``, ``nac sim`` and the Studio's Inputs dialog can build inputs for a file without being
told. It is an ordinary RSRC entry: a reader that ignores it still runs the file; files without it
(the reference compiler's) simply have no default inputs.

The payload is untrusted like every other byte of a file: sizes, counts, ranks, dimensions and
element totals are bounded before anything is allocated, and every defect is a
``NacFormatError("RSRC", offset, reason)`` at the resource's data offset.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Iterable, Optional

import numpy as np

from ..errors import NacFormatError
from .resource_table import find_resource as _find

RESOURCE_NAME = "nac-studio/input-signature"
VERSION = 1
KINDS = ("input", "buffer", "constant")
DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
          "complex64", "complex128")
FILLS = ("random", "zeros", "ones")
MAX_PAYLOAD_BYTES = 1 << 20
MAX_INPUTS = 4096
MAX_RANK = 16
MAX_DIM = (1 << 31) - 1
MAX_ELEMENTS = 1 << 28            # per input: 1 GiB of float32
MAX_TOTAL_BYTES = 2 << 30         # all inputs together: what make_inputs may allocate for a hostile file
MAX_NAME = 1024


@dataclass(frozen=True)
class InputSpec:
    """One value a run needs: name, shape, numpy dtype name, kind, and the example's value range."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str = "input"
    low: Optional[float] = None
    high: Optional[float] = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def spec_from_example(name: str, value, kind: str = "input") -> Optional[InputSpec]:
    """The spec of an example tensor/array (``None`` when it is not a tensor or its dtype has no
    numpy name, e.g. bfloat16). The range is the example's min/max, so random token ids drawn
    from it stay inside the vocabulary the example used."""
    try:
        import torch
        if isinstance(value, torch.Tensor):
            if value.dtype == torch.bfloat16 or value.is_complex() and value.dtype not in (torch.complex64,
                                                                                           torch.complex128):
                return None
            value = value.detach().cpu().numpy()
    except ImportError:      # pragma: no cover - torch is always there when compiling
        pass
    if not isinstance(value, np.ndarray) or value.dtype.name not in DTYPES:
        return None
    low = high = None
    if value.size and value.dtype.kind in "biuf":
        lo, hi = value.min(), value.max()
        if np.isfinite(lo) and np.isfinite(hi):
            low, high = float(lo), float(hi)
    return InputSpec(str(name), tuple(int(d) for d in value.shape), value.dtype.name, kind, low, high)


def encode_input_signature(specs: Iterable[InputSpec]) -> bytes:
    """The resource payload for ``specs`` (compact, key-sorted JSON: same specs, same bytes)."""
    items = []
    for s in specs:
        _check_spec(s, lambda reason: ValueError(reason))
        items.append({"name": s.name, "shape": list(s.shape), "dtype": s.dtype, "kind": s.kind,
                      "low": s.low, "high": s.high})
    if len(items) > MAX_INPUTS:
        raise ValueError(f"{len(items)} inputs; the signature holds at most {MAX_INPUTS}")
    data = json.dumps({"version": VERSION, "inputs": items}, sort_keys=True, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")
    if len(data) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"input signature is {len(data)} bytes; at most {MAX_PAYLOAD_BYTES}")
    return data


def set_input_signature(nac, specs: Iterable[InputSpec]) -> None:
    """Store ``specs`` in ``nac.rsrc`` (replacing an earlier signature, keeping other resources)."""
    from .model import Resource
    payload = encode_input_signature(specs)
    kept = [r for r in (nac.rsrc or []) if r.name != RESOURCE_NAME]
    nac.rsrc = kept + [Resource(RESOURCE_NAME, _payload=payload)]


def find_resource(nac, name: str):
    """The RSRC entry called ``name``, or ``None``."""
    return _find(getattr(nac, "rsrc", None), name)


def resource_json(nac, name: str, max_bytes: int, versions: tuple = (VERSION,)) -> tuple[Optional[dict], int]:
    """(decoded JSON object, data offset) of resource ``name``, or (None, -1) when absent.
    Size, encoding, syntax, nesting depth and the top-level ``version`` (one of ``versions``)
    are checked here."""
    r = find_resource(nac, name)
    if r is None:
        return None, -1
    off = max(r.data_offset, 0)
    size = r.data_length if r._payload is None else len(r._payload)
    if size > max_bytes:
        raise NacFormatError("RSRC", off, f"{name}: {size} bytes; at most {max_bytes} are accepted")
    try:
        value = json.loads(r.data.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as e:
        raise NacFormatError("RSRC", off + e.start, f"{name}: not UTF-8 ({e.reason})") from None
    except RecursionError:
        raise NacFormatError("RSRC", off, f"{name}: JSON nested too deeply") from None
    except ValueError as e:
        pos = getattr(e, "pos", 0) or 0
        raise NacFormatError("RSRC", off + pos, f"{name}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise NacFormatError("RSRC", off, f"{name}: expected a JSON object, found {type(value).__name__}")
    if value.get("version") not in versions:
        known = " and ".join(str(v) for v in versions)
        raise NacFormatError("RSRC", off, f"{name}: version {value.get('version')!r} is not supported "
                                          f"(this reader knows version {known})")
    return value, off


def _reject_constant(token: str):
    raise ValueError(f"{token} is not a finite number")


def read_input_signature(nac) -> Optional[list[InputSpec]]:
    """The file's input signature, ``None`` when it has none (e.g. the reference compiler's files)."""
    value, off = resource_json(nac, RESOURCE_NAME, MAX_PAYLOAD_BYTES)
    if value is None:
        return None

    def fail(reason: str) -> NacFormatError:
        return NacFormatError("RSRC", off, f"{RESOURCE_NAME}: {reason}")

    items = value.get("inputs")
    if not isinstance(items, list):
        raise fail("'inputs' must be a list")
    if len(items) > MAX_INPUTS:
        raise fail(f"{len(items)} inputs; at most {MAX_INPUTS}")
    specs = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise fail(f"inputs[{i}] is not an object")
        shape = item.get("shape")
        if not isinstance(shape, list) or len(shape) > MAX_RANK:
            raise fail(f"inputs[{i}].shape must be a list of at most {MAX_RANK} dimensions")
        if not all(type(d) is int for d in shape):
            raise fail(f"inputs[{i}].shape must hold integers")
        low, high = item.get("low"), item.get("high")
        for key, v in (("low", low), ("high", high)):
            if v is not None and (type(v) not in (int, float) or not math.isfinite(v)):
                raise fail(f"inputs[{i}].{key} must be a finite number or null")
        spec = InputSpec(item.get("name"), tuple(shape), item.get("dtype"), item.get("kind", "input"),
                         None if low is None else float(low), None if high is None else float(high))
        _check_spec(spec, lambda reason: fail(f"inputs[{i}]: {reason}"))
        specs.append(spec)
    _check_total(specs, fail)
    return specs


def _check_total(specs: list[InputSpec], error) -> None:
    total = sum(s.numel * np.dtype(s.dtype).itemsize for s in specs)
    if total > MAX_TOTAL_BYTES:
        raise error(f"the inputs add up to {total} bytes; at most {MAX_TOTAL_BYTES}")


def _check_spec(s: InputSpec, error) -> None:
    if not isinstance(s.name, str) or not s.name or len(s.name) > MAX_NAME:
        raise error(f"name must be a non-empty string of at most {MAX_NAME} characters")
    if s.dtype not in DTYPES:
        raise error(f"{s.name}: dtype {s.dtype!r} is not one of {', '.join(DTYPES)}")
    if s.kind not in KINDS:
        raise error(f"{s.name}: kind {s.kind!r} is not one of {', '.join(KINDS)}")
    if not isinstance(s.shape, tuple) or len(s.shape) > MAX_RANK:
        raise error(f"{s.name}: rank {len(s.shape)} is above {MAX_RANK}")
    if any(type(d) is not int or d < 0 or d > MAX_DIM for d in s.shape):
        raise error(f"{s.name}: dimensions must be integers in 0..{MAX_DIM}, got {list(s.shape)}")
    if s.numel > MAX_ELEMENTS:
        raise error(f"{s.name}: {s.numel} elements; at most {MAX_ELEMENTS}")
    if s.low is not None and s.high is not None and s.low > s.high:
        raise error(f"{s.name}: low {s.low} is above high {s.high}")


def make_inputs(specs: Iterable[InputSpec], seed: int = 0, fill: str = "random") -> dict[str, np.ndarray]:
    """Arrays for ``specs``, deterministic in (specs, seed, fill). ``random``: floats uniform in the
    recorded range (standard normal without one), integers uniform in the recorded range inclusive
    (0 or 1 without one), booleans fair coins. ``zeros``/``ones``: constant."""
    if fill not in FILLS:
        raise ValueError(f"fill must be one of {', '.join(FILLS)}, not {fill!r}")
    specs = list(specs)
    for s in specs:
        _check_spec(s, lambda reason: ValueError(reason))
    _check_total(specs, lambda reason: ValueError(reason))
    out = {}
    for i, s in enumerate(specs):
        dtype = np.dtype(s.dtype)
        if fill == "zeros":
            out[s.name] = np.zeros(s.shape, dtype)
            continue
        if fill == "ones":
            out[s.name] = np.ones(s.shape, dtype)
            continue
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, i])     # one stream per input: order-stable
        if dtype.kind == "b":
            out[s.name] = rng.integers(0, 2, size=s.shape).astype(bool)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            lo = int(s.low) if s.low is not None else 0
            hi = int(s.high) if s.high is not None else 1
            lo, hi = max(lo, int(info.min)), min(hi, int(info.max))
            out[s.name] = rng.integers(lo, hi, size=s.shape, endpoint=True).astype(dtype)
        elif dtype.kind == "c":
            out[s.name] = (rng.standard_normal(s.shape) + 1j * rng.standard_normal(s.shape)).astype(dtype)
        elif s.low is not None and s.high is not None and s.high > s.low:
            out[s.name] = rng.uniform(s.low, s.high, size=s.shape).astype(dtype)
        elif s.low is not None and s.high is not None:
            out[s.name] = np.full(s.shape, s.low, dtype)
        else:
            out[s.name] = rng.standard_normal(s.shape).astype(dtype)
    return out


def describe(spec: InputSpec) -> str:
    """``NAME=1x128:int64`` — the form ``nac sim --input`` accepts."""
    return f"{spec.name}={'x'.join(str(d) for d in spec.shape) or '1'}:{spec.dtype}"


def signature_inputs(nac, seed: int = 0, fill: str = "random") -> Optional[dict[str, np.ndarray]]:
    """``make_inputs`` of the file's recorded signature: the default inputs of ``nac run``/``nac diff``
    and the Studio; ``None`` when the file records no signature."""
    specs = read_input_signature(nac)
    return None if specs is None else make_inputs(specs, seed=seed, fill=fill)


def missing_inputs_hint(missing=()) -> str:
    """The one-line advice a command prints when a file without a signature lacks inputs."""
    names = [getattr(s, "name", None) for s in missing]
    example = next((n for n in names if n), "x")
    return (f"; this file records no input signature (compiled elsewhere): give each input with "
            f"--input NAME=SHAPE:DTYPE (e.g. --input {example}=1x128:int64) or --input NAME=x.npy")
