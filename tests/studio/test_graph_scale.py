"""The graph at real-model scale: text at the overview zoom, block frames and titles,
search inside collapsed blocks, the minimap beside the selection, the whole legend."""
from __future__ import annotations

import contextlib
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import QRectF  # noqa: E402

from nac_studio.model.document import Document, Selection  # noqa: E402
from nac_studio.model.graph_labels import BUNDLE_SPAN  # noqa: E402
from nac_studio.model.graph_model import OP_CLASSES  # noqa: E402
from nac_studio.qt_document import QtDocument  # noqa: E402
from nac_studio.views.graph import GraphView  # noqa: E402
from nac_studio.widgets.graph_canvas import FIT_MIN_SCALE, TEXT_PX_MIN  # noqa: E402

from .gpt2_like import gpt2_like  # noqa: E402

TIMEOUT = 30000


@contextlib.contextmanager
def _graph_of(qtbot, qd: QtDocument, width: int = 1000, height: int = 700):
    """A shown graph view with ``qd`` laid out; the document closed afterwards."""
    v = GraphView(None)
    qtbot.addWidget(v)
    v.resize(width, height)
    v.show()
    qtbot.waitExposed(v)
    try:
        with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
            v.set_document(qd)
        yield v
    finally:
        v.set_document(None)
        qd.tasks.shutdown(wait=True)
        qd.close()


@pytest.fixture
def gpt2_view(qtbot):
    """The 12-block graph with its blocks expanded (twelve layers open collapsed by default)."""
    with _graph_of(qtbot, QtDocument(Document(gpt2_like(12, d=64, n_head=2, seq=4)))) as v:
        assert v.act_collapse.isChecked()
        with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
            v.act_collapse.setChecked(False)
        yield v


def _paint(v):
    v.canvas.repaint()
    return v.canvas.text_items()


def test_text_is_on_screen_at_the_fit_scale(gpt2_view):
    v = gpt2_view
    v.canvas.fit()
    assert v.canvas.scale >= FIT_MIN_SCALE - 1e-9      # a tall graph scrolls instead of shrinking
    texts = _paint(v)
    assert texts, "no readable text at the fit scale"
    # block titles among them, and every text at least the minimum legible size, on screen
    assert any(t.startswith("h.") for t, _r in texts)
    screen = QRectF(v.canvas.rect())
    for t, r in texts:
        assert r.height() >= TEXT_PX_MIN and screen.intersects(r), t
    # the opening view too (reset_view): readable labels on the boxes
    v.canvas.reset_view()
    assert any(not t.startswith("h.") for t, _r in _paint(v))


def test_frames_name_every_expanded_block(gpt2_view):
    v = gpt2_view
    assert [f.key for f in v.canvas.frames] == [f"h.{i}" for i in range(12)]
    blocks = {b.prefix: b for b in v.shown.blocks}
    for f in v.canvas.frames:      # a frame holds every node of its block
        b = blocks[f.key]
        for i, nd in enumerate(v.shown.nodes):
            if b.lo <= nd.tick <= b.hi and nd.tick not in b.shared:
                x, y, w, h = v.layout_.rect(i)
                assert f.x0 <= x and x + w <= f.x1 and f.y0 <= y and y + h <= f.y1, (f.key, nd.op)
    # far out: titles stay legible and do not overlap
    v.canvas.set_view_state((0.05, 10, 10))
    texts = _paint(v)
    titles = [r for t, r in texts if t.startswith("h.")]
    assert titles
    for i, a in enumerate(titles):
        for b in titles[i + 1:]:
            assert not a.intersects(b)


def test_search_finds_and_opens_a_node_inside_a_collapsed_block(qtbot, gpt2_view):
    v = gpt2_view
    with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
        v.act_collapse.setChecked(True)
    assert not any(nd.op == "h.7.mlp.c_fc.weight" for nd in v.shown.nodes)
    v.search.setText("h.7.mlp.c_fc.weight")
    assert "in blocks" in v.match_label.text()
    with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
        v.find_next()
    groups = [nd.op for nd in v.shown.nodes if nd.kind == "group"]
    assert "h.7" not in groups and "h.6" in groups
    node = v.highlighted_node()
    assert node is not None and v.shown.nodes[node].op == "h.7.mlp.c_fc.weight"
    x, y, w, h = v.layout_.rect(node)
    assert v.canvas.visible_scene_rect().intersects(QRectF(x, y, w, h))


