"""Graph layouts are cached per document: switching back to a tab shows the graph at once
(no new layout task) with the blocks and view as they were; changing options lays out
again; only the last few documents keep theirs."""
from __future__ import annotations

import gc
import shutil

import pytest

from nac_studio.model.document import Document
from nac_studio.qt_document import QtDocument
from nac_studio.views import graph as graphmod
from nac_studio.views.graph import GraphView

from .conftest import wait_idle
from .gpt2_like import gpt2_like

TIMEOUT = 20000


@pytest.fixture
def copies(demo_path, tmp_path):
    """Three distinct files (copies of the demo model)."""
    out = []
    for name in ("a.nac", "b.nac", "c.nac"):
        shutil.copyfile(demo_path, tmp_path / name)
        out.append(tmp_path / name)
    return out


def _layout_tasks(window):
    titles = []
    window.tasks.started.connect(lambda t: titles.append(t.title) if t.title.startswith("Graph layout") else None)
    return titles


def test_switching_back_shows_the_cached_layout_without_a_task(window, copies, qtbot):
    graph = window.graph_view
    a = window.open_and_wait(copies[0])
    layout_a = graph.layout_
    assert layout_a is not None and graph.shown is layout_a.graph
    graph.canvas.set_view_state((1.3, -40.0, 25.0))
    want_view = graph.canvas.view_state()
    window.open_and_wait(copies[1])
    layout_b = graph.layout_
    assert layout_b is not layout_a

    started = _layout_tasks(window)
    ready = []
    graph.layoutReady.connect(lambda: ready.append(1))
    window.tabs.setCurrentIndex(window.docs.index(a))
    # on screen at once, synchronously: the very same layout object, no task submitted
    assert window.active is a and graph.layout_ is layout_a and graph.shown is layout_a.graph
    assert graph.canvas.layout_ is layout_a and ready == [1]
    assert graph.canvas.view_state() == pytest.approx(want_view)
    assert not graph.progress.isVisible()
    qtbot.wait(100)
    wait_idle(qtbot, window)
    assert started == [] and graph.layout_ is layout_a
    # and the other way round
    window.tabs.setCurrentIndex(1 - window.docs.index(a))
    assert graph.layout_ is layout_b and started == []


def test_changing_options_lays_out_again_and_replaces_the_entry(window, copies, qtbot):
    graph = window.graph_view
    a = window.open_and_wait(copies[0])
    b = window.open_and_wait(copies[1])
    started = _layout_tasks(window)
    window.tabs.setCurrentIndex(window.docs.index(a))
    assert started == []
    window.commands.run("graph.weights")             # hide weights: a new layout for a
    assert len(started) == 1
    wait_idle(qtbot, window)
    hidden_a = graph.layout_
    assert not hidden_a.graph.show_params
    # b was laid out with weights shown: its entry no longer matches, so b is laid out again
    window.tabs.setCurrentIndex(window.docs.index(b))
    assert len(started) == 2 and graph.layout_ is None
    wait_idle(qtbot, window)
    assert not graph.layout_.graph.show_params
    # a's new layout (weights hidden) is the cached one now
    window.tabs.setCurrentIndex(window.docs.index(a))
    assert len(started) == 2 and graph.layout_ is hidden_a


def test_the_cache_keeps_only_the_last_few_documents(window, copies, qtbot, monkeypatch):
    monkeypatch.setattr(graphmod, "LAYOUT_CACHE_DOCS", 2)
    graph = window.graph_view
    a, b, c = (window.open_and_wait(p) for p in copies)
    assert a.doc not in graph._cache and b.doc in graph._cache and c.doc in graph._cache
    started = _layout_tasks(window)
    window.tabs.setCurrentIndex(window.docs.index(b))       # cached
    assert started == []
    window.tabs.setCurrentIndex(window.docs.index(a))       # evicted: laid out again
    assert len(started) == 1
    wait_idle(qtbot, window)
    # now a is in and the least recently used (c) is out
    assert a.doc in graph._cache and b.doc in graph._cache and c.doc not in graph._cache
    # closing a document drops its entry
    window.close_document(b)
    assert b.doc not in graph._cache and len(graph._cache) == 1


def test_blocks_the_user_opened_come_back_with_the_document(qtbot):
    """Two GPT-2-shaped documents in one view: a's collapsed/expanded blocks survive a visit to b."""
    docs = [QtDocument(Document(gpt2_like(3, d=64, n_head=2, seq=4))) for _ in range(2)]
    view = GraphView(None)
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    try:
        a, b = docs
        with qtbot.waitSignal(view.layoutReady, timeout=TIMEOUT):
            view.set_document(a)
        with qtbot.waitSignal(view.layoutReady, timeout=TIMEOUT):
            view.act_collapse.setChecked(True)
        with qtbot.waitSignal(view.layoutReady, timeout=TIMEOUT):
            view.expand_block("h.1")
        groups_a = [nd.op for nd in view.shown.nodes if nd.kind == "group"]
        assert groups_a == ["h.0", "h.2"]
        layout_a = view.layout_
        with qtbot.waitSignal(view.layoutReady, timeout=TIMEOUT):
            view.set_document(b)                        # b opens with blocks shown (small file)
        assert not view.act_collapse.isChecked()
        submitted = []
        a.tasks.started.connect(submitted.append)
        view.set_document(a)
        assert view.layout_ is layout_a and submitted == []
        assert view.act_collapse.isChecked() and view.collapsed_prefixes() == ["h.0", "h.2"]
        # the restored state is live: folding h.1 again lays out with all three collapsed
        with qtbot.waitSignal(view.layoutReady, timeout=TIMEOUT):
            view.collapse_block("h.1")
        assert [nd.op for nd in view.shown.nodes if nd.kind == "group"] == ["h.0", "h.1", "h.2"]
        assert len(submitted) == 1
    finally:
        view.set_document(None)
        for d in docs:
            d.tasks.shutdown(wait=True)
            d.close()


def test_a_new_document_never_gets_a_closed_ones_layout(qtbot):
    """Entries are held weakly: once a document is gone its entry goes too."""
    view = GraphView(None)
    qtbot.addWidget(view)
    qd = QtDocument(Document(gpt2_like(1, d=64, n_head=2, seq=4)))
    with qtbot.waitSignal(view.layoutReady, timeout=TIMEOUT):
        view.set_document(qd)
    assert len(view._cache) == 1
    view.set_document(None)
    qd.tasks.shutdown(wait=True)
    qd.close()
    doc = qd.doc
    del qd
    entry = view._cache._entries[id(doc)]
    del doc
    gc.collect()
    assert entry.doc() is None and len(view._cache) == 0
