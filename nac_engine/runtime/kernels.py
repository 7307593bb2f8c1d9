"""Kernels: the standard NAC ops by hand, every ``aten.<op>.<overload>`` by lookup.

Semantics are PyTorch eager's, not the reference runtime's (research note §16.3 lists its
deviations: tanh-GELU, the ``nac.add`` channel hack, squeeze-as-no-op, float64 zeros/ones).

How NAC encodes arguments (research note §6.2, §16.3) and what we do about it:

* Arguments arrive in the export node's order, *args then kwarg values, without names*.
  :func:`bind` matches them to the ATen schema by type: each value goes to the next schema
  argument that can take it, skipping arguments that have defaults. So
  ``_to_copy(x, "float32")`` binds ``"float32"`` to ``dtype`` and
  ``arange(8, "int64", "cpu", False)`` skips ``layout``.
* dtype/device/layout/memory-format objects were stored as strings without ``torch.``
  (``"float32"``, ``"cpu"``, ``"strided"``, ``"contiguous_format"``); they become torch objects
  where the schema wants one. Device strings map to the session's device: a file compiled
  on a GPU still runs here.
* Lists arrive as tuples; a bare int where the schema wants ``int[]`` is wrapped.
* The reference compiler canonicalises some ATen ops into standard ones with reordered
  arguments (research §4.3): ``rsub(self, other)`` arrives as ``nac.sub(other, self)``,
  ``masked_fill(self, mask, value)`` as ``nac.where(mask, value, self)``,
  ``squeeze(x[, dim])`` as ``nac.view(x[, dim])``, ``copy(self, src)`` as ``nac.clone``.
  The kernels below undo each of these.

Kernels are plain callables ``fn(*args)``. :class:`Kernels` resolves an op name to one, with
a cache; nothing here knows about instructions or files.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Optional

import torch

from ..isa.coerce import InexactCoercion, exact, is_scalar, try_exact
from ..isa.optable import custom_op_name
from ..format.model import is_tensor_placeholder  # noqa: F401  (re-exported: session reads it from here)
from .errors import NotSupported

# --------------------------------------------------------------------------- string constants
_DTYPES = {name: getattr(torch, name) for name in dir(torch)
           if isinstance(getattr(torch, name, None), torch.dtype)}
_LAYOUTS = {name: getattr(torch, name) for name in ("strided", "sparse_coo", "sparse_csr", "sparse_csc",
                                                    "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged")
            if isinstance(getattr(torch, name, None), torch.layout)}
_MEMORY_FORMATS = {name: getattr(torch, name) for name in ("contiguous_format", "channels_last",
                                                           "channels_last_3d", "preserve_format")
                   if isinstance(getattr(torch, name, None), torch.memory_format)}
_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hpu", "mtia", "privateuseone")


def _strip_torch(s: str) -> str:
    return s[6:] if s.startswith("torch.") else s


def to_dtype(v: Any) -> Optional[torch.dtype]:
    """``"float32"`` / ``"torch.int64"`` / a torch.dtype → torch.dtype; anything else → None."""
    if isinstance(v, torch.dtype):
        return v
    if isinstance(v, str):
        return _DTYPES.get(_strip_torch(v))
    return None


def to_layout(v: Any) -> Optional[torch.layout]:
    if isinstance(v, torch.layout):
        return v
    if isinstance(v, str):
        return _LAYOUTS.get(_strip_torch(v))
    return None


def to_memory_format(v: Any) -> Optional[torch.memory_format]:
    if isinstance(v, torch.memory_format):
        return v
    if isinstance(v, str):
        return _MEMORY_FORMATS.get(_strip_torch(v))
    return None


def is_device_string(v: Any) -> bool:
    if isinstance(v, torch.device):
        return True
    if not isinstance(v, str):
        return False
    return v.split(":", 1)[0] in _DEVICE_TYPES


# --------------------------------------------------------------------------- scalar helpers
def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, complex)) and not isinstance(v, bool)


def _as_int(v: Any) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, torch.Tensor) and v.ndim == 0 and not v.dtype.is_floating_point \
            and not v.dtype.is_complex and v.dtype != torch.bool:
        return int(v.item())
    return None


def _as_int_list(v: Any) -> Optional[list]:
    if isinstance(v, (tuple, list, torch.Size)):
        out = [_as_int(x) for x in v]
        return None if any(x is None for x in out) else out
    one = _as_int(v)
    return None if one is None else [one]


def _scalar(v: Any) -> Any:
    """Python scalar from a number or a 0-d tensor (symbolic-shape arithmetic can give either)."""
    if isinstance(v, torch.Tensor) and v.ndim == 0:
        return v.item()
    return v


# --------------------------------------------------------------------------- schema binding
_NO = object()        # "this schema argument cannot take this value"
_DEFAULT = object()   # "None for a non-optional argument with a default: leave the default"


class _Param:
    """One schema argument, reduced to what binding needs."""

    __slots__ = ("name", "kind", "optional", "has_default", "kwarg_only")

    def __init__(self, arg):
        t = str(getattr(arg, "real_type", arg.type))
        optional = t.startswith("Optional[")
        if optional:
            t = t[len("Optional["):-1]
        self.name = arg.name
        self.kind = t
        self.optional = optional
        self.has_default = arg.has_default_value() if hasattr(arg, "has_default_value") \
            else arg.default_value is not None
        self.kwarg_only = arg.kwarg_only

    @property
    def skippable(self) -> bool:
        return self.has_default or self.optional and self.kwarg_only


def _convert(p: _Param, v: Any, device: torch.device) -> Any:
    """``v`` converted for schema argument ``p``, or ``_NO``."""
    k = p.kind
    if v is None:
        if p.optional:
            return None
        return _DEFAULT if p.has_default else _NO
    if k == "Tensor":
        if isinstance(v, torch.Tensor):
            return v
        if isinstance(v, (bool, int, float, complex)):
            return torch.tensor(v, device=device)
        return _NO
    if k == "List[Tensor]":
        if isinstance(v, (tuple, list)) and all(isinstance(x, torch.Tensor) for x in v):
            return list(v)
        return _NO
    if k == "List[Optional[Tensor]]":
        if isinstance(v, (tuple, list)) and all(x is None or isinstance(x, torch.Tensor) for x in v):
            return list(v)
        return _NO
    if k in ("List[int]", "List[SymInt]"):
        out = _as_int_list(v)
        return _NO if out is None else out
    if k == "List[float]":
        if isinstance(v, (tuple, list)) and all(_is_number(_scalar(x)) for x in v):
            return [float(_scalar(x)) for x in v]
        if _is_number(_scalar(v)):
            return [float(_scalar(v))]
        return _NO
    if k == "List[bool]":
        if isinstance(v, (tuple, list)) and all(isinstance(x, (bool, int)) for x in v):
            return [bool(x) for x in v]
        return _NO
    if k in ("int", "SymInt"):
        out = _as_int(v)
        return _NO if out is None else out
    if k == "float":
        s = _scalar(v)
        return float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) else _NO
    if k == "bool":
        s = _scalar(v)
        return s if isinstance(s, bool) else _NO
    if k == "number":            # Scalar
        s = _scalar(v)
        return s if isinstance(s, (bool, int, float, complex)) else _NO
    if k == "ScalarType":
        d = to_dtype(v)
        return _NO if d is None else d
    if k == "Layout":
        d = to_layout(v)
        return _NO if d is None else d
    if k == "MemoryFormat":
        d = to_memory_format(v)
        return _NO if d is None else d
    if k == "Device":
        return device if is_device_string(v) else _NO
    if k == "str":
        return v if isinstance(v, str) else _NO
    # Generator, Dimname, Storage, ...: pass through only exact Python objects of no NAC type
    return _NO


def _schema_params(op) -> list:
    cached = getattr(op, "_nac_params", None)
    if cached is None:
        cached = [_Param(a) for a in op._schema.arguments]
        try:
            op._nac_params = cached
        except AttributeError:     # pragma: no cover - OpOverload normally takes attributes
            pass
    return cached


def bind(op, args: tuple, device: torch.device = torch.device("cpu")) -> tuple[list, dict]:
    """Match NAC's unnamed argument list to ``op``'s schema by type (see the module docstring).

    Returns ``(positional, keyword)`` ready for ``op(*positional, **keyword)``. Raises
    TypeError naming the schema when the values do not fit."""
    params = _schema_params(op)
    try:
        bound = _bind_greedy(op, params, args, device)
    except TypeError:
        # Compilers flatten a Tensor[] argument into one slot per tensor (research §5.2:
        # cat([a, b], 1) is stored as a, b, 1). Regroup by searching how many items each
        # tensor-list argument takes; only tried when the plain binding fails.
        # First without turning Python scalars into Tensor arguments: in index_put(x, i, v,
        # True) the list must stop before v, not swallow it and hand True to `values`.
        bound = _bind_regrouped(params, args, device, strict=True)
        if bound is None:
            bound = _bind_regrouped(params, args, device, strict=False)
        if bound is None:
            bound = _bind_coerced(op, params, args, device)
        if bound is None:
            raise
    return _arrange(params, bound)


_SCALAR_KINDS = {"int": int, "SymInt": int, "float": float, "bool": bool}
_SCALAR_LIST_KINDS = {"List[int]": int, "List[SymInt]": int, "List[float]": float, "List[bool]": bool}


def _bind_coerced(op, params: list, args: tuple, device: torch.device) -> Optional[list]:
    """Last resort: the same bindings with exact scalar coercion (``isa/coerce.py``): a
    reference file's shared constants store dim 1 as ``1.0`` or keepdim as ``1``. Tried only
    after the strict bindings failed, so a value never moves to another argument because it
    could also be coerced. An inexact value an argument of the schema wanted (1.5 as a dim)
    is InexactCoercion naming the argument and both types."""
    misses: list = []

    def convert(p: _Param, v: Any, dev: torch.device) -> Any:
        conv = _convert(p, v, dev)
        if conv is not _NO:
            return conv
        s = _scalar(v)
        wanted = _SCALAR_KINDS.get(p.kind)
        if wanted is not None and is_scalar(s):
            c = try_exact(s, wanted)
            if c is None:
                misses.append((p, v))
                return _NO
            return c
        wanted = _SCALAR_LIST_KINDS.get(p.kind)
        if wanted is not None:
            items = v if isinstance(v, (tuple, list)) else (v,)
            if items and all(is_scalar(_scalar(x)) for x in items):
                out = [try_exact(_scalar(x), wanted) for x in items]
                if any(x is None for x in out):
                    misses.append((p, v))
                    return _NO
                return out
        return _NO

    try:
        return _bind_greedy(op, params, args, device, convert)
    except TypeError:
        pass
    bound = _bind_regrouped(params, args, device, strict=True, base=convert)
    if bound is None:
        bound = _bind_regrouped(params, args, device, strict=False, base=convert)
    if bound is None and misses:
        p, v = misses[0]
        n = next((i + 1 for i, a in enumerate(args) if a is v), "?")      # 1-based, as dis counts
        raise InexactCoercion(_scalar(v) if not isinstance(v, (tuple, list)) else v,
                              _SCALAR_KINDS.get(p.kind) or _SCALAR_LIST_KINDS[p.kind],
                              f"{n} ({p.name}: {p.kind})")
    return bound


_TENSOR_LISTS = ("List[Tensor]", "List[Optional[Tensor]]")


def _bind_regrouped(params: list, args: tuple, device: torch.device, strict: bool,
                    base: Callable = None) -> Optional[list]:
    memo: dict[tuple[int, int], Optional[list]] = {}
    base = base or _convert

    def convert(p: _Param, v: Any) -> Any:
        if strict and p.kind == "Tensor" and not isinstance(v, torch.Tensor):
            return _NO
        return base(p, v, device)

    def item_fits(p: _Param, v: Any) -> bool:
        return isinstance(v, torch.Tensor) or (v is None and p.kind == "List[Optional[Tensor]]")

    def search(j: int, n: int) -> Optional[list]:
        key = (j, n)
        if key in memo:
            return memo[key]
        out = None
        if n == len(args):
            out = [] if all(p.skippable or p.optional for p in params[j:]) else None
        elif j < len(params):
            p, v = params[j], args[n]
            if p.kind in _TENSOR_LISTS:
                k = 0
                while n + k < len(args) and item_fits(p, args[n + k]):
                    k += 1
                for take in range(k, 0, -1):     # longest first: a list usually ends the run
                    rest = search(j + 1, n + take)
                    if rest is not None:
                        out = [(p, list(args[n:n + take]))] + rest
                        break
            if out is None:
                conv = convert(p, v)
                if conv is not _NO:
                    rest = search(j + 1, n + 1)
                    if rest is not None:
                        out = [(p, conv)] + rest
            if out is None and p.skippable:
                out = search(j + 1, n)
        memo[key] = out
        return out

    return search(0, 0)


def _bind_greedy(op, params: list, args: tuple, device: torch.device,
                 convert: Callable = None) -> list:
    convert = convert or _convert
    bound: list[tuple[_Param, Any]] = []
    j = 0
    for n, v in enumerate(args):
        while True:
            if j >= len(params):
                raise TypeError(f"{op._schema}: too many arguments, argument {n} ({_describe(v)}) "
                                f"has no place")
            p = params[j]
            conv = convert(p, v, device)
            j += 1
            if conv is not _NO:
                bound.append((p, conv))
                break
            if not p.skippable:
                raise TypeError(f"{op._schema}: argument {n} ({_describe(v)}) does not fit "
                                f"{p.name}: {p.kind}")
    for p in params[j:]:
        if not p.skippable and not p.optional:
            raise TypeError(f"{op._schema}: required argument {p.name} was not given")
    return bound


def _arrange(params: list, bound: list) -> tuple[list, dict]:
    positional, keyword = [], {}
    skipped = False
    by_name = {p.name: v for p, v in bound if v is not _DEFAULT}
    bound_names = set(by_name)
    for p in params:
        if p.name not in bound_names:
            skipped = True
            continue
        if p.kwarg_only or skipped:
            keyword[p.name] = by_name[p.name]
        else:
            positional.append(by_name[p.name])
    return positional, keyword


def _describe(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return f"Tensor{tuple(v.shape)} {str(v.dtype)[6:]}"
    if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
        return "[" + ", ".join(_describe(x) for x in v) + "]"
    return repr(v)


def describe_args(args) -> str:
    return ", ".join(_describe(a) for a in args)


def call_bound(op, args: tuple, device: torch.device = torch.device("cpu")) -> Any:
    """Call an ATen overload with NAC-encoded arguments."""
    try:
        pos, kw = bind(op, args, device)
    except TypeError:
        # Let torch judge the plain positional call; its error message is the better one.
        return op(*args)
    return op(*pos, **kw)


# --------------------------------------------------------------------------- standard NAC ops
def nac_pass(x, *_ignored):
    """detach / dropout (eval) / alias: identity."""
    return x


def nac_add(a, b, alpha=1):
    """``a + alpha*b`` (alpha fused as torch does it, so results are bit-identical)."""
    if alpha == 1:
        return a + b
    if isinstance(a, torch.Tensor):
        return torch.add(a, b, alpha=alpha)
    if isinstance(b, torch.Tensor):
        return torch.add(torch.as_tensor(a), b, alpha=alpha)
    return a + alpha * b


def nac_sub(a, b, alpha=1):
    """``a - alpha*b``. ``rsub(self, other)`` was emitted swapped as ``sub(other, self)``, which
    this computes as ``other - alpha*self`` — through ``torch.rsub`` when ``other`` is a scalar,
    exactly as eager did."""
    if alpha == 1:
        return a - b
    if isinstance(a, torch.Tensor):
        return torch.sub(a, b, alpha=alpha)
    if isinstance(b, torch.Tensor):
        return torch.rsub(b, a, alpha=alpha)
    return a - alpha * b


def nac_mul(a, b):
    return a * b


def nac_div(a, b, rounding_mode=None):
    if rounding_mode is None:
        return a / b
    if not isinstance(a, torch.Tensor):
        a = torch.as_tensor(a)
    return torch.div(a, b, rounding_mode=rounding_mode)


def nac_gt(a, b, *_):
    return a > b


def nac_le(a, b, *_):
    return a <= b


def nac_neg(x):
    return -x


def nac_where(cond, x, y):
    """``where(cond, x, y)``; also ``masked_fill(self, mask, value)``, which the compiler
    emits as ``where(mask, value, self)``. A Python scalar ``x`` can only come from
    masked_fill (``aten.where.self`` takes three tensors; the scalar overloads stay custom
    ops), and masked_fill keeps ``self``'s dtype where torch.where would promote."""
    if isinstance(y, torch.Tensor) and not isinstance(x, torch.Tensor):
        return y.masked_fill(cond, x)
    if not isinstance(x, torch.Tensor) and not isinstance(y, torch.Tensor):
        return torch.where(cond, torch.as_tensor(x), torch.as_tensor(y))
    return torch.where(cond, x, y)


