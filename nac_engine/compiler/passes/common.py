"""Helpers the passes share: purity, constant values, shapes."""
from __future__ import annotations

import operator
from typing import Any, Optional

import torch

from ...isa.optable import uninitialised
from ..graph import Graph, Node, TensorSpec

aten = torch.ops.aten


def undefined_result(target: Any) -> bool:
    """``empty``, ``empty_like``, ``new_empty``, ``empty_strided``, ``empty_permuted``, the quantised
    ``_empty_*``... (:func:`~nac_engine.isa.optable.uninitialised`): the result is whatever the
    allocator hands out. Evaluated at compile time it would bake that memory into the file
    (different bytes on every compile)."""
    return isinstance(target, torch._ops.OpOverload) and uninitialised(target._schema.name)


def is_pure(target: Any) -> bool:
    """Safe to evaluate at compile time and to merge: no mutation, has a result, and that result is
    a function of the arguments — not random (``nondeterministic_seeded``), not uninitialised memory."""
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    if schema.is_mutable or not schema.returns or undefined_result(target):
        return False
    return torch.Tag.nondeterministic_seeded not in target.tags


def has_side_effect(node: Node) -> bool:
    """Ops that must stay even without users: mutation, no result, randomness (it advances the
    generator). An unread ``empty`` goes: allocating has no effect anyone can see. Asserts count:
    only the identity pass, which knows why they hold, removes them."""
    return node.kind == "op" and not is_pure(node.target) and not undefined_result(node.target)


def is_assert(target: Any) -> bool:
    """``_assert_tensor_metadata``, ``_assert_async``, ``_assert_scalar``, ``sym_constrain_range``...:
    checks torch.export leaves behind; shapes and dtypes are static here, so they hold by construction."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    name = target._schema.name
    return ("assert" in name or "constrain_range" in name) and not target._schema.returns


def same_spec(a: Node, b: Node) -> bool:
    return isinstance(a.spec, TensorSpec) and a.spec == b.spec


def constant_tensor(node: Any) -> Optional[torch.Tensor]:
    # a deferred weight (compiler/deferred.py) is not looked into: its values are read only when written
    if isinstance(node, Node) and node.kind == "param" and isinstance(node.tensor, torch.Tensor):
        return node.tensor
    return None


def scalar_value(v: Any) -> Optional[float]:
    """A Python number, or a single-valued constant tensor's value (all elements equal)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    t = constant_tensor(v)
    if t is not None and t.numel() > 0 and not t.dtype.is_complex and t.dtype != torch.bool:
        first = t.reshape(-1)[0]
        if bool((t == first).all()):
            return first.item()
    return None


def norm_dim(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


def arg(node: Node, index: int, name: str, default: Any = None) -> Any:
    """Argument by position or keyword."""
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def replace_and_remove(graph: Graph, old: Node, new: Node) -> None:
    graph.replace_uses(old, new)
    graph.remove([old])
