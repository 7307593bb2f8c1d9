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

What does not depend on where an instruction's values come from — the kernel, the constants in
place, and the recipes with their closure makers (:mod:`.fastcall`) — is a :class:`CallPlan`,
shared process-wide by every instruction with the same key: the kernel table, the op name, the
signature, the D field and the constants by type and value (built by ``Session.prepare``; a
file's ids never enter it). A new session of a file (or of another file with the same calls) then prepares an
instruction with one dictionary lookup and one closure, and its first call is already bound.

The recipe is only kept when it cannot differ from a fresh binding: every referenced
value was a tensor passed through unchanged (a 0-d tensor that binding turned into an int,
or a Python number from ``sym_size``, depends on its value, so such calls are bound every
time), and the op writes to none of its arguments (a constant converted to a tensor once
must not be mutated and reused). Each later call checks that its referenced values are
still tensors with the same "is 0-d" flag, else it binds afresh.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch

from ..format import layout as L
from .fastcall import plain_call_maker, recipe_call_maker
from .kernels import _SchemaKernel, bind


def _schema_flag(op, attr: str, compute) -> bool:
    """``compute(schema)``, kept on the op overload under ``attr`` (asked once per prepared call)."""
    cached = getattr(op, attr, None)
    if cached is None:
        cached = compute(op._schema)
        try:
            setattr(op, attr, cached)
        except AttributeError:     # pragma: no cover - OpOverload normally takes attributes
            pass
    return cached


def _writes_an_argument(op) -> bool:
    return _schema_flag(op, "_nac_writes", lambda schema: any(
        a.alias_info is not None and a.alias_info.is_write for a in schema.arguments))


def _returns_an_alias(op) -> bool:
    return _schema_flag(op, "_nac_returns_alias", lambda schema: any(
        r.alias_info is not None for r in schema.returns))


def constant_key(const) -> tuple:
    """A constant for a plan key: its stored type and value, with the sign of each float (0.0 and
    -0.0 are equal in Python but not as an op's argument). A NaN never equals another NaN, so a
    call with one simply gets its own plan each time."""
    t, v = const.type, const.value
    if t == L.CONST_FLOAT64:
        return (t, v, math.copysign(1.0, v))
    if t == L.CONST_LIST_F32:
        return (t, v, tuple(math.copysign(1.0, x) for x in v))
    return (t, v)


# Plans shared by every session in the process (see the module docstring). Bounded: cleared
# when full, which only costs preparing again.
_PLANS: dict = {}
_PLANS_MAX = 8192
_RECIPES_PER_PLAN = 8


def shared_plan(key):
    return _PLANS.get(key)


def keep_plan(key, plan: "CallPlan") -> None:
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    _PLANS[key] = plan


def forget_plans() -> None:
    """Drop every shared plan: the next sessions prepare and bind from scratch (what a first
    session in a new process pays; benchmarks measure it)."""
    _PLANS.clear()


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
    if _writes_an_argument(op):
        return None
    if not refs:
        # constants only (ones/full/zeros with a constant shape): the binding never changes; kept
        # unless the result may alias an argument (a tensor made once from a constant would then
        # be handed out by every call)
        if _returns_an_alias(op):
            return None
        return _Recipe(op, list(pos), dict(kw), (), (), (), ())
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


class CallPlan:
    """An instruction's call apart from where its referenced values come from (shared; see the
    module docstring): ``name``, the kernel ``fn``, ``base`` the argument list with the constants
    in place (``None`` when every argument is a reference), ``refs`` the positions of the
    references, and for a schema-bound op ``recipes``: 0-d pattern of the references →
    (recipe, closure maker), ``recent`` the last one found. A plain kernel's closure maker is
    ``plain_maker``."""

    __slots__ = ("name", "fn", "base", "refs", "keep_tuples", "schema", "recipes", "recent", "plain_maker")

    def __init__(self, name: str, fn, base: Optional[list], refs: tuple, keep_tuples: bool):
        self.name, self.fn, self.base, self.refs, self.keep_tuples = name, fn, base, refs, keep_tuples
        self.schema = isinstance(fn, _SchemaKernel)
        self.recipes: dict = {}
        self.recent = None
        self.plain_maker = None if self.schema else plain_call_maker(fn, refs, base, keep_tuples)

    def add_recipe(self, zero: tuple, recipe: "_Recipe") -> tuple:
        found = (recipe, recipe_call_maker(recipe, self.refs, self.base))
        if len(self.recipes) < _RECIPES_PER_PLAN:
            self.recipes[zero] = found
            self.recent = found
        return found


class PreparedCall:
    """The kernel, argument template and (once known) binding recipe of one instruction: its
    plan (:class:`CallPlan`) and the ticks its referenced values come from.

    For the run loop: ``producers`` are the ticks of the referenced values in argument order,
    ``base`` the argument list with the constants in place (``None`` when every argument is a
    reference), ``plain`` the kernel when it takes the arguments as they are (a hand-written
    standard op: no schema binding, so no recipe), ``fast`` the whole call as one function of
    the results (:mod:`.fastcall`; ``None`` until a schema-bound op has a recipe: from its plan
    when another instruction with the same plan was bound already, else after its first call)."""

    __slots__ = ("plan", "name", "fn", "refs", "producers", "base", "plain", "keep_tuples", "recipe",
                 "fast", "_tried")

    def __init__(self, name: str, fn, template: list, keep_tuples: bool):
        refs, producers, base = [], [], []
        for k, (is_ref, x) in enumerate(template):
            if is_ref:
                refs.append(k)
                producers.append(x)
                base.append(None)
            else:
                base.append(x)
        plan = CallPlan(name, fn, None if len(refs) == len(template) else base, tuple(refs), keep_tuples)
        self._start(plan, tuple(producers))

    @classmethod
    def of_plan(cls, plan: CallPlan, producers: tuple) -> "PreparedCall":
        call = cls.__new__(cls)
        call._start(plan, producers)
        return call

    def _start(self, plan: CallPlan, producers: tuple) -> None:
        self.plan = plan
        self.name, self.fn, self.refs, self.base, self.keep_tuples = \
            plan.name, plan.fn, plan.refs, plan.base, plan.keep_tuples
        self.producers = producers
        self.recipe = None
        if plan.schema:
            self._tried = False
            self.plain = None
            self.fast = None
            if plan.recent is not None:          # bound before: its closure checks it still fits
                self.recipe = plan.recent[0]
                self.fast = plan.recent[1](producers)
        else:
            self._tried = True
            self.plain = plan.fn
            self.fast = plan.plain_maker(producers)

    @property
    def template(self) -> list:
        """Per argument: ``(True, producer tick)`` or ``(False, constant)``."""
        out = [(False, x) for x in self.base] if self.base is not None else [None] * len(self.refs)
        for k, p in zip(self.refs, self.producers):
            out[k] = (True, p)
        return out

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
        plan = self.plan
        zero = _zero_pattern(args, self.refs)
        found = plan.recipes.get(zero) if zero is not None else None
        if found is not None:
            self._use(found)
            return found[0](args)
        op, device = self.fn.op, self.fn.kernels.device
        try:
            pos, kw = bind(op, tuple(args), device)
        except TypeError:
            return op(*args)        # as call_bound: torch's own message is the better one
        result = op(*pos, **kw)
        recipe = _recipe(op, args, self.refs, pos, kw)
        if recipe is not None:
            self._use(plan.add_recipe(zero, recipe))
        return result

    def _use(self, found: tuple) -> None:
        self.recipe = found[0]
        self.fast = found[1](self.producers)


def _zero_pattern(args: list, refs: tuple) -> Optional[tuple]:
    """Whether each referenced value is 0-d (None when one is not a plain tensor: no recipe)."""
    out = []
    for i in refs:
        v = args[i]
        if not isinstance(v, torch.Tensor):
            return None
        out.append(v.ndim == 0)
    return tuple(out)