def nac_clone(x, *rest):
    """``clone(x[, memory_format])``, ``lift_fresh_copy(x)``, or ``copy(self, src[, non_blocking])``:
    the latter returns ``src``'s values in ``self``'s shape and dtype (the reference runtime
    wrongly returns a copy of ``self``)."""
    if rest and isinstance(rest[0], torch.Tensor):
        return torch.ops.aten.copy.default(x, rest[0])
    mf = None
    for r in rest:
        mf = to_memory_format(r)
        if mf is not None:
            break
    return x.clone(memory_format=mf) if mf is not None else x.clone()


def nac_view(x, *shape):
    """``view``/``_unsafe_view``/``reshape`` with a shape tuple, or with the dims as separate
    arguments (symbolic dims arrive that way); ``squeeze(x)`` and ``squeeze(x, dim)``, which the
    compiler canonicalises to ``nac.view`` too (research §4.3).

    ``aten.view`` always carries its size as a *list* (a tuple constant here), so a single
    bare int is a squeeze dim. The one ambiguity — a one-element symbolic shape ``view(x, [n])``
    whose ``n`` arrives as a bare int — is told apart by value: ``n`` equals ``x.numel()`` and
    is not a size-1 dim of ``x``."""
    if not shape:
        return torch.squeeze(x)
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, torch.Size)):
        d = _as_int(shape[0])
        if d is None and isinstance(shape[0], (bool, float)):
            d = exact(shape[0], int, "1 (dim: int)")
        if d is None:
            raise TypeError(f"nac.view: expected a shape or a dim, got {_describe(shape[0])}")
        valid_dim = -x.ndim <= d < x.ndim if x.ndim else d in (0, -1)
        if valid_dim and not (d == x.numel() and (x.ndim == 0 or x.shape[d] != 1)):
            return torch.squeeze(x, d)
        return x.reshape(d)
    if len(shape) == 1:
        shape = shape[0]
    dims = _as_int_list(shape)
    if dims is None:
        raise TypeError(f"nac.view: shape {shape!r} is not a list of ints")
    return x.reshape(dims)


