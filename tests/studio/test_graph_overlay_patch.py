"""``GraphCanvas.update_node_overlay``: single overlay entries changed in place. The cached picture
is repainted only under the nodes touched, and the result must be the picture a full repaint
draws, pixel for pixel, at every level of detail."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from PySide6.QtGui import QColor  # noqa: E402

from nac_studio.views.graph import GraphView  # noqa: E402

TIMEOUT = 20000
BERT = Path(__file__).resolve().parents[2] / "nac_studio" / "demos" / "demo_bert_tiny.nac"   # 50 instructions
SHADE, EXEC, BREAK = QColor("#cfe8d3"), QColor("#2e9d4a"), QColor("#d0443c")


@pytest.fixture
def bert_path() -> Path:
    if not BERT.is_file():
        pytest.skip(f"demo model missing at {BERT}")
    return BERT


def _view(qtbot, qdoc) -> GraphView:
    v = GraphView(qdoc)
    qtbot.addWidget(v)
    v.resize(900, 700)
    v.show()
    qtbot.waitExposed(v)
    qtbot.waitUntil(lambda: v.layout_ is not None and v.layout_.graph is v.graph, timeout=TIMEOUT)
    return v


def _full_repaint(canvas):
    """The picture drawn from scratch (a layer set and cleared forces a whole repaint)."""
    canvas.set_node_overlay("zz-force", {})
    canvas.clear_overlay("zz-force")
    return canvas.grab().toImage()


def _differing_pixels(a, b) -> int:
    assert a.size() == b.size()
    return sum(1 for y in range(a.height()) for x in range(a.width()) if a.pixel(x, y) != b.pixel(x, y))


@pytest.mark.parametrize("zoom", [1.2, 0.5, 0.1])
def test_patched_overlay_equals_a_full_repaint(qtbot, qdoc_for, bert_path, zoom):
    v = _view(qtbot, qdoc_for(bert_path))
    c = v.canvas
    ticks = [nd.tick for nd in v.shown.nodes if nd.kind == "instruction" and nd.tick is not None]
    assert len(ticks) > 12
    mid = ticks[len(ticks) // 2]
    c.center_on(int(v.shown.node_of_tick[mid]), zoom=zoom)
    # a debugger stopped at ``mid``: ticks before it shaded, a breakpoint further on
    c.set_node_overlay("debug.executed", {t: (SHADE, None, None) for t in ticks if t < mid})
    c.set_node_overlay("debug.current", {mid: (QColor("#f6e7a6"), EXEC, "▶")})
    c.set_node_overlay("debug.breakpoints", {ticks[-3]: (None, None, "●")})
    c.grab()                                      # the cached picture exists
    key = c._base_key
    # one F10 and a breakpoint toggled: three layers change by one or two entries each
    nxt = ticks[ticks.index(mid) + 1]
    c.update_node_overlay("debug.executed", {mid: (SHADE, None, None)})
    c.update_node_overlay("debug.current", {mid: None, nxt: (QColor("#f6e7a6"), EXEC, "▶")})
    c.update_node_overlay("debug.breakpoints", {ticks[-3]: None, nxt: (None, None, "○")})
    patched = c.grab().toImage()
    assert c._base_key == key, "the whole picture was drawn again"
    # the resolved styles are those of the same layers set whole
    resolved = {i: list(s) for i, s in c.overlay_styles().items()}
    c.set_node_overlay("debug.executed", {t: (SHADE, None, None) for t in ticks if t <= mid})
    c.set_node_overlay("debug.current", {nxt: (QColor("#f6e7a6"), EXEC, "▶")})
    c.set_node_overlay("debug.breakpoints", {nxt: (None, None, "○")})
    assert resolved == c.overlay_styles()
    full = _full_repaint(c)
    assert c._base_key != key
    assert _differing_pixels(patched, full) == 0
    # and the patch really changed the picture under the nodes it touched
    before_step = c.grab().toImage()
    c.update_node_overlay("debug.current", {nxt: None})
    assert _differing_pixels(before_step, c.grab().toImage()) > 0


def test_off_screen_changes_repaint_nothing_and_many_changes_repaint_all(qtbot, qdoc_for, bert_path, monkeypatch):
    from nac_studio.widgets import graph_canvas
    monkeypatch.setattr(graph_canvas, "PATCH_MAX_NODES", 8)     # the small graph stands for a big one
    v = _view(qtbot, qdoc_for(bert_path))
    c = v.canvas
    ticks = [nd.tick for nd in v.shown.nodes if nd.kind == "instruction" and nd.tick is not None]
    c.center_on(int(v.shown.node_of_tick[ticks[0]]), zoom=1.5)
    c.grab()
    key = c._base_key
    far = [t for t in ticks if not c.visible_scene_rect().intersects(
        c.visible_scene_rect().__class__(*v.layout_.rect(int(v.shown.node_of_tick[t]))))]
    assert far, "the graph is taller than the view at this zoom"
    before = c.grab().toImage()
    c.update_node_overlay("debug.executed", {far[-1]: (SHADE, None, None)})
    assert c._base_key == key and _differing_pixels(before, c.grab().toImage()) == 0
    assert c.overlay_styles()[int(v.shown.node_of_tick[far[-1]])] == [(SHADE, None, None)]
    # a Continue shades everything at once: one whole repaint, not one patch per node
    c.update_node_overlay("debug.executed", {t: (SHADE, None, None) for t in ticks})
    c.grab()
    assert c._base_key != key
    assert len(c.overlay_styles()) >= len({int(v.shown.node_of_tick[t]) for t in ticks})
