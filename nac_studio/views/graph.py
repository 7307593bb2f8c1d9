"""Graph view: the ABCD dataflow as a layered DAG, in sync with the document.

The graph is built on the UI thread (milliseconds: one pass over the instructions) and
laid out in the background through the document's task runner, with progress in the
view and in the status bar; a newer request cancels an older one. Changing an option
(layer mode, weights, constants, blocks) re-lays out and keeps the node that was in the
middle of the view in the middle, so the user does not lose their place.

Clicking a node selects what it stands for (instruction, parameter, constant); a
collapsed block is expanded by double-clicking it, and folded again from the context
menu of any of its instructions.

Layouts are cached per document (:class:`LayoutCache`): switching back to a file whose
graph was laid out with the current options shows it at once, with the blocks the user
had opened and the view where they left it. An entry is replaced when that document is
laid out again (options changed), and only the last :data:`LAYOUT_CACHE_DOCS` documents
keep theirs: a big model's layout holds a few hundred MB of paths.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from PySide6.QtCore import QPointF, QRect, QSize, Qt, Signal
from PySide6.QtGui import QAction, QColor, QIcon, QPainter, QPalette
from PySide6.QtWidgets import (QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QMenu, QMessageBox, QSizePolicy, QToolBar, QToolButton, QVBoxLayout, QWidget)

from nac_engine.errors import with_compile_hint

from ..widgets.image_files import could_not_write
from ..qt_document import rebind
from ..model.document import Selection
from ..model.graph_layout import GraphLayout, LayoutCancelled, layout_graph
from ..model.graph_problems import problem_ticks
from ..model.graph_shapes import file_shapes, node_shape_labels
from ..model.graph_model import OP_CLASS_TITLES, OP_CLASSES, DataflowGraph, build_graph, detect_block_prefixes
from ..model.peer_graph import dataflow_from_peer
from ..widgets.graph_canvas import GraphCanvas, class_colors, edge_batches
from ..widgets.task_indicator import ProgressStrip

#: Above this many instructions, or with this many repeated blocks (an LLM's decoder layers), the
#: view opens with the blocks collapsed: one box per layer reads at overview; 22 expanded do not.
COLLAPSE_BY_DEFAULT = 1500
COLLAPSE_BLOCKS = 8
#: How many documents keep their laid-out graph for an instant switch back.
LAYOUT_CACHE_DOCS = 4


@dataclass
class CachedLayout:
    """One document's graph as last laid out, and how the user was looking at it."""
    doc: Any                  # weakref.ref to the Document
    options: tuple            # (mode, show weights, show constants, collapsed block prefixes)
    collapse: bool            # the Blocks toggle for this document
    expanded: frozenset       # blocks opened by hand while collapsing is on
    layout: GraphLayout
    batches: list
    view: Optional[tuple[float, float, float]] = None    # zoom, offset x, offset y when left


class LayoutCache:
    """The last few documents' layouts, most recently used last. Held weakly by document,
    so a closed file's entry can never be handed to a new document at the same address."""

    def __init__(self):
        self._entries: "OrderedDict[int, CachedLayout]" = OrderedDict()

    def get(self, doc) -> Optional[CachedLayout]:
        self._purge()
        entry = self._entries.get(id(doc))
        if entry is None or entry.doc() is not doc:
            return None
        self._entries.move_to_end(id(doc))
        return entry

    def put(self, doc, entry: CachedLayout) -> None:
        self._entries.pop(id(doc), None)
        self._entries[id(doc)] = entry
        self._purge()
        while len(self._entries) > max(0, LAYOUT_CACHE_DOCS):
            self._entries.popitem(last=False)

    def drop(self, doc) -> None:
        entry = self._entries.get(id(doc))
        if entry is not None and entry.doc() in (doc, None):
            del self._entries[id(doc)]

    def _purge(self) -> None:
        for key in [k for k, e in self._entries.items() if e.doc() is None]:
            del self._entries[key]

    def __len__(self) -> int:
        self._purge()
        return len(self._entries)

    def __contains__(self, doc) -> bool:
        entry = self._entries.get(id(doc))
        return entry is not None and entry.doc() is doc


def _icon(name: str) -> QIcon:
    try:
        from ..icons import icon
        return icon(name)
    except (ImportError, KeyError):
        return QIcon()


