"""One instruction's call, prepared once per session: arguments gathered from a template and
the ATen schema bound once.

Without this every execution of an instruction rebuilt its argument list from C/D
(``NacFile.arguments``), coerced its constants again and matched the values to the op's
schema by type again (``kernels.bind``): about 10 µs per call, a third of a small model's
run. A :class:`PreparedCall` keeps

* the kernel, resolved once;
* a template of the arguments: producer ticks for references, the constants already
  coerced to the type the op uses;
* after the first call of a schema-bound ATen op, a *recipe*: the positional and keyword
  arguments ``bind`` produced, with each slot that held a referenced value remembered by
  position. Later calls put the new values in those slots and call the op directly.

The recipe is only kept when it cannot differ from a fresh binding: every referenced
value was a tensor passed through unchanged (a 0-d tensor that binding turned into an int,
or a Python number from ``sym_size``, depends on its value, so such calls are bound every
time), and the op writes to none of its arguments (a constant converted to a tensor once
must not be mutated and reused). Each later call checks that its referenced values are
still tensors with the same "is 0-d" flag, else it binds afresh.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from .fastcall import plain_call, recipe_call
from .kernels import _SchemaKernel, bind


def _writes_an_argument(op) -> bool:
    cached = getattr(op, "_nac_writes", None)
    if cached is None:
        cached = any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments)
        try:
            op._nac_writes = cached
        except AttributeError:     # pragma: no cover - OpOverload normally takes attributes
            pass
    return cached


# Recipes shared by every session in the process, keyed by the op, the device, and the
# argument template (constants by type and value, references by their 0-d-ness): the same
# call in a new session of the same (or another) file is not bound again. Bounded: cleared
# when full, which only costs a re-binding.
_SHARED: dict = {}
_SHARED_MAX = 8192


def _frozen(v):
    """A hashable stand-in for a constant that keeps its type (1, 1.0 and True differ)."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_frozen(x) for x in v))
    hash(v)
    return (type(v).__name__, v)


class _Recipe:
    """``op(*pos, **kw)`` with the referenced values substituted by position.

    ``identity``: the binding is the argument list itself (every value at its own position,
    constants passed through unchanged, keywords constant), so a call is ``op(*args, **kw)``
    with nothing to copy or fill: the common case (``linear(x, w, b)``, ``slice(x, 0, 0, 8)``)."""

    __slots__ = ("op", "pos", "kw", "pos_slots", "kw_slots", "list_slots", "zero_dim", "zero", "identity",
                 "by_reference")

    def __init__(self, op, pos, kw, pos_slots, kw_slots, list_slots, zero_dim, identity=False):
        self.op, self.pos, self.kw = op, pos, kw
        self.pos_slots, self.kw_slots, self.list_slots = pos_slots, kw_slots, list_slots
        self.zero_dim = zero_dim          # (arg index, was 0-d) per referenced value
        self.zero = tuple(z for _, z in zero_dim)
        self.identity = identity
        self.by_reference = None          # the slots numbered by reference (fastcall, on first use)

    def fits(self, args: list) -> bool:
        for i, was0d in self.zero_dim:
            v = args[i]
            if not isinstance(v, torch.Tensor) or (v.ndim == 0) != was0d:
                return False
        return True

    def __call__(self, args: list) -> Any:
        if self.identity:
            return self.op(*args, **self.kw)
        pos = self.pos.copy() if self.pos_slots or self.list_slots else self.pos
        kw = self.kw.copy() if self.kw_slots else self.kw
        for k, i in self.pos_slots:
            pos[k] = args[i]
        for k, i in self.kw_slots:
            kw[k] = args[i]
        for where, k, idx in self.list_slots:
            items = [args[i] for i in idx]
            if where:
                kw[k] = items
            else:
                pos[k] = items
        return self.op(*pos, **kw)


