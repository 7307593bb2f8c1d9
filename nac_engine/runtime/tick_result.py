"""One tick's result and its summary statistics (torch-free to import).

Made by the debugger where the values live (the engine host), and made again from that summary
and the array on the Studio's side (:meth:`TickResult.from_summary`), so both hold the same
object without the Studio importing torch or recomputing statistics."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

#: The summary's fields, in the order :meth:`TickResult.summary` writes them.
SUMMARY_FIELDS = ("shape", "dtype", "min", "max", "mean", "std", "nan_count", "inf_count", "zero_count")
#: Statistics are computed over this many elements at a time.
STATS_CHUNK = 1 << 22


def as_numpy(v: Any) -> np.ndarray:
    """A value as numpy: a torch tensor (detached, bfloat16 widened), the first tensor of a
    multi-output tuple (as ``kernels.first_of_multi``), or anything ``np.asarray`` takes. Never
    imports torch: a torch value means it is loaded."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, tuple) and v and isinstance(v[0], torch.Tensor):
        v = v[0]
    if torch is not None and isinstance(v, torch.Tensor):
        t = v.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    return np.asarray(v)


@dataclass(frozen=True)
class TickResult:
    """One tick's result and its summary. Statistics are over the finite values (None when the
    result is not numeric or has none)."""
    tick: int
    name: str
    value: Any
    tensor: Optional[np.ndarray] = field(init=False, default=None)
    shape: Optional[tuple] = field(init=False, default=None)
    dtype: Optional[str] = field(init=False, default=None)
    min: Optional[float] = field(init=False, default=None)
    max: Optional[float] = field(init=False, default=None)
    mean: Optional[float] = field(init=False, default=None)
    std: Optional[float] = field(init=False, default=None)
    nan_count: int = field(init=False, default=0)
    inf_count: int = field(init=False, default=0)
    zero_count: int = field(init=False, default=0)

    def __post_init__(self):
        if self.value is None or type(self.value).__name__ == "NotTaken" or isinstance(self.value, _Summarised):
            return
        arr = as_numpy(self.value)
        put = lambda k, v: object.__setattr__(self, k, v)   # noqa: E731 (frozen dataclass)
        put("tensor", arr)
        put("shape", tuple(arr.shape))
        put("dtype", str(arr.dtype))
        if arr.dtype.kind not in "biufc":
            return
        # in chunks: a 32000x2048 embedding is never widened to float64 whole (two passes, so
        # the deviation is summed around the mean, as numpy's std does)
        flat = arr.reshape(-1)
        chunks = range(0, flat.size, STATS_CHUNK)

        def widened(start: int) -> np.ndarray:
            part = flat[start:start + STATS_CHUNK]
            return (np.abs(part) if part.dtype.kind == "c" else part).astype(np.float64)
        nan = inf = zero = n = 0
        total, lo, hi = 0.0, None, None
        for start in chunks:
            a = widened(start)
            nan += int(np.isnan(a).sum())
            inf += int(np.isinf(a).sum())
            zero += int((flat[start:start + STATS_CHUNK] == 0).sum())
            f = a[np.isfinite(a)]
            if f.size:
                n += f.size
                total += float(f.sum())
                lo = float(f.min()) if lo is None else min(lo, float(f.min()))
                hi = float(f.max()) if hi is None else max(hi, float(f.max()))
        put("nan_count", nan)
        put("inf_count", inf)
        put("zero_count", zero)
        if n:
            mean = total / n
            squares = 0.0
            for start in chunks:
                a = widened(start)
                squares += float(np.square(a[np.isfinite(a)] - mean).sum())
            put("min", lo)
            put("max", hi)
            put("mean", mean)
            put("std", float(np.sqrt(squares / n)))

    def summary(self) -> dict:
        """Everything but the value, as plain data (``tensor`` is the array itself)."""
        out = {"tick": self.tick, "name": self.name, "tensor": self.tensor,
               "text": None if self.tensor is not None else repr(self.value)[:200]}
        for k in SUMMARY_FIELDS:
            v = getattr(self, k)
            out[k] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_summary(cls, d: dict) -> "TickResult":
        """The result :meth:`summary` described (its ``value`` is the tensor, or the value's text)."""
        tensor = d.get("tensor")
        r = cls(int(d.get("tick", -1)), str(d.get("name", "")),
                _Summarised(d.get("text")) if tensor is None else _Summarised(None))
        put = lambda k, v: object.__setattr__(r, k, v)   # noqa: E731 (frozen dataclass)
        if tensor is not None:
            put("value", tensor)
            put("tensor", np.asarray(tensor))
        else:
            put("value", d.get("text"))
        for k in SUMMARY_FIELDS:
            v = d.get(k)
            put(k, tuple(v) if k == "shape" and v is not None else v)
        return r


class _Summarised:
    """Marks a TickResult whose fields come from a summary: ``__post_init__`` computes nothing."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text
