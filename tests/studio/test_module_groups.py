"""Blocks from the source map's module hierarchy, with the parameter-name rule as fallback."""
from __future__ import annotations

from nac_engine.format.source_map import SourceEntry, set_source_map
from nac_studio.model.graph_model import block_intervals, build_graph, detect_block_prefixes
from nac_studio.model.module_groups import module_block_of, module_block_ticks

from .gpt2_like import gpt2_like


def test_module_block_of():
    assert module_block_of("h.3.attn.c_attn") == ("h", "h.3", 3)
    assert module_block_of("features.4") == ("features", "features.4", 4)
    assert module_block_of("encoder.layer.11.output") == ("encoder.layer", "encoder.layer.11", 11)
    assert module_block_of("0.conv") is None and module_block_of("lm_head") is None


def test_without_a_source_map_blocks_come_from_parameter_names():
    nac = gpt2_like(3, d=32, n_head=2, seq=4)
    assert module_block_ticks(nac) is None
    assert detect_block_prefixes(nac) == ["h.0", "h.1", "h.2"]


def test_source_map_modules_decide_membership():
    nac = gpt2_like(3, d=32, n_head=2, seq=4)
    n = len(nac.instructions)
    by_params = {b.prefix: (b.lo, b.hi) for b in block_intervals(nac, detect_block_prefixes(nac))}
    # the compiler says: stage.K is everything from h.K's first tick up to the next one's,
    # residual adds and the final layer_norm's neighbours included
    starts = [by_params[f"h.{k}"][0] for k in range(3)] + [n]
    entries = []
    for t in range(n):
        k = max((i for i in range(3) if starts[i] <= t), default=None)
        path = f"stage.{k}.part" if k is not None and t < n - 2 else ""
        entries.append(SourceEntry(t, path, f"node{t}"))
    set_source_map(nac, entries)
    assert list(module_block_ticks(nac)) == ["stage.0", "stage.1", "stage.2"]
    prefixes = detect_block_prefixes(nac)
    assert prefixes == ["stage.0", "stage.1", "stage.2"]
    blocks = block_intervals(nac, prefixes)
    assert [(b.lo, b.hi) for b in blocks][:2] == [(starts[0], starts[1] - 1), (starts[1], starts[2] - 1)]
    g = build_graph(nac, collapse_prefixes=prefixes)
    assert [nd.op for nd in g.nodes if nd.kind == "group"] == prefixes
    src = g.edges[:, 0]
    assert (src < g.edges[:, 1]).all()      # still a DAG in node order


def test_a_damaged_source_map_falls_back(monkeypatch):
    nac = gpt2_like(2, d=32, n_head=2, seq=4)
    from nac_engine.errors import NacFormatError
    import nac_engine.format.source_map as sm

    def broken(_nac):
        raise NacFormatError("RSRC", 0, "bad source map")
    monkeypatch.setattr(sm, "read_source_map", broken)
    assert detect_block_prefixes(nac) == ["h.0", "h.1"]