def nac_transpose(x, *dims):
    """``transpose(x, d0, d1)`` or ``t(x)`` (no dims)."""
    if not dims:
        return x.t() if x.ndim <= 2 else x.permute(*reversed(range(x.ndim)))
    d0, d1 = (_dim(d, n) for n, d in enumerate(dims[:2], start=1))
    return x.transpose(d0, d1)


def _dim(v: Any, position: int) -> Any:
    """A standard op's dim argument: an int, exactly coerced from a shared constant (``False``
    for 0, ``1.0`` for 1); a 0-d integer tensor (symbolic arithmetic) as its value."""
    d = _as_int(v)
    if d is not None:
        return d
    s = _scalar(v)
    return exact(s, int, f"{position} (dim: int)") if is_scalar(s) else v


def nac_matmul(a, b):
    """mm, bmm and matmul."""
    return torch.matmul(a, b)


class _SchemaKernel:
    """A standard op that is one ATen overload with the NAC argument encoding."""

    def __init__(self, op, kernels: "Kernels"):
        self.op = op
        self.kernels = kernels

    def __call__(self, *args):
        return call_bound(self.op, args, self.kernels.device)


class _Arange:
    """``arange(end, ...)``, ``arange(start, end, ...)`` or ``arange(start, end, step, ...)``:
    the overload is chosen by how many numbers lead the argument list."""

    def __init__(self, kernels: "Kernels"):
        self.kernels = kernels

    def __call__(self, *args):
        return call_bound(self.overload(args), args, self.kernels.device)

    def overload(self, args: tuple):
        n = 0
        for a in args[:3]:
            if _is_number(_scalar(a)):
                n += 1
            else:
                break
        overload = {1: "default", 2: "start", 3: "start_step"}.get(n)
        if overload is None:
            raise TypeError(f"nac.arange: no numeric arguments in ({describe_args(args)})")
        return getattr(torch.ops.aten.arange, overload)

    def bound(self, *args):
        """(overload, positional, keyword) of a call with these arguments (TypeError when they do
        not bind: then the call itself raises torch's message)."""
        op = self.overload(args)
        pos, kw = bind(op, args, self.kernels.device)
        return op, pos, kw


