"""Constant folding: ops whose inputs are all known at compile time are evaluated now.

Known values are the parameters (their tensors) and the results of pure ops over known values,
including creation ops with no tensor input (``arange``, ``full``...). A known value that
something unknown (or the output) reads becomes a new parameter ``_folded.<node name>``.

Size rule: a folded tensor is stored in the file, so it is only made when it is small
(≤ ``SMALL_BYTES``) or no bigger than the inputs it replaces — folding ``expand(bias, big)``
would bloat the file, folding a causal mask built from ``arange`` shrinks the program.
Ops that fail to evaluate on CPU simply stay.

Complex results (RoPE's ``torch.polar``) are stored as their real pairs, ``view_as_real`` of
the value (NAC's DATA has no complex dtype), and read back through one
``view_as_complex`` op, which is not folded again.

Uninitialised memory (``empty`` and its family) is never a known value — folding it would store
whatever the allocator returned. But an op that overwrites all of its first argument
(:data:`OVERWRITES_SELF`: ``fill``, ``copy``, ``zero``, ``*_like``, ``new_*``) depends only on that
argument's shape and dtype, so ``torch.empty(n).fill_(v)`` still folds: it is evaluated on zeros
of the same shape and dtype.
"""
from __future__ import annotations

from typing import Any

import torch

from ..graph import Graph, Node, TensorSpec, map_nodes, spec_of_value
from .common import aten, is_pure, replace_and_remove, undefined_result
from .complex_pairs import store_as_real_pairs

SMALL_BYTES = 64 * 1024
OVERWRITES_SELF = frozenset({
    aten.fill.Scalar, aten.fill.Tensor, aten.copy.default, aten.zero.default,
    aten.zeros_like.default, aten.ones_like.default, aten.full_like.default,
    aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
})


def _nbytes(v: Any) -> int:
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, (tuple, list)):
        return sum(_nbytes(x) for x in v)
    return 0


def _overwritten_blank(node: Node, unknown: list) -> Any:
    """Zeros standing in for ``node``'s first argument when that is the only unknown input, is
    uninitialised memory and ``node`` overwrites all of it; else None."""
    if node.target not in OVERWRITES_SELF or len(unknown) != 1 or not node.args:
        return None
    blank = unknown[0]
    if node.args[0] is not blank or blank.kind != "op" or not undefined_result(blank.target):
        return None
    if not isinstance(blank.spec, TensorSpec):
        return None
    if any(a is blank for a in (*node.args[1:], *node.kwargs.values())):
        return None
    return torch.zeros(blank.spec.shape, dtype=blank.spec.dtype)


def fold_constants(graph: Graph, small_bytes: int = SMALL_BYTES) -> int:
    # deferred weights (compiler/deferred.py) are not folded through: their values are not here
    known: dict[int, Any] = {n.id: n.tensor for n in graph.nodes
                             if n.kind == "param" and isinstance(n.tensor, torch.Tensor)}
    with torch.no_grad():
        for node in graph.nodes:
            if node.kind != "op" or not is_pure(node.target):
                continue
            unknown = [src for src in node.inputs() if src.id not in known]
            blank = _overwritten_blank(node, unknown) if unknown else None
            if unknown and blank is None:
                continue
            value = lambda n: known[n.id] if n.id in known else blank   # noqa: E731
            args = map_nodes(node.args, value)
            kwargs = map_nodes(node.kwargs, value)
            try:
                known[node.id] = node.target(*args, **kwargs)
            except Exception:   # e.g. an op with no CPU kernel: it stays an op
                continue

    users = graph.users()
    outputs = graph.output_ids()
    changes = 0
    for node in list(graph.nodes):
        if node.kind != "op" or node.id not in known:
            continue
        value = known[node.id]
        if not isinstance(value, torch.Tensor):
            continue          # tuples are folded through their getitems
        if node.id not in outputs and all(u.id in known for u in users.get(node.id, [])):
            continue          # only other folded values read it
        budget = max(small_bytes, sum(_nbytes(known.get(s.id)) for s in node.inputs()))
        if _nbytes(value) > budget:
            continue
        if value.is_complex():
            if node.target is aten.view_as_complex.default and all(s.kind == "param" for s in node.inputs()):
                continue      # already the stored real pairs read back
            store_as_real_pairs(graph, node, value)
            changes += 1
            continue
        tensor = value.detach().clone(memory_format=torch.contiguous_format)
        param = graph.new_node("param", graph.unique_param_name(f"_folded.{node.name}"),
                               spec=spec_of_value(tensor), tensor=tensor, origin="folded")
        graph.insert_before(node, param)
        replace_and_remove(graph, node, param)
        changes += 1
    return changes

