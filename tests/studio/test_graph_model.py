"""The dataflow graph: nodes and edges from the ABCD producers, hidden weights/constants, blocks."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import igraph  # noqa: E402
import pytest  # noqa: E402

from nac_engine.format.reader import read  # noqa: E402
from nac_engine.text.asm import assemble  # noqa: E402
from nac_engine.isa.coerce import use_note  # noqa: E402
from nac_engine.text.literals import format_literal  # noqa: E402
from nac_studio.model.document import Selection  # noqa: E402
from nac_studio.model.graph_model import (block_intervals, block_prefix, build_graph, detect_block_prefixes,  # noqa: E402
                                    op_class)
from tests.studio.gpt2_like import gpt2_like  # noqa: E402


def producer_pairs(nac):
    return {(p, ins.index) for ins in nac.instructions for p in ins.producers()}


def is_param_load(ins):
    return ins.a == 2 and ins.b == 1


def test_every_corpus_file_edges_are_the_instruction_producers(corpus_file):
    nac = read(str(corpus_file))
    g = build_graph(nac)
    assert g.n_nodes == len(nac.instructions)
    assert [nd.tick for nd in g.nodes] == list(range(len(nac.instructions)))
    assert list(g.node_of_tick) == list(range(len(nac.instructions)))
    got = {(g.nodes[s].tick, g.nodes[d].tick) for s, d in g.edges.tolist()}
    assert got == producer_pairs(nac)
    assert g.problems == []
    assert all(s < d for s, d in g.edges.tolist())      # node order is topological


def test_every_corpus_file_without_weights_with_constants(corpus_file):
    nac = read(str(corpus_file))
    g = build_graph(nac, show_params=False, show_consts=True)
    loads = {ins.index: ins.c[1] for ins in nac.instructions if is_param_load(ins)}
    assert not any(nd.kind == "param" for nd in g.nodes)
    # instruction edges: the producer pairs minus those leaving a parameter load
    ins_edges = {(g.nodes[s].tick, g.nodes[d].tick) for s, d in g.edges.tolist()
                 if g.nodes[s].kind != "const"}
    assert ins_edges == {(p, c) for p, c in producer_pairs(nac) if p not in loads}
    # every reader remembers the parameters it reads
    for p, c in producer_pairs(nac):
        if p in loads:
            assert loads[p] in g.nodes[g.node_of_tick[c]].params
    # one constant node per constant argument, with one edge into its consumer
    expected = [(ins.index, a.const_id) for ins in nac.instructions if ins.a >= 10
                for a in nac.arguments(ins) if a.kind == "const"]
    consts = [(i, nd) for i, nd in enumerate(g.nodes) if nd.kind == "const"]
    assert sorted((nd.tick, nd.const_id) for _i, nd in consts) == sorted(expected)
    for i, nd in consts:
        out = [d for s, d in g.edges.tolist() if s == i]
        assert out == [g.node_of_tick[nd.tick]]
        c = nac.constants.get(nd.const_id)
        if c is not None:
            arg = [a for a in nac.arguments(nac.instructions[nd.tick]) if a.kind == "const"][nd.key[2]]
            # a shared constant (1.0 stored for dim 1) shows as the op uses it
            assert nd.op == (use_note(c.value, arg.code) or format_literal(c.type, c.value))
    assert all(s < d for s, d in g.edges.tolist())


def test_block_prefix_rule():
    assert block_prefix("m.encoder.layer.3.attention.self.query.weight") == ("m.encoder.layer", "m.encoder.layer.3", 3)
    assert block_prefix("layers.0.experts.3.w") == ("layers", "layers.0", 0)
    assert block_prefix("fc1.weight") is None
    assert block_prefix("0.weight") is None      # a numeric first component is not a block of anything


def test_bert_tiny_blocks_and_collapsed_graph(corpus_case):
    nac = read(str(corpus_case("bert_tiny")))
    prefixes = detect_block_prefixes(nac)
    assert prefixes == ["m.encoder.layer.0", "m.encoder.layer.1"]
    blocks = block_intervals(nac, prefixes)
    consumers = {}
    for p, c in producer_pairs(nac):
        consumers.setdefault(p, set()).add(c)
    for b in blocks:
        loads = [ins.index for ins in nac.instructions
                 if is_param_load(ins) and nac.params[ins.c[1]].name.startswith(b.prefix + ".")]
        assert len(loads) == 16
        readers = set().union(*(consumers[t] for t in loads))
        # the interval starts at the first load and covers every load and reader
        assert b.lo == min(loads)
        assert set(loads) | readers <= set(b.ticks)
        # a block ends at its output layer_norm: the last reader of output.LayerNorm.*
        ln = [t for t in loads if nac.params[nac.instructions[t].c[1]].name == b.prefix + ".output.LayerNorm.bias"]
        assert b.hi == max(consumers[ln[0]])
        assert nac.instruction_name(nac.instructions[b.hi]) == "aten.layer_norm.default"
        # no instruction inside reads a parameter of another prefix
        for t in b.ticks:
            for p in nac.instructions[t].producers():
                if is_param_load(nac.instructions[p]):
                    assert nac.params[nac.instructions[p].c[1]].name.startswith(b.prefix + ".")
    assert blocks[0].hi + 1 == blocks[1].lo

    g = build_graph(nac, collapse_prefixes=prefixes)
    groups = [i for i, nd in enumerate(g.nodes) if nd.kind == "group"]
    assert [g.nodes[i].op for i in groups] == prefixes
    inside = set(blocks[0].ticks) | set(blocks[1].ticks)
    assert g.n_nodes == len(nac.instructions) - len(inside) + 2
    for gi, b in zip(groups, blocks):
        assert all(g.node_of_tick[t] == gi for t in b.ticks)
        # edges into a group: exactly the producers outside it of instructions inside it
        assert b.shared == ()
        expected_in = {g.node_of_tick[p] for t in b.ticks for p in nac.instructions[t].producers()
                       if not b.lo <= p <= b.hi}
        assert {s for s, d in g.edges.tolist() if d == gi} == expected_in
    # layer 1 reads layer 0's output and the attention mask (v26) computed before layer 0
    assert {g.nodes[s].tick for s, d in g.edges.tolist() if d == groups[1]} == {blocks[0].lo, 26}
    assert igraph.Graph(n=g.n_nodes, edges=g.edges.tolist(), directed=True).is_dag()

    # expanding one block individually
    g1 = build_graph(nac, collapse_prefixes=prefixes[1:])
    assert [nd.op for nd in g1.nodes if nd.kind == "group"] == prefixes[1:]
    assert g1.n_nodes == len(nac.instructions) - blocks[1].size + 1


def test_interleaved_blocks_stay_disjoint_and_acyclic():
    # two blocks whose instructions interleave (a schedule the rule has to survive)
    text = """.version 1.8
