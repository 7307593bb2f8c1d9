"""Command registry, fuzzy filter, palette, and menus/toolbar generated from the registry."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

from nac_studio.commands import Command, CommandRegistry, filter_commands, fuzzy_score
from nac_studio.widgets.command_palette import CommandPalette, PaletteModel


def _registry(qapp):
    reg = CommandRegistry()
    calls = []
    state = {"on": False}
    reg.add("nav.back", "Go Back", lambda: calls.append("back"), shortcut="Alt+Left")
    reg.add("hex.bookmark", "Toggle Bookmark", lambda: calls.append("bm"), shortcut="Ctrl+B")
    reg.add("view.palette", "Command Palette", lambda: calls.append("pal"))
    reg.add("x.disabled", "Disabled Thing", lambda: calls.append("never"), enabled=lambda: False)
    reg.add("x.toggle", "Toggle Something", lambda: state.update(on=not state["on"]), checked=lambda: state["on"])
    return reg, calls, state


def test_register_run_and_enabled_state(qapp):
    reg, calls, state = _registry(qapp)
    with pytest.raises(ValueError):
        reg.add("nav.back", "again", lambda: None)
    reg.run("nav.back")
    assert calls == ["back"]
    assert reg.run("x.disabled") is None and "never" not in calls
    act = reg.action("x.disabled")
    assert not act.isEnabled()
    toggle = reg.action("x.toggle")
    assert toggle.isCheckable() and not toggle.isChecked()
    toggle.trigger()
    assert state["on"] and toggle.isChecked()
    with pytest.raises(KeyError):
        reg.get("no.such.command")


def test_action_carries_shortcut_and_runs_the_command(qapp):
    reg, calls, _ = _registry(qapp)
    act = reg.action("hex.bookmark")
    assert act.shortcut() == QKeySequence("Ctrl+B")
    assert reg.action("hex.bookmark") is act   # one action per command
    act.trigger()
    assert calls == ["bm"]


def test_fuzzy_score_prefers_word_starts_and_substrings():
    assert fuzzy_score("", "anything") == 0
    assert fuzzy_score("xyz", "Go Back") is None
    assert fuzzy_score("gb", "Go Back") > fuzzy_score("gb", "Toggle Bookmark")
    assert fuzzy_score("back", "Go Back") > fuzzy_score("back", "Big Attack Chunk")
    cmds = [Command("a", "Toggle Bookmark", lambda: None), Command("b", "Go Back", lambda: None),
            Command("c", "Reset Layout", lambda: None)]
    assert [c.id for c in filter_commands(cmds, "back")] == ["b"]
    assert [c.id for c in filter_commands(cmds, "bo")][0] == "a"
    assert len(filter_commands(cmds, "")) == 3


def test_palette_model_passes_qmodeltester(qapp, qtmodeltester):
    reg, _, _ = _registry(qapp)
    model = PaletteModel(reg)
    qtmodeltester.check(model)
    model.set_query("tog")
    qtmodeltester.check(model)
    assert {model.command(r).id for r in range(model.rowCount())} == {"hex.bookmark", "x.toggle"}
    # disabled commands are listed but cannot be selected
    model.set_query("disabled")
    assert model.rowCount() == 1
    assert not (model.flags(model.index(0)) & Qt.ItemFlag.ItemIsEnabled)


def test_palette_filters_as_you_type_and_enter_runs(qtbot):
    reg, calls, _ = _registry(None)
    palette = CommandPalette(reg)
    qtbot.addWidget(palette)
    palette.popup()
    qtbot.keyClicks(palette.edit, "go back")
    assert palette.model.command(palette.list.currentIndex().row()).id == "nav.back"
    qtbot.keyClick(palette.edit, Qt.Key.Key_Return)
    assert calls == ["back"]
    assert not palette.isVisible()


def test_palette_skips_disabled_commands_with_the_arrow_keys(qtbot):
    reg, calls, _ = _registry(None)
    palette = CommandPalette(reg)
    qtbot.addWidget(palette)
    palette.popup()
    qtbot.keyClicks(palette.edit, "t")
    rows = [palette.model.command(r).id for r in range(palette.model.rowCount())]
    seen = set()
    for _ in range(len(rows) + 1):
        seen.add(palette.model.command(palette.list.currentIndex().row()).id)
        qtbot.keyClick(palette.edit, Qt.Key.Key_Down)
    assert "x.disabled" not in seen


def test_main_window_menus_toolbar_and_palette_come_from_the_registry(window):
    reg = window.commands
    menu_actions = set()
    for menu in window.menuBar().findChildren(type(window.menuBar().actions()[0].menu())):
        for act in menu.actions():
            if act.objectName():
                menu_actions.add(act.objectName())
    for cmd in reg.commands():
        if cmd.menu:
            assert cmd.id in menu_actions, f"{cmd.id} declares menu {cmd.menu!r} but is in no menu"
    for act in window.toolbar.actions():
        if not act.isSeparator():
            assert act.objectName() in reg
    shortcuts = [QKeySequence(c.shortcut).toString() for c in reg.commands() if c.shortcut]
    assert len(shortcuts) == len(set(shortcuts)), "two commands share a shortcut"
    for needed in ("nav.back", "nav.forward", "view.commandPalette", "file.open", "edit.copyHex",
                   "edit.copyC", "nav.gotoOffset", "edit.find", "nav.toggleBookmark"):
        assert needed in reg
    assert reg.get("nav.back").shortcut == "Alt+Left" and reg.get("nav.forward").shortcut == "Alt+Right"
    assert reg.get("view.commandPalette").shortcut == "Ctrl+Shift+P"
    # nothing open: document commands are disabled
    assert not reg.action("nav.back").isEnabled()
    assert not reg.action("file.close").isEnabled()


def test_palette_opens_from_its_shortcut_command(window, qtbot):
    window.commands.run("view.commandPalette")
    assert window.palette_popup.isVisible()
    qtbot.keyClicks(window.palette_popup.edit, "reset layout")
    assert window.palette_popup.model.command(window.palette_popup.list.currentIndex().row()).id == "view.resetLayout"
    qtbot.keyClick(window.palette_popup.edit, Qt.Key.Key_Escape)
    assert not window.palette_popup.isVisible()
