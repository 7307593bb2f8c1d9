"""Complex constants as real pairs: NAC's DATA has no complex dtype, so a complex tensor known at
compile time (a RoPE table from ``torch.polar``, folded or registered as a buffer) is stored as
``view_as_real`` of it (float, one trailing dim of 2) and read back through one
``aten.view_as_complex`` op. The values are the same bits; nothing is approximated.
"""
from __future__ import annotations

import torch

from ..graph import Graph, Node, spec_of_value
from .common import aten, replace_and_remove


def store_as_real_pairs(graph: Graph, node: Node, value: torch.Tensor) -> Node:
    """Replace ``node`` (a complex op result or parameter) by a real-pairs parameter and a
    ``view_as_complex`` of it; returns the new op node."""
    pairs = torch.view_as_real(value.detach().resolve_conj().contiguous()).clone()
    base = node.name if node.kind == "param" else f"_folded.{node.name}"
    param = graph.new_node("param", graph.unique_param_name(f"{base}.real_pairs"), spec=spec_of_value(pairs),
                           tensor=pairs, origin="folded")
    graph.insert_before(node, param)
    back = graph.new_node("op", f"{node.name.replace('.', '_')}_as_complex", target=aten.view_as_complex.default,
                          args=(param,), kwargs={}, spec=spec_of_value(value))
    back.origin = node.origin if node.kind == "op" else ""
    graph.insert_before(node, back)
    replace_and_remove(graph, node, back)
    return back


def complex_params_as_pairs(graph: Graph) -> int:
    """Every complex parameter/buffer of the model stored as real pairs (run with or without the
    optimiser: the format cannot hold the complex tensor either way)."""
    changes = 0
    for node in list(graph.nodes):
        if node.kind == "param" and isinstance(node.tensor, torch.Tensor) and node.tensor.is_complex():
            store_as_real_pairs(graph, node, node.tensor)
            changes += 1
    return changes


__all__ = ["store_as_real_pairs", "complex_params_as_pairs"]