.param 1 blk.0.w
.param 2 blk.1.w
.param 3 blk.0.v
.param 4 blk.1.v
.ops
v0 = input x
v1 = param blk.0.w
v2 = param blk.1.w
v3 = nac.add(v0, v1)
v4 = nac.add(v0, v2)
v5 = param blk.0.v
v6 = nac.mul(v3, v5)
v7 = param blk.1.v
v8 = nac.mul(v4, v7)
v9 = nac.add(v6, v8)
v10 = return v9
"""
    nac = assemble(text)
    prefixes = detect_block_prefixes(nac)
    assert prefixes == ["blk.0", "blk.1"]
    blocks = block_intervals(nac, prefixes)
    ticks = [set(b.ticks) for b in blocks]
    assert not (ticks[0] & ticks[1])
    assert blocks[0].lo == 1
    g = build_graph(nac, collapse_prefixes=prefixes)
    assert igraph.Graph(n=g.n_nodes, edges=g.edges.tolist(), directed=True).is_dag()
    assert all(s < d for s, d in g.edges.tolist())
    # nothing lost: every producer edge crossing a node boundary is there
    want = {(g.node_of_tick[p], g.node_of_tick[c]) for p, c in producer_pairs(nac)
            if g.node_of_tick[p] != g.node_of_tick[c]}
    assert {tuple(e) for e in g.edges.tolist()} == want


def test_a_source_shared_by_several_blocks_stays_out_of_them():
    # a mask loaded once inside block 0 and read by both blocks (as the compiled GPT-2 does)
    text = """.version 1.8
