"""Graph canvas overlay API: layers of (fill, outline, badge) per node key or tick."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtGui import QColor  # noqa: E402

from nac_studio.views.graph import GraphView  # noqa: E402

TIMEOUT = 20000


def _view(qtbot, qdoc) -> GraphView:
    v = GraphView(qdoc)
    qtbot.addWidget(v)
    v.resize(900, 700)
    v.show()
    qtbot.waitExposed(v)
    qtbot.waitUntil(lambda: v.layout_ is not None and v.layout_.graph is v.graph, timeout=TIMEOUT)
    return v


def _pixel_at_node(view, node):
    x, y, w, h = view.layout_.rect(node)
    c = view.canvas
    p = c.scene_to_screen(x + w * 0.15, y + h * 0.5)
    return c.grab().toImage().pixelColor(int(p.x()), int(p.y()))


def test_overlay_fill_outline_badge_by_key_and_tick(qtbot, qdoc_for, demo_path):
    v = _view(qtbot, qdoc_for(demo_path))
    graph = v.shown
    node = next(i for i, nd in enumerate(graph.nodes) if nd.kind == "instruction")
    nd = graph.nodes[node]
    v.canvas.center_on(node, zoom=1.2)
    before = _pixel_at_node(v, node)
    red = QColor(230, 20, 20)
    v.canvas.set_node_overlay("test", {nd.key: (red, QColor("blue"), "3")})
    assert v.canvas.overlay_styles() == {node: [(red, QColor("blue"), "3")]}
    after = _pixel_at_node(v, node)
    assert after != before and after.red() > 200 and after.green() < 60
    # a tick key lands on the node standing for that tick; a later layer's fill wins
    green = QColor(20, 200, 20)
    v.canvas.set_node_overlay("later", {nd.tick: (green, None, None)})
    assert _pixel_at_node(v, node).green() > 180
    assert v.canvas.overlay_layers() == ["test", "later"]
    v.canvas.clear_overlay("later")
    v.canvas.clear_overlay("test")
    v.canvas.clear_overlay("never set")
    assert v.canvas.overlay_styles() == {}
    assert _pixel_at_node(v, node) == before


def test_overlay_survives_relayout_and_unknown_keys_are_ignored(qtbot, qdoc_for, demo_path):
    v = _view(qtbot, qdoc_for(demo_path))
    nd = next(nd for nd in v.shown.nodes if nd.kind == "instruction")
    v.canvas.set_node_overlay("bp", {nd.key: (None, QColor("red"), "●"), ("ins", 10 ** 9): (None, None, "x"),
                                     10 ** 9: (QColor("red"), None, None)})
    with qtbot.waitSignal(v.layoutReady, timeout=TIMEOUT):
        v.set_mode("tick")
    styles = v.canvas.overlay_styles()
    assert list(styles) == [v.shown.nodes.index(next(n for n in v.shown.nodes if n.key == nd.key))]
    assert not v.canvas.grab().isNull()
    v.canvas.fit()     # marks-only zoom draws too
    assert not v.canvas.render_image(max_side=800).isNull()


def test_a_label_on_a_light_overlay_fill_is_dark_in_the_dark_theme(qtbot, qdoc_for, demo_path, qapp):
    """The debugger's executed and current fills are fixed light colours: a dark theme's light
    label text on them could not be read. The label is drawn dark there (and stays the theme's
    colour on an unshaded node)."""
    from nac_studio.debug_marks import EXECUTED_STYLE
    from nac_studio.theme import apply_theme
    apply_theme(qapp, "dark")
    try:
        v = _view(qtbot, qdoc_for(demo_path))
        node = next(i for i, nd in enumerate(v.shown.nodes) if nd.kind == "instruction")
        v.canvas.center_on(node, zoom=1.4)

        def label_lightness() -> list:
            img = v.canvas.grab().toImage()
            text, r = next((t, r) for t, r in v.canvas.text_items()
                           if r.contains(v.canvas.scene_to_screen(*v.layout_.pos[node])))
            return sorted(img.pixelColor(x, y).lightness() for x in range(int(r.left()) + 2, int(r.right()) - 2)
                          for y in range(int(r.top()) + 2, int(r.bottom()) - 2))
        plain = label_lightness()
        assert plain[-1] > 180                      # light text on the dark theme's node
        v.canvas.set_node_overlay("debug.executed", {v.shown.nodes[node].key: EXECUTED_STYLE})
        shaded = label_lightness()
        assert shaded[0] < 80, "no dark text on the light executed fill"
    finally:
        apply_theme(qapp, "light")
