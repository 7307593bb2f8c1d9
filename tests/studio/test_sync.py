"""One selection, every view: select anywhere and hex, structure, disassembly, graph and
properties follow — asserted through the document model, not through pixels."""
from __future__ import annotations

from PySide6.QtCore import QPoint, Qt

from nac_studio.model.document import Selection
from nac_studio.widgets.hex_area import ROW

from .conftest import wait_idle


def _views_agree_on_instruction(win, tick: int) -> None:
    qdoc = win.active
    span = qdoc.doc.span_of(Selection("instruction", tick))
    assert qdoc.tick == tick
    assert win.hex_view.area.highlights() == [(span.offset, span.end)]
    assert win.structure_view.current_span() is span
    dis = win.disassembly_view
    assert dis.model.tick_at(dis.table.currentIndex().row()) == tick
    graph = win.graph_view
    node = graph.highlighted_node()
    assert node is not None and graph.shown.nodes[node].tick == tick
    assert win.properties_view.heading.text().startswith(f"t{tick} · ")


def test_click_in_hex_moves_every_view(window, demo_path, qtbot):
    qdoc = window.open_and_wait(demo_path)
    ins = qdoc.nac.instructions[7]
    area = window.hex_view.area
    area.ensure_visible(ins.offset, center=True)
    row = ins.offset // ROW - area.first_row()
    i = ins.offset % ROW
    x = (area._cell_left(i) + area._cell_right(i)) / 2 - area.horizontalScrollBar().value()
    y = area._header_h + row * area._lh + area._lh / 2
    qtbot.mouseClick(area.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))
    assert qdoc.selection == Selection("instruction", 7)
    _views_agree_on_instruction(window, 7)


def test_selecting_a_row_in_disassembly_moves_every_view(window, demo_path):
    qdoc = window.open_and_wait(demo_path)
    window.disassembly_view.select_tick(4)
    assert qdoc.selection == Selection("instruction", 4)
    _views_agree_on_instruction(window, 4)


def test_clicking_a_graph_node_moves_every_view(window, demo_path):
    qdoc = window.open_and_wait(demo_path)
    graph = window.graph_view
    node = next(k for k, nd in enumerate(graph.shown.nodes) if nd.kind == "instruction" and nd.tick == 8)
    graph._on_node_clicked(node)
    assert qdoc.selection == Selection("instruction", 8)
    _views_agree_on_instruction(window, 8)


def test_selecting_a_field_in_structure_follows_to_its_instruction(window, demo_path):
    qdoc = window.open_and_wait(demo_path)
    tree = window.structure_view
    field = qdoc.nac.spans.find("OPS/instr[11]/D[0]")
    tree.tree.setCurrentIndex(tree.model.index_of(field))
    assert qdoc.selection == Selection("span", "OPS/instr[11]/D[0]")
    assert qdoc.tick == 11
    assert window.hex_view.area.highlights() == [(field.offset, field.end)]
    dis = window.disassembly_view
    assert dis.model.tick_at(dis.table.currentIndex().row()) == 11
    # a field is not a node: the graph marks its instruction as the current tick
    graph = window.graph_view
    assert graph.canvas.current is not None and graph.shown.nodes[graph.canvas.current].tick == 11


def test_a_parameter_selected_anywhere_is_selected_everywhere(window, demo_path):
    qdoc = window.open_and_wait(demo_path)
    p = next(p for p in qdoc.nac.params.values() if p.name == "fc2.weight")
    qdoc.select(Selection("param", p.id), source=None)
    spans = qdoc.doc.spans_of(Selection("param", p.id))
    assert window.hex_view.area.highlights() == [(s.offset, s.end) for s in spans]
    assert window.structure_view.current_span() is spans[0]
    assert window.properties_view.heading.text() == "fc2.weight"
    load = next(i.index for i in qdoc.nac.instructions if i.a == 2 and i.b == 1 and i.c[1] == p.id)
    dis = window.disassembly_view
    assert dis.model.tick_at(dis.table.currentIndex().row()) == load
    graph = window.graph_view
    assert graph.shown.nodes[graph.highlighted_node()].param_id == p.id


def test_back_and_forward_commands_restore_every_view(window, demo_path):
    qdoc = window.open_and_wait(demo_path)
    cmds = window.commands
    assert not cmds.action("nav.back").isEnabled()
    window.disassembly_view.select_tick(3)
    window.disassembly_view.select_tick(9)
    qdoc.select(Selection("section", "CMAP"))
    assert cmds.action("nav.back").isEnabled() and not cmds.action("nav.forward").isEnabled()
    cmds.run("nav.back")
    assert qdoc.selection == Selection("instruction", 9)
    _views_agree_on_instruction(window, 9)
    cmds.run("nav.back")
    _views_agree_on_instruction(window, 3)
    assert cmds.action("nav.forward").isEnabled()
    cmds.run("nav.forward")
    _views_agree_on_instruction(window, 9)
    cmds.run("nav.forward")
    assert qdoc.selection == Selection("section", "CMAP")
    assert window.properties_view.heading.text() == "Section CMAP"
    assert not cmds.action("nav.forward").isEnabled()


def test_tabs_switch_every_view_to_the_other_document(window, demo_path, corpus_case, qtbot):
    first = window.open_and_wait(demo_path)
    first.select(Selection("instruction", 5))
    second = window.open_and_wait(corpus_case("cnn"))
    assert window.tabs.count() == 2 and window.active is second
    assert window.hex_view.area.size_bytes == second.nac.size
    assert window.disassembly_view.model.rowCount() == len(second.nac.instructions)
    window.tabs.setCurrentIndex(0)
    assert window.active is first
    wait_idle(qtbot, window)   # the graph lays the other document out again
    assert window.hex_view.area.size_bytes == first.nac.size
    _views_agree_on_instruction(window, 5)   # each document keeps its own selection
    window.commands.run("file.close")
    assert window.active is second and window.tabs.count() == 1
    # opening an open file activates it instead of opening it twice
    assert window.open_path(str(corpus_case("cnn"))) is None and window.tabs.count() == 1
