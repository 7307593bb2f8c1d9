"""NAC Studio: the PySide6 GUI over nac_engine.

Start it with ``nac-studio [FILE ...]`` (or ``python -m nac_studio``); ``app.main`` parses
the arguments and runs Qt under qasync's event loop.

* ``document`` (no Qt): the open file, one current selection and one current tick,
  back/forward history, selection ↔ byte spans. ``qt_document`` gives it Qt signals,
  ``tasks`` runs background work with progress and cooperative cancel.
* ``main_window``: file tabs, the views as docks, the status bar's task progress.
* ``commands``: the registry every menu, toolbar button, shortcut and the command
  palette are built from.
* ``views/``: one module per pane (structure, hex, disassembly, graph, properties,
  problems). A view only talks to the document: it follows ``selectionChanged`` /
  ``tickChanged`` and sets the selection; views never call each other.
* ``widgets/``: reusable painted widgets (hex area, graph canvas, command palette).
* ``graph_model`` / ``graph_layout`` (no Qt): the dataflow graph and its layered layout.
* ``theme`` and ``icons``: palette-derived colours and the Studio's own SVG icons.

The GUI observes engine objects and issues commands; all decoding, checking and
execution happens in nac_engine.
"""