.param 1 blk.0.w
.param 2 mask
.param 3 blk.0.v
.param 4 blk.1.w
.ops
v0 = input x
v1 = param blk.0.w
v2 = param mask
v3 = nac.add(v0, v1)
v4 = nac.mul(v3, v2)
v5 = param blk.0.v
v6 = nac.add(v4, v5)
v7 = param blk.1.w
v8 = nac.add(v6, v7)
v9 = nac.mul(v8, v2)
v10 = return v9
"""
    nac = assemble(text)
    blocks = block_intervals(nac, detect_block_prefixes(nac))
    assert [(b.lo, b.hi, b.shared) for b in blocks] == [(1, 6, (2,)), (7, 8, ())]
    assert blocks[0].ticks == [1, 3, 4, 5, 6] and blocks[0].size == 5
    g = build_graph(nac, collapse_prefixes=["blk.0", "blk.1"])
    g0, g1 = (g.node_of_tick[b.lo] for b in blocks)
    mask = g.node_of_tick[2]
    assert g.nodes[mask].kind == "param" and mask not in (g0, g1)
    t = g.node_of_tick
    assert {tuple(e) for e in g.edges.tolist()} == {(t[0], g0), (mask, g0), (mask, t[9]), (g0, g1), (g1, t[9]),
                                                    (t[9], t[10])}
    assert all(s < d for s, d in g.edges.tolist())
    # hidden, the mask is remembered by the group and the instruction that read it
    h = build_graph(nac, show_params=False, collapse_prefixes=["blk.0", "blk.1"])
    assert h.nodes[h.node_of_tick[1]].params == (2,) and h.nodes[h.node_of_tick[9]].params == (2,)
    assert h.nodes[h.node_of_tick[1]].kind == "group"


def test_gpt2_like_blocks_absorb_the_residual_tail():
    nac = gpt2_like(4)
    prefixes = detect_block_prefixes(nac)
    assert prefixes == [f"h.{i}" for i in range(4)]
    blocks = block_intervals(nac, prefixes)
    for a, b in zip(blocks, blocks[1:]):
        assert a.hi + 1 == b.lo       # the residual add after mlp.c_proj belongs to the block
        assert nac.instruction_name(nac.instructions[a.hi]) == "nac.add"
    g = build_graph(nac, collapse_prefixes=prefixes)
    chain = [i for i, nd in enumerate(g.nodes) if nd.kind == "group"]
    for a, b in zip(chain, chain[1:]):
        assert [a, b] in g.edges.tolist()


@pytest.mark.parametrize("name,cls", [
    ("aten.linear.default", "matmul"), ("aten.conv2d.default", "matmul"), ("nac.matmul", "matmul"),
    ("nac.add", "elementwise"), ("aten.where.self", "elementwise"),
    ("aten.layer_norm.default", "normalisation"),
    ("aten._native_batch_norm_legit_no_training.default", "normalisation"),
    ("aten.gelu.default", "activation"), ("aten.softmax.int", "activation"),
    ("nac.view", "data"), ("aten.permute.default", "data"), ("aten.embedding.default", "data"),
    ("aten.max_pool2d.default", "reduction"), ("aten.mean.dim", "reduction"),
    ("<INPUT>", "io"), ("param", "io"), ("return", "io"), ("<CONVERGENCE>", "other"),
    ("my.custom_op", "other"),
])
def test_op_classes(name, cls):
    assert op_class(name) == cls


def test_search_and_selection_lookup(corpus_case):
    nac = read(str(corpus_case("bert_tiny")))
    g = build_graph(nac)
    ln = g.search("layer_norm")
    assert ln and all(g.nodes[i].op == "aten.layer_norm.default" for i in ln)
    assert len(ln) == sum(1 for i in nac.instructions if nac.instruction_name(i) == "aten.layer_norm.default")
    assert g.search("v29") == [29]
    q = g.search("attention.self.query.weight")
    assert [g.nodes[i].kind for i in q] == ["param", "param"]
    pid = g.nodes[q[0]].param_id
    assert g.node_for_selection(Selection("param", pid)) == q[0]
    assert g.node_for_selection(Selection("instruction", 40)) == 40

    hidden = build_graph(nac, show_params=False)
    node = hidden.node_for_selection(Selection("param", pid))
    assert node is not None and pid in hidden.nodes[node].params
    assert hidden.nodes[node].op == "aten.linear.default"
    # a hidden parameter load has no node
    assert hidden.node_for_selection(Selection("instruction", g.nodes[q[0]].tick)) is None


def test_bad_producer_offsets_are_reported_not_drawn():
    nac = assemble(".version 1.8\n.ops\nv0 = input x\nv1 = aten.relu.default(v0)\nv2 = return v1\n")
    nac.instructions[1].d = (5,)          # points forward, past the end
    g = build_graph(nac)
    assert g.problems and "t1" in g.problems[0]
    assert all(s < d for s, d in g.edges.tolist())
