"""Removal of paired inverses: ``outer(inner(x))`` that gives back ``x``.

* ``transpose(transpose(x, a, b), a, b)`` (either dim order), ``t(t(x))``;
* ``permute(permute(x, p), q)`` when ``q`` undoes ``p``;
* ``neg(neg(x))``;
* reshape chains: ``view``/``reshape``/``_unsafe_view``/``squeeze``/``unsqueeze``/``flatten``/
  ``unflatten`` all keep row-major element order, so two of them in a row that end at ``x``'s
  shape are ``x``; a ``view``/``reshape`` of another reshape reads ``x`` directly instead
  (the inner op then often dies).

Only ``outer`` is replaced; ``inner`` stays while something else reads it.
"""
from __future__ import annotations

from ..graph import Graph, Node
from .common import arg, aten, norm_dim, replace_and_remove, same_spec
from .identities import _ops

RESHAPES = _ops("view", "reshape", "_unsafe_view", "squeeze", "squeeze.dim", "squeeze.dims", "unsqueeze",
                "flatten.using_ints", "unflatten.int")
DIRECT_VIEWS = _ops("view", "reshape", "_unsafe_view")


def _inner(node: Node):
    x = node.args[0] if node.args else None
    return x if isinstance(x, Node) and x.kind == "op" and x.args and isinstance(x.args[0], Node) else None


def _transpose_dims(node: Node, ndim: int):
    return {norm_dim(int(arg(node, 1, "dim0")), ndim), norm_dim(int(arg(node, 2, "dim1")), ndim)}


def undo_source(node: Node):
    """``(x, collapse)``: ``x`` when ``node`` undoes its input's op; with ``collapse`` True the
    node should read ``x`` instead of its input (it stays, but no longer needs the inner op)."""
    if node.kind != "op":
        return None, False
    inner = _inner(node)
    if inner is None:
        return None, False
    x = inner.args[0]
    t, ti = node.target, inner.target
    if t in RESHAPES and ti in RESHAPES:
        if same_spec(node, x):
            return x, False
        if t in DIRECT_VIEWS:
            return x, True
        return None, False
    if not same_spec(node, x):
        return None, False
    ndim = len(x.spec.shape)
    if t == ti == aten.transpose.int:
        return (x, False) if _transpose_dims(node, ndim) == _transpose_dims(inner, ndim) else (None, False)
    if t == ti == aten.t.default or t == ti == aten.neg.default:
        return x, False
    if t == ti == aten.permute.default:
        p = [norm_dim(int(d), ndim) for d in arg(inner, 1, "dims")]
        q = [norm_dim(int(d), ndim) for d in arg(node, 1, "dims")]
        return (x, False) if [p[q[i]] for i in range(ndim)] == list(range(ndim)) else (None, False)
    return None, False


def remove_inverse_pairs(graph: Graph) -> int:
    changes = 0
    for node in list(graph.nodes):
        x, collapse = undo_source(node)
        if x is None:
            continue
        if collapse:
            node.args = (x,) + tuple(node.args[1:])
        else:
            replace_and_remove(graph, node, x)
        changes += 1
    return changes