_HAND = {
    "nac.pass": nac_pass, "nac.add": nac_add, "nac.sub": nac_sub, "nac.gt": nac_gt,
    "nac.neg": nac_neg, "nac.where": nac_where, "nac.clone": nac_clone, "nac.view": nac_view,
    "nac.le": nac_le, "nac.mul": nac_mul, "nac.div": nac_div, "nac.matmul": nac_matmul,
    "nac.transpose": nac_transpose,
}
# Standard ops that are exactly one ATen overload once the arguments are bound by schema.
_BY_SCHEMA = ("zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like")

# Non-ATen callables appear under their __name__ (research §4.2); the pure ones from
# `operator` are safe to call by name.
_OPERATOR_NAMES = frozenset({
    "getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
    "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "invert", "lshift",
    "rshift", "matmul", "index", "truth",
})


def sym_size_int(x, dim):
    return x.size(_dim(dim, 1))


def getitem(container, index):
    """``operator.getitem`` whose index is an int, exactly coerced from a shared constant
    (``getitem(t, 1.0)`` is element 1); slices and tensor indices pass through."""
    if isinstance(index, (bool, float)):
        index = exact(index, int, "1 (index: int)")
    return operator.getitem(container, index)


def grouped_mm(x, weight, offs):
    """Hugging Face's grouped matrix product of mixture-of-experts layers (Mixtral, Qwen-MoE,
    OLMoE...), the custom op ``transformers.grouped_mm_fallback`` they export to where torch's
    own ``_grouped_mm`` cannot run: ``x`` holds the tokens sorted by expert, ``offs`` the
    cumulative token count per expert; rows ``offs[i-1]:offs[i]`` are multiplied by expert
    ``i``'s ``weight[i]`` (input_dim × output_dim)."""
    if x.dim() != 2 or weight.dim() != 3 or offs.dim() != 1 or x.shape[1] != weight.shape[1] \
            or offs.shape[0] > weight.shape[0]:
        raise ValueError(f"grouped_mm: input {list(x.shape)}, weight {list(weight.shape)} and offsets "
                         f"{list(offs.shape)} do not fit (S×K, E×K×N, at most E offsets)")
    if x.is_meta or offs.is_meta:        # the shape pass: the result's shape needs no offsets
        return x.new_empty(x.shape[0], weight.shape[2])
    ends = offs.tolist()
    if any(b < a for a, b in zip([0] + ends, ends)) or (ends and ends[-1] > x.shape[0]):
        raise ValueError(f"grouped_mm: offsets {ends[:8]}{'…' if len(ends) > 8 else ''} are not cumulative "
                         f"token counts of {x.shape[0]} rows")
    out = x.new_zeros(x.shape[0], weight.shape[2])
    start = 0
    for i, end in enumerate(ends):
        if end > start:
            torch.mm(x[start:end], weight[i], out=out[start:end])
        start = end
    return out


