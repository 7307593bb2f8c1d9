"""A peer file's dataflow graph (:meth:`PeerFile.graph`) as the graph view's :class:`DataflowGraph`
(no Qt here), so peer formats use the same layout and canvas as NAC.

Nodes keep the byte span that defines them: selecting a node selects those bytes (the document
turns an offset into the record holding it), and a selection maps back to the node whose span
holds its first byte. Peer op kinds map onto the view's colour classes. An edge that does not
go from an earlier node to a later one (a use before definition in a broken file) is dropped
and listed in ``problems``, because the layout needs the node order to be topological.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .document import Selection
from .graph_model import DataflowGraph, Node

#: peer node kind -> graph colour class
KIND_CLASS = {"matmul": "matmul", "conv": "matmul", "elementwise": "elementwise", "activation": "activation",
              "reduce": "reduction", "shape": "data", "index": "data", "input": "io", "output": "io",
              "const": "io", "control": "other", "norm": "normalisation"}


@dataclass
class SpanNode(Node):
    """A graph node standing for a byte range of a peer file."""
    span: Optional[tuple] = None

    def selection(self) -> Selection:
        return Selection("offset", self.span[0]) if self.span else Selection("offset", 0)


class PeerDataflowGraph(DataflowGraph):
    def node_for_selection(self, sel: Optional[Selection]) -> Optional[int]:
        off = _selection_offset(self, sel)
        if off is None:
            return None
        k = bisect_right(self._starts, off) - 1
        for j in range(k, max(-1, k - 64), -1):       # spans barely nest: look a few back
            a, b, node = self._ranges[j]
            if a <= off < b:
                return node
        return None

    def search(self, text: str) -> list[int]:
        q = text.strip().lower()
        return [i for i, nd in enumerate(self.nodes) if q and (q in nd.op.lower() or q in nd.label.lower())]


def _selection_offset(g: PeerDataflowGraph, sel: Optional[Selection]) -> Optional[int]:
    if sel is None:
        return None
    if sel.kind == "offset" and isinstance(sel.key, int):
        return sel.key
    if sel.kind in ("span", "section") and g.root is not None:
        span = g.root.find(sel.key)
        return span.offset if span is not None else None
    return None


def dataflow_from_peer(peer) -> Optional[PeerDataflowGraph]:
    """The graph view's graph for ``peer`` (``None`` when the format has no graph)."""
    pg = peer.graph()
    if pg is None:
        return None
    nodes: list[Node] = []
    index: dict[int, int] = {}
    for k, pn in enumerate(pg.nodes):
        index[pn.id] = k
        attrs = pn.attrs or {}
        detail = str(attrs.get("detail") or attrs.get("type") or "")   # "detail": the decoder's one-line summary
        if "line" in attrs:
            detail = f"line {attrs['line']}" + (f" · {detail}" if detail else "")
        kind = pn.kind if pn.kind in ("input", "output", "const") else "instruction"
        nodes.append(SpanNode(("peer", pn.id), kind, _elide(pn.label, 28), KIND_CLASS.get(pn.kind, "other"), k, k,
                              op=pn.label + (" (inferred)" if pn.inferred else ""), detail=detail, span=pn.span))
    edges = set()
    problems = []
    for e in pg.edges:
        s, d = index.get(e.src), index.get(e.dst)
        if s is None or d is None:
            continue
        if s < d:
            edges.add((s, d))
        elif s != d:
            problems.append(f"edge {pg.nodes[s].label} -> {pg.nodes[d].label} goes backwards (dropped)")
    arr = np.array(sorted(edges), dtype=np.int32).reshape(-1, 2)
    g = PeerDataflowGraph(nodes, arr, np.full(0, -1, dtype=np.int64), [], (), problems, True, False)
    g.root = peer.root
    ranges = sorted((n.span[0], n.span[0] + max(1, n.span[1]), i) for i, n in enumerate(nodes) if n.span)
    g._ranges = ranges
    g._starts = [r[0] for r in ranges]
    return g


def _elide(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"
