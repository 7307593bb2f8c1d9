"""The main window's own commands (File, Edit, Go, View, the graph's, Help), declared here like
the debug and simulation ones: each names what it runs on the window, its shortcut, menu place
and when it is enabled; menus, toolbar, palette and shortcuts are built from the registry."""
from __future__ import annotations

PANEL_SHORTCUTS = {"structure": "Alt+1", "hex": "Alt+2", "disassembly": "Alt+3", "properties": "Alt+4",
                   "problems": "Alt+5"}
PANEL_ICONS = {"structure": "structure", "hex": "hex", "disassembly": "disassembly", "properties": "properties",
               "problems": "problems", "graph": "graph", "variables": "variables", "watches": "watch",
               "breakpoints": "breakpoint", "tensor_inspector": "tensor"}


def register_window_commands(window) -> None:
    c = window.commands
    has_doc = lambda: window.active is not None  # noqa: E731
    # File
    c.add("file.open", "Open…", window.open_dialog, shortcut="Ctrl+O", icon="open", menu="File", group="a",
          toolbar=True, tip="Open a .nac file")
    c.add("file.compile", "Compile Model…", window.compile_dialog, shortcut="Ctrl+Shift+B", icon="file", menu="File",
          group="a", order=1, tip="Compile a PyTorch model (a model.py, or a Hugging Face directory) to .nac and open it")
    c.add("file.reload", "Reload", window.reload_active, shortcut="Ctrl+R", icon="reload", menu="File", group="a",
          order=2, enabled=has_doc, tip="Read the file again from disk")
    c.add("file.close", "Close", window.close_active, shortcut="Ctrl+W", icon="close", menu="File", group="a",
          order=3, enabled=has_doc)
    c.add("file.screenshot", "Save Window Screenshot…", window.screenshot_dialog, icon="image", menu="File",
          group="c", tip="Save a PNG of the whole window")
    c.add("file.quit", "Quit", window.close, shortcut="Ctrl+Q", icon="quit", menu="File", group="z")
    # Edit
    hex_ok = lambda: window.active is not None and window.hex_view.copy_range() is not None  # noqa: E731
    c.add("edit.copyHex", "Copy Bytes as Hex", lambda: window.hex_view.copy("hex"), shortcut="Ctrl+Shift+C",
          icon="copy", menu="Edit", group="a", enabled=hex_ok)
    c.add("edit.copyC", "Copy Bytes as C Array", lambda: window.hex_view.copy("c"), menu="Edit", group="a",
          order=1, enabled=hex_ok)
    c.add("edit.copyPython", "Copy Bytes as Python bytes", lambda: window.hex_view.copy("python"), menu="Edit",
          group="a", order=2, enabled=hex_ok)
    c.add("edit.find", "Find Bytes or Text…", window.focus_search, shortcut="Ctrl+F", icon="search", menu="Edit",
          group="b", enabled=has_doc)
    c.add("edit.findNext", "Find Next", lambda: window.hex_view.find(True), shortcut="F3", menu="Edit",
          group="b", order=1, enabled=has_doc)
    c.add("edit.findPrevious", "Find Previous", lambda: window.hex_view.find(False), shortcut="Shift+F3",
          menu="Edit", group="b", order=2, enabled=has_doc)
    # Go
    c.add("nav.back", "Go Back", window.go_back, shortcut="Alt+Left", icon="back", menu="Go", group="a",
          toolbar=True, enabled=lambda: window.active is not None and window.active.doc.can_go_back,
          tip="Previous selection")
    c.add("nav.forward", "Go Forward", window.go_forward, shortcut="Alt+Right", icon="forward", menu="Go",
          group="a", order=1, toolbar=True,
          enabled=lambda: window.active is not None and window.active.doc.can_go_forward, tip="Next selection")
    c.add("nav.gotoOffset", "Go to Offset…", window.focus_goto, shortcut="Ctrl+G", icon="goto", menu="Go",
          group="b", enabled=has_doc)
    c.add("nav.gotoTick", "Go to Tick…", window.goto_tick_dialog, shortcut="Ctrl+T", menu="Go", group="b",
          order=1, enabled=lambda: window.active is not None and bool(window.active.nac.instructions))
    c.add("nav.nextProblem", "Next Problem", lambda: window.problems_view.step(1), shortcut="F8", menu="Go",
          group="c", enabled=lambda: window.active is not None and bool(window.active.doc.problems))
    c.add("nav.previousProblem", "Previous Problem", lambda: window.problems_view.step(-1), shortcut="Shift+F8",
          menu="Go", group="c", order=1,
          enabled=lambda: window.active is not None and bool(window.active.doc.problems))
    c.add("nav.toggleBookmark", "Toggle Bookmark", lambda: window.hex_view.toggle_bookmark(), shortcut="Ctrl+B",
          icon="bookmark", menu="Go", group="d", enabled=has_doc)
    c.add("nav.nextBookmark", "Next Bookmark", lambda: window.hex_view.next_bookmark(True), shortcut="F2",
          menu="Go", group="d", order=1, enabled=has_doc)
    c.add("nav.previousBookmark", "Previous Bookmark", lambda: window.hex_view.next_bookmark(False),
          shortcut="Shift+F2", menu="Go", group="d", order=2, enabled=has_doc)
    c.add("nav.clearSelection", "Clear Selection", lambda: window.active.select(None), menu="Go", group="e",
          enabled=lambda: window.active is not None and window.active.selection is not None)
    # View
    c.add("view.commandPalette", "Command Palette…", window.show_palette, shortcut="Ctrl+Shift+P",
          icon="palette", menu="View", group="a", toolbar=True, tip="Search every command")
    for order, name in enumerate(window.docks):     # the panels, in the order they were added
        title = window.views[name].title
        c.add(f"view.panel.{name}", f"{title} Panel", lambda n=name: window.toggle_panel(n),
              shortcut=PANEL_SHORTCUTS.get(name), icon=PANEL_ICONS.get(name), menu="View", group="b",
              order=order, checked=lambda n=name: not window.docks[n].isHidden(),
              tip=f"Show or hide {title}")
    c.add("view.resetLayout", "Reset Layout", lambda: window.apply_default_layout(), icon="layout", menu="View",
          group="c")
    c.add("view.compactLayout", "Compact Layout (Tabbed Panels)", lambda: window.apply_default_layout("compact"),
          menu="View", group="c", order=1)
    c.add("view.wideLayout", "Wide Layout (Side-by-Side Panels)", lambda: window.apply_default_layout("wide"),
          menu="View", group="c", order=2)
    c.add("view.nextFile", "Next File", lambda: window.cycle_tab(1), shortcut="Ctrl+Tab", menu="View",
          group="d", enabled=lambda: len(window.docs) > 1)
    c.add("view.previousFile", "Previous File", lambda: window.cycle_tab(-1), shortcut="Ctrl+Shift+Tab",
          menu="View", group="d", order=1, enabled=lambda: len(window.docs) > 1)
    for order, mode in enumerate(("system", "light", "dark")):
        c.add(f"view.theme.{mode}", f"Theme: {mode.capitalize() if mode != 'system' else 'Follow System'}",
              lambda m=mode: window.set_theme(m), menu="View/Theme", group="a", order=order,
              checked=lambda m=mode: window.theme == m)
    # Graph (the central view): its toolbar's actions, reachable from menus and the palette
    g = window.graph
    c.add("graph.fit", "Fit Graph", g.canvas.fit, icon="fit", menu="View/Graph", group="a", enabled=has_doc)
    c.add("graph.find", "Find in Graph…", window.focus_graph_search, icon="search", menu="View/Graph",
          group="a", order=1, enabled=has_doc)
    c.add("graph.layout.longestPath", "Graph Layers: Longest Path", lambda: g.set_mode("longest-path"),
          menu="View/Graph", group="b", checked=lambda: g.mode == "longest-path")
    c.add("graph.layout.tick", "Graph Layers: By Tick", lambda: g.set_mode("tick"), menu="View/Graph",
          group="b", order=1, checked=lambda: g.mode == "tick")
    c.add("graph.weights", "Graph: Show Weights", g.act_params.trigger, icon="param", menu="View/Graph",
          group="c", checked=g.act_params.isChecked)
    c.add("graph.constants", "Graph: Show Constants", g.act_consts.trigger, icon="constant",
          menu="View/Graph", group="c", order=1, checked=g.act_consts.isChecked)
    c.add("graph.blocks", "Graph: Collapse Repeated Blocks", g.act_collapse.trigger, icon="layout",
          menu="View/Graph", group="c", order=2, checked=g.act_collapse.isChecked,
          enabled=g.act_collapse.isEnabled)
    c.add("graph.exportPng", "Export Graph as PNG…", lambda: window.export_graph("png"), icon="image",
          menu="View/Graph", group="d", enabled=lambda: window.graph.shown is not None)
    c.add("graph.exportSvg", "Export Graph as SVG…", lambda: window.export_graph("svg"), icon="image",
          menu="View/Graph", group="d", order=1, enabled=lambda: window.graph.shown is not None)


def register_help_commands(window) -> None:
    c = window.commands
    c.add("help.shortcuts", "Keyboard Shortcuts", window.show_shortcuts, menu="Help", group="a")
    c.add("help.about", "About NAC Studio", window.show_about, icon="about", menu="Help", group="b")
