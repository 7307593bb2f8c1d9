"""What a user may say about an input and a budget: ``1x128:int64``, ``256M``, and the limits.

Shared by the shape pass (``shapes``), its torch session (``_shape_session``), the simulator's
command line and the topology reader; torch-free."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

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


#: Values typed as text (a JSON list) at most: a debugging input, not a dataset.
LITERAL_MAX_CHARS = 1 << 20


def is_literal(text: str) -> bool:
    """Whether ``text`` gives the values themselves (``[1, 15043, 29892]``) rather than a shape."""
    return text.lstrip().startswith("[")


def parse_literal(text: str, dtype=None, shape=None):
    """``"[1, 15043, 29892]"`` or ``"[[0.5, 1], [2, 3]]"`` → a numpy array: JSON numbers (no
    ``eval``), rectangular, as ``dtype`` (default: int64 for whole numbers, else float32) and,
    when ``shape`` is given and only the count agrees (token ids typed flat for ``[1, 32]``),
    reshaped to it. ValueError says what is wrong."""
    import json
    if len(text) > LITERAL_MAX_CHARS:
        raise ValueError(f"values: {len(text):,} characters; type at most {LITERAL_MAX_CHARS:,} (use an .npy file)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"values {text[:40]!r}: not a list of numbers ({e.msg} at character {e.pos})") from None
    except RecursionError:
        raise ValueError("values: lists nested too deep") from None
    try:
        arr = np.asarray(data)
    except ValueError:
        raise ValueError("values: the rows are not all the same length (or nested too deep)") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise ValueError("values: give numbers in lists of equal length, e.g. [[1, 2], [3, 4]]")
    if dtype is None:
        dtype = {"b": "bool", "i": "int64", "u": "int64"}.get(arr.dtype.kind, "float32")
    np_dtype = "float32" if dtype == "bfloat16" else dtype
    try:
        arr = arr.astype(np_dtype)
    except TypeError:
        raise ValueError(f"values: not a numpy dtype {dtype!r}") from None
    if shape is not None and tuple(arr.shape) != tuple(shape) and arr.size == int(np.prod(shape)):
        arr = arr.reshape(tuple(int(d) for d in shape))
    return arr


#: Inputs that go with a tokenizer's ``input_ids``: name -> the value for ``real`` tokens out of
#: ``n`` (the rest padding), which is also what transformers assumes when one is not given (a
#: mask of ones, type 0, positions 0..n-1).
TEXT_COMPANIONS = {
    "attention_mask": lambda real, n: (np.arange(n) < real).astype(np.int64),
    "token_type_ids": lambda real, n: np.zeros(n, np.int64),
    "position_ids": lambda real, n: np.arange(n, dtype=np.int64),
}


def companion_value(name: Optional[str], real: int, n: int, dtype: Optional[str] = None) -> Optional[np.ndarray]:
    """The ``[1, n]`` value of companion input ``name`` for ``real`` tokens out of ``n``, as the
    file's recorded integer or bool ``dtype`` (int64 otherwise); None when ``name`` is no companion."""
    make = TEXT_COMPANIONS.get((name or "").lower())
    if make is None:
        return None
    if not dtype or not (dtype.startswith(("int", "uint")) or dtype == "bool"):
        dtype = "int64"
    return make(real, n).reshape(1, n).astype(dtype)


def fill_companions(names, inputs: dict, dtypes=None) -> list[str]:
    """Give each companion of ``inputs["input_ids"]`` among ``names`` that ``inputs`` lacks its
    default (all tokens real); returns the names filled. ``dtypes``: name -> recorded dtype."""
    shape = getattr(inputs.get("input_ids"), "shape", None)
    if shape is None or len(shape) != 2:
        return []
    batch, n = shape
    filled = []
    for name in names:
        value = None if name in inputs else companion_value(name, n, n, (dtypes or {}).get(name))
        if value is not None:
            inputs[name] = np.tile(value, (batch, 1))
            filled.append(name)
    return filled
