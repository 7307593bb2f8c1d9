"""Identity removal: ops whose result equals one of their inputs.

* copies and aliases: ``clone``, ``contiguous``, ``alias``, ``detach``, ``lift_fresh_copy``,
  ``positive``, ``copy(self, src)`` (→ ``src``), ``_to_copy``/``to`` to the same dtype — the graph
  is functional, so a copy is never written to; memory format and device do not change values,
  and NAC has no memory layout (its ``view`` is a reshape), so a ``contiguous`` before a ``view``
  is not needed either;
* eval-mode ``dropout(x, p, train=False)``;
* shape ops that keep the shape: ``view``/``reshape``/``_unsafe_view``/``expand``/``squeeze``/
  ``flatten``/``unflatten``/``slice``/``narrow``/``repeat`` (same shape ⇒ same elements in the
  same order), ``permute`` by the identity permutation, ``transpose(x, d, d)``;
* export's checks (``_assert_tensor_metadata`` and friends): static shapes and dtypes make them
  hold by construction, so they are deleted.

An op is only replaced when its result has exactly the input's shape and dtype.
"""
from __future__ import annotations

from ..graph import Graph, Node
from .common import arg, aten, is_assert, norm_dim, replace_and_remove, same_spec


def _ops(*names):
    out = set()
    for name in names:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(aten, packet, None), overload or "default", None)
        if op is not None:
            out.add(op)
    return frozenset(out)


COPIES = _ops("clone", "contiguous", "alias", "detach", "lift_fresh_copy", "positive", "_to_copy",
              "to.dtype", "to.dtype_layout", "to.device", "alias_copy", "detach_copy")
SAME_SHAPE = _ops("view", "view_copy", "reshape", "_unsafe_view", "expand", "expand_copy", "squeeze",
                  "squeeze.dim", "squeeze.dims", "squeeze_copy.dim", "flatten.using_ints", "unflatten.int",
                  "slice.Tensor", "slice_copy.Tensor", "narrow", "repeat")


def identity_source(node: Node):
    """The input this op's result equals, or None."""
    if node.kind != "op" or not node.args:
        return None
    t = node.target
    x = node.args[0]
    if not isinstance(x, Node):
        return None
    if t == aten.copy.default:
        src = node.args[1] if len(node.args) > 1 else None
        return src if isinstance(src, Node) and same_spec(node, src) else None
    if not same_spec(node, x):
        return None
    if t in COPIES or t in SAME_SHAPE:
        return x
    if t == aten.dropout.default:
        return x if arg(node, 2, "train", True) is False or arg(node, 1, "p", 0.5) == 0 else None
    ndim = len(x.spec.shape)
    if t == aten.permute.default:
        dims = [norm_dim(int(d), ndim) for d in arg(node, 1, "dims", ())]
        return x if dims == list(range(ndim)) else None
    if t == aten.transpose.int:
        d0, d1 = arg(node, 1, "dim0"), arg(node, 2, "dim1")
        return x if norm_dim(int(d0), ndim) == norm_dim(int(d1), ndim) else None
    return None


def remove_identities(graph: Graph) -> int:
    changes = 0
    users = None
    for node in list(graph.nodes):
        if node.kind != "op":
            continue
        if is_assert(node.target):
            users = users if users is not None else graph.users()
            if not users.get(node.id):
                graph.remove([node])
                changes += 1
            continue
        src = identity_source(node)
        if src is not None:
            replace_and_remove(graph, node, src)
            users = None
            changes += 1
    return changes