# Explicit adapters for ATen ops whose NAC encoding differs from their schema, beyond what
# binding handles, and the few library custom ops exported models carry. Keyed by full name.
_ATEN_ADAPTERS: dict[str, Callable] = {
    "aten.sym_size.int": sym_size_int,
    "getitem": getitem, "operator.getitem": getitem,
    "transformers.grouped_mm_fallback.default": grouped_mm,
}


class Kernels:
    """Op name → kernel, resolved once per name.

    * ``nac.*``: the standard ops above;
    * ``aten.<op>[.<overload>]``: ``torch.ops.aten.<op>.<overload>`` called through
      :func:`bind`; an op that is not in ``torch.ops.aten`` but is a Tensor method (v1.8 emits
      ``call_method`` nodes as ``aten.<method>.default``) is called as that method;
    * ``getitem`` and other ``operator`` function names.
    """

    def __init__(self, device: str | torch.device = "cpu"):
        self.device = torch.device(device)
        self._cache: dict[str, Callable] = {}

    def __call__(self, name: str) -> Callable:
        fn = self._cache.get(name)
        if fn is None:
            fn = self._cache[name] = self._resolve(name)
        return fn

    def writes_an_argument(self, name: str) -> bool:
        """Whether op ``name`` may write into one of its arguments (an in-place or ``out=`` ATen
        overload, a ``Tensor.xxx_`` method); an op without a kernel writes nothing (it fails)."""
        try:
            fn = self(name)
        except NotSupported:
            return False
        if isinstance(fn, _SchemaKernel):
            return any(a.alias_info is not None and a.alias_info.is_write for a in fn.op._schema.arguments)
        if isinstance(fn, _TensorMethod):
            return fn.name.endswith("_") and not fn.name.endswith("__")
        return False

    def _resolve(self, name: str) -> Callable:
        if name in _HAND:
            return _HAND[name]
        if name.startswith("nac."):
            base = name[4:]
            if base in _BY_SCHEMA:
                return _SchemaKernel(getattr(torch.ops.aten, base).default, self)
            if base == "arange":
                return _Arange(self)
            raise NotSupported(f"no kernel for standard op {name!r}")
        if name in _ATEN_ADAPTERS:
            return _ATEN_ADAPTERS[name]
        if name.startswith("aten."):
            return self._resolve_aten(name)
        if name in _OPERATOR_NAMES:
            return getattr(operator, name)
        op = registered_op(name)
        if op is not None:                  # a library's or the user's own torch.library op, loaded here
            return _SchemaKernel(op, self)
        if custom_op_name(name):
            raise NotSupported(f"no kernel for op {name!r}: a custom operator (torch.library) that this "
                               f"process has not loaded; load the code that defines it (--import FILE.py on "
                               f"the command line; the Studio's Debug › Load Operator Code…; nac dap's launch "
                               f"'imports')")
        raise NotSupported(f"no kernel for op {name!r} (not a standard NAC op, not aten.*, "
                           f"not a known Python operator)")

    def _resolve_aten(self, name: str) -> Callable:
        parts = name.split(".")
        if len(parts) not in (2, 3) or not parts[1]:
            raise NotSupported(f"malformed ATen op name {name!r}")
        op_name = parts[1]
        overload = parts[2] if len(parts) == 3 else "default"
        packet = None
        try:
            packet = getattr(torch.ops.aten, op_name)
        except (AttributeError, RuntimeError):
            packet = None
        if packet is not None:
            try:
                op = getattr(packet, overload)
            except (AttributeError, RuntimeError):
                op = None
            if op is not None:
                return _SchemaKernel(op, self)
            raise NotSupported(f"{name!r}: torch.ops.aten.{op_name} has no overload {overload!r} "
                               f"(known: {', '.join(packet.overloads())})")
        method = getattr(torch.Tensor, op_name, None)
        if overload == "default" and callable(method):
            return _TensorMethod(op_name)
        raise NotSupported(f"{name!r}: no torch.ops.aten.{op_name} in torch {torch.__version__}")


