"""Graph view: background layout, selection sync both ways, options, blocks, search, export."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import xml.etree.ElementTree as ET  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import QPointF, QRectF, Qt  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

from nac_studio.model.document import Selection  # noqa: E402
from nac_studio.views.graph import GraphView  # noqa: E402

TIMEOUT = 20000


def make_view(qtbot, qdoc) -> GraphView:
    v = GraphView(qdoc)
    qtbot.addWidget(v)
    v.resize(1000, 760)
    v.show()
    qtbot.waitExposed(v)
    qtbot.waitUntil(lambda: v.layout_ is not None and v.layout_.graph is v.graph, timeout=TIMEOUT)
    return v


def relayout_with(qtbot, view, action) -> None:
    with qtbot.waitSignal(view.layoutReady, timeout=TIMEOUT):
        action()
    assert view.layout_.graph is view.graph


def node_screen_pos(view, node: int) -> QPointF:
    x, y = view.layout_.pos[node]
    return view.canvas.scene_to_screen(x, y)


def node_visible(view, node: int) -> bool:
    x, y, w, h = view.layout_.rect(node)
    return view.canvas.visible_scene_rect().intersects(QRectF(x, y, w, h))


@pytest.fixture
def bert(qdoc_for, corpus_case):
    return qdoc_for(corpus_case("bert_tiny"))


def test_every_corpus_file_in_the_view(qtbot, qdoc_for, corpus_file):
    qdoc = qdoc_for(corpus_file)
    v = make_view(qtbot, qdoc)
    assert v.layout_.stats["nodes"] == len(qdoc.nac.instructions)
    assert not v.canvas.grab().isNull()
    relayout_with(qtbot, v, lambda: v.set_mode("tick"))
    assert v.layout_.mode == "tick"
    assert not v.progress.isVisible()


def test_click_node_selects_it(qtbot, bert):
    v = make_view(qtbot, bert)
    node = int(v.graph.node_of_tick[29])
    v.canvas.center_on(node, zoom=1.0)
    qtbot.mouseClick(v.canvas, Qt.MouseButton.LeftButton, pos=node_screen_pos(v, node).toPoint())
    assert bert.selection == Selection("instruction", 29)
    assert bert.tick == 29
    assert v.highlighted_node() == node and v.canvas.current == node
    # a parameter node selects the parameter (the tick stays)
    pnode = next(i for i, nd in enumerate(v.graph.nodes) if nd.kind == "param")
    v.canvas.center_on(pnode, zoom=1.0)
    qtbot.mouseClick(v.canvas, Qt.MouseButton.LeftButton, pos=node_screen_pos(v, pnode).toPoint())
    assert bert.selection == Selection("param", v.graph.nodes[pnode].param_id)
    assert v.highlighted_node() == pnode and bert.tick == 29


def test_document_selection_highlights_and_reveals_the_node(qtbot, bert):
    v = make_view(qtbot, bert)
    v.canvas.center_on(0, zoom=1.0)
    assert not node_visible(v, int(v.graph.node_of_tick[100]))
    bert.select(Selection("instruction", 100))
    node = int(v.graph.node_of_tick[100])
    assert v.highlighted_node() == node
    assert v.canvas.current == node
    assert node_visible(v, node)
    bert.set_tick(57)
    assert v.canvas.current == int(v.graph.node_of_tick[57])
    assert v.highlighted_node() == node


def test_hidden_weights_highlight_their_readers(qtbot, bert):
    v = make_view(qtbot, bert)
    relayout_with(qtbot, v, lambda: v.act_params.setChecked(False))
    assert not any(nd.kind == "param" for nd in v.graph.nodes)
    pid = next(p.id for p in bert.nac.params.values() if p.name.endswith("layer.0.attention.self.query.weight"))
    bert.select(Selection("param", pid))
    node = v.highlighted_node()
    assert node is not None and pid in v.graph.nodes[node].params
    assert v.graph.nodes[node].op == "aten.linear.default"


def test_tick_mode_orders_layers_by_tick(qtbot, bert):
    v = make_view(qtbot, bert)
    relayout_with(qtbot, v, lambda: v.set_mode("tick"))
    ticks = [nd.tick for nd in v.graph.nodes]
    ys = v.layout_.pos[:, 1]
    assert list(np.argsort(ys, kind="stable")) == list(np.argsort(ticks, kind="stable"))


def test_blocks_collapse_and_expand_individually(qtbot, bert):
    v = make_view(qtbot, bert)
    assert v.act_collapse.isEnabled() and not v.act_collapse.isChecked()   # small file: open by default
    relayout_with(qtbot, v, lambda: v.act_collapse.setChecked(True))
    groups = [i for i, nd in enumerate(v.graph.nodes) if nd.kind == "group"]
    assert [v.graph.nodes[i].op for i in groups] == ["m.encoder.layer.0", "m.encoder.layer.1"]
    # double-click on a block opens it, the other stays collapsed
    g0 = groups[0]
    v.canvas.center_on(g0, zoom=1.0)
    relayout_with(qtbot, v, lambda: qtbot.mouseDClick(v.canvas, Qt.MouseButton.LeftButton,
                                                       pos=node_screen_pos(v, g0).toPoint()))
    assert [nd.op for nd in v.graph.nodes if nd.kind == "group"] == ["m.encoder.layer.1"]
    # selecting an instruction inside the collapsed block highlights the block
    bert.select(Selection("instruction", 90))
    assert v.graph.nodes[v.highlighted_node()].op == "m.encoder.layer.1"
    # and a block can be folded again from one of its instructions
    relayout_with(qtbot, v, lambda: v.collapse_block("m.encoder.layer.0"))
    assert [nd.op for nd in v.graph.nodes if nd.kind == "group"] == ["m.encoder.layer.0", "m.encoder.layer.1"]


def test_search_selects_and_centres(qtbot, bert):
    v = make_view(qtbot, bert)
    v.canvas.center_on(0, zoom=1.0)
    v.search.setText("softmax")
    node = v.find_next()
    assert bert.nac.instruction_name(bert.nac.instructions[bert.selection.key]) == "aten.softmax.int"
    assert node_visible(v, node)
    first = bert.selection
    v.find_next()
    assert bert.selection != first and v.match_label.text() == "2/2"
    # a parameter that has no node of its own (weights hidden) is found through its reader
    relayout_with(qtbot, v, lambda: v.act_params.setChecked(False))
    v.search.setText("intermediate.dense.weight")
    node = v.find_next()
    assert bert.selection.kind == "param"
    assert bert.nac.params[bert.selection.key].name.endswith("intermediate.dense.weight")
    assert bert.selection.key in v.graph.nodes[node].params
    v.search.setText("no-such-thing")
    assert v.find_next() is None and v.match_label.text() == "no match"


def test_options_keep_the_centred_node_in_place(qtbot, bert):
    v = make_view(qtbot, bert)
    node = int(v.graph.node_of_tick[64])
    v.canvas.center_on(node, zoom=1.0)
    relayout_with(qtbot, v, lambda: v.act_consts.setChecked(True))
    node = int(v.graph.node_of_tick[64])
    p = node_screen_pos(v, node)
    assert abs(p.x() - v.canvas.width() / 2) < 2 and abs(p.y() - v.canvas.height() / 2) < 2
    assert any(nd.kind == "const" for nd in v.graph.nodes)


def test_only_the_latest_layout_is_shown(qtbot, bert):
    v = make_view(qtbot, bert)
    with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
        v.act_consts.setChecked(True)
        v.set_mode("tick")
        v.act_params.setChecked(False)
    qtbot.waitUntil(lambda: not bert.tasks.active, timeout=TIMEOUT)
    assert v.layout_.graph is v.graph
    assert v.layout_.mode == "tick" and v.graph.show_consts and not v.graph.show_params


def test_export_png_and_svg(qtbot, bert, tmp_path):
    v = make_view(qtbot, bert)
    png, svg = tmp_path / "g.png", tmp_path / "g.svg"
    v.export_png(str(png))
    img = QImage(str(png))
    assert not img.isNull()
    margin = 40
    assert img.width() == int(v.layout_.width + margin) and img.height() == int(v.layout_.height + margin)
    # the picture is not blank: node fills differ from the background
    bg = img.pixelColor(2, 2)
    sample = [img.pixelColor(int(x + margin / 2), int(y + margin / 2)) for x, y in v.layout_.pos[:20]]
    assert any(c != bg for c in sample)
    v.export_svg(str(svg))
    assert QSvgRenderer(str(svg)).isValid()
    root = ET.parse(str(svg)).getroot()
    assert root.tag.endswith("svg")
    texts = "".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    assert "layer_norm" in texts and "linear" in texts
    # a size cap scales big exports down instead of failing
    small = tmp_path / "small.png"
    v.export_png(str(small), max_side=300)
    assert max(QImage(str(small)).width(), QImage(str(small)).height()) <= 300


def test_no_document(qtbot, bert):
    v = make_view(qtbot, bert)
    v.set_document(None)
    assert v.layout_ is None and v.canvas.layout_ is None
    assert not v.canvas.grab().isNull()
    v.set_document(bert)
    qtbot.waitUntil(lambda: v.layout_ is not None, timeout=TIMEOUT)


def test_hover_frames_the_node_and_explains_it(qtbot, bert):
    v = make_view(qtbot, bert)
    relayout_with(qtbot, v, lambda: v.act_params.setChecked(False))
    node = int(v.graph.node_of_tick[29])          # aten.linear.default reading two hidden weights
    v.canvas.center_on(node, zoom=1.0)
    qtbot.mouseMove(v.canvas, node_screen_pos(v, node).toPoint())
    qtbot.waitUntil(lambda: v.canvas.hovered == node, timeout=2000)
    tip = v._tooltip(node)
    assert "aten.linear.default" in tip and "t29" in tip
    assert "reads m.encoder.layer.0.attention.self.query.weight" in tip


def test_zoom_keeps_the_point_under_the_cursor(qtbot, bert):
    v = make_view(qtbot, bert)
    node = int(v.graph.node_of_tick[60])
    v.canvas.center_on(node, zoom=0.5)
    anchor = node_screen_pos(v, node)
    v.canvas.zoom_by(1.6, anchor)
    assert abs(v.canvas.scale - 0.8) < 1e-9
    after = node_screen_pos(v, node)
    assert abs(after.x() - anchor.x()) < 1 and abs(after.y() - anchor.y()) < 1
