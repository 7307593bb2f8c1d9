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
        a = arr.astype(np.float64) if arr.dtype.kind != "c" else np.abs(arr)
        finite = np.isfinite(a)
        put("nan_count", int(np.isnan(a).sum()))
        put("inf_count", int(np.isinf(a).sum()))
        put("zero_count", int((arr == 0).sum()))
        f = a[finite]
        if f.size:
            put("min", float(f.min()))
            put("max", float(f.max()))
            put("mean", float(f.mean()))
            put("std", float(f.std()))

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