class _Legend(QWidget):
    """Colour chips naming every op class present in the graph, wrapped onto as many
    rows as the width needs (height for width), so none is ever cut off."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.classes: list[str] = []
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def set_classes(self, classes: list[str]) -> None:
        self.classes = [c for c in OP_CLASSES if c in set(classes)]
        self.setToolTip(", ".join(OP_CLASS_TITLES[c] for c in self.classes))
        self.updateGeometry()
        self.update()

    def chip_rects(self, width: int) -> list[tuple[str, QRect]]:
        """Where each class's chip + title goes at ``width`` (tests read it too)."""
        fm = self.fontMetrics()
        row_h = fm.height() + 6
        x, y = 8, 2
        out = []
        for cls in self.classes:
            w = min(21 + fm.horizontalAdvance(OP_CLASS_TITLES[cls]) + 2, max(40, width - 12))
            if x > 8 and x + w > width - 4:
                x, y = 8, y + row_h
            out.append((cls, QRect(x, y, w, row_h)))
            x += w + 12
        return out

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        rects = self.chip_rects(width)
        return (rects[-1][1].bottom() + 3) if rects else self.fontMetrics().height() + 8

    def sizeHint(self) -> QSize:
        return QSize(200, self.heightForWidth(max(200, self.width())))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.height() != self.heightForWidth(self.width()):
            self.updateGeometry()

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        colors = class_colors(pal.color(QPalette.ColorRole.Window).lightness() < 128)
        for cls, r in self.chip_rects(self.width()):
            fill, border, _ = colors[cls]
            p.setPen(border)
            p.setBrush(fill)
            p.drawRoundedRect(r.x(), r.y() + (r.height() - 10) // 2, 16, 10, 3, 3)
            p.setPen(pal.color(QPalette.ColorRole.WindowText))
            title = self.fontMetrics().elidedText(OP_CLASS_TITLES[cls], Qt.TextElideMode.ElideRight, r.width() - 21)
            p.drawText(r.adjusted(21, 0, 0, 0), Qt.AlignmentFlag.AlignVCenter, title)
        p.end()


class GraphView(QWidget):
    title = "Graph"
    object_name = "graph"

    layoutReady = Signal()        # a new layout is on screen
    layoutFailed = Signal(str)

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.graph: Optional[DataflowGraph] = None
        self.layout_: Optional[GraphLayout] = None
        self._task = None
        self._generation = 0
        self._expanded: set[str] = set()      # blocks the user opened while collapsing is on
        self._collapse_default: Optional[bool] = None
        self._matches: list[int] = []
        self._hidden_hits: list[int] = []      # ticks matching inside collapsed blocks
        self._reveal_tick: Optional[int] = None
        self._match_pos = -1
        self._anchor_key = None               # node key to keep in the middle across re-layouts
        self._cache = LayoutCache()
        self._shapes: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # doc -> tick -> label
        # doc -> tick -> label of what the file states (made by the layout worker: 20 ms on 2,314 ticks)
        self._file_shapes: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self._search_by_doc: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self._shape_tasks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

        self.canvas = GraphCanvas(self)
        self.canvas.tooltip_provider = self._tooltip
        self.canvas.nodeClicked.connect(self._on_node_clicked)
        self.canvas.nodeActivated.connect(self._on_node_activated)
        self.canvas.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.canvas.customContextMenuRequested.connect(self._context_menu)
        # the window's actions on a node under the pointer (breakpoint, logpoint, run to here,
        # inspect), given by the window: this view knows no commands
        self.node_actions: list = []

        bar = QToolBar(self)
        bar.setIconSize(QSize(16, 16))
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toolbar = bar
        self.mode_box = QComboBox(self)
        self.mode_box.addItem("Longest path", "longest-path")
        self.mode_box.addItem("By tick", "tick")
        self.mode_box.setToolTip("Layers: by longest path (compact) or one per tick (execution order, "
                                 "lines up with the timeline)")
        self.mode_box.currentIndexChanged.connect(lambda _i: self.relayout())
        bar.addWidget(self.mode_box)
        bar.addSeparator()
        self.act_params = self._toggle(bar, "Weights", "param", True, "Show parameter loads as nodes")
        self.act_consts = self._toggle(bar, "Constants", "constant", False, "Show constant arguments as nodes")
        self.act_collapse = self._toggle(bar, "Blocks", "layout", False,
                                         "Collapse repeated blocks (modules from the file's source map, "
                                         "else parameter-name prefixes, e.g. encoder.layer.3); "
                                         "double-click a block to open it")
        bar.addSeparator()
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Find op, parameter or v<tick>…")
        self.search.setClearButtonEnabled(True)
        self.search.setMaximumWidth(240)
        self._search_icon = self.search.addAction(_icon("search"), QLineEdit.ActionPosition.LeadingPosition)
        self.search.returnPressed.connect(self.find_next)
        self.search.textChanged.connect(self._search_changed)
        bar.addWidget(self.search)
        self.match_label = QLabel("", self)
        self.match_label.setMinimumWidth(44)
        bar.addWidget(self.match_label)
        spacer = QWidget(self)
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        bar.addWidget(spacer)
        self.act_fit = QAction(_icon("fit"), "Fit", self)
        self.act_fit.setToolTip("Fit the whole graph (F)")
        self.act_fit.triggered.connect(self.canvas.fit)
        bar.addAction(self.act_fit)
        export = QToolButton(self)
        export.setText("Export")
        export.setIcon(_icon("image"))
        self._export_button = export
        export.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        export.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(export)
        self.act_png = menu.addAction("Export PNG…", lambda: self._export_dialog("png"))
        self.act_svg = menu.addAction("Export SVG…", lambda: self._export_dialog("svg"))
        export.setMenu(menu)
        bar.addWidget(export)

        self.legend = _Legend(self)
        self.status = QLabel("", self)
        self.status.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        pal = self.status.palette()
        pal.setColor(QPalette.ColorRole.WindowText, pal.color(QPalette.ColorRole.PlaceholderText))
        self.status.setPalette(pal)
        self.progress = ProgressStrip(self)     # QProgressBar repaints synchronously (whole window)
        self.progress.setRange(0, 1000)
        self.progress.setFixedSize(140, 12)
        self.progress.hide()
        foot = QHBoxLayout()
        foot.setContentsMargins(0, 0, 8, 0)
        foot.setSpacing(6)
        foot.addWidget(self.legend, 1)
        foot.addWidget(self.progress)
        foot.addWidget(self.status)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(bar)
        lay.addWidget(self.canvas, 1)
        lay.addLayout(foot)
        self.set_document(qdoc)

    def _toggle(self, bar: QToolBar, text: str, icon_name: str, checked: bool, tip: str) -> QAction:
        act = QAction(_icon(icon_name), text, self)
        act.setProperty("iconName", icon_name)
        act.setCheckable(True)
        act.setChecked(checked)
        act.setToolTip(tip)
        act.toggled.connect(lambda _c: self.relayout())
        bar.addAction(act)
        return act

    def retint(self) -> None:
        """Re-draw the toolbar and search-field icons in the current palette (the main
        window calls this on a theme switch)."""
        for act in (self.act_params, self.act_consts, self.act_collapse):
            act.setIcon(_icon(act.property("iconName")))
        self.act_fit.setIcon(_icon("fit"))
        self._search_icon.setIcon(_icon("search"))
        self._export_button.setIcon(_icon("image"))
        self.canvas.update()

    # ------------------------------------------------------------------ document
    def set_document(self, qdoc) -> None:
        # the search text belongs to its file: keep it for when the user comes back, and
        # give the next file its own (empty the first time)
        if self.qdoc is not None and self.qdoc is not qdoc:
            self._search_by_doc[self.qdoc.doc] = self.search.text()
        if qdoc is not self.qdoc:
            self.search.blockSignals(True)
            self.search.setText(self._search_by_doc.get(qdoc.doc, "") if qdoc is not None else "")
            self.search.blockSignals(False)
            self._matches, self._hidden_hits, self._match_pos = [], [], -1
            self.match_label.setText("")
            self._reveal_tick = None
        rebind(self.qdoc, qdoc, selection=self._on_selection, tick=self._on_tick)
        self._cancel_task()
        self._remember_view()
        self.qdoc = qdoc
        self._expanded.clear()
        self._anchor_key = None
        self.graph = None
        self.layout_ = None
        self.canvas.set_graph_layout(None)
        if qdoc is None:
            self.canvas.set_message("No file open")
            self.status.setText("")
            self.legend.set_classes([])
            return
        blocks = detect_block_prefixes(qdoc.nac)
        has_blocks = bool(blocks)
        self.act_collapse.setEnabled(has_blocks)
        cached = self._cache.get(qdoc.doc)
        if cached is not None and cached.options[:3] == self._shared_options():
            self._restore(cached)
            return
        big = len(qdoc.nac.instructions) > COLLAPSE_BY_DEFAULT or len(blocks) >= COLLAPSE_BLOCKS
        self.act_collapse.blockSignals(True)
        self.act_collapse.setChecked(big and has_blocks)
        self.act_collapse.blockSignals(False)
        self.relayout()

    def forget(self, qdoc) -> None:
        """Drop the cached layout of a document being closed."""
        if qdoc is not None:
            self._cache.drop(qdoc.doc)

    def _shared_options(self) -> tuple:
        """The toolbar options every document shares (blocks are per document)."""
        return (self.mode, self.act_params.isChecked(), self.act_consts.isChecked())

    def _options(self) -> tuple:
        return self._shared_options() + (tuple(self.collapsed_prefixes()),)

    def _remember_view(self) -> None:
        """Note where the user was looking, for when they come back to this document."""
        if self.qdoc is None or self.layout_ is None:
            return
        cached = self._cache.get(self.qdoc.doc)
        if cached is not None and cached.layout is self.layout_:
            cached.view = self.canvas.view_state()

    def _restore(self, cached: CachedLayout) -> None:
        """Show a cached layout: no task, the blocks and the view as the user left them."""
        self.act_collapse.blockSignals(True)
        self.act_collapse.setChecked(cached.collapse)
        self.act_collapse.blockSignals(False)
        self._expanded = set(cached.expanded)
        self._generation += 1      # a late result of an older request must not replace this
        self.graph = cached.layout.graph
        self._show_layout(cached.layout, cached.batches, keep_view=False)
        if cached.view is not None:
            self.canvas.set_view_state(cached.view)
        else:
            self._center_after_layout(cached.layout)
        self.layoutReady.emit()

    @property
    def mode(self) -> str:
        return self.mode_box.currentData()

    def set_mode(self, mode: str) -> None:
        i = self.mode_box.findData(mode)
        if i < 0:
            raise ValueError(f"unknown layout mode {mode!r}")
        self.mode_box.setCurrentIndex(i)

    def collapsed_prefixes(self) -> list[str]:
        if self.qdoc is None or not self.act_collapse.isChecked():
            return []
        return [p for p in detect_block_prefixes(self.qdoc.nac) if p not in self._expanded]

    def relayout(self) -> None:
        """Rebuild the graph with the current options and lay it out in the background."""
        if self.qdoc is None:
            return
        self._remember_anchor()
        self._cancel_task()
        self._cache.drop(self.qdoc.doc)   # the options changed (or nothing was laid out yet)
        options = self._options()
        peer = getattr(self.qdoc.doc, "peer", None)    # a peer-format file draws its own dataflow
        # the graph is built in the task too: 0.2 s on a 48-layer model is a visible stall;
        # self.graph is the one on screen until the new layout arrives
        self._generation += 1
        gen = self._generation
        mode = self.mode
        build = dict(show_params=self.act_params.isChecked(), show_consts=self.act_consts.isChecked(),
                     collapse_prefixes=self.collapsed_prefixes())
        nac = self.qdoc.nac
        n = len(nac.instructions)
        self.canvas.set_message(f"Laying out {n:,} instructions…" if self.layout_ is None else "")
        self.progress.setValue(0)
        self.progress.show()
        self.status.setText(f"laying out {n:,} instructions…")

        host = self.qdoc.host
        path = self.qdoc.doc.path

        def work(ctx, nac=nac, peer=peer, mode=mode, build=build):
            graph = dataflow_from_peer(peer) if peer is not None else None
            if graph is None and path:
                # a file's graph is built and laid out in the engine host (Python-heavy work that
                # here would hold the GIL against the window's frames); this thread only waits
                layout = host_layout(ctx, host, path, mode, build)
                if layout is not None:
                    ctx.check()
                    return layout, edge_batches(layout), file_shapes(nac)
            if graph is None:
                graph = build_graph(nac, **build)
            ctx.check()
            try:
                layout = layout_graph(graph, mode, progress=ctx.progress, cancelled=lambda: ctx.cancelled,
                                      sugiyama=lambda *a: host_sugiyama(host, *a))
            except LayoutCancelled:
                ctx.check()
                raise
            ctx.check()
            # the edge paths and the file's edge shapes too: no UI-thread stall for them
            return layout, edge_batches(layout), file_shapes(nac)

        task = self.qdoc.tasks.submit(f"Graph layout ({n:,} instructions)", work,
                                      on_done=lambda res, g=gen, o=options: self._layout_done(g, *res, o),
                                      on_error=lambda exc, g=gen: self._layout_failed(g, exc))
        task.progressed.connect(lambda frac, _text, g=gen: self._progress(g, frac))
        self._task = task

    def _cancel_task(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    def _progress(self, gen: int, frac: float) -> None:
        if gen == self._generation:
            self.progress.setValue(int(frac * 1000))

    def _layout_done(self, gen: int, layout: GraphLayout, batches: list, shapes: dict,
                     options: tuple = ()) -> None:
        if gen != self._generation or self.qdoc is None:
            return
        self._task = None
        self._file_shapes.setdefault(self.qdoc.doc, shapes)
        first = self.layout_ is None
        self.graph = layout.graph
        self._show_layout(layout, batches, keep_view=not first)
        self._center_after_layout(layout)
        if self._reveal_tick is not None:
            self._reveal_pending()
        if options:
            self._cache.put(self.qdoc.doc, CachedLayout(
                weakref.ref(self.qdoc.doc), options, self.act_collapse.isChecked(), frozenset(self._expanded),
                layout, batches))
        self.layoutReady.emit()

    def _show_layout(self, layout: GraphLayout, batches: list, keep_view: bool) -> None:
        self.layout_ = layout
        self.progress.hide()
        self.canvas.set_message("")
        if not layout.graph.nodes and self.qdoc is not None:
            # nothing decoded to draw (an unreadable file): say why where the graph would be
            problems = self.qdoc.doc.problems
            why = str(getattr(problems[0], "reason", problems[0])) if problems else "the file has no instructions"
            why = with_compile_hint(self.qdoc.doc.path or "", why)
            self.canvas.set_graph_layout(None)
            self.canvas.set_message(f"No graph to draw: {why}"
                                    + (f"\n({len(problems)} problems, see Problems)" if len(problems) > 1 else ""))
        else:
            self.canvas.set_graph_layout(layout, keep_view=keep_view, batches=batches)
        st = layout.stats
        self.status.setText(f"{st['nodes']:,} nodes · {st['edges']:,} edges · {st['layers']:,} layers · "
                            f"{st['seconds']['total']:.2f} s")
        self._apply_shapes()
        self._mark_problems()
        self.legend.set_classes([nd.op_class for nd in layout.graph.nodes] +
                                [c for nd in layout.graph.nodes for c, _n in nd.composition])
        self._update_highlight()
        if self.search.text():
            self._search_changed(self.search.text())

    # ------------------------------------------------------------------ problems
    def _mark_problems(self) -> None:
        """Damaged instructions and loads whose tensor is missing: a red outline and a
        ``!`` badge (overlay layer "problems"), the reason in the tooltip."""
        self._problem_ticks = problem_ticks(self.qdoc.doc) if self.qdoc is not None else {}
        if not self._problem_ticks:
            self.canvas.clear_overlay("problems")
            return
        red = QColor("#d0312d")
        self.canvas.set_node_overlay("problems", {t: (None, red, "!") for t in self._problem_ticks})

    # ------------------------------------------------------------------ edge shapes
    def _apply_shapes(self) -> None:
        """Shapes on the edges: the file's at once, the meta pass's when its task is done
        (started once per document, off the UI thread: it imports torch)."""
        if self.qdoc is None or self.shown is None:
            return
        doc = self.qdoc.doc
        shapes = self._shapes.get(doc)
        if shapes is None:
            shapes = self._file_shapes.get(doc)
            if shapes is None:
                shapes = self._file_shapes[doc] = file_shapes(self.qdoc.nac)
            self._start_shape_pass(doc)
        self.canvas.set_edge_labels(node_shape_labels(self.shown, shapes))

    def _start_shape_pass(self, doc) -> None:
        """The meta-device shape pass (torch) in the engine host, once per document."""
        if doc in self._shape_tasks or getattr(doc, "peer", None) is not None or not doc.path:
            return
        base = self._file_shapes[doc]     # set by _apply_shapes, its one caller

        def done(found, ref=weakref.ref(doc)):
            d = ref()
            if d is None:
                return
            self._shapes[d] = {**base, **{int(k): v for k, v in (found or {}).items()}}
            if self.qdoc is not None and self.qdoc.doc is d:
                self._apply_shapes()

        task = self.qdoc.host.request("nac/shapes", {"path": doc.path}, title="Edge shapes")
        task.finished.connect(done)
        task.failed.connect(lambda _exc: None)     # shapes are a nicety: the file's stay
        self._shape_tasks[doc] = task

    def _center_after_layout(self, layout: GraphLayout) -> None:
        """A new layout keeps the node that was in the middle; a file's first one shows the
        execution point of a stopped run (which may have stopped before the layout came),
        else the selection."""
        anchor = self._anchor_node(layout.graph)
        focus = self._execution_node(layout.graph)
        if focus is None:
            focus = self._selected_node()
        if anchor is not None:
            self.canvas.center_on(anchor)
        elif focus is not None:
            self.canvas.center_on(focus, zoom=max(self.canvas.scale, 0.8))

    def _execution_node(self, graph) -> Optional[int]:
        tick = self.qdoc.doc.execution_tick if self.qdoc is not None else None
        if tick is None or not 0 <= tick < len(graph.node_of_tick):
            return None
        node = int(graph.node_of_tick[tick])
        return node if node >= 0 else None

    def _layout_failed(self, gen: int, exc: BaseException) -> None:
        if gen != self._generation:
            return
        self._task = None
        self.progress.hide()
        from ..tasks import Cancelled
        if isinstance(exc, (Cancelled, LayoutCancelled)):
            self.status.setText("layout cancelled")
            return
        self.status.setText("layout failed")
        self.canvas.set_message(f"Graph layout failed: {exc}")
        self.layoutFailed.emit(str(exc))

    def _remember_anchor(self) -> None:
        """The node in the middle of the view, to put back in the middle after re-layout."""
        lay = self.layout_
        if lay is None or not len(lay.pos):
            self._anchor_key = None
            return
        cx, cy = self.canvas.screen_to_scene(QPointF(self.canvas.width() / 2, self.canvas.height() / 2))
        d = (lay.pos[:, 0] - cx) ** 2 + (lay.pos[:, 1] - cy) ** 2
        i = int(d.argmin())
        nd = lay.graph.nodes[i]
        self._anchor_key = (nd.key, nd.tick)

    def _anchor_node(self, graph: DataflowGraph) -> Optional[int]:
        if self._anchor_key is None:
            return None
        key, tick = self._anchor_key
        self._anchor_key = None
        for i, nd in enumerate(graph.nodes):
            if nd.key == key:
                return i
        if 0 <= tick < len(graph.node_of_tick) and graph.node_of_tick[tick] >= 0:
            return int(graph.node_of_tick[tick])
        return None

    @property
    def shown(self) -> Optional[DataflowGraph]:
        """The graph on screen (``self.graph`` may be newer while its layout runs)."""
        return self.layout_.graph if self.layout_ is not None else None

    # ------------------------------------------------------------------ document → view
    def _selected_node(self) -> Optional[int]:
        if self.shown is None or self.qdoc is None:
            return None
        return self.shown.node_for_selection(self.qdoc.selection)

    def _update_highlight(self) -> None:
        if self.shown is None or self.qdoc is None:
            return
        sel = self.qdoc.selection
        node = self.shown.node_for_selection(sel)
        related: set[int] = set()
        if sel is not None and sel.kind == "param":
            related = set(self.shown.nodes_reading_param(sel.key)) - ({node} if node is not None else set())
        current = None
        tick = self.qdoc.tick
        if tick is not None and 0 <= tick < len(self.shown.node_of_tick) and self.shown.node_of_tick[tick] >= 0:
            current = int(self.shown.node_of_tick[tick])
        self.canvas.set_highlight({node} if node is not None else set(), related, current)

    def highlighted_node(self) -> Optional[int]:
        """The node drawn as selected (for tests and commands)."""
        return next(iter(self.canvas.selected), None)

    def _on_selection(self, source) -> None:
        self._update_highlight()
        if source is self:
            return
        node = self._selected_node()
        if node is not None:
            self.canvas.ensure_visible(node)

    def _on_tick(self, source) -> None:
        self._update_highlight()
        if source is self or self.canvas.current is None:
            return
        self.canvas.ensure_visible(self.canvas.current)

    # ------------------------------------------------------------------ view → document
    def _on_node_clicked(self, node: int) -> None:
        if self.qdoc is None or self.shown is None:
            return
        self.canvas.setFocus()
        self.qdoc.select(self.shown.nodes[node].selection(), source=self)

    def _on_node_activated(self, node: int) -> None:
        if self.shown is None:
            return
        nd = self.shown.nodes[node]
        if nd.kind == "group":
            self.expand_block(nd.op)
        else:
            self.canvas.center_on(node)

    def expand_block(self, prefix: str) -> None:
        self._expanded.add(prefix)
        self.relayout()

    def collapse_block(self, prefix: str) -> None:
        self._expanded.discard(prefix)
        if not self.act_collapse.isChecked():
            # collapsing one block turns collapsing on with every other block left open
            self._expanded = set(detect_block_prefixes(self.qdoc.nac)) - {prefix} if self.qdoc else set()
            self.act_collapse.blockSignals(True)
            self.act_collapse.setChecked(True)
            self.act_collapse.blockSignals(False)
        self.relayout()

    def _block_of(self, node: int) -> Optional[str]:
        nd = self.shown.nodes[node]
        for b in self.shown.blocks:
            if b.lo <= nd.tick <= b.hi and nd.tick not in b.shared:
                return b.prefix
        return None

    def _context_menu(self, pos) -> None:
        if self.shown is None:
            return
        node = self.canvas.node_at(QPointF(pos))
        menu = QMenu(self)
        if node is not None:
            nd = self.shown.nodes[node]
            if nd.kind == "group":
                menu.addAction(f"Expand {nd.op}", lambda p=nd.op: self.expand_block(p))
            else:
                self._on_node_clicked(node)                 # the window's actions act on the selection
                for action in self.node_actions:    # a disabled one shows greyed
                    menu.addSeparator() if action is None else menu.addAction(action)
                menu.addSeparator()
                prefix = self._block_of(node)
                if prefix is not None:
                    menu.addAction(f"Collapse {prefix}", lambda p=prefix: self.collapse_block(p))
            menu.addAction("Centre", lambda n=node: self.canvas.center_on(n))
            menu.addSeparator()
        menu.addAction(self.act_fit)
        if self.shown.blocks:
            menu.addAction("Collapse all blocks", self._collapse_all)
            menu.addAction("Expand all blocks", self._expand_all)
        menu.addSeparator()
        menu.addAction(self.act_png)
        menu.addAction(self.act_svg)
        menu.exec(self.canvas.mapToGlobal(pos))

    def _collapse_all(self) -> None:
        self._expanded.clear()
        if self.act_collapse.isChecked():
            self.relayout()
        else:
            self.act_collapse.setChecked(True)

    def _expand_all(self) -> None:
        self.act_collapse.setChecked(False)

    def _tooltip(self, node: int) -> str:
        if self.shown is None:
            return ""
        nd = self.shown.nodes[node]
        lines = [f"<b>{_esc(nd.op or nd.label)}</b>"]
        if nd.kind == "group":
            lines.append(_esc(nd.detail))
            lines.append("<i>double-click to expand</i>")
        else:
            if self.qdoc is not None:
                lines.append(_esc(self.qdoc.doc.describe(nd.selection())))
            if nd.detail:
                lines.append(_esc(nd.detail))
            reason = getattr(self, "_problem_ticks", {}).get(nd.tick)
            if reason:
                lines.append(f"<span style='color:#d0312d'>⚠ {_esc(reason)}</span>")
            if nd.params and self.qdoc is not None:
                names = [self.qdoc.nac.params[p].name for p in nd.params if p in self.qdoc.nac.params]
                lines.append("reads " + ", ".join(_esc(n) for n in names))
        return "<br>".join(lines)

    # ------------------------------------------------------------------ search
    def _search_changed(self, text: str) -> None:
        self._matches, self._hidden_hits = self._find(text)
        self._match_pos = -1
        if not text.strip():
            self.match_label.setText("")
        else:
            n = len(self._matches) + len(self._hidden_hits)
            inside = f" ({len(self._hidden_hits)} in blocks)" if self._hidden_hits else ""
            self.match_label.setText(f"{n} found{inside}" if n else "no match")

    def _find(self, text: str) -> tuple[list[int], list[int]]:
        """Matching nodes on screen, and ticks that match inside collapsed blocks."""
        if self.shown is None or not text.strip():
            return [], []
        q = text.strip().lower()
        hits = self.shown.search(text)
        hits = [h for h in hits if self.shown.nodes[h].kind != "group" or q in self.shown.nodes[h].op.lower()]
        if not hits and self.qdoc is not None:
            # a hidden parameter: find the instructions that read it
            for pid, p in self.qdoc.nac.params.items():
                if q in p.name.lower():
                    hits.extend(self.shown.nodes_reading_param(pid))
            hits = sorted(set(hits))
        return hits, self._find_in_collapsed(q)

    def _find_in_collapsed(self, q: str) -> list[int]:
        """Ticks inside collapsed blocks whose op, parameter name or ``v<tick>`` matches."""
        graph, qdoc = self.shown, self.qdoc
        if graph is None or qdoc is None or not graph.collapsed:
            return []
        import re
        m = re.fullmatch(r"[vt]?(\d+)", q)
        collapsed = set(graph.collapsed)
        nac = qdoc.nac
        out = []
        for b in graph.blocks:
            if b.prefix not in collapsed:
                continue
            if m:
                t = int(m.group(1))
                if b.lo <= t <= b.hi and t not in b.shared:
                    out.append(t)
                continue
            for t in b.ticks:
                ins = nac.instructions[t]
                p = nac.param_for(ins) if ins.a == 2 else None
                if q in nac.instruction_name(ins).lower() or (p is not None and q in p.name.lower()):
                    out.append(t)
        return out

    def find_next(self) -> Optional[int]:
        """Select and centre the next match of the search text; returns the node. A match
        inside a collapsed block opens that block and is selected once it is laid out."""
        if not self._matches and not self._hidden_hits:
            self._search_changed(self.search.text())
        if (not self._matches and not self._hidden_hits) or self.shown is None or self.qdoc is None:
            return None
        if not self._matches:
            tick = self._hidden_hits[0]
            node = int(self.shown.node_of_tick[tick])
            self._reveal_tick = tick
            self.match_label.setText(f"opening {self.shown.nodes[node].op}…")
            self.expand_block(self.shown.nodes[node].op)
            return node
        self._match_pos = (self._match_pos + 1) % len(self._matches)
        node = self._matches[self._match_pos]
        more = f" +{len(self._hidden_hits)} in blocks" if self._hidden_hits else ""
        self.match_label.setText(f"{self._match_pos + 1}/{len(self._matches)}{more}")
        nd = self.shown.nodes[node]
        sel = nd.selection()
        q = self.search.text().strip().lower()
        if nd.kind != "param" and nd.params and self.qdoc is not None:
            for pid in nd.params:   # found through a hidden parameter: select that parameter
                if q in self.qdoc.nac.params[pid].name.lower():
                    sel = Selection("param", pid)
                    break
        self.qdoc.select(sel, source=self)
        self.canvas.center_on(node, zoom=max(self.canvas.scale, 0.8))
        return node

    def _reveal_pending(self) -> None:
        """After a search opened a block: select and centre the instruction it found."""
        tick, self._reveal_tick = self._reveal_tick, None
        if tick is None or self.shown is None or self.qdoc is None:
            return
        node = int(self.shown.node_of_tick[tick]) if 0 <= tick < len(self.shown.node_of_tick) else -1
        if node < 0:
            return
        if node in self._matches:
            self._match_pos = self._matches.index(node)
            self.match_label.setText(f"{self._match_pos + 1}/{len(self._matches)}")
        self.qdoc.select(self.shown.nodes[node].selection(), source=self)
        self.canvas.center_on(node, zoom=max(self.canvas.scale, 0.8))

    # ------------------------------------------------------------------ export
    def export_png(self, path: str, max_side: int = 12000) -> None:
        """The graph as a PNG at ``path``, written whole; ``OSError`` when it cannot be."""
        from ..widgets.image_files import write_png
        img = self.canvas.render_image(max_side=max_side)
        if img.isNull():
            raise OSError(f"the graph is too large to draw as one image (at most {max_side} pixels a side)")
        write_png(img, path)

    def export_svg(self, path: str) -> None:
        """The graph as an SVG at ``path``, written whole; ``OSError`` when it cannot be."""
        from nac_engine.format.writer import atomic_write
        title = "NAC dataflow graph"
        if self.qdoc is not None and self.qdoc.doc.path:
            title += f" — {self.qdoc.doc.path}"
        atomic_write(path, self.canvas.render_svg(title))

    def _default_export_name(self, ext: str) -> str:
        import os
        base = "graph"
        if self.qdoc is not None and self.qdoc.doc.path:
            base = os.path.splitext(self.qdoc.doc.path)[0] + "_graph"
        return f"{base}.{ext}"

    def export_path(self, fmt: str) -> Optional[str]:
        """Where to export the graph as ``fmt`` (png, svg): asked, None when cancelled."""
        path, _ = QFileDialog.getSaveFileName(self, f"Export graph as {fmt.upper()}", self._default_export_name(fmt),
                                              f"{fmt.upper()} image (*.{fmt})")
        return path or None

    def export(self, fmt: str, path: str) -> None:
        (self.export_svg if fmt == "svg" else self.export_png)(path)

    def _export_dialog(self, fmt: str) -> None:
        if self.layout_ is None:
            return
        path = self.export_path(fmt)
        if path:
            try:
                self.export(fmt, path)
            except OSError as e:
                QMessageBox.warning(self, "Export failed", could_not_write(path, e))


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def host_sugiyama(host, n: int, edges, layers, maxiter: int):
    """igraph's Sugiyama in the engine host (it holds the GIL for its whole C call: in this
    process that froze the window); computed here only if the host cannot answer (it died)."""
    from ..model.graph_layout import sugiyama_coordinates
    from ..host.connection import EngineStopped, HostError
    try:
        got = host.call("nac/sugiyama", {"n": int(n), "edges": np.asarray(edges, np.int64).reshape(-1, 2),
                                         "layers": np.asarray(layers, np.int64), "maxiter": int(maxiter)})
        coords, points, counts = got["coords"], got["points"], got["counts"]
    except (EngineStopped, HostError, KeyError):
        return sugiyama_coordinates(n, edges, layers, maxiter)
    return coords, points.reshape(-1, 2), counts


def host_layout(ctx, host, path: str, mode: str, build: dict):
    """The file's graph laid out by the engine host (``nac/layout``), waited for in this worker
    thread with its progress and cancel passed along; None when the host cannot answer (it died:
    the caller lays out here)."""
    from ..model.graph_layout import layout_from_data
    from ..host.connection import EngineStopped, HostError, RequestCancelled
    req = host.connection.request("nac/layout", {"path": path, "mode": mode, **build}, convert=layout_from_data)
    req.on_progress = lambda frac, _text: ctx.progress(frac, 1.0)
    while True:
        try:
            return req.future.result(timeout=0.05)
        except TimeoutError:
            if ctx.cancelled:
                req.cancel()
                ctx.check()
        except RequestCancelled:
            ctx.check()
            raise
        except (EngineStopped, HostError):
            return None