def test_minimap_never_covers_the_selected_node(qtbot, gpt2_view):
    v = gpt2_view
    c = v.canvas
    c.set_view_state((1.6, 0, 0))     # wider than the view: it can be panned sideways
    assert not c.minimap_rect().isEmpty()
    # put a selected node right under the default (bottom-right) minimap corner
    default = c.minimap_rect()
    for tick in range(len(v.shown.node_of_tick)):
        node = int(v.shown.node_of_tick[tick])
        if node < 0:
            continue
        v.qdoc.select(Selection("instruction", tick))
        x, y, w, h = v.layout_.rect(node)
        target = default.center()
        c.set_view_state((c.scale, target.x() - (x + w / 2) * c.scale, target.y() - (y + h / 2) * c.scale))
        sel = c._screen_rect(node)
        if sel.intersects(default):
            break
    else:
        pytest.skip("could not bring a node under the minimap")
    mini = c.minimap_rect()
    assert mini.isEmpty() or not mini.intersects(sel)
    assert mini != default


def test_legend_lists_every_class_present_even_when_narrow(qtbot, gpt2_view):
    v = gpt2_view
    present = {nd.op_class for nd in v.shown.nodes}
    assert set(v.legend.classes) == present
    v.resize(420, 600)
    qtbot.wait(30)
    rects = v.legend.chip_rects(v.legend.width())
    assert [c for c, _r in rects] == [c for c in OP_CLASSES if c in present]
    for _c, r in rects:           # every chip inside the legend: wrapped, not cut off
        assert r.right() <= v.legend.width() and r.bottom() <= v.legend.height() + 1


def _fanout_doc() -> QtDocument:
    """``x`` read by twenty adds down a chain: a causal mask read by every block, in small."""
    from nac_engine.text.asm import assemble
    lines = [".version 1.8", ".ops", "v0 = input x", "v1 = input y"]
    for k in range(2, 22):
        lines.append(f"v{k} = nac.add(v{k - 1}, v0)")
    lines.append("v22 = return v21")
    return QtDocument(Document(assemble("\n".join(lines) + "\n")))


def test_a_value_read_far_down_by_many_nodes_is_one_bundled_edge(qtbot):
    with _graph_of(qtbot, _fanout_doc(), 800, 700) as v:
        c = v.canvas
        src = int(v.shown.node_of_tick[0])
        assert list(c.bundles) == [src]
        kept, rest = c.bundles[src]
        edges = v.shown.edges
        assert int((edges[:, 0] == src).sum()) == 20
        span = v.layout_.layer[edges[:, 1]] - v.layout_.layer[edges[:, 0]]
        long_ = {e for e in range(len(edges)) if edges[e, 0] == src and span[e] > BUNDLE_SPAN}
        assert kept not in rest and set(rest) == long_ - {kept} and len(rest) >= 12
        # every reader still has an arrow: the stubs are in the edge batches
        n_paths = sum(path.elementCount() > 0 for _b, path, _h in c._edge_batches)
        assert n_paths >= 2
        c.center_on(src, zoom=1.0)
        assert any(t == "×20" for t, _r in _paint(v))
        c.center_on(int(v.shown.node_of_tick[15]), zoom=1.0)
        names = [r for t, r in _paint(v) if t == "x"]
        assert names                                      # the stub into a far reader names the source
        for r in names:                                   # in the gap between rows, on no node's box
            assert not any(QRectF(c._screen_rect(i)).intersects(r) for i in range(len(v.shown.nodes)))


def test_search_text_stays_with_its_file(qtbot):
    docs = [QtDocument(Document(gpt2_like(2, d=32, n_head=2, seq=4))) for _ in range(2)]
    v = GraphView(None)
    qtbot.addWidget(v)
    v.resize(800, 600)
    v.show()
    try:
        a, b = docs
        with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
            v.set_document(a)
        v.search.setText("layer_norm")
        assert "found" in v.match_label.text()
        with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
            v.set_document(b)
        assert v.search.text() == "" and v.match_label.text() == ""
        v.set_document(a)
        assert v.search.text() == "layer_norm"
    finally:
        v.set_document(None)
        for d in docs:
            d.tasks.shutdown(wait=True)
            d.close()


def test_a_load_whose_tensor_is_missing_is_marked_on_the_graph(qtbot):
    nac = gpt2_like(1, d=32, n_head=2, seq=4)
    victim = next(ins for ins in nac.instructions if ins.a == 2 and ins.b == 1)
    del nac.params[victim.c[1]]
    qd = QtDocument(Document(nac))
    v = GraphView(None)
    qtbot.addWidget(v)
    v.resize(800, 600)
    v.show()
    try:
        with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
            v.set_document(qd)
        node = int(v.shown.node_of_tick[victim.index])
        styles = v.canvas.overlay_styles()
        assert node in styles and styles[node][0][2] == "!"
        assert "no tensor record" in v._tooltip(node)
        marked = {i for i in styles}
        assert len(marked) == 1
    finally:
        v.set_document(None)
        qd.tasks.shutdown(wait=True)
        qd.close()


