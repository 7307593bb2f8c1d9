"""What a user may say about an input and a budget: ``1x128:int64``, ``256M``, and the limits.

Shared by the shape pass (``shapes``), its torch session (``_shape_session``), the simulator's
command line and the topology reader; torch-free."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..format import layout as L

MAX_ELEMENTS = 1 << 40                 # elements of one tensor, meta or real
DEFAULT_CPU_BUDGET = 256 << 20         # bytes of real values shape propagation may compute


class ShapeBudgetError(ValueError):
    """Shape propagation would exceed a limit: a tensor of more than :data:`MAX_ELEMENTS`
    elements, or real values over the CPU budget. ``tick``/``op`` name the instruction whose
    value does not fit, ``nbytes`` its size in bytes."""

    def __init__(self, message: str, tick: int, op: str, nbytes: int):
        super().__init__(message)
        self.tick, self.op, self.nbytes = tick, op, nbytes


_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_size(value: Any) -> int:
    """A byte count: an int, or text such as ``"4096"``, ``"256M"``, ``"256MiB"``, ``"1G"``."""
    if isinstance(value, bool):
        raise ValueError(f"size {value!r}: expected a byte count")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size {value}: must not be negative")
        return value
    m = _SIZE.match(str(value))
    if not m:
        raise ValueError(f"size {value!r}: expected bytes such as 4096, 256M or 1G")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


@dataclass(frozen=True)
class InputSpec:
    shape: tuple
    dtype: str = "float32"


_SPEC = re.compile(r"^\s*(scalar|\d+(?:\s*[x,]\s*\d+)*)\s*(?::\s*([A-Za-z0-9_]+))?\s*$")


def parse_input_spec(text: str) -> InputSpec:
    """``"1x128:int64"`` → InputSpec((1, 128), "int64")."""
    m = _SPEC.match(text)
    if not m:
        raise ValueError(f"input spec {text!r}: expected SHAPE[:DTYPE] such as 1x128:int64")
    dims = () if m.group(1) == "scalar" else tuple(int(x) for x in re.split(r"\s*[x,]\s*", m.group(1)))
    if any(d > MAX_ELEMENTS for d in dims):
        raise ValueError(f"input spec {text!r}: dimension too large")
    n = 1
    for d in dims:
        n *= d
    if n > MAX_ELEMENTS:
        raise ValueError(f"input spec {text!r}: {n:,} elements; at most 2**40")
    dtype = m.group(2) or "float32"
    if dtype.startswith("torch."):
        dtype = dtype[6:]
    if dtype not in L.DTYPE_CODES and dtype not in _EXTRA_DTYPES:
        known = ", ".join(sorted(set(L.DTYPE_CODES) | _EXTRA_DTYPES))
        raise ValueError(f"input spec {text!r}: unknown dtype {dtype!r} (one of: {known})")
    return InputSpec(dims, dtype)


_EXTRA_DTYPES = {"uint16", "uint32", "uint64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"}
