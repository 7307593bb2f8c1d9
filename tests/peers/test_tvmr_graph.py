"""TVMR register dataflow: SSA renaming on the straight-line samples, basic blocks and loop-carried
edges (phis) for LOOP / JUMP / CALL programs."""
from __future__ import annotations

import pytest

from nac_engine.peers import tvmr
from nac_engine.peers.tvmr.asm import assemble
from nac_engine.peers.tvmr.dataflow import basic_blocks
from tests.peers.test_tvmr import SAMPLES, TVMR_DIR, needs_corpus


def edges(g):
    return {(g.nodes[e.src].label, g.nodes[e.dst].label, e.label) for e in g.edges}


@needs_corpus
def test_classifier_is_an_ssa_chain():
    f = tvmr.decode((TVMR_DIR / "synthesized" / "ant_classifier.tvmr").read_bytes())
    g = f.graph()
    assert basic_blocks(f) == [(0, 26)]
    e = edges(g)
    # recurrent iterations: H1 renamed at every write; the last matmul reads H1.5 (after 3 add+shift)
    writes = [w for n in g.nodes for w in n.attrs.get("writes", [])]
    assert writes.count("H1.1") == 1 and "H1.8" in writes and len(writes) == len(set(writes))
    assert ("SHIFT", "TERNARY_MATMUL", "H1.8") in e
    assert ("C3 ternary[4, 24]", "TERNARY_MATMUL", "C3") in e
    out = [n for n in g.nodes if n.kind == "output"][0]
    assert [g.nodes[x.src].label for x in g.edges if x.dst == out.id] == ["TERNARY_MATMUL"]
    consts = [n for n in g.nodes if n.kind == "const"]
    assert sorted(n.attrs["key"] for n in consts) == sorted(r.key_text for r in f.registers if r.key)
    for n in g.nodes:        # a node selects the bytes that define it
        assert n.span and 0 <= n.span[0] < f.size


@needs_corpus
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_every_sample_graph_runs_input_to_output(path):
    g = tvmr.decode(path.read_bytes()).graph()
    kinds = [n.kind for n in g.nodes]
    assert kinds.count("input") == 1 and kinds.count("output") == 1
    succ = {}
    for e in g.edges:
        succ.setdefault(e.src, set()).add(e.dst)
    start = kinds.index("input")
    seen, todo = {start}, [start]
    while todo:
        for d in succ.get(todo.pop(), ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    assert kinds.index("output") in seen


LOOPED = """
.registers
    H0: i32[4]
    H1: i32[4]
    H2: i32[1]
.program
    load_input H0
    copy_reg H1, H0
    loop 4
    add H1, H1, H0
    shift H1, H1, 1
    end_loop
    if_zero H2, skip
    call sub
skip:
    store_output H1
    halt
sub:
    relu H1, H1
    return
"""


def test_loop_blocks_and_phi_edges():
    f = tvmr.decode(assemble(LOOPED), strict=True)
    assert basic_blocks(f) == [(0, 2), (3, 5), (6, 6), (7, 7), (8, 9), (10, 11)]
    e = edges(f.graph())
    assert ("COPY_REG", "ADD", "H1.1") in e              # from before the loop
    assert ("SHIFT", "ADD", "H1.3 (back edge)") in e           # and around the back edge
    assert ("SHIFT", "STORE_OUTPUT", "H1.3") in e         # if_zero jumps over the call
    assert ("RELU", "STORE_OUTPUT", "H1.4 (back edge)") in e   # or the call returns to it
    assert ("H2 i32[1]", "IF_ZERO", "H2") in e            # read before any write: its definition