def test_png_of_a_tall_graph_stays_legible(gpt2_view):
    v = gpt2_view
    lay = v.layout_
    w, h = lay.width + 40, lay.height + 40
    assert h > 8 * w                              # tall: one column would be a sliver
    img = v.canvas.render_image(max_side=4000)
    assert max(img.width(), img.height()) <= 4000
    scale, cols = v.canvas.last_export
    assert cols > 1 and scale > 2 * (4000 / h)    # columns side by side, each much larger
    assert img.width() >= cols * w * scale - 1
    # not blank at the end: the last strip holds the end of the graph
    tail = img.copy(img.width() - int(w * scale), 0, int(w * scale), img.height())
    assert len({tail.pixel(x, y) for x in range(0, tail.width(), 5) for y in range(0, tail.height(), 5)}) > 2


def test_opening_view_follows_resizes_until_the_user_moves_it(qtbot, gpt2_view):
    v = gpt2_view
    c = v.canvas
    c.reset_view()
    v.resize(500, 700)
    qtbot.wait(20)
    small = c.scale
    v.resize(1200, 700)
    qtbot.wait(20)
    assert c.scale != small or c.scale == 1.0
    c.zoom_by(1.5)
    zoomed = c.scale
    v.resize(700, 700)
    qtbot.wait(20)
    assert c.scale == zoomed


def test_an_unreadable_file_says_why_in_the_graph_area(window, tmp_path):
    bad = tmp_path / "cut.nac"
    bad.write_bytes(b"NAC\x01" + bytes(30))
    window.open_and_wait(bad)
    canvas = window.graph_view.canvas
    assert window.stack.currentWidget() is window.graph_view
    assert canvas.layout_ is None and canvas.message.startswith("No graph to draw: ")
    assert len(canvas.message) > len("No graph to draw: ") + 5


def _blocks_reading_one_value_doc() -> QtDocument:
    """Sixteen repeated blocks (``blk.<i>.w``), each reading the shared input ``x``: collapsed,
    the blocks sit one row apart and ``x`` reaches them through one bundle of stubs."""
    from nac_engine.text.asm import assemble
    lines = [".version 1.8"] + [f".param {i + 1} blk.{i}.w" for i in range(16)]
    lines += [".ops", "v0 = input x", "v1 = input y"]
    v, prev = 2, 1
    for i in range(16):
        lines += [f"v{v} = param blk.{i}.w", f"v{v + 1} = nac.add(v{prev}, v{v})",
                  f"v{v + 2} = nac.add(v{v + 1}, v0)", f"v{v + 3} = nac.mul(v{v + 2}, v{v})"]
        prev, v = v + 3, v + 4
    lines.append(f"v{v} = return v{prev}")
    return QtDocument(Document(assemble("\n".join(lines) + "\n")))


def test_stub_names_stay_off_collapsed_blocks(qtbot):
    """The row gap under a collapsed block is shorter than a stub: the stub's name goes right
    above its reader, and is left out where even that has no room, never over a block."""
    with _graph_of(qtbot, _blocks_reading_one_value_doc()) as v:
        assert v.act_collapse.isChecked()          # sixteen blocks open collapsed
        c = v.canvas
        assert sum(nd.kind == "group" for nd in v.shown.nodes) == 16
        src = int(v.shown.node_of_tick[0])
        _kept, rest = c.bundles[src]
        assert len(rest) >= 8
        names = 0
        for e in rest:
            c.center_on(int(v.shown.edges[e, 1]), zoom=1.0)
            drawn = _paint(v)
            for k, (text, r) in enumerate(drawn):
                if text == "x" and r.width() < 40:        # a stub's name (the node x's own label is wider)
                    names += 1
                    assert not any(QRectF(c._screen_rect(i)).intersects(r) for i in range(len(v.shown.nodes)))
                    assert not any(r.intersects(r2) for j, (_t, r2) in enumerate(drawn) if j != k)
        assert names >= len(rest)


def test_a_model_file_of_another_kind_shows_its_bytes_and_how_to_compile_the_model(window, tmp_path):
    """Opening model.onnx (a model, but no compiled file and nothing the Studio compiles) shows its
    bytes and, where the graph would be, how to make a .nac. (A model.py or a Hugging Face folder
    opens the Compile Model dialog: test_compile_dialog.)"""
    src = tmp_path / "model.onnx"
    src.write_bytes(b"\x08\x07\x12\x07pytorch" + bytes(200))
    window.open_and_wait(src)
    message = window.graph_view.canvas.message
    assert "not a NAC file" in message and "compile the model first: nac compile MODEL.py" in message
