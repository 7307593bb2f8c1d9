"""Selection stall (issue 12): the Structure tree follows the selection only while it is on
screen. Revealing a record expands its section and lays out every row in it, so a Structure
pane tabbed behind another does that once, when it is shown, not on every selection."""
from __future__ import annotations

from nac_studio.model.document import Selection


def test_hidden_structure_reveals_when_shown(qtbot, window, demo_path):
    window.resize(1024, 700)
    qtbot.wait(20)
    window.apply_default_layout(None)
    qtbot.wait(50)
    qdoc = window.open_and_wait(demo_path)
    sv = window.structure_view
    window.docks["problems"].show()
    window.docks["problems"].raise_()
    qtbot.wait(30)
    if window.docks["structure"] not in window.tabifiedDockWidgets(window.docks["problems"]):
        window.tabifyDockWidget(window.docks["problems"], window.docks["structure"])
        window.docks["problems"].raise_()
        qtbot.wait(30)
    assert sv.tree.viewport().visibleRegion().isEmpty()

    tick = len(qdoc.nac.instructions) - 2
    qdoc.select(Selection("instruction", tick))
    qtbot.wait(20)
    expected = qdoc.doc.spans_of(qdoc.selection)[0]
    # nothing expanded or laid out for the hidden tree
    assert not sv.tree.currentIndex().isValid() or sv.model.span_for(sv.tree.currentIndex()) is not expected

    window.docks["structure"].raise_()
    qtbot.waitUntil(lambda: sv.tree.currentIndex().isValid(), timeout=3000)
    assert sv.model.span_for(sv.tree.currentIndex()) is expected

    # shown: it follows each selection, in the frame after the selection's own (not on a
    # later show, not never)
    qdoc.select(Selection("instruction", 1))
    want = qdoc.doc.spans_of(qdoc.selection)[0]
    qtbot.waitUntil(lambda: sv.model.span_for(sv.tree.currentIndex()) is want, timeout=1000)


def test_current_span_asked_while_hidden_is_the_selection(qtbot, window, demo_path):
    qdoc = window.open_and_wait(demo_path)
    window.docks["structure"].hide()
    qtbot.wait(20)
    qdoc.select(Selection("instruction", 3))
    assert window.structure_view.current_span() is qdoc.doc.spans_of(qdoc.selection)[0]
