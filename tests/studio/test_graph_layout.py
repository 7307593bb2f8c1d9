"""Layered layout: producers above consumers, no overlaps, edges routed between the right boxes."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nac_engine.format.model import Header, NacFile  # noqa: E402
from nac_engine.format.reader import read  # noqa: E402
from nac_studio.model import graph_layout  # noqa: E402
from nac_studio.model.graph_layout import GAP, LayoutCancelled, compute_layers, layout_graph  # noqa: E402
from nac_studio.model.graph_model import build_graph, detect_block_prefixes  # noqa: E402
from tests.studio.gpt2_like import gpt2_like  # noqa: E402


def check_layout(lay):
    g = lay.graph
    n = g.n_nodes
    assert lay.pos.shape == (n, 2) and lay.size.shape == (n, 2)
    assert np.isfinite(lay.pos).all()
    src, dst = g.edges[:, 0], g.edges[:, 1]
    # producers above consumers, in layers and on screen
    assert (lay.layer[src] < lay.layer[dst]).all()
    assert (lay.pos[src, 1] + lay.size[src, 1] / 2 < lay.pos[dst, 1] - lay.size[dst, 1] / 2).all()
    # boxes of one layer do not overlap
    for layer in np.unique(lay.layer):
        idx = np.nonzero(lay.layer == layer)[0]
        idx = idx[np.argsort(lay.pos[idx, 0])]
        left = lay.pos[idx, 0] - lay.size[idx, 0] / 2
        right = lay.pos[idx, 0] + lay.size[idx, 0] / 2
        assert (left[1:] >= right[:-1] + GAP - 1e-6).all()
    # every box inside the reported extent
    assert (lay.pos[:, 0] - lay.size[:, 0] / 2 >= -1e-6).all()
    assert (lay.pos[:, 0] + lay.size[:, 0] / 2 <= lay.width + 1e-6).all()
    assert (lay.pos[:, 1] + lay.size[:, 1] / 2 <= lay.height + 1e-6).all()
    # each edge runs from the bottom of its source to the top of its target, downwards
    assert len(lay.edge_points) == len(g.edges)
    for (s, d), pts in zip(g.edges.tolist(), lay.edge_points):
        assert np.allclose(pts[0], (lay.pos[s, 0], lay.pos[s, 1] + lay.size[s, 1] / 2))
        assert np.allclose(pts[-1], (lay.pos[d, 0], lay.pos[d, 1] - lay.size[d, 1] / 2))
        assert (np.diff(pts[:, 1]) > 0).all()


@pytest.mark.parametrize("mode", ["longest-path", "tick"])
def test_every_corpus_file_lays_out(corpus_file, mode):
    nac = read(str(corpus_file))
    for opts in ({}, {"show_params": False, "show_consts": True},
                 {"collapse_prefixes": detect_block_prefixes(nac)}):
        lay = layout_graph(build_graph(nac, **opts), mode)
        check_layout(lay)
        assert lay.mode == mode and lay.stats["nodes"] == lay.graph.n_nodes


def test_routed_edges_have_one_bend_per_layer_crossed(corpus_case):
    lay = layout_graph(build_graph(read(str(corpus_case("bert_tiny")))), "tick")
    assert lay.edge_routed.all()
    for (s, d), pts in zip(lay.graph.edges.tolist(), lay.edge_points):
        assert len(pts) == 2 + lay.layer[d] - lay.layer[s] - 1


def test_tick_mode_follows_execution_order(corpus_case):
    nac = read(str(corpus_case("bert_tiny")))
    g = build_graph(nac, show_consts=True)
    layers = compute_layers(g, "tick")
    ins = [i for i, nd in enumerate(g.nodes) if nd.kind != "const"]
    assert list(np.argsort(layers[ins], kind="stable")) == list(range(len(ins)))
    assert np.all(np.diff(layers[ins]) == 1)          # one layer per instruction
    for i, nd in enumerate(g.nodes):                  # constants right above their consumer
        if nd.kind == "const":
            assert layers[i] == layers[g.node_of_tick[nd.tick]] - 1


def test_longest_path_puts_sources_next_to_their_consumer(corpus_case):
    g = build_graph(read(str(corpus_case("bert_tiny"))))
    layers = compute_layers(g, "longest-path")
    for s, d in g.edges.tolist():
        if g.nodes[s].kind == "param":
            assert layers[s] == layers[d] - 1


def test_gpt2_like_trunk_stays_straight():
    # coordinate placement regression: the residual trunk must not drift sideways block by block
    g = build_graph(gpt2_like(12))
    lay = layout_graph(g, "longest-path")
    check_layout(lay)
    ln = [i for i, nd in enumerate(g.nodes) if nd.op == "aten.layer_norm.default"]
    xs = lay.pos[ln, 0]
    assert xs.max() - xs.min() < 2 * 150, xs
    assert lay.width < 2500


def test_progress_and_cancel():
    g = build_graph(gpt2_like(2))
    seen = []
    layout_graph(g, "tick", progress=lambda done, total: seen.append(done / total))
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) >= 3
    calls = []

    def cancel_after_two():
        calls.append(1)
        return len(calls) >= 2
    with pytest.raises(LayoutCancelled):
        layout_graph(g, "longest-path", cancelled=cancel_after_two)
    assert len(calls) == 2


def test_over_budget_edges_are_drawn_direct(monkeypatch):
    g = build_graph(gpt2_like(2))
    full = layout_graph(g, "tick")
    assert full.stats["dummies"] > 50 and full.edge_routed.all()
    monkeypatch.setattr(graph_layout, "DUMMY_BUDGET", 50)
    lay = layout_graph(g, "tick")
    assert lay.stats["dummies"] <= 50 and lay.stats["unrouted_edges"] > 0
    check_layout(lay)
    for routed, pts in zip(lay.edge_routed, lay.edge_points):
        if not routed:
            assert len(pts) == 2


def test_empty_and_unknown_mode():
    lay = layout_graph(build_graph(NacFile(Header())), "longest-path")
    assert lay.stats["nodes"] == 0 and lay.width == 0 and lay.height == 0
    with pytest.raises(ValueError):
        layout_graph(build_graph(gpt2_like(1)), "sideways")


@pytest.mark.parametrize("collapse", [False, True])
def test_a_layout_crosses_from_the_engine_host_unchanged(collapse, tmp_path):
    """``layout_to_data`` -> JSON and array files -> ``layout_from_data`` gives the same graph and
    layout (the engine host lays out a file's graph; the window draws what arrives)."""
    import json

    from nac_studio.model.graph_layout import layout_from_data, layout_to_data
    from nac_studio.host.arrays import ArrayWriter, decode
    nac = gpt2_like(6)
    opts = {"collapse_prefixes": detect_block_prefixes(nac)} if collapse else {}
    lay = layout_graph(build_graph(nac, **opts), "tick")
    wire = json.loads(json.dumps(ArrayWriter(str(tmp_path)).encode(layout_to_data(lay))))
    back = layout_from_data(decode(wire, str(tmp_path)))
    assert back.graph.nodes == lay.graph.nodes and back.graph.blocks == lay.graph.blocks
    assert back.graph.collapsed == lay.graph.collapsed and back.mode == lay.mode
    for name in ("pos", "size", "layer", "edge_routed"):
        np.testing.assert_array_equal(getattr(back, name), getattr(lay, name))
    np.testing.assert_array_equal(back.graph.edges, lay.graph.edges)
    assert len(back.edge_points) == len(lay.edge_points)
    assert all(np.array_equal(a, b) for a, b in zip(back.edge_points, lay.edge_points))
    assert (back.width, back.height) == (lay.width, lay.height)
