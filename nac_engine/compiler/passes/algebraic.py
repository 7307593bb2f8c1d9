"""Algebraic simplification: ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1``, ``x ** 1``.

The neutral operand is a Python number or a constant tensor whose elements all equal it. The op
goes only when the result has ``x``'s shape and dtype — ``int_tensor * 1.0`` promotes to float
and ``x + zeros(bigger)`` broadcasts, so those stay. (``x + 0`` turns ``-0.0`` into ``+0.0``;
no comparison can tell them apart, so that is not a change of value worth keeping an op for.)
``x * 0`` is *not* simplified: ``inf * 0`` is NaN.
"""
from __future__ import annotations

from ..graph import Graph, Node
from .common import arg, replace_and_remove, same_spec, scalar_value
from .identities import _ops

ADDS = _ops("add.Tensor", "add.Scalar")
SUBS = _ops("sub.Tensor", "sub.Scalar")
MULS = _ops("mul.Tensor", "mul.Scalar")
DIVS = _ops("div.Tensor", "div.Scalar")
POWS = _ops("pow.Tensor_Scalar")


def simplified_source(node: Node):
    if node.kind != "op" or len(node.args) < 2:
        return None
    t = node.target
    a, b = node.args[0], node.args[1]

    def keep(x, neutral_is):
        return x if isinstance(x, Node) and same_spec(node, x) and neutral_is else None

    if t in ADDS:
        alpha = arg(node, 2, "alpha", 1)
        return keep(a, scalar_value(b) == 0) or keep(b, scalar_value(a) == 0 and alpha == 1)
    if t in SUBS:
        return keep(a, scalar_value(b) == 0)
    if t in MULS:
        return keep(a, scalar_value(b) == 1) or keep(b, scalar_value(a) == 1)
    if t in DIVS:
        return keep(a, scalar_value(b) == 1)
    if t in POWS:
        return keep(a, scalar_value(b) == 1)
    return None


def simplify_algebra(graph: Graph) -> int:
    changes = 0
    for node in list(graph.nodes):
        src = simplified_source(node)
        if src is not None:
            replace_and_remove(graph, node, src)
            changes += 1
    return changes
