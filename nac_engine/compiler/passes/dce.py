"""Dead-code elimination: ops and parameters nothing reads.

Kept: user inputs (they are the model's interface even when unused), the outputs, and ops with
side effects (and export's asserts, which the identity pass removes).
"""
from __future__ import annotations

from ..graph import Graph
from .common import has_side_effect


def eliminate_dead_code(graph: Graph) -> int:
    live = graph.output_ids()
    keep = []
    for node in reversed(graph.nodes):
        if node.kind == "input" or node.id in live or has_side_effect(node):
            keep.append(node)
            live.update(src.id for src in node.inputs())
    removed = len(graph.nodes) - len(keep)
    if removed:
        keep.reverse()
        graph.nodes = keep
    return removed
