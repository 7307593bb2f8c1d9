"""One instruction's call as a single small function of the results: what the run loop calls.

A prepared call (:mod:`.prepared`) knows where its arguments come from (producer ticks, the
constants in place) and, for a schema-bound ATen op, how they bind (a recipe). Executing that
generically takes a handful of Python calls per instruction — gather the arguments, check the
recipe still fits, fill the binding's slots, call the ``torch.ops`` overload — which on a small
model costs as much as the kernels. :func:`recipe_call` and :func:`plain_call` build one
closure per instruction that does all of it at once::

    value = fast(results)     # the op's result, or SLOW

``SLOW`` means "take the general path": a value is not a plain tensor (a multi-output op's
tuple, which the general path reduces to its first element; a Python number from symbolic
shape arithmetic; a tensor subclass), or its 0-d-ness differs from when the recipe was made
(the binding could differ). A missing value raises ``KeyError`` before the kernel runs; the
caller turns that into its precise error.

Everything that does not depend on where the arguments come from (the specialisation, the
recipe's slots) is decided once per *call plan* (:class:`.prepared.CallPlan`, shared by every
instruction and session with the same op and constants): :func:`recipe_call_maker` and
:func:`plain_call_maker` return ``make(producers) -> fast``, so a new session's instruction
costs one closure.

An overload is called through its C++ handle (``OpOverload._op``, which is all
``OpOverload.__call__`` does): one Python frame fewer per call, same dispatch.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

_Tensor = torch.Tensor


class _Slow:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<take the general path>"


SLOW: Any = _Slow()


def op_handle(op) -> Callable:
    """The callable behind a ``torch.ops`` overload (the overload itself if it has none)."""
    return getattr(op, "_op", op)


def recipe_call(recipe, producers: tuple, refs: tuple, base: Optional[list]) -> Callable:
    """``fast(results)`` for a schema-bound op with a binding recipe (:class:`.prepared._Recipe`):
    ``producers`` the ticks of the referenced values, ``refs`` their argument positions,
    ``base`` the argument list with the constants in place (None: all arguments are references)."""
    return recipe_call_maker(recipe, refs, base)(producers)


def recipe_call_maker(recipe, refs: tuple, base: Optional[list]) -> Callable:
    """``make(producers) -> fast``: what :func:`recipe_call` builds, with everything that does not
    depend on where the arguments come from worked out once (a call plan keeps the maker, and a
    new session's instruction gets its closure from it for the cost of one closure)."""
    op = op_handle(recipe.op)
    kw = recipe.kw
    zero = recipe.zero          # was each reference 0-d when the binding was made (``refs`` order)
    if recipe.identity and base is None and not kw and len(refs) in (1, 2, 3):
        if len(refs) == 1:
            (z0,) = zero

            def make(producers):
                (p0,) = producers

                def fast(results):
                    a = results[p0]
                    if a.__class__ is _Tensor and (a.ndim == 0) is z0:
                        return op(a)
                    return SLOW
                return fast
            return make
        if len(refs) == 2:
            z0, z1 = zero

            def make(producers):
                p0, p1 = producers

                def fast(results):
                    a = results[p0]
                    b = results[p1]
                    if a.__class__ is _Tensor and b.__class__ is _Tensor and (a.ndim == 0) is z0 \
                            and (b.ndim == 0) is z1:
                        return op(a, b)
                    return SLOW
                return fast
            return make
        z0, z1, z2 = zero

        def make(producers):
            p0, p1, p2 = producers

            def fast(results):
                a = results[p0]
                b = results[p1]
                c = results[p2]
                if a.__class__ is _Tensor and b.__class__ is _Tensor and c.__class__ is _Tensor \
                        and (a.ndim == 0) is z0 and (b.ndim == 0) is z1 and (c.ndim == 0) is z2:
                    return op(a, b, c)
                return SLOW
            return fast
        return make
    if recipe.identity:
        template = base if base is not None else [None] * len(refs)

        def make(producers):
            slots = tuple(zip(refs, producers, zero))

            def fast(results):
                args = template.copy()
                for k, p, z in slots:
                    v = results[p]
                    if v.__class__ is not _Tensor or (v.ndim == 0) is not z:
                        return SLOW
                    args[k] = v
                return op(*args, **kw)
            return fast
        return make
    # a binding that moves values: fill the recipe's own positional/keyword slots, numbered by
    # reference (the same for every call sharing the recipe: its key fixes where references are)
    slots = recipe.by_reference
    if slots is None:
        ordinal = {arg: n for n, arg in enumerate(refs)}
        slots = recipe.by_reference = (
            tuple((k, ordinal[i]) for k, i in recipe.pos_slots),
            tuple((k, ordinal[i]) for k, i in recipe.kw_slots),
            tuple((where, k, tuple(ordinal[i] for i in idx)) for where, k, idx in recipe.list_slots))
    pos_slots, kw_slots, list_slots = slots
    pos0 = recipe.pos

    def make(producers):
        checks = tuple(zip(producers, zero))

        def fast(results):
            vals = []
            for p, z in checks:
                v = results[p]
                if v.__class__ is not _Tensor or (v.ndim == 0) is not z:
                    return SLOW
                vals.append(v)
            pos = pos0.copy()
            for k, n in pos_slots:
                pos[k] = vals[n]
            if kw_slots or list_slots:
                kwargs = kw.copy()
                for k, n in kw_slots:
                    kwargs[k] = vals[n]
                for where, k, idx in list_slots:
                    items = [vals[n] for n in idx]
                    if where:
                        kwargs[k] = items
                    else:
                        pos[k] = items
                return op(*pos, **kwargs)
            return op(*pos, **kw)
        return fast
    return make


def plain_call(fn: Callable, producers: tuple, refs: tuple, base: Optional[list], keep_tuples: bool) -> Callable:
    """``fast(results)`` for a kernel that takes the arguments as they are (the hand-written
    standard ops, ``getitem``, Python operators). A tuple argument takes the general path
    (which passes only its first element) unless the op keeps tuples (``getitem``).

    A standard op whose constants settle what it does is called as that: ``nac.view(x,
    (1, 8, 64))`` is ``x.reshape([1, 8, 64])``, ``nac.transpose(x, 1, 2)`` is
    ``x.transpose(1, 2)``, a two-argument ``nac.add`` is ``a + b`` (the kernel's own first
    line), its constants converted once here instead of on every call."""
    return plain_call_maker(fn, refs, base, keep_tuples)(producers)


def plain_call_maker(fn: Callable, refs: tuple, base: Optional[list], keep_tuples: bool) -> Callable:
    """``make(producers) -> fast``: :func:`plain_call` with the specialisation decided once."""
    special = _SPECIAL.get(fn) or (_arange_call if isinstance(fn, kernels._Arange) else None)
    if special is not None:
        make = special(refs, base) if special is not _arange_call else _arange_call(fn, refs, base)
        if make is not None:
            return make
    n_args = len(base) if base is not None else len(refs)
    if n_args == 2 and fn in _BINARY:
        fn = _BINARY[fn]
    if base is None and len(refs) == 1:
        def make(producers):
            (p0,) = producers

            def fast(results):
                a = results[p0]
                if not keep_tuples and isinstance(a, tuple):
                    return SLOW
                return fn(a)
            return fast
        return make
    if base is None and len(refs) == 2:
        def make(producers):
            p0, p1 = producers

            def fast(results):
                a = results[p0]
                b = results[p1]
                if not keep_tuples and (isinstance(a, tuple) or isinstance(b, tuple)):
                    return SLOW
                return fn(a, b)
            return fast
        return make
    template = base if base is not None else [None] * len(refs)

    def make(producers):
        slots = tuple(zip(refs, producers))

        def fast(results):
            args = template.copy()
            for k, p in slots:
                v = results[p]
                if not keep_tuples and isinstance(v, tuple):
                    return SLOW
                args[k] = v
            return fn(*args)
        return fast
    return make


# --------------------------------------------------------------------------- standard ops
def _tensor_method_call(method: Callable, refs: tuple, args: tuple) -> Optional[Callable]:
    """``make(producers)`` of ``x.method(*args)`` for a call whose only reference is its first argument."""
    if refs != (0,):
        return None

    def make(producers):
        (p0,) = producers

        def fast(results):
            a = results[p0]
            if a.__class__ is _Tensor:
                return method(a, *args)
            return SLOW
        return fast
    return make


def _view_call(refs, base):
    # nac.view(x, shape) with a constant shape list: the kernel's reshape (a single bare int is a
    # squeeze dim decided by value, so it stays with the kernel)
    if base is None or len(base) != 2 or not isinstance(base[1], (tuple, list)):
        return None
    dims = kernels._as_int_list(base[1])
    if dims is None:
        return None
    return _tensor_method_call(_Tensor.reshape, refs, (dims,))


def _transpose_call(refs, base):
    if base is None or len(base) != 3:
        return None
    try:
        dims = tuple(kernels._dim(d, n) for n, d in enumerate(base[1:], start=1))
    except (ValueError, TypeError):       # an inexact dim: the kernel raises it, naming the argument
        return None
    if not all(type(d) is int for d in dims):
        return None
    return _tensor_method_call(_Tensor.transpose, refs, dims)


def _arange_call(fn, refs, base):
    # nac.arange with constant arguments only: its overload and binding are fixed (the kernel
    # would pick and bind them on every call); the result is a new tensor each call
    if refs or not base:
        return None
    try:
        op, pos, kw = fn.bound(*base)
    except (TypeError, ValueError):       # the kernel raises it, naming the arguments
        return None
    op = op_handle(op)

    def make(producers):
        def fast(results):
            return op(*pos, **kw)
        return fast
    return make


def _clone_call(refs, base):
    if base is not None:
        return None
    return _tensor_method_call(_Tensor.clone, refs, ())


# The hand-written kernels whose two-argument form is a Python operator (each kernel's own
# first line when alpha/rounding_mode are absent), and those with a constant-argument form.
from . import kernels  # noqa: E402  (kernels imports nothing from here)
import operator  # noqa: E402

_BINARY = {kernels.nac_add: operator.add, kernels.nac_sub: operator.sub, kernels.nac_mul: operator.mul,
           kernels.nac_div: operator.truediv, kernels.nac_matmul: torch.matmul}
_SPECIAL = {kernels.nac_view: _view_call, kernels.nac_transpose: _transpose_call, kernels.nac_clone: _clone_call}
