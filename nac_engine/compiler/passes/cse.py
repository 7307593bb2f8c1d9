"""Common-subexpression elimination: a pure op with the same target and the same arguments as an
earlier one is replaced by it.

Arguments compare by node identity and by typed value: ``1``, ``1.0`` and ``True`` differ (they
can select different overload behaviour and dtypes), ``-0.0`` differs from ``0.0``, NaN equals NaN.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from ..graph import Graph, Node, target_name
from .common import is_pure, replace_and_remove


def _freeze(v: Any) -> Any:
    if isinstance(v, Node):
        return ("node", v.id)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("float", "nan" if math.isnan(v) else v.hex())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_freeze(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((k, _freeze(x)) for k, x in v.items())))
    if isinstance(v, (str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(v).__name__, str(v))
    return ("object", id(v))   # unknown objects only match themselves


def eliminate_common_subexpressions(graph: Graph) -> int:
    seen: dict[Any, Node] = {}
    changes = 0
    for node in list(graph.nodes):
        if node.kind != "op" or not is_pure(node.target):
            continue
        key = (target_name(node.target), _freeze(node.args), _freeze(node.kwargs))
        first = seen.get(key)
        if first is None:
            seen[key] = node
        else:
            replace_and_remove(graph, node, first)
            changes += 1
    return changes