def _recipe(op, args: list, refs: tuple, pos: list, kw: dict) -> Optional[_Recipe]:
    """The binding of this call as a recipe, or None when it must be bound each time."""
    if not refs or _writes_an_argument(op):
        return None
    by_id = {}
    for i in refs:
        v = args[i]
        if not isinstance(v, torch.Tensor):
            return None
        by_id.setdefault(id(v), i)
    used = set()

    def slot_of(v):
        if isinstance(v, torch.Tensor):
            i = by_id.get(id(v))
            if i is not None and args[i] is v:
                return i
        return None

    pos_slots, kw_slots, list_slots = [], [], []
    for k, v in enumerate(pos):
        i = slot_of(v)
        if i is not None:
            pos_slots.append((k, i)); used.add(i)
        elif isinstance(v, list) and v and all(slot_of(x) is not None for x in v):
            idx = tuple(slot_of(x) for x in v)
            list_slots.append((False, k, idx)); used.update(idx)
    for k, v in kw.items():
        i = slot_of(v)
        if i is not None:
            kw_slots.append((k, i)); used.add(i)
        elif isinstance(v, list) and v and all(slot_of(x) is not None for x in v):
            idx = tuple(slot_of(x) for x in v)
            list_slots.append((True, k, idx)); used.update(idx)
    # Every referenced value must have landed somewhere unchanged, and the same object must
    # not stand for two references (then the positions are ambiguous).
    if used != set(refs) or len(by_id) != len(refs):
        return None
    # the binding is the argument list itself: nothing to fill per call
    identity = (not kw_slots and not list_slots and len(pos) == len(args)
                and all(k == i for k, i in pos_slots) and all(pos[k] is args[k] for k in range(len(pos))))
    # the slots are filled per call: the recipe (shared across sessions) must not keep this
    # call's tensors alive
    pos, kw = list(pos), dict(kw)
    for k, _ in pos_slots:
        pos[k] = None
    for k, _ in kw_slots:
        kw[k] = None
    for where, k, _ in list_slots:
        if where:
            kw[k] = None
        else:
            pos[k] = None
    return _Recipe(op, pos, kw, tuple(pos_slots), tuple(kw_slots), tuple(list_slots),
                   tuple((i, args[i].ndim == 0) for i in refs), identity)


class PreparedCall:
    """The kernel, argument template and (once known) binding recipe of one instruction.

    For the run loop: ``producers`` are the ticks of the referenced values in argument order,
    ``base`` the argument list with the constants in place (``None`` when every argument is a
    reference), ``plain`` the kernel when it takes the arguments as they are (a hand-written
    standard op: no schema binding, so no recipe), ``fast`` the whole call as one function of
    the results (:mod:`.fastcall`; ``None`` until a schema-bound op has its recipe)."""

    __slots__ = ("name", "fn", "template", "refs", "producers", "base", "plain", "keep_tuples", "recipe",
                 "fast", "_tried")

    def __init__(self, name: str, fn, template: list, keep_tuples: bool):
        self.name = name
        self.fn = fn
        self.template = template          # per argument: (True, producer) or (False, value)
        refs, producers, base = [], [], []
        for k, (is_ref, x) in enumerate(template):
            if is_ref:
                refs.append(k)
                producers.append(x)
                base.append(None)
            else:
                base.append(x)
        self.refs = tuple(refs)
        self.producers = tuple(producers)
        self.base = None if len(refs) == len(template) else base
        self.keep_tuples = keep_tuples
        self.recipe: Optional[_Recipe] = None
        self._tried = not isinstance(fn, _SchemaKernel)
        self.plain = fn if self._tried else None
        self.fast = plain_call(fn, self.producers, self.refs, self.base, keep_tuples) if self._tried else None

    def gather(self, results: dict) -> list:
        """The arguments from ``results`` (tick → value); KeyError when a value is missing."""
        if self.base is None:
            return [results[p] for p in self.producers]
        args = self.base.copy()
        for k, p in zip(self.refs, self.producers):
            args[k] = results[p]
        return args

    def __call__(self, args: list) -> Any:
        recipe = self.recipe
        if recipe is not None and recipe.fits(args):
            return recipe(args)
        if self._tried:
            return self.fn(*args)
        self._tried = True
        op, device = self.fn.op, self.fn.kernels.device
        key = self._shared_key(op, device, args)
        shared = _SHARED.get(key) if key is not None else None
        if shared is not None and shared.fits(args):
            self._use(shared)
            return shared(args)
        try:
            pos, kw = bind(op, tuple(args), device)
        except TypeError:
            return op(*args)        # as call_bound: torch's own message is the better one
        result = op(*pos, **kw)
        self._use(_recipe(op, args, self.refs, pos, kw))
        if self.recipe is not None and key is not None:
            if len(_SHARED) >= _SHARED_MAX:
                _SHARED.clear()
            _SHARED[key] = self.recipe
        return result

    def _use(self, recipe: Optional[_Recipe]) -> None:
        self.recipe = recipe
        if recipe is not None:
            self.fast = recipe_call(recipe, self.producers, self.refs, self.base)

    def _shared_key(self, op, device, args: list):
        parts = [op, device]
        try:
            for (is_ref, x), v in zip(self.template, args):
                if is_ref:
                    if not isinstance(v, torch.Tensor):
                        return None
                    parts.append(v.ndim == 0)
                else:
                    parts.append(_frozen(x))
            return tuple(parts)
        except TypeError:            # an unhashable constant: this call is not shared
            return None
