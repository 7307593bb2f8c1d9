"""Hidden panes do no work for a document until they are shown."""
from __future__ import annotations


def test_hidden_source_pane_does_not_highlight_until_shown(window, qtbot, tmp_path):
    from nac_engine.cli import main
    from nac_studio.model.document import Selection
    from tests.studio.test_source_and_diff_views import FACTORY
    (tmp_path / "model.py").write_text(FACTORY)
    assert main(["compile", str(tmp_path / "model.py"), "-o", str(tmp_path / "f.nac")]) == 0
    qdoc = window.open_and_wait(tmp_path / "f.nac")
    src = window.views["source"]
    window.docks["source"].show()
    window.docks["disassembly"].show()
    window.tabifyDockWidget(window.docks["disassembly"], window.docks["source"])
    window.docks["disassembly"].raise_()           # the Source tab behind another
    qtbot.wait(50)
    tick = next(i.index for i in qdoc.nac.instructions if "linear" in qdoc.nac.instruction_name(i))
    qdoc.select(Selection("instruction", tick))
    qtbot.wait(100)
    assert src.shown_path == str(tmp_path / "model.py")
    assert src._documents[src.shown_path][1] is None        # loaded, not highlighted
    window.docks["source"].raise_()
    qtbot.waitUntil(lambda: src._documents[src.shown_path][1] is not None, timeout=3000)
    doc = src.editor.document()
    qtbot.waitUntil(lambda: any(doc.findBlockByNumber(n).layout().formats() for n in range(doc.blockCount())),
                    timeout=3000)


def test_help_about_shows_versions_and_copies_them(window, qtbot):
    from PySide6.QtWidgets import QApplication, QMessageBox
    window.commands.run("help.about")
    box = window.about_dialog
    qtbot.waitUntil(box.isVisible, timeout=5000)
    details = box.detailedText()
    assert "nac-studio:" in details and "Qt:" in details and "Python:" in details
    copy = next(b for b in box.buttons() if b.text() == "Copy diagnostics")
    copy.click()
    assert QApplication.clipboard().text() == details and box.isVisible()
    box.button(QMessageBox.StandardButton.Close).click()
