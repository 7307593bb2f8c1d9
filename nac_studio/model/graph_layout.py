"""Layered (Sugiyama) layout of a :class:`~nac_studio.model.graph_model.DataflowGraph` (no Qt here).

igraph's ``layout_sugiyama`` (C core) orders the vertices inside each layer and routes
edges through dummy vertices; the layering is ours, because the instruction stream
already is a topological order and two layerings are useful:

* ``"longest-path"``: a node sits one layer above its first consumer, computed in reverse
  tick order (longest path *to the sinks*). Plain longest path from the sources would put
  every parameter and constant in layer 0, miles above its consumer: on GPT-2 XL with
  constants shown that is two million dummy vertices (5 s in igraph) instead of two
  thousand (milliseconds). The main trunk gets the same layers either way.
* ``"tick"``: one layer per visible node in tick order, so the vertical axis is the
  execution order and lines up with the MMAP timeline (constants sit one layer above
  their consumer; a source shared by collapsed blocks, right above the first of them).
  Each node's ``tick`` says which tick its row stands for.

Speed. The cost of igraph's Sugiyama is its crossing reduction, roughly
``maxiter × (vertices + dummy vertices)``. The dummy count is known before calling it (sum
of edge spans), so ``maxiter`` is chosen from it: full quality on small graphs, one sweep
on huge ones. If even that would be too slow (a layering with more than
:data:`DUMMY_BUDGET` dummies, e.g. a random DAG with many edges across the whole model),
the longest edges are left out of the Sugiyama input and drawn as direct curves: they
then do not influence the ordering, which is what keeps the layout under a few seconds.

Coordinates. igraph places vertices (dummies included) at least ``hgap`` apart as if all
had the same width. Our nodes have different widths and dummies have none, so each layer
is re-spaced with the real widths: a left-to-right sweep (push right to make room) and a
right-to-left sweep (push left), averaged. Both satisfy the minimum separations, and so
does their average (the constraints are linear), while the drift of a one-sided sweep
cancels out.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .graph_model import DataflowGraph

MODES = ("longest-path", "tick")

#: Node box sizes (width, height) in scene units (pixels at zoom 1), by node kind.
NODE_SIZE = {"instruction": (150.0, 32.0), "param": (128.0, 24.0), "input": (128.0, 30.0),
             "output": (110.0, 30.0), "const": (88.0, 22.0), "group": (190.0, 46.0)}
ROW_PITCH = 64.0        # vertical distance between layers
UNIT = 80.0             # scene units per igraph x unit (the real spacing comes from the sweeps)
GAP = 22.0              # minimum horizontal gap between boxes
DUMMY_WIDTH = 6.0       # room taken by an edge passing through a layer
DUMMY_BUDGET = 400_000  # beyond this many dummy vertices the longest edges are not routed


class LayoutCancelled(Exception):
    """``cancelled()`` returned true between two stages of :func:`layout_graph`."""


@dataclass
class GraphLayout:
    graph: DataflowGraph
    mode: str
    pos: np.ndarray            # (n, 2) box centres
    size: np.ndarray           # (n, 2) box width, height
    layer: np.ndarray          # (n,) layer index
    edge_points: list          # per edge of graph.edges: (k, 2) polyline, source bottom → target top
    edge_routed: np.ndarray    # (m,) False for edges drawn direct (not routed through dummies)
    width: float
    height: float
    stats: dict = field(default_factory=dict)

    def rect(self, i: int) -> tuple[float, float, float, float]:
        (x, y), (w, h) = self.pos[i], self.size[i]
        return x - w / 2, y - h / 2, w, h

    def node_at(self, x: float, y: float) -> Optional[int]:
        if not len(self.pos):
            return None
        hit = np.nonzero((np.abs(self.pos[:, 0] - x) <= self.size[:, 0] / 2) &
                         (np.abs(self.pos[:, 1] - y) <= self.size[:, 1] / 2))[0]
        return int(hit[0]) if len(hit) else None

    def nodes_in(self, x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
        """Indices of boxes intersecting the rectangle (for painting only what is visible)."""
        half = self.size / 2
        return np.nonzero((self.pos[:, 0] + half[:, 0] >= x0) & (self.pos[:, 0] - half[:, 0] <= x1) &
                          (self.pos[:, 1] + half[:, 1] >= y0) & (self.pos[:, 1] - half[:, 1] <= y1))[0]


def compute_layers(graph: DataflowGraph, mode: str = "longest-path") -> np.ndarray:
    """Layer per node; every edge goes from a lower layer to a higher one."""
    n = graph.n_nodes
    edges = graph.edges
    if mode not in MODES:
        raise ValueError(f"unknown layout mode {mode!r} (expected one of {MODES})")
    if mode == "tick":
        is_const = np.array([nd.kind == "const" for nd in graph.nodes], dtype=bool)
        layer = np.zeros(n, dtype=np.int64)
        layer[~is_const] = np.arange(int((~is_const).sum())) + (1 if is_const.any() else 0)
        if is_const.any():
            # a const node's only edge goes to its consumer, the next non-const node
            consumer = np.full(n, -1, dtype=np.int64)
            consumer[edges[:, 0]] = edges[:, 1]
            idx = np.nonzero(is_const)[0]
            layer[idx] = layer[consumer[idx]] - 1
        return layer
    # longest path from the sources (node order is topological: every edge has src < dst)
    asap = np.zeros(n, dtype=np.int64)
    order = np.argsort(edges[:, 1], kind="stable")
    for s, d in edges[order]:
        if asap[s] + 1 > asap[d]:
            asap[d] = asap[s] + 1
    # then each node one layer above its first consumer, in reverse order (see module docstring)
    layer = asap.copy()
    by_src = np.argsort(edges[:, 0], kind="stable")
    src_sorted, dst_sorted = edges[by_src, 0], edges[by_src, 1]
    starts = np.searchsorted(src_sorted, np.arange(n))
    ends = np.searchsorted(src_sorted, np.arange(n), side="right")
    for v in range(n - 1, -1, -1):
        a, b = starts[v], ends[v]
        if a < b:
            m = layer[dst_sorted[a:b]].min()
            layer[v] = m - 1
    return layer - layer.min() if n else layer


def _maxiter_for(work: int) -> int:
    # crossing reduction sweeps, by extended-graph size; measured on this project's 2-core VM
    if work < 20_000:
        return 50
    if work < 100_000:
        return 10
    if work < 300_000:
        return 3
    return 1


def sugiyama_coordinates(n: int, edges: np.ndarray, layers: np.ndarray,
                         maxiter: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """igraph's Sugiyama: vertex coordinates (n×2), and each edge's bend points as one (k×2)
    array of all points plus per-edge counts. The Studio runs it in the engine host (the
    ``nac/sugiyama`` request): python-igraph holds the GIL for the whole C call, 80-110 ms on a
    2,314-node graph, which in the window's process froze the UI for as long."""
    import igraph
    g = igraph.Graph(n=n, edges=np.asarray(edges).tolist(), directed=True)
    lay = g.layout_sugiyama(layers=np.asarray(layers).tolist(), hgap=1, vgap=1, maxiter=maxiter)
    coords = np.asarray(lay.coords, dtype=np.float64).reshape(-1, 2)[:n]
    routing = lay.edge_routing
    counts = np.fromiter((len(r) for r in routing), dtype=np.int64, count=len(routing))
    points = np.asarray([p[:2] for r in routing for p in r], dtype=np.float64).reshape(-1, 2)
    return coords, points, counts


