"""Exact coercion of stored constants to the type an op uses them as.

The reference compiler keeps one CNST entry per *value*, whatever its type (research note
upstream_format §6.3): ``1``, ``1.0`` and ``True`` share an entry, and so do ``0``, ``0.0``
and ``False``; whichever was met first is stored. Its signature codes, though, were taken from
each argument's own Python type before the entry was shared (§5.2): ``i``/``A`` an int, ``b`` a
bool, ``f`` a float. So ``cat(a, b, 1.0)<TTA>`` means dim 1 and ``transpose(x, 1, False)<Tii>``
means dims 1 and 0.

One rule, used by the interpreter (signature codes here, schema types in the kernels' binding),
the debugger and the simulator's shape pass (both run the interpreter's gather) and the readable
forms of ``nac dis`` and the Studio: a scalar is converted to the wanted type only when the
conversion loses nothing (1.0 → 1, 0 → False, False → 0, True → 1, 2 → 2.0); anything else
(1.5 as a dim, 2 as a flag) is :class:`InexactCoercion`. Torch-free.
"""
from __future__ import annotations

import math
from typing import Any, Optional

# Signature code → the Python type the compiler saw for that argument (codes S, s, c and the
# tensor codes say nothing about a scalar's type).
CODE_TYPES = {"i": int, "A": int, "b": bool, "f": float}


class InexactCoercion(ValueError):
    """A stored scalar cannot be converted exactly to the type its use wants."""

    def __init__(self, value: Any, wanted: type, where: str = ""):
        self.value = value
        self.wanted = wanted
        self.where = where
        super().__init__(f"{where + ': ' if where else ''}stored {type_name(value)} {value!r} "
                         f"cannot be used as {wanted.__name__} exactly")


def type_name(v: Any) -> str:
    return type(v).__name__


def is_scalar(v: Any) -> bool:
    return isinstance(v, (bool, int, float))


def exact(value: Any, wanted: type, where: str = "") -> Any:
    """``value`` as ``wanted`` (int, bool or float) when that is exact; else InexactCoercion.

    ``value`` must be a Python bool/int/float."""
    if type(value) is wanted:
        return value
    if wanted is int:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
    elif wanted is bool:
        if value in (0, 1) and not (isinstance(value, float) and not math.isfinite(value)):
            return bool(value)
    elif wanted is float:
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, int):
            try:
                f = float(value)
            except OverflowError:
                f = None
            if f is not None and int(f) == value:      # 2**60 is exact, 2**60 + 1 is not
                return f
    raise InexactCoercion(value, wanted, where)


def try_exact(value: Any, wanted: type) -> Optional[Any]:
    """Like :func:`exact` but None when not exact (or not a scalar)."""
    if not is_scalar(value):
        return None
    try:
        return exact(value, wanted)
    except InexactCoercion:
        return None


def as_used(value: Any, code: str, where: str = "") -> Any:
    """A constant argument's value as the op uses it, by its signature code.

    Scalars under ``i``/``A``/``b``/``f`` are converted exactly (InexactCoercion otherwise);
    everything else (lists, strings, None, other codes) is returned unchanged."""
    wanted = CODE_TYPES.get(code)
    if wanted is None or not is_scalar(value):
        return value
    return exact(value, wanted, where)


def differs(stored: Any, used: Any) -> bool:
    """Whether the use changed the stored value's type (``1.0`` → ``1``)."""
    return type(stored) is not type(used)


def use_note(value: Any, code: str) -> Optional[str]:
    """For readable forms: ``"1 (stored 1.0)"`` when the op uses a stored scalar in another
    type, ``"1.5 (not usable as int)"`` when it cannot, None when the stored form is the use."""
    wanted = CODE_TYPES.get(code)
    if wanted is None or not is_scalar(value) or type(value) is wanted:
        return None
    try:
        return f"{exact(value, wanted)!r} (stored {value!r})"
    except InexactCoercion:
        return f"{value!r} (not usable as {wanted.__name__})"


__all__ = ["use_note", "CODE_TYPES", "InexactCoercion", "exact", "try_exact", "as_used", "differs", "type_name",
           "is_scalar"]