def needs_operator_code(name: str) -> bool:
    """A custom operator the interpreter runs only with its defining code loaded (not one it has a
    kernel of its own for, such as transformers' grouped matmul)."""
    return custom_op_name(name) and name not in _ATEN_ADAPTERS and name not in _HAND


def registered_op(name: str):
    """``torch.ops.<namespace>.<op>.<overload>`` of a custom op name when this process has it
    registered (its defining code imported), else None."""
    if not custom_op_name(name):
        return None
    ns, op, *overload = name.split(".")
    try:
        return getattr(getattr(getattr(torch.ops, ns), op), overload[0] if overload else "default")
    except (AttributeError, RuntimeError):
        return None


class _TensorMethod:
    def __init__(self, name: str):
        self.name = name

    def __call__(self, x, *args):
        return getattr(x, self.name)(*(_to_torch_object(a) for a in args))


def _to_torch_object(v: Any) -> Any:
    """Best-effort string → torch object for methods that have no schema to bind against."""
    if isinstance(v, str):
        for conv in (to_dtype, to_memory_format, to_layout):
            obj = conv(v)
            if obj is not None:
                return obj
    return v


def first_of_multi(v: Any) -> Any:
    """A multi-output op's result (a tuple) consumed as a tensor means its first element:
    the reference optimizer removes ``getitem(A, 0)`` and points the users at ``A``
    (research §8.1 step 2: batch norm, layer norm, SDPA). ``Tensor[]`` results (lists, e.g.
    ``split``) are left alone."""
    return v[0] if isinstance(v, tuple) and v and isinstance(v[0], torch.Tensor) else v


default_kernels = Kernels()