def layout_graph(graph: DataflowGraph, mode: str = "longest-path",
                 progress: Optional[Callable[[float, float], None]] = None,
                 cancelled: Optional[Callable[[], bool]] = None,
                 sugiyama: Callable = sugiyama_coordinates) -> GraphLayout:
    """Place ``graph`` in layers (see the module docstring). Runs headless, off the UI thread.

    ``progress(done, total)`` is called between stages; ``cancelled()`` is polled there and
    :class:`LayoutCancelled` raised when it returns true. ``sugiyama``: where igraph's crossing
    reduction runs (the Studio: in the engine host; :func:`sugiyama_coordinates`'s signature).
    """
    import igraph   # the C core is only needed here; importing the model stays light

    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def stage(name: str, frac: float) -> None:
        now = time.perf_counter()
        timings[name] = now - stage.t
        stage.t = now
        if progress is not None:
            progress(frac, 1.0)
        if cancelled is not None and cancelled():
            raise LayoutCancelled()
    stage.t = t0

    n = graph.n_nodes
    edges = graph.edges
    m = len(edges)
    size = np.array([NODE_SIZE.get(nd.kind, NODE_SIZE["instruction"]) for nd in graph.nodes],
                    dtype=np.float64).reshape(-1, 2)
    layer = compute_layers(graph, mode)
    stage("layers", 0.1)

    span = (layer[edges[:, 1]] - layer[edges[:, 0]] - 1) if m else np.zeros(0, dtype=np.int64)
    routed = np.ones(m, dtype=bool)
    dummies = int(span.sum())
    if dummies > DUMMY_BUDGET:
        # leave the longest edges out until the rest fits the budget
        order = np.argsort(span)
        keep = np.cumsum(span[order]) <= DUMMY_BUDGET
        routed[:] = False
        routed[order[keep]] = True
        dummies = int(span[routed].sum())
    maxiter = _maxiter_for(n + dummies)

    xs = np.zeros(n)
    routing: list = [[] for _ in range(m)]
    # igraph 1.0's Sugiyama crashes (segfault in the C core) on disconnected input: fuzzing
    # with random layered DAGs, 0 of 200 connected graphs crashed, while batches of graphs
    # with 2 or 5 components crashed in 2/25 and 13/25 runs (an isolated vertex is such a
    # component). So each weakly connected component is laid out on its own, and the
    # components are put side by side; isolated nodes need no igraph call at all.
    sub_edges = edges[routed]
    routed_ids = np.nonzero(routed)[0]
    full = igraph.Graph(n=n, edges=sub_edges.tolist(), directed=True)
    comp = np.asarray(full.connected_components(mode="weak").membership, dtype=np.int64)
    n_comp = int(comp.max()) + 1 if n else 0
    edge_comp = comp[sub_edges[:, 0]] if len(sub_edges) else np.zeros(0, dtype=np.int64)
    order_e = np.argsort(edge_comp, kind="stable")
    starts = np.searchsorted(edge_comp[order_e], np.arange(n_comp + 1))
    members_of = np.argsort(comp, kind="stable")
    m_starts = np.searchsorted(comp[members_of], np.arange(n_comp + 1))
    x_offset = 0.0
    for c in range(n_comp):
        members = members_of[m_starts[c]:m_starts[c + 1]]
        eids = order_e[starts[c]:starts[c + 1]]
        if not len(eids):
            xs[members] = x_offset
            x_offset += 1.0
            continue
        local = np.full(n, -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        coords, bends, counts = sugiyama(len(members), local[sub_edges[eids]], layer[members], maxiter)
        cx = coords[:, 0]
        lo = min(cx.min(), bends[:, 0].min()) if len(bends) else cx.min()
        hi = max(cx.max(), bends[:, 0].max()) if len(bends) else cx.max()
        xs[members] = cx - lo + x_offset
        bend_list = (bends + (x_offset - lo, 0.0)).tolist()
        cursor = 0
        for k, e in enumerate(eids):
            c = int(counts[k])
            routing[routed_ids[e]] = [tuple(p) for p in bend_list[cursor:cursor + c]]
            cursor += c
        x_offset += hi - lo + 1.0
    stage("sugiyama", 0.75)

    # dummies (edge bends) become items like nodes: one list of items per layer, in igraph's order
    d_edge, d_x, d_layer = [], [], []
    for e, pts in enumerate(routing):
        for x, y in pts:
            d_edge.append(e)
            d_x.append(x)
            d_layer.append(int(round(y)))
    n_items = n + len(d_x)
    all_x = np.concatenate([xs, np.asarray(d_x, dtype=np.float64)]) * UNIT
    all_layer = np.concatenate([layer, np.asarray(d_layer, dtype=np.int64)])
    all_w = np.concatenate([size[:, 0], np.full(len(d_x), DUMMY_WIDTH)])
    chains = _edge_chains(edges, routed, d_edge, n)
    sweeps = _sweeps_for(n_items)
    if sweeps:
        new_x = _place(all_x, all_layer, all_w, chains, edges, n, sweeps)
    else:
        new_x = _respace(all_x, all_layer, all_w)
    if len(new_x):
        new_x -= (new_x - all_w / 2).min()
    stage("coordinates", 0.9)

    pos = np.empty((n, 2))
    pos[:, 0] = new_x[:n]
    pos[:, 1] = layer * ROW_PITCH + ROW_PITCH / 2
    dummy_pts = new_x[n:]
    points: list = [None] * m
    cursor = 0
    counts = np.zeros(m, dtype=np.int64)
    for e in d_edge:
        counts[e] += 1
    for e in range(m):
        s, d = edges[e]
        k = counts[e]
        pts = np.empty((k + 2, 2))
        pts[0] = (pos[s, 0], pos[s, 1] + size[s, 1] / 2)
        pts[-1] = (pos[d, 0], pos[d, 1] - size[d, 1] / 2)
        if k:
            pts[1:-1, 0] = dummy_pts[cursor:cursor + k]
            pts[1:-1, 1] = np.asarray(routing[e], dtype=np.float64)[:, 1] * ROW_PITCH + ROW_PITCH / 2
            cursor += k
        points[e] = pts
    width = float((pos[:, 0] + size[:, 0] / 2).max()) if n else 0.0
    if len(dummy_pts):
        width = max(width, float(dummy_pts.max()) + DUMMY_WIDTH)
    height = float((layer.max() + 1) * ROW_PITCH) if n else 0.0
    stage("edges", 1.0)
    timings["total"] = time.perf_counter() - t0
    stats = {"nodes": n, "edges": m, "layers": int(layer.max() + 1) if n else 0, "dummies": dummies,
             "unrouted_edges": int((~routed).sum()), "maxiter": maxiter, "placement_sweeps": sweeps,
             "seconds": timings}
    return GraphLayout(graph, mode, pos, size, layer, points, routed, width, height, stats)


def _respace(x: np.ndarray, layer: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Positions as close to ``x`` as the real widths allow, order within each layer kept."""
    if not len(x):
        return x
    order = np.lexsort((x, layer))
    xs, ls, ws = x[order], layer[order], width[order]
    new_layer = np.ones(len(xs), dtype=bool)
    new_layer[1:] = ls[1:] != ls[:-1]
    # separation needed between item i-1 and item i (0 at the start of a layer)
    sep = np.zeros(len(xs))
    sep[1:] = (ws[1:] + ws[:-1]) / 2 + GAP
    sep[new_layer] = 0.0
    cum = np.cumsum(sep)
    start = np.maximum.accumulate(np.where(new_layer, np.arange(len(xs)), 0))
    cum_in_layer = cum - cum[start]
    # sweep right: p_i = max(x_i, p_{i-1} + sep_i)  <=>  p - S = running max of (x - S) per layer.
    # A per-layer offset larger than any coordinate keeps the running max inside each layer.
    big = (np.abs(xs).max() + cum_in_layer.max() + 1.0) * 4.0
    lid = np.cumsum(new_layer) - 1
    right = np.maximum.accumulate(xs - cum_in_layer + lid * big) - lid * big + cum_in_layer
    # sweep left: the mirror image (run from the end of each layer)
    rx, rsep_layer = -xs[::-1], ls[::-1]
    rnew = np.ones(len(xs), dtype=bool)
    rnew[1:] = rsep_layer[1:] != rsep_layer[:-1]
    rws = ws[::-1]
    rsep = np.zeros(len(xs))
    rsep[1:] = (rws[1:] + rws[:-1]) / 2 + GAP
    rsep[rnew] = 0.0
    rcum = np.cumsum(rsep)
    rstart = np.maximum.accumulate(np.where(rnew, np.arange(len(xs)), 0))
    rcum_in = rcum - rcum[rstart]
    rlid = np.cumsum(rnew) - 1
    left = -(np.maximum.accumulate(rx - rcum_in + rlid * big) - rlid * big + rcum_in)[::-1]
    out = np.empty(len(xs))
    out[order] = (right + left) / 2
    return out


def _edge_chains(edges: np.ndarray, routed: np.ndarray, d_edge: list, n: int) -> list:
    """Item chain of every routed edge: source node, its dummies in order, target node."""
    chains = []
    k = n
    pos = 0
    for e in range(len(edges)):
        dummies = []
        while pos < len(d_edge) and d_edge[pos] == e:
            dummies.append(k)
            k += 1
            pos += 1
        if routed[e]:
            chains.append([int(edges[e, 0])] + dummies + [int(edges[e, 1])])
    return chains


def _sweeps_for(items: int) -> int:
    # pure-Python placement costs a few microseconds per item and sweep; past 20k items
    # (a 20k-node graph) two sweeps keep the layout under its 3 s budget, and the trunk
    # is already straight after the first
    if items <= 20_000:
        return 4
    if items <= 60_000:
        return 2
    if items <= 150_000:
        return 1
    return 0


def _place(x: np.ndarray, layer: np.ndarray, width: np.ndarray, chains: list, edges: np.ndarray,
           n: int, sweeps: int) -> np.ndarray:
    """Coordinate assignment: alternate down and up sweeps; in each, every item is placed as
    close as the widths allow to its *main* neighbour in the previous layer.

    Why not igraph's coordinates: on a long chain with side inputs (every linear reads two
    parameters) its placement drifts sideways by half a unit per block — GPT-2's trunk ends
    40 units right of where it starts — and it spaces dummies as if they were as wide as
    nodes. Why the main neighbour and not the mean of all neighbours: a merge (the ``where``
    that reads the causal-mask branch, a residual ``add``) would then sit between its inputs
    and the trunk would step sideways at every merge. The main upper neighbour is the one
    with the longest path from the sources (the trunk, not the mask branch); the main lower
    neighbour the one with the longest path to the sinks. Where items of one layer want the
    same spot, the one on the longer path wins (see the priorities below), so side branches
    give way to the trunk.

    "As close as the widths allow" is exact: with ``q_i = p_i - S_i`` (``S`` the running
    sum of minimum separations) the order constraints become ``q`` non-decreasing, and the
    least-squares fit is isotonic regression, solved by pool adjacent violators in linear
    time per layer — here with lexicographic priorities instead of weights.
    """
    total = len(x)
    depth, height = _path_lengths(edges, n)
    longest = max(1, int((depth + height).max())) if n else 1
    src_of = [0] * total
    dst_of = [0] * total
    main_up = [-1] * total
    main_down = [-1] * total
    for ch in chains:
        s, d = ch[0], ch[-1]
        for k in ch[1:-1]:
            src_of[k], dst_of[k] = s, d
            main_up[k] = -2           # marker: set below from the chain
    dep = depth.tolist()
    hei = height.tolist()
    key_up = [-1.0] * total
    key_down = [-1.0] * total
    for ch in chains:
        s, d = ch[0], ch[-1]
        for a, b in zip(ch, ch[1:]):
            ka = dep[a] if a < n else dep[src_of[a]]
            if ka > key_up[b]:
                key_up[b], main_up[b] = ka, a
            kb = hei[b] if b < n else hei[dst_of[b]]
            if kb > key_down[a]:
                key_down[a], main_down[a] = kb, b
    # Priority by slack: how much shorter the longest path through an item is than the
    # longest path in the graph. The trunk has slack 0; a residual edge skipping 20 layers
    # slack 20, a parameter feeding a deep layer a large one. Priorities are strict (the
    # trunk keeps its line exactly where a residual bend or a q/k/v branch wants the same
    # spot): with weights, even 1 against 1/4, the trunk steps aside a little at every
    # fork and a 48-block model slants by thousands of pixels. Equal-slack parallel
    # branches share the middle.
    prio = []
    for i in range(total):
        through = dep[i] + hei[i] if i < n else dep[src_of[i]] + 1 + hei[dst_of[i]]
        prio.append(through - longest)
    order = np.lexsort((x, layer))
    layers: list[list[int]] = []
    prev = None
    for i in order.tolist():
        li = int(layer[i])
        if li != prev:
            layers.append([])
            prev = li
        layers[-1].append(i)
    xs = x.tolist()
    ws = width.tolist()
    for ids in layers:     # start from the order only: each layer packed around 0
        for k, v in zip(ids, _pav(ids, [0.0] * len(ids), [0] * len(ids), ws)):
            xs[k] = v
    for sweep in range(2 * sweeps + 1):     # down, up, ..., down: the trunk follows its producers last
        main = main_up if sweep % 2 == 0 else main_down
        seq = layers if sweep % 2 == 0 else layers[::-1]
        for ids in seq:
            targets, prios = [], []
            for k in ids:
                j = main[k]
                if j >= 0:
                    targets.append(xs[j])
                    prios.append(prio[k])
                else:    # nothing to follow in this direction: give way to everything
                    targets.append(xs[k])
                    prios.append(_YIELD)
            for k, v in zip(ids, _pav(ids, targets, prios, ws)):
                xs[k] = v
    # The last down sweep moved the trunk; sources (parameters, constants) were placed by the
    # up sweep before it. One more bottom-up pass brings each source next to its consumer
    # while everything else keeps its place (a weight the sources cannot move).
    for ids in layers[::-1]:
        if all(main_up[k] >= 0 for k in ids):
            continue
        targets, prios = [], []
        for k in ids:
            if main_up[k] < 0 and main_down[k] >= 0:
                targets.append(xs[main_down[k]])
                prios.append(0)
            else:
                targets.append(xs[k])
                prios.append(1)
        for k, v in zip(ids, _pav(ids, targets, prios, ws)):
            xs[k] = v
    return np.asarray(xs, dtype=np.float64)


def _path_lengths(edges: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Longest path (in edges) from any source to each node, and from each node to any sink."""
    depth = np.zeros(n, dtype=np.int64)
    height = np.zeros(n, dtype=np.int64)
    if not len(edges):
        return depth, height
    dep = depth.tolist()
    hei = height.tolist()
    fwd = edges[np.argsort(edges[:, 1], kind="stable")].tolist()
    for s, d in fwd:
        if dep[s] + 1 > dep[d]:
            dep[d] = dep[s] + 1
    for s, d in edges[np.argsort(-edges[:, 0], kind="stable")].tolist():
        if hei[d] + 1 > hei[s]:
            hei[s] = hei[d] + 1
    return np.asarray(dep, dtype=np.int64), np.asarray(hei, dtype=np.int64)


_YIELD = -(1 << 60)


def _pav(ids: list, targets: list, prios: list, ws: list) -> list:
    """Ordered positions closest to ``targets`` with boxes not overlapping; where targets
    conflict, higher priority wins outright (equal priorities share the difference)."""
    k = len(ids)
    if k == 1:
        return [targets[0]]
    offs = [0.0] * k
    for i in range(1, k):
        a, b = ws[ids[i - 1]], ws[ids[i]]
        gap = GAP if (a > DUMMY_WIDTH or b > DUMMY_WIDTH) else 2.0
        offs[i] = offs[i - 1] + (a + b) / 2 + gap
    # pool adjacent violators on y_i = target_i - offset_i; a block is
    # [top priority, sum of y over its top-priority items, their count, size]
    blocks: list[list] = []
    for i in range(k):
        blocks.append([prios[i], targets[i] - offs[i], 1, 1])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] > blocks[-1][1] / blocks[-1][2]:
            p2, s2, c2, n2 = blocks.pop()
            p1, s1, c1, n1 = blocks[-1]
            if p2 > p1:
                blocks[-1] = [p2, s2, c2, n1 + n2]
            elif p1 > p2:
                blocks[-1] = [p1, s1, c1, n1 + n2]
            else:
                blocks[-1] = [p1, s1 + s2, c1 + c2, n1 + n2]
    out = []
    i = 0
    for _p, total, count, size in blocks:
        m = total / count
        for _ in range(size):
            out.append(m + offs[i])
            i += 1
    return out


