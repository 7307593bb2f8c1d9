"""File tabs tell same-named files apart by folder."""
from __future__ import annotations

import shutil

from nac_studio.model.tab_names import tab_titles


def test_tab_titles():
    assert tab_titles(["/r/a/model.nac", "/r/b/model.nac", "/r/other.nac"]) == \
        ["a/model.nac", "b/model.nac", "other.nac"]
    assert tab_titles(["/p/a/m.nac", "/q/a/m.nac"]) == ["p/a/m.nac", "q/a/m.nac"]
    assert tab_titles(["/only.nac"]) == ["only.nac"]
    assert tab_titles([]) == []


def test_window_tabs_disambiguate_and_go_back_when_one_closes(window, demo_path, tmp_path):
    paths = []
    for folder in ("run_a", "run_b"):
        (tmp_path / folder).mkdir()
        paths.append(tmp_path / folder / demo_path.name)
        shutil.copy(demo_path, paths[-1])
    a = window.open_and_wait(paths[0])
    assert window.tabs.tabText(0) == demo_path.name
    window.open_and_wait(paths[1])
    assert [window.tabs.tabText(i) for i in range(2)] == [f"run_a/{demo_path.name}", f"run_b/{demo_path.name}"]
    window.close_document(a)
    assert window.tabs.tabText(0) == demo_path.name


def test_palette_ranks_exact_and_prefix_first_and_says_no_match(window):
    from nac_studio.commands import filter_commands
    cmds = window.commands.commands()
    assert filter_commands(cmds, "reload")[0].title == "Reload"
    first = filter_commands(cmds, "fit")[0].title.lower()
    assert first.startswith("fit") or first.split()[0] == "fit" or " fit" in first
    pal = window.palette_popup
    pal.popup()
    pal.edit.setText("zzqqxx no such command")
    assert pal.model.rowCount() == 0 and pal.no_match.isVisibleTo(pal) and not pal.list.isVisibleTo(pal)
    pal.edit.setText("rel")
    assert pal.model.rowCount() > 0 and not pal.no_match.isVisibleTo(pal)
    pal.hide()


def test_shortcuts_dialog_is_searchable(window):
    window.show_shortcuts()
    dlg = window.shortcuts_dialog
    table = dlg.table
    total = table.rowCount()
    dlg.search.setText("ctrl+o")
    shown = [r for r in range(total) if not table.isRowHidden(r)]
    assert 0 < len(shown) < total
    assert all("ctrl+o" in " ".join(table.item(r, c).text().lower() for c in range(3)) for r in shown)
    dlg.search.setText("")
    assert not any(table.isRowHidden(r) for r in range(total))
    dlg.close()
