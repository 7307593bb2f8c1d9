"""igraph's Sugiyama in the helper process gives the layout the in-process call gives, the
pipe carries only .npy arrays (no pickle), and a helper that cannot run falls back."""
from __future__ import annotations

import io

import numpy as np
import pytest

from nac_studio import graph_layout, sugiyama_process as sp
from nac_studio.graph_model import build_graph


def _ladder(n_rungs: int):
    """A connected layered DAG with crossings to reduce: two chains with cross links."""
    a = np.arange(n_rungs)
    b = a + n_rungs
    edges = np.concatenate([np.stack([a[:-1], a[1:]], 1), np.stack([b[:-1], b[1:]], 1),
                            np.stack([a[:-1], b[1:]], 1), np.stack([b[:-1], a[1:]], 1)])
    layers = np.concatenate([a, a])
    return 2 * n_rungs, edges, layers


@pytest.fixture
def fresh_helper(monkeypatch):
    helper = sp._Helper()
    monkeypatch.setattr(sp, "_helper", helper)
    yield helper
    helper.stop()


def test_helper_process_matches_in_process(fresh_helper):
    n, edges, layers = _ladder(400)
    assert n + len(edges) >= sp.PROCESS_FROM
    got = sp.sugiyama(n, edges, layers, 10)
    assert fresh_helper.proc is not None and not fresh_helper.broken      # it did run in the child
    want = sp.compute(n, edges, layers, 10)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    again = sp.sugiyama(n, edges, layers, 10)         # the same child serves the next request
    np.testing.assert_array_equal(again[0], want[0])


def test_layout_of_a_real_graph_is_the_same_either_way(fresh_helper, monkeypatch, demo_path):
    from nac_studio.peer_document import open_any
    graph = build_graph(open_any(str(demo_path)).nac, collapse_prefixes=None)
    monkeypatch.setattr(sp, "PROCESS_FROM", 1)
    in_child = graph_layout.layout_graph(graph)
    assert fresh_helper.proc is not None and not fresh_helper.broken
    monkeypatch.setattr(sp, "PROCESS_FROM", 10 ** 9)
    here = graph_layout.layout_graph(graph)
    np.testing.assert_array_equal(in_child.pos, here.pos)
    assert len(in_child.edge_points) == len(here.edge_points)
    for a, b in zip(in_child.edge_points, here.edge_points):
        np.testing.assert_array_equal(a, b)


def test_a_helper_that_cannot_start_falls_back(fresh_helper, monkeypatch):
    monkeypatch.setattr(sp.sys, "executable", "/nonexistent/python")
    n, edges, layers = _ladder(400)
    got = sp.sugiyama(n, edges, layers, 5)
    assert fresh_helper.broken
    np.testing.assert_array_equal(got[0], sp.compute(n, edges, layers, 5)[0])


def test_pipe_messages_are_plain_arrays_with_checked_lengths():
    buf = io.BytesIO()
    sp._write(buf, np.arange(5), np.ones((2, 2)))
    buf.seek(0)
    np.testing.assert_array_equal(sp._read(buf), np.arange(5))
    np.testing.assert_array_equal(sp._read(buf), np.ones((2, 2)))
    with pytest.raises(EOFError):
        sp._read(buf)
    with pytest.raises(EOFError):                                  # cut mid-message
        sp._read(io.BytesIO((100).to_bytes(8, "little") + b"\x93NUMPY"))
    with pytest.raises(ValueError):                                # no size beyond the bound
        sp._read(io.BytesIO((sp.MAX_MESSAGE + 1).to_bytes(8, "little")))
    obj = io.BytesIO()
    np.lib.format.write_array(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    data = obj.getvalue()
    with pytest.raises(ValueError):                                # an object array is refused
        sp._read(io.BytesIO(len(data).to_bytes(8, "little") + data))
