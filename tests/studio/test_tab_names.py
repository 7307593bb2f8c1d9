"""File tabs tell same-named files apart by folder."""
from __future__ import annotations

import shutil

from nac_studio.tab_names import tab_titles


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
