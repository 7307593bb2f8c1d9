"""Constant folding: ops whose inputs are all known at compile time are evaluated now.

Known values are the parameters (their tensors) and the results of pure ops over known values,
including creation ops with no tensor input (``arange``, ``full``...). A known value that
something unknown (or the output) reads becomes a new parameter ``_folded.<node name>``.

Size rule: a folded tensor is stored in the file, so it is only made when it is small
(≤ ``SMALL_BYTES``) or no bigger than the inputs it replaces — folding ``expand(bias, big)``
would bloat the file, folding a causal mask built from ``arange`` shrinks the program.
Ops that fail to evaluate on CPU simply stay.
"""
from __future__ import annotations

from typing import Any

import torch

from ..graph import Graph, map_nodes, spec_of_value
from .common import is_pure, replace_and_remove

SMALL_BYTES = 64 * 1024


def _nbytes(v: Any) -> int:
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, (tuple, list)):
        return sum(_nbytes(x) for x in v)
    return 0


def fold_constants(graph: Graph, small_bytes: int = SMALL_BYTES) -> int:
    known: dict[int, Any] = {n.id: n.tensor for n in graph.nodes if n.kind == "param"}
    with torch.no_grad():
        for node in graph.nodes:
            if node.kind != "op" or not is_pure(node.target):
                continue
            if any(src.id not in known for src in node.inputs()):
                continue
            args = map_nodes(node.args, lambda n: known[n.id])
            kwargs = map_nodes(node.kwargs, lambda n: known[n.id])
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
        budget = max(small_bytes, sum(_nbytes(known[s.id]) for s in node.inputs()))
        if _nbytes(value) > budget:
            continue
        tensor = value.detach().clone(memory_format=torch.contiguous_format)
        param = graph.new_node("param", graph.unique_param_name(f"_folded.{node.name}"),
                               spec=spec_of_value(tensor), tensor=tensor, origin="folded")
        graph.insert_before(node, param)
        replace_and_remove(graph, node, param)
        changes += 1
    return changes