# --------------------------------------------------------------------------- across processes
def layout_to_data(lay: GraphLayout) -> dict:
    """The layout and its graph as plain data and arrays (the engine host builds and lays out a
    file's graph; :func:`layout_from_data` gives the same objects back in the window)."""
    import dataclasses
    g = lay.graph
    counts = np.array([len(p) for p in lay.edge_points], dtype=np.int64)
    points = np.concatenate(lay.edge_points) if lay.edge_points else np.zeros((0, 2))
    return {"nodes": [dataclasses.asdict(nd) for nd in g.nodes], "edges": np.asarray(g.edges),
            "node_of_tick": np.asarray(g.node_of_tick), "blocks": [dataclasses.asdict(b) for b in g.blocks],
            "collapsed": list(g.collapsed), "problems": list(g.problems), "show_params": g.show_params,
            "show_consts": g.show_consts, "mode": lay.mode, "pos": lay.pos, "size": lay.size, "layer": lay.layer,
            "edge_points": np.asarray(points, dtype=np.float64), "edge_counts": counts,
            "edge_routed": np.asarray(lay.edge_routed), "width": lay.width, "height": lay.height,
            "stats": lay.stats}


def _tuples(v):
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def layout_from_data(d: dict) -> GraphLayout:
    from .graph_model import Block, Node
    nodes = [Node(**{k: _tuples(v) if k in ("key", "params", "composition") else v for k, v in nd.items()})
             for nd in d["nodes"]]
    blocks = [Block(**{**b, "shared": tuple(b.get("shared") or ())}) for b in d["blocks"]]
    edges = np.asarray(d["edges"]).reshape(-1, 2)
    graph = DataflowGraph(nodes, edges, np.asarray(d["node_of_tick"]), blocks, tuple(d["collapsed"]),
                          list(d["problems"]), bool(d["show_params"]), bool(d["show_consts"]))
    counts = np.asarray(d["edge_counts"], dtype=np.int64)
    points = np.asarray(d["edge_points"], dtype=np.float64).reshape(-1, 2)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    edge_points = [points[bounds[i]:bounds[i + 1]] for i in range(len(counts))]
    return GraphLayout(graph, d["mode"], np.asarray(d["pos"]).reshape(-1, 2), np.asarray(d["size"]).reshape(-1, 2),
                       np.asarray(d["layer"]), edge_points, np.asarray(d["edge_routed"]), float(d["width"]),
                       float(d["height"]), d.get("stats") or {})
