"""Advanced indexing by constant index tensors → one gather with precomputed offsets.

``x[i0, ..., ik]`` (``aten.index.Tensor``) takes a *list* of tensors, which NAC can only store
flattened. When the indices are compile-time constants the lookup is a fixed gather:

* every dim indexed: ``take(x, Σ i_d · stride_d)`` with the flat offsets folded into one parameter;
* one dim ``d`` indexed, the others whole (``x[:, idx]``): ``index_select(x, d, idx.flatten())``,
  then a ``view`` to the result's shape when ``idx`` is not 1-D.

Negative indices are normalised; bool masks and out-of-range indices are left as they are.
"""
from __future__ import annotations

import torch

from ..graph import Graph, Node, spec_of_value
from .common import aten, constant_tensor, replace_and_remove


def _int_index(v, size: int):
    t = constant_tensor(v)
    if t is None or t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        return None
    t = t.to(torch.int64)
    t = torch.where(t < 0, t + size, t)
    if t.numel() and (t.min() < 0 or t.max() >= size):
        return None
    return t


def _param(graph: Graph, anchor: Node, name: str, tensor: torch.Tensor) -> Node:
    tensor = tensor.contiguous()
    node = graph.new_node("param", graph.unique_param_name(name), spec=spec_of_value(tensor), tensor=tensor,
                          origin="folded")
    return graph.insert_before(anchor, node)


def _op(graph: Graph, anchor: Node, name: str, target, args, spec) -> Node:
    return graph.insert_before(anchor, graph.new_node("op", name, target=target, args=args, spec=spec))


def simplify_constant_index(graph: Graph) -> int:
    changes = 0
    for node in list(graph.nodes):
        if node.kind != "op" or node.target != aten.index.Tensor or len(node.args) != 2:
            continue
        x, indices = node.args
        if not isinstance(x, Node) or x.spec is None or not isinstance(indices, (list, tuple)):
            continue
        shape = x.spec.shape
        present = [(d, v) for d, v in enumerate(indices) if v is not None]
        if len(present) == len(shape) and len(indices) == len(shape):
            idx = [_int_index(v, shape[d]) for d, v in present]
            if any(i is None for i in idx):
                continue
            strides = torch.empty(shape, device="meta").stride() if shape else ()
            flat = sum(i * s for i, s in zip(idx, strides))
            flat = torch.broadcast_to(torch.as_tensor(flat), torch.broadcast_shapes(*(i.shape for i in idx)))
            offsets = _param(graph, node, f"_folded.{node.name}.offsets", flat.clone())
            new = _op(graph, node, f"{node.name}_take", aten.take.default, (x, offsets), node.spec)
        elif len(present) == 1:
            d, v = present[0]
            idx = _int_index(v, shape[d])
            if idx is None:
                continue
            flat = _param(graph, node, f"_folded.{node.name}.index", idx.reshape(-1).clone())
            sel_shape = shape[:d] + (idx.numel(),) + shape[d + 1:]
            sel_spec = type(node.spec)(sel_shape, node.spec.dtype)
            new = _op(graph, node, f"{node.name}_select", aten.index_select.default, (x, d, flat), sel_spec)
            if idx.dim() != 1:
                new = _op(graph, node, f"{node.name}_view", aten.view.default, (new, list(node.spec.shape)),
                          node.spec)
        else:
            continue
        replace_and_remove(graph, node, new)
        changes += 1
    return changes
