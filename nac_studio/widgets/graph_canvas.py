"""A painted canvas for a laid-out dataflow graph: zoom, pan, level of detail, minimap.

Why a custom widget and not ``QGraphicsScene`` with one item per node: the layout is
already a set of numpy arrays, and what has to stay smooth is thousands of nodes and
edges at every zoom. Painting straight from the arrays lets the canvas cull with one
vectorised test per frame, draw all edges in a few cached ``QPainterPath`` batches (one
``drawPath`` per batch, batches outside the view skipped), and draw zoomed-out nodes with
one ``drawRects`` per colour — no per-item objects, no scene index to maintain.

Level of detail, by zoom: boxes with a label and a detail line; boxes with a label;
boxes only; coloured marks only. Edges are cosmetic (one device pixel wide at any zoom).
The same painting code draws the exported PNG and SVG at full detail.

Overlays (for other views' state drawn on the graph: executed shading, breakpoints,
timeline colours). A layer is a name and a mapping from node to a style::

    canvas.set_node_overlay("executed", {("ins", 12): (QColor("#ccc"), None, None),
                                         40: (None, QColor("red"), "●")})
    canvas.clear_overlay("executed")
    canvas.update_node_overlay("executed", {13: (QColor("#ccc"), None, None), 40: None})

``update_node_overlay`` changes single entries (``None`` removes one) at the cost of the nodes
it touches: the cached picture is repainted only under them (a debugger step moves two or three
marks; replacing the whole layer would redraw the whole view).

Keys are node keys (``Node.key``: ``("ins", tick)``, ``("group", prefix)``...) or plain
ints, read as ticks and drawn on the node standing for that tick (a collapsed block
for a tick inside it). A style is ``(fill, outline, badge)``, each ``None`` to leave
that part alone: ``fill`` replaces the class colour, ``outline`` is a frame just outside
the box, ``badge`` a short text in a pill on the box's top-right corner. Layers are drawn
in the order they were first set; a later layer wins where two give a fill. Overlays
survive a re-layout (they are resolved again against the new graph) and are drawn at
every zoom, the exports included; :data:`OverlayStyle` is the tuple type.
"""
from __future__ import annotations

import math
from typing import Mapping, Optional, Union

import numpy as np
from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (QColor, QFont, QFontMetricsF, QImage, QMouseEvent, QPainter, QPainterPath,
                           QPalette, QPen, QPixmap, QPolygonF, QRegion, QWheelEvent)
from PySide6.QtWidgets import QToolTip, QWidget

from ..model.graph_labels import FRAME_TITLE, Frame, block_frames, fanout_bundles, spread_titles, visible_labels
from ..model.graph_layout import GraphLayout
from ..model.graph_model import OP_CLASSES

#: Hue per op class (a qualitative palette; the same hue is tuned per light/dark scheme).
CLASS_HUES = {"matmul": 212, "elementwise": 174, "normalisation": 280, "activation": 28, "data": 95,
              "reduction": 352, "io": 45, "group": 228, "other": 30}

ZOOM_MIN, ZOOM_MAX = 0.002, 4.0
LOD_DETAIL = 0.7       # from this zoom on: second line (signature, shape, size)
LOD_TEXT = 0.42        # labels
LOD_BOXES = 0.14       # outlined boxes; below: flat colour marks only
EDGE_BATCH = 256       # edges per cached path
FIT_MIN_SCALE = 0.32   # Fit never goes below this (boxes keep a short label); it scrolls instead
TEXT_PX_MAX = 12.0     # on-screen label size at zoom >= 1
TEXT_PX_MIN = 8.0      # labels are never drawn smaller; a box too small for them shows none
TITLE_PX = 11.0        # block / frame titles, the same size at every zoom
STUB_LENGTH = 22.0     # a bundled fan-out edge ends in a stub this long into its reader
EDGE_LABEL_MIN_SCALE = 0.5   # below this the gap between rows is too small for a shape label
MINIMAP_MAX = QSize(140, 180)
PATCH_MAX_NODES = 64   # update_node_overlay repaints up to this many nodes in place; more: the whole view

#: (fill, outline, badge) of one node in an overlay layer; ``None`` leaves that part as is.
OverlayStyle = tuple[Optional[QColor], Optional[QColor], Optional[str]]
#: A node key (``Node.key``) or a tick.
OverlayKey = Union[tuple, int]


def class_colors(dark: bool) -> dict[str, tuple[QColor, QColor, QColor]]:
    """(fill, border, text) per op class for a light or dark background."""
    out = {}
    for cls in OP_CLASSES:
        hue = CLASS_HUES.get(cls, 0)
        sat = 40 if cls in ("other", "group") else 150
        if dark:
            fill = QColor.fromHsl(hue, sat, 62)
            border = QColor.fromHsl(hue, min(255, sat + 40), 140)
            text = QColor(235, 237, 240)
        else:
            fill = QColor.fromHsl(hue, sat, 222)
            border = QColor.fromHsl(hue, min(255, sat + 20), 115)
            text = QColor(28, 30, 34)
        out[cls] = (fill, border, text)
    return out


class GraphCanvas(QWidget):
    """Draws a :class:`GraphLayout`. Emits node indices; knows nothing about the document."""

    nodeClicked = Signal(int)
    nodeActivated = Signal(int)          # double click (a group: expand it)
    hoveredChanged = Signal(int)         # -1 when over nothing

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self.setMinimumSize(160, 120)
        self.layout_: Optional[GraphLayout] = None
        self.scale = 1.0
        self.offset = QPointF(0, 0)          # screen = scene * scale + offset
        self.selected: set[int] = set()      # nodes drawn as selected
        self.related: set[int] = set()       # nodes drawn as "reads the selected parameter"
        self.current: Optional[int] = None   # node of the document's current tick
        self.hovered: Optional[int] = None
        self.minimap_visible = True
        self.message = ""                    # drawn centred when there is no layout
        self._overlays: dict[str, dict] = {}          # layer -> {key: OverlayStyle}, insertion order kept
        self._overlay_nodes: Optional[dict[int, list[OverlayStyle]]] = None   # resolved, per layout
        self._overlay_version = 0
        self._key_index: Optional[tuple] = None       # (layout, node key -> index, ticks sorted by node)
        self._stale = QRegion()                       # parts of the cached picture to draw again
        self.frames: list[Frame] = []         # expanded blocks, drawn as titled frames
        self._auto_view = False               # the view is reset_view's: follow resizes
        self.bundles: dict[int, tuple[int, list[int]]] = {}    # fan-out source -> (kept edge, stubbed edges)
        self.edge_labels: dict[int, str] = {}                  # node -> shape of what it produces
        self._base: Optional[QPixmap] = None  # everything but selection marks, for the current view
        self._base_key = None
        self._fonts: dict[int, QFont] = {}
        self._edge_batches: list[tuple[QRectF, QPainterPath, QPainterPath]] = []
        self._minimap: Optional[QImage] = None
        self._minimap_key = None
        self._drag_start: Optional[QPointF] = None
        self._drag_offset = QPointF()
        self._dragged = False
        self._minimap_drag = False
        self._font = QFont(self.font())
        self._font.setPointSizeF(max(7.5, self._font.pointSizeF() * 0.95))
        self._small = QFont(self._font)
        self._small.setPointSizeF(self._font.pointSizeF() * 0.82)

    # ------------------------------------------------------------------ content
    def set_graph_layout(self, layout: Optional[GraphLayout], keep_view: bool = False,
                         batches: Optional[list] = None) -> None:
        """Show ``layout``. ``batches``: its :func:`edge_batches`, if already built (they
        can be built off the UI thread: ``QPainterPath`` is a plain value type)."""
        self.layout_ = layout
        self.hovered = None
        self._overlay_nodes = None
        self._overlay_version += 1
        self.frames = block_frames(layout.graph, layout.pos, layout.size) if layout is not None else []
        self.bundles = fanout_bundles(layout.graph.edges, layout.layer) if layout is not None else {}
        self._edge_batches = batches if batches is not None else edge_batches(layout)
        self._minimap = None
        if layout is not None and not keep_view:
            self.reset_view()
        self.update()

    def set_message(self, text: str) -> None:
        self.message = text
        self.update()

    def set_highlight(self, selected: set[int], related: set[int], current: Optional[int]) -> None:
        self.selected, self.related, self.current = set(selected), set(related), current
        self.update()

    # ------------------------------------------------------------------ overlays
    def set_node_overlay(self, layer: str, styles: Mapping[OverlayKey, OverlayStyle]) -> None:
        """Set (replace) overlay ``layer``: node key or tick -> (fill, outline, badge)."""
        self._overlays[layer] = dict(styles)
        self._overlay_nodes = None
        self._overlay_version += 1
        self.update()

    def clear_overlay(self, layer: str) -> None:
        """Remove overlay ``layer`` (no error when it is not set)."""
        if self._overlays.pop(layer, None) is not None:
            self._overlay_nodes = None
            self._overlay_version += 1
            self.update()

    def update_node_overlay(self, layer: str, changes: Mapping[OverlayKey, Optional[OverlayStyle]]) -> None:
        """Set (a style) or remove (``None``) single entries of overlay ``layer``. Costs what the
        touched nodes cost: their resolved styles are recomputed and the cached picture is
        repainted under them only (more than :data:`PATCH_MAX_NODES`: the whole view)."""
        styles = self._overlays.setdefault(layer, {})
        for key, style in changes.items():
            if style is None:
                styles.pop(key, None)
            else:
                styles[key] = style
        if self.layout_ is None or not changes:
            return
        nodes = {i for i in (self._node_of_key(k) for k in changes) if i >= 0}
        if len(nodes) > PATCH_MAX_NODES:      # e.g. a Continue's executed range: resolve and draw all once
            self._overlay_nodes = None
            self._overlay_version += 1
            self.update()
            return
        if self._overlay_nodes is not None:
            for i in nodes:
                self._resolve_node(i)
        if not self._mark_stale(nodes):
            self._overlay_version += 1        # no valid picture: the next paint draws the whole view
            self.update()

    def _node_index(self) -> tuple:
        """(node key -> index, ticks ordered by their node, those nodes, each tick's node as a
        list): built once per layout."""
        lay = self.layout_
        if self._key_index is None or self._key_index[0] is not lay:
            by_node = np.asarray(lay.graph.node_of_tick, dtype=np.int64)
            order = np.argsort(by_node, kind="stable")
            self._key_index = (lay, {nd.key: i for i, nd in enumerate(lay.graph.nodes)}, order, by_node[order],
                               by_node.tolist())
        return self._key_index[1:]

    def _node_of_key(self, key: OverlayKey) -> int:
        index, _order, _nodes, node_of_tick = self._node_index()
        return _node_for(key, index, node_of_tick)

    def _resolve_node(self, i: int) -> None:
        """Recompute node ``i``'s entry of the resolved styles (its ticks and its key, per layer)."""
        _index, order, nodes, _ticks = self._node_index()
        keys = [*order[np.searchsorted(nodes, i, "left"):np.searchsorted(nodes, i, "right")].tolist(),
                self.layout_.graph.nodes[i].key]
        found = [styles[k] for styles in self._overlays.values() for k in keys if k in styles]
        if found:
            self._overlay_nodes[i] = found
        else:
            self._overlay_nodes.pop(i, None)

    def _mark_stale(self, nodes: set[int]) -> bool:
        """Queue the screen area of ``nodes`` (with room for outlines and badges) to be drawn
        again in the cached picture at the next paint: the changes of several layers in one
        stop cost one partial redraw. False when there is no valid picture to patch."""
        if self._base is None or self._base_key != self._base_cache_key(self.palette()):
            return False
        lay = self.layout_
        badge_h = QFontMetricsF(self._small).height() + 2       # scene units: badges rise this much
        pad = (badge_h / 2 + 4) * self.scale + 10               # screen pixels around the box
        region = QRegion()
        for i in nodes:
            x, y, w, h = lay.rect(i)
            p0 = self.scene_to_screen(x, y)
            region = region.united(QRect(int(p0.x() - pad), int(p0.y() - pad), int(w * self.scale + 2 * pad) + 1,
                                         int(h * self.scale + 2 * pad) + 1))
        region = region.intersected(QRegion(self.rect()))
        if not region.isEmpty():              # else nothing that changed is on screen
            self._stale = self._stale.united(region)
            self.update(region)
        return True

    def _redraw_stale(self, pal: QPalette) -> None:
        """Draw the stale area of the cached picture again: the same drawing as a whole
        picture, clipped to it (nodes just outside whose outline or badge reaches in included)."""
        region, self._stale = self._stale, QRegion()
        bounds = region.boundingRect()
        px = 1.0 / max(self.scale, 1e-6)
        x0, y0 = self.screen_to_scene(QPointF(bounds.left(), bounds.top()))
        x1, y1 = self.screen_to_scene(QPointF(bounds.right() + 1, bounds.bottom() + 1))
        margin = 16 * px + QFontMetricsF(self._small).height() + 2
        cull = QRectF(x0 - margin, y0 - margin, x1 - x0 + 2 * margin, y1 - y0 + 2 * margin)
        bp = QPainter(self._base)
        bp.setClipRegion(region)
        bp.fillRect(bounds, pal.color(QPalette.ColorRole.Base))
        bp.setRenderHint(QPainter.RenderHint.Antialiasing, self.scale > LOD_BOXES)
        bp.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        bp.save()
        bp.translate(self.offset)
        bp.scale(self.scale, self.scale)
        self.paint_scene(bp, cull.intersected(self.visible_scene_rect()), self.scale, pal, marks=False)
        bp.restore()
        self._paint_screen_text(bp, pal, clip=QRectF(bounds))
        bp.end()

    def set_edge_labels(self, labels: dict[int, str]) -> None:
        """Node index -> the shape/dtype of the value it produces, written under the node
        where its out-edges leave (at zooms where it is legible)."""
        self.edge_labels = dict(labels)
        self._overlay_version += 1
        self.update()

    def overlay_layers(self) -> list[str]:
        return list(self._overlays)

    def overlay_styles(self) -> dict[int, list[OverlayStyle]]:
        """Node index -> the styles drawn on it, in layer order (resolved against the
        current layout; cached until the overlays or the layout change)."""
        if self._overlay_nodes is not None:
            return self._overlay_nodes
        out: dict[int, list[OverlayStyle]] = {}
        lay = self.layout_
        if lay is not None and self._overlays:
            index, _order, _nodes, node_of_tick = self._node_index()
            for styles in self._overlays.values():
                for key, style in styles.items():     # a Continue's executed layer: one per tick
                    i = _node_for(key, index, node_of_tick)
                    if i >= 0:
                        found = out.get(i)
                        if found is None:
                            out[i] = [style]
                        elif found[-1] is not style:  # the same style again from this layer adds nothing
                            found.append(style)
        self._overlay_nodes = out
        return out

    # ------------------------------------------------------------------ view transform
    def scene_to_screen(self, x: float, y: float) -> QPointF:
        return QPointF(x * self.scale + self.offset.x(), y * self.scale + self.offset.y())

    def screen_to_scene(self, p: QPointF) -> tuple[float, float]:
        return (p.x() - self.offset.x()) / self.scale, (p.y() - self.offset.y()) / self.scale

    def visible_scene_rect(self) -> QRectF:
        x0, y0 = self.screen_to_scene(QPointF(0, 0))
        return QRectF(x0, y0, self.width() / self.scale, self.height() / self.scale)

    def fit_scale(self) -> float:
        lay = self.layout_
        if lay is None or lay.width <= 0 or lay.height <= 0:
            return 1.0
        margin = 24
        return max(ZOOM_MIN, min(ZOOM_MAX, (self.width() - 2 * margin) / lay.width,
                                 (self.height() - 2 * margin) / lay.height))

    def fit(self) -> None:
        """Whole graph in view, but never below :data:`FIT_MIN_SCALE`: a graph taller than
        that shows its width and scrolls, keeping the part in the middle of the view."""
        lay = self.layout_
        if lay is None:
            return
        cx, cy = self.screen_to_scene(QPointF(self.width() / 2, self.height() / 2))
        self.scale = max(self.fit_scale(), min(FIT_MIN_SCALE, ZOOM_MAX))
        x = (self.width() - lay.width * self.scale) / 2 if lay.width * self.scale <= self.width() \
            else self.width() / 2 - cx * self.scale
        y = (self.height() - lay.height * self.scale) / 2 if lay.height * self.scale <= self.height() \
            else self.height() / 2 - cy * self.scale
        self.offset = QPointF(x, y)
        self._changed()

    def resizeEvent(self, event) -> None:
        """Until the user pans or zooms, the opening view follows the widget's size (the
        window's first layout pass resizes the canvas after the graph arrives)."""
        super().resizeEvent(event)
        if self._auto_view and self.layout_ is not None:
            self.reset_view()
            self._auto_view = True

    def reset_view(self) -> None:
        """Readable zoom at the top of the graph (a tall graph fitted whole is a thin sliver)."""
        lay = self.layout_
        if lay is None:
            return
        self._auto_view = True
        fit_w = (self.width() - 48) / lay.width if lay.width > 0 else 1.0
        self.scale = max(FIT_MIN_SCALE, min(1.0, fit_w, ZOOM_MAX))
        if lay.height * self.scale <= self.height():
            self.fit()
            self._auto_view = True
            return
        x = (self.width() - lay.width * self.scale) / 2 if lay.width * self.scale <= self.width() else 24.0
        self.offset = QPointF(x, 16.0)
        self._changed(auto=True)

    def center_on(self, node: int, zoom: Optional[float] = None) -> None:
        lay = self.layout_
        if lay is None or not (0 <= node < len(lay.pos)):
            return
        if zoom is not None:
            self.scale = max(ZOOM_MIN, min(ZOOM_MAX, zoom))
        x, y = lay.pos[node]
        self.offset = QPointF(self.width() / 2 - x * self.scale, self.height() / 2 - y * self.scale)
        self._clamp(24.0)
        self._changed()

    def _clamp(self, margin: float) -> None:
        """Keep the graph on screen: centred along an axis where it fits, otherwise no more
        than ``margin`` pixels of empty space beyond its edges."""
        lay = self.layout_
        if lay is None:
            return
        out = []
        for off, view, extent in ((self.offset.x(), self.width(), lay.width * self.scale),
                                  (self.offset.y(), self.height(), lay.height * self.scale)):
            if extent + 2 * margin <= view:
                out.append((view - extent) / 2)
            else:
                out.append(min(margin, max(view - extent - margin, off)))
        self.offset = QPointF(*out)

    def ensure_visible(self, node: int) -> None:
        lay = self.layout_
        if lay is None or not (0 <= node < len(lay.pos)):
            return
        x, y, w, h = lay.rect(node)
        if not self.visible_scene_rect().contains(QRectF(x, y, w, h)):
            self.center_on(node)

    def zoom_by(self, factor: float, anchor: Optional[QPointF] = None) -> None:
        anchor = anchor if anchor is not None else QPointF(self.width() / 2, self.height() / 2)
        sx, sy = self.screen_to_scene(anchor)
        self.scale = max(ZOOM_MIN, min(ZOOM_MAX, self.scale * factor))
        self.offset = QPointF(anchor.x() - sx * self.scale, anchor.y() - sy * self.scale)
        self._changed()

    def view_state(self) -> tuple[float, float, float]:
        """Zoom and pan, to put back later with :meth:`set_view_state`."""
        return (self.scale, self.offset.x(), self.offset.y())

    def set_view_state(self, state: tuple[float, float, float]) -> None:
        scale, x, y = state
        self.scale = max(ZOOM_MIN, min(ZOOM_MAX, scale))
        self.offset = QPointF(x, y)
        self._changed()

    def _changed(self, auto: bool = False) -> None:
        self._auto_view = auto
        self._clamp(min(self.width(), self.height()) / 2)
        # no "view changed" signal per pan step: nothing listens, and on PySide6 6.12 with
        # CPython 3.11 every emit() also drops a reference to True
        self.update()

    # ------------------------------------------------------------------ painting
    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        pal = self.palette()
        if self.layout_ is None:
            painter.fillRect(self.rect(), pal.color(QPalette.ColorRole.Base))
            if self.message:
                painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
                painter.drawText(self.rect().adjusted(24, 24, -24, -24),
                                 Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.message)
            painter.end()
            return
        # the graph itself is cached per view: a selection or hover repaints only the marks
        dpr = self.devicePixelRatioF()
        key = self._base_cache_key(pal)
        if self._base is not None and self._base_key == key and not self._stale.isEmpty():
            self._redraw_stale(pal)
        if self._base is None or self._base_key != key:
            self._stale = QRegion()
            self._base = QPixmap(int(math.ceil(self.width() * dpr)), int(math.ceil(self.height() * dpr)))
            self._base.setDevicePixelRatio(dpr)
            self._base.fill(pal.color(QPalette.ColorRole.Base))
            bp = QPainter(self._base)
            bp.setRenderHint(QPainter.RenderHint.Antialiasing, self.scale > LOD_BOXES)
            bp.setRenderHint(QPainter.RenderHint.TextAntialiasing)
            bp.save()
            bp.translate(self.offset)
            bp.scale(self.scale, self.scale)
            self.paint_scene(bp, self.visible_scene_rect(), self.scale, pal, marks=False)
            bp.restore()
            self._paint_screen_text(bp, pal)
            bp.end()
            self._base_key = key
        painter.drawPixmap(0, 0, self._base)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, self.scale > LOD_BOXES)
        painter.save()
        painter.translate(self.offset)
        painter.scale(self.scale, self.scale)
        self._paint_highlighted_edges(painter, self.visible_scene_rect(), pal.color(QPalette.ColorRole.Highlight))
        self._paint_marks(painter, self.layout_, pal.color(QPalette.ColorRole.Highlight), self.scale)
        painter.restore()
        if self.minimap_visible:
            self._paint_minimap(painter, pal)
        if self.message:
            painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect().adjusted(8, 6, -8, -6),
                             Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft, self.message)
        painter.end()

    def _base_cache_key(self, pal: QPalette) -> tuple:
        """What the cached picture depends on: when any of it changes, it is drawn again whole."""
        return (id(self.layout_), self.scale, self.offset.x(), self.offset.y(), self.width(), self.height(),
                self.devicePixelRatioF(), pal.color(QPalette.ColorRole.Base).rgba(),
                pal.color(QPalette.ColorRole.Text).rgba(), self._overlay_version, len(self._edge_batches))

    def _paint_edge_labels(self, painter: QPainter, pal: QPalette, idx: np.ndarray, texts: list) -> None:
        """Shapes under the nodes that produce them, where the rows leave room (the layer
        pitch on screen holds a line of text) and labels do not collide."""
        lay = self.layout_
        if not self.edge_labels or self.scale < EDGE_LABEL_MIN_SCALE:
            return
        font = self._font_px(TEXT_PX_MIN + (1 if self.scale >= 1 else 0))
        fm = QFontMetricsF(font)
        ink = QColor(pal.color(QPalette.ColorRole.Text))
        ink.setAlphaF(0.62)
        boxes, items = [], []
        for i in idx.tolist():
            text = self.edge_labels.get(i)
            if not text:
                continue
            x, y, w, h = lay.rect(i)
            p = self.scene_to_screen(x + w / 2, y + h)
            r = QRectF(p.x() + 4, p.y() + 1, fm.horizontalAdvance(text) + 2, fm.height())
            boxes.append((r.x(), r.y(), r.width(), r.height()))
            items.append((text, r))
        painter.setFont(font)
        painter.setPen(ink)
        for k in spread_titles(boxes):
            text, r = items[k]
            painter.drawText(r, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
            texts.append((text, r))

    def _paint_bundle_labels(self, painter: QPainter, pal: QPalette, rect: QRectF, texts: list) -> None:
        """``×12`` beside a bundled source, and its short name beside each stub where it ends, in
        the gap above the reader (left out where that gap has no room for it, or a shape label
        or title is there)."""
        lay = self.layout_
        if not self.bundles:
            return
        font = self._font_px(TEXT_PX_MIN + 1)
        fm = QFontMetricsF(font)
        painter.setFont(font)
        ink = QColor(pal.color(QPalette.ColorRole.Text))
        ink.setAlphaF(0.75)
        edges = lay.graph.edges
        boxes = None
        for src, (_kept, rest) in self.bundles.items():
            name = lay.graph.nodes[src].label
            x, y, w, h = lay.rect(src)
            if rect.intersects(QRectF(x, y, w, h + 40)):
                # above the box's right end, in the gap between rows: beside it, it would
                # cover the node next to the source
                p = self.scene_to_screen(x + w, y)
                count = f"×{int((edges[:, 0] == src).sum())}"      # every reader, near ones too
                tw = fm.horizontalAdvance(count) + 4
                r = QRectF(p.x() - tw, p.y() - fm.height(), tw, fm.height())
                painter.setPen(ink)
                painter.drawText(r, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, count)
                texts.append((count, r))
            if self.scale * STUB_LENGTH < fm.height() + 2:
                continue           # the stub is too short on screen to carry a name
            painter.setPen(ink)    # (the source may be off screen: its count set no pen)
            if boxes is None:
                boxes = (lay.pos - lay.size / 2, lay.pos + lay.size / 2)
            label = fm.elidedText(name, Qt.TextElideMode.ElideMiddle, 110)
            tw = fm.horizontalAdvance(label) + 4
            for e in rest:
                ex, ey = (float(v) for v in lay.edge_points[e][-1])
                if not rect.contains(QPointF(ex, ey - STUB_LENGTH)):
                    continue
                # beside the stub's lower end, right above its reader: the stub's upper end
                # reaches into the row above where rows sit close (a collapsed block's readers)
                p = self.scene_to_screen(ex, ey)
                r = QRectF(p.x() + 3, p.y() - fm.height() - 1, tw, fm.height())
                if self._covers_a_node(r, *boxes) or any(r.intersects(t) for _s, t in texts):
                    continue       # no room between the rows: the source's ×N says it
                painter.drawText(r, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)
                texts.append((label, r))

    def _covers_a_node(self, screen_rect: QRectF, lo: np.ndarray, hi: np.ndarray) -> bool:
        """Whether ``screen_rect`` overlaps a node box (``lo``/``hi``: the boxes' scene corners)."""
        x0, y0 = self.screen_to_scene(screen_rect.topLeft())
        x1, y1 = self.screen_to_scene(screen_rect.bottomRight())
        return bool(np.any((lo[:, 0] < x1) & (hi[:, 0] > x0) & (lo[:, 1] < y1) & (hi[:, 1] > y0)))

    def _font_px(self, px: float, bold: bool = False) -> QFont:
        k = int(round(px * 2)) * (2 if bold else 1) + (1 if bold else 0)
        f = self._fonts.get(k)
        if f is None:
            f = QFont(self._font)
            f.setPixelSize(max(1, int(round(px))))
            f.setBold(bold)
            self._fonts[k] = f
        return f

    def label_px(self) -> float:
        """On-screen size of node labels at the current zoom."""
        return max(TEXT_PX_MIN, min(TEXT_PX_MAX, TEXT_PX_MAX * self.scale))

    def text_items(self) -> list[tuple[str, QRectF]]:
        """The texts drawn on screen now (node labels, block and frame titles) with their
        screen rectangles: what a reader can read at this zoom (tests, screenshots)."""
        return list(self._texts)

    _texts: list = []

    def _paint_screen_text(self, painter: QPainter, pal: QPalette, clip: Optional[QRectF] = None) -> None:
        """Labels in screen space: the same legible size whatever the zoom, drawn on the
        boxes they fit in; block and frame titles at every zoom, thinned where they would
        overlap. ``clip``: a repaint of that screen rectangle only (node labels outside it are
        skipped; what is drawn and where is decided over the whole view, as for a full paint)."""
        lay = self.layout_
        texts: list[tuple[str, QRectF]] = []
        if clip is None:
            self._texts = texts
        else:
            painter = _ClipSkippingPainter(painter, clip)
        rect = self.visible_scene_rect()
        nodes = lay.graph.nodes
        dark = pal.color(QPalette.ColorRole.Window).lightness() < 128
        colors = class_colors(dark)
        ink = pal.color(QPalette.ColorRole.Text)
        # frame titles (expanded blocks) and collapsed blocks' titles, thinned by overlap
        title_font = self._font_px(TITLE_PX, bold=True)
        tfm = QFontMetricsF(title_font)
        titles: list[tuple[str, QRectF, QColor]] = []
        for fr in self.frames:
            if fr.x1 < rect.left() or fr.x0 > rect.right() or fr.y1 < rect.top() or fr.y0 > rect.bottom():
                continue
            top_left = self.scene_to_screen(fr.x0, fr.y0)
            bottom = self.scene_to_screen(fr.x1, fr.y1)
            if bottom.y() - top_left.y() < TITLE_PX + 2:
                continue
            # bottom-aligned on the frame's title band: when the band is thinner than the
            # text (zoomed out) the title rises into the gap above, not onto the first row
            band_bottom = top_left.y() + FRAME_TITLE * self.scale + 2
            y = max(band_bottom - (tfm.height() + 2), 2.0) if bottom.y() - 4 > TITLE_PX + 2 else top_left.y() + 1
            w = min(tfm.horizontalAdvance(fr.title) + 8, max(60.0, self.width() - 8))
            x = max(2.0, top_left.x() + 4)
            titles.append((fr.title, QRectF(x, y, w, tfm.height() + 2), ink))
        idx = lay.nodes_in(rect.left(), rect.top(), rect.right(), rect.bottom())
        groups = [i for i in idx.tolist() if nodes[i].kind == "group"]
        for i in groups:
            x, y, w, h = lay.rect(i)
            p0 = self.scene_to_screen(x, y)
            sw, sh = w * self.scale, h * self.scale
            text = f"{nodes[i].op}  ·  {nodes[i].detail}" if nodes[i].detail else nodes[i].op
            if sh >= TITLE_PX + 4 and sw >= 60:
                continue        # big enough: drawn as a node label below
            tw = tfm.horizontalAdvance(text) + 8
            titles.append((text, QRectF(p0.x() + sw + 6, p0.y() + sh / 2 - (tfm.height() + 2) / 2, tw,
                                        tfm.height() + 2), colors["group"][1]))
        keep = spread_titles([(r.x(), r.y(), r.width(), r.height()) for _t, r, _c in titles])
        painter.setFont(title_font)
        bg = QColor(pal.color(QPalette.ColorRole.Base))
        bg.setAlphaF(0.82)
        for k in keep:
            text, r, color = titles[k]
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(bg)
            painter.drawRoundedRect(r, 3, 3)
            painter.setPen(color)
            painter.drawText(r.adjusted(4, 0, -4, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                             tfm.elidedText(text, Qt.TextElideMode.ElideRight, r.width() - 8))
            texts.append((text, r))
        self._paint_edge_labels(painter, pal, idx, texts)
        self._paint_bundle_labels(painter, pal, rect, texts)     # after the shapes: it gives way to them
        # node labels where they fit
        px = self.label_px()
        font = self._font_px(px)
        small = self._font_px(max(TEXT_PX_MIN, px * 0.84))
        fm, sm = QFontMetricsF(font), QFontMetricsF(small)
        fit = visible_labels(lay.size, idx, self.scale, fm.height(), char_px=fm.averageCharWidth())
        if clip is not None:           # a label stays inside its box: only boxes meeting the clip
            (cx0, cy0), (cx1, cy1) = self.screen_to_scene(clip.topLeft()), self.screen_to_scene(clip.bottomRight())
            fit = np.intersect1d(fit, lay.nodes_in(cx0, cy0, cx1, cy1))
        overlays = self.overlay_styles()
        for i in fit.tolist():
            nd = nodes[i]
            x, y, w, h = lay.rect(i)
            p0 = self.scene_to_screen(x, y)
            sw, sh = w * self.scale, h * self.scale
            fg = _label_ink(overlays.get(i), colors[nd.op_class][2])
            th = sh - 6 * self.scale if nd.composition else sh
            inner = sw - 12 * min(1.0, self.scale) - (4 if nd.params and nd.kind != "group" else 0)
            label = nd.label if nd.kind != "group" else nd.op
            two = nd.detail and th >= fm.height() + sm.height() - 1     # lines may touch, not overlap
            painter.setPen(fg)
            painter.setFont(font)
            text = fm.elidedText(label, Qt.TextElideMode.ElideMiddle, inner)
            if not text:
                continue
            if two:
                top = QRectF(p0.x(), p0.y(), sw, th / 2 + 1)
                painter.drawText(top, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom, text)
                painter.setFont(small)
                sub = QColor(fg)
                sub.setAlphaF(0.72)
                painter.setPen(sub)
                bottom = QRectF(p0.x() + 2, p0.y() + th / 2 + 1, sw - 4, th / 2 - 1)
                painter.drawText(bottom, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop,
                                 sm.elidedText(nd.detail, Qt.TextElideMode.ElideRight, inner))
            else:
                painter.drawText(QRectF(p0.x(), p0.y(), sw, th), Qt.AlignmentFlag.AlignCenter, text)
            texts.append((text, QRectF(p0.x(), p0.y(), sw, sh)))

    def paint_scene(self, painter: QPainter, rect: QRectF, scale: float, pal: QPalette,
                    full_detail: bool = False, marks: bool = True) -> None:
        """Draw what lies in scene ``rect`` with ``painter`` already in scene coordinates.
        On screen, labels are drawn afterwards in screen space (:meth:`_paint_screen_text`);
        ``full_detail`` (exports) draws them here, in the scene. ``marks``: selection,
        current tick and hover too (the screen draws them over its cached graph)."""
        lay = self.layout_
        if lay is None:
            return
        dark = pal.color(QPalette.ColorRole.Window).lightness() < 128
        colors = class_colors(dark)
        ink = pal.color(QPalette.ColorRole.Text)
        self._paint_frames(painter, rect, pal, full_detail)
        edge_color = QColor(ink)
        edge_color.setAlphaF(0.42 if dark else 0.38)
        pen = QPen(edge_color, 1.0)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        arrows = full_detail or scale >= LOD_BOXES
        for bounds, path, heads in self._edge_batches:
            if bounds.intersects(rect):
                painter.drawPath(path)
                if arrows:
                    painter.fillPath(heads, edge_color)
        accent = pal.color(QPalette.ColorRole.Highlight)
        if marks:
            self._paint_highlighted_edges(painter, rect, accent)

        idx = lay.nodes_in(rect.left(), rect.top(), rect.right(), rect.bottom())
        if not len(idx):
            return
        nodes = lay.graph.nodes
        overlays = self.overlay_styles()
        if not full_detail and scale < LOD_BOXES:
            by_color: dict[int, tuple[QColor, list[QRectF]]] = {}
            for i in idx.tolist():
                x, y, w, h = lay.rect(i)
                color = _overlay_fill(overlays.get(i)) or colors[nodes[i].op_class][1]
                by_color.setdefault(color.rgba(), (color, []))[1].append(QRectF(x, y, w, h))
            painter.setPen(Qt.PenStyle.NoPen)
            for color, rects in by_color.values():
                painter.setBrush(color)
                painter.drawRects(rects)
            self._paint_overlay_marks(painter, lay, idx, overlays, scale, badges=False)
            if marks:
                self._paint_marks(painter, lay, accent, scale)
            return
        text = full_detail     # on screen: _paint_screen_text
        detail = full_detail or scale >= LOD_DETAIL
        fm = QFontMetricsF(self._font)
        sm = QFontMetricsF(self._small)
        for i in idx.tolist():
            nd = nodes[i]
            x, y, w, h = lay.rect(i)
            r = QRectF(x, y, w, h)
            fill, border, fg = colors[nd.op_class]
            fill = _overlay_fill(overlays.get(i)) or fill
            fg = _label_ink(overlays.get(i), fg)
            bpen = QPen(border, 1.0)
            bpen.setCosmetic(True)
            radius = h / 2 if nd.kind in ("param", "const", "input", "output") else 4.0
            if nd.kind == "group":
                shadow = QRectF(r).translated(4, 4)
                painter.setPen(bpen)
                painter.setBrush(fill)
                painter.drawRoundedRect(shadow, 6, 6)
                radius = 6.0
            painter.setPen(bpen)
            painter.setBrush(fill)
            painter.drawRoundedRect(r, radius, radius)
            if nd.composition:      # a block: what it is made of, as a stacked bar
                total = sum(c for _cls, c in nd.composition)
                bx, bw = x + 8, w - 16
                painter.setPen(Qt.PenStyle.NoPen)
                for cls, c in nd.composition:
                    seg = bw * c / total
                    painter.setBrush(colors[cls][1])
                    painter.drawRect(QRectF(bx, y + h - 7, seg, 3))
                    bx += seg
            if nd.params and nd.kind != "group":    # reads hidden weights: a small tab
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(colors["io"][1])
                painter.drawRect(QRectF(x + w - 7, y + 3, 3, h - 6))
            if not text:
                continue
            painter.setPen(fg)
            painter.setFont(self._font)
            th = h - 6 if nd.composition else h     # text area above a block's composition bar
            if detail and nd.detail and h >= 28:
                top = QRectF(x + 6, y + 2, w - 12, th / 2 + 1)
                painter.drawText(top, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom,
                                 fm.elidedText(nd.label, Qt.TextElideMode.ElideMiddle, w - 12))
                painter.setFont(self._small)
                sub = QColor(fg)
                sub.setAlphaF(0.7)
                painter.setPen(sub)
                bottom = QRectF(x + 6, y + th / 2 + 1, w - 12, th / 2 - 3)
                painter.drawText(bottom, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop,
                                 sm.elidedText(nd.detail, Qt.TextElideMode.ElideRight, w - 12))
            else:
                painter.drawText(QRectF(x + 6, y, w - 12, th), Qt.AlignmentFlag.AlignCenter,
                                 fm.elidedText(nd.label, Qt.TextElideMode.ElideMiddle, w - 12))
        self._paint_overlay_marks(painter, lay, idx, overlays, scale, badges=full_detail or scale >= LOD_TEXT)
        if marks:
            self._paint_marks(painter, lay, accent, scale)

    def _paint_frames(self, painter: QPainter, rect: QRectF, pal: QPalette, with_titles: bool) -> None:
        """Expanded blocks as light rounded frames behind their nodes (titles: on screen
        by :meth:`_paint_screen_text`, in exports here)."""
        if not self.frames:
            return
        ink = QColor(pal.color(QPalette.ColorRole.Text))
        fill = QColor(ink)
        fill.setAlphaF(0.035)
        ink.setAlphaF(0.35)
        pen = QPen(ink, 1.0, Qt.PenStyle.DashLine)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(fill)
        for fr in self.frames:
            if fr.x1 < rect.left() or fr.x0 > rect.right() or fr.y1 < rect.top() or fr.y0 > rect.bottom():
                continue
            painter.drawRoundedRect(QRectF(*fr.rect), 8, 8)
            if with_titles:
                painter.setFont(self._font)
                painter.setPen(pal.color(QPalette.ColorRole.Text))
                painter.drawText(QRectF(fr.x0 + 8, fr.y0 + 2, fr.x1 - fr.x0 - 16, 16),
                                 Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, fr.title)
                painter.setPen(pen)

    def _paint_overlay_marks(self, painter: QPainter, lay: GraphLayout, idx: np.ndarray,
                             overlays: dict, scale: float, badges: bool) -> None:
        """Overlay outlines (a frame just outside the box) and badges of the nodes in ``idx``."""
        if not overlays:
            return
        px = 1.0 / max(scale, 1e-6)
        visible = set(idx.tolist()) & overlays.keys()
        for i in sorted(visible):
            x, y, w, h = lay.rect(i)
            outline = next((o for _f, o, _b in reversed(overlays[i]) if o is not None), None)
            badge = " ".join(b for _f, _o, b in overlays[i] if b)
            if outline is not None:
                pen = QPen(outline, 2.0)
                pen.setCosmetic(True)
                painter.setPen(pen)
                painter.setBrush(Qt.BrushStyle.NoBrush)
                p = 1.5 * px
                grow = max(0.0, 6 * px - min(w, h) / 2) if scale < LOD_BOXES else 0.0
                painter.drawRoundedRect(QRectF(x - p - grow, y - p - grow, w + 2 * (p + grow),
                                               h + 2 * (p + grow)), 4, 4)
            if badge and badges:
                fm = QFontMetricsF(self._small)
                bw, bh = fm.horizontalAdvance(badge) + 8, fm.height() + 2
                r = QRectF(x + w - bw + 4, y - bh / 2, bw, bh)
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(outline if outline is not None else QColor(60, 60, 70))
                painter.drawRoundedRect(r, bh / 2, bh / 2)
                painter.setPen(QColor(255, 255, 255))
                painter.setFont(self._small)
                painter.drawText(r, Qt.AlignmentFlag.AlignCenter, badge)

    def _paint_highlighted_edges(self, painter: QPainter, rect: QRectF, accent: QColor) -> None:
        lay = self.layout_
        if not self.selected or lay is None or not len(lay.graph.edges):
            return
        sel = np.fromiter(self.selected, dtype=np.int64)
        edges = lay.graph.edges
        hit = np.nonzero(np.isin(edges[:, 0], sel) | np.isin(edges[:, 1], sel))[0]
        if not len(hit):
            return
        path, heads = QPainterPath(), QPainterPath()
        for e in hit[:2000].tolist():
            _add_edge(path, heads, lay.edge_points[e], bool(lay.edge_routed[e]))
        pen = QPen(accent, 2.0)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(path)
        painter.fillPath(heads, accent)

    def _paint_marks(self, painter: QPainter, lay: GraphLayout, accent: QColor, scale: float) -> None:
        """Selection, related nodes, current tick and hover, drawn on top at every zoom."""
        # frames stay a few device pixels away from the box whatever the zoom
        px = 1.0 / max(scale, 1e-6)
        tick_color = QColor("#e8a317")

        def frame(i: int, color: QColor, width: float, pad: float, style=Qt.PenStyle.SolidLine) -> None:
            x, y, w, h = lay.rect(i)
            pen = QPen(color, width)
            pen.setCosmetic(True)
            pen.setStyle(style)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            p = pad * px
            r = QRectF(x - p, y - p, w + 2 * p, h + 2 * p)
            if scale < LOD_BOXES:    # keep tiny marks findable when zoomed far out
                grow = max(0.0, 8 * px - min(w, h) / 2)
                r = r.adjusted(-grow, -grow, grow, grow)
            painter.drawRoundedRect(r, 5 * px + 3, 5 * px + 3)

        for i in self.related:
            if 0 <= i < len(lay.pos):
                frame(i, accent, 1.5, 3, Qt.PenStyle.DashLine)
        if self.current is not None and 0 <= self.current < len(lay.pos):
            frame(self.current, tick_color, 2.5, 4)
        for i in self.selected:
            if 0 <= i < len(lay.pos):
                frame(i, accent, 2.5, 2)
        if self.hovered is not None and 0 <= self.hovered < len(lay.pos):
            hover = QColor(accent)
            hover.setAlphaF(0.55)
            frame(self.hovered, hover, 1.5, 1)

    def _paint_minimap(self, painter: QPainter, pal: QPalette) -> None:
        rect = self.minimap_rect()
        if rect.isEmpty():
            return
        lay = self.layout_
        key = (id(lay), rect.size().toTuple(), pal.color(QPalette.ColorRole.Base).rgb())
        if self._minimap is None or self._minimap_key != key:
            self._minimap = self._render_minimap(rect.size(), pal)
            self._minimap_key = key
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        frame = QColor(pal.color(QPalette.ColorRole.Mid))
        painter.setPen(frame)
        painter.setBrush(pal.color(QPalette.ColorRole.Window))
        painter.setOpacity(0.85)
        painter.drawRect(rect.adjusted(-1, -1, 0, 0))
        painter.drawImage(rect.topLeft(), self._minimap)
        painter.setOpacity(1.0)
        sx, sy = self._minimap_scales(rect.size())
        vis = self.visible_scene_rect()
        view = QRectF(rect.x() + vis.x() * sx, rect.y() + vis.y() * sy, vis.width() * sx, vis.height() * sy)
        view = view.intersected(QRectF(rect))
        accent = QColor(pal.color(QPalette.ColorRole.Highlight))
        painter.setPen(QPen(accent, 1.5))
        fill = QColor(accent)
        fill.setAlphaF(0.15)
        painter.setBrush(fill)
        painter.drawRect(view)
        painter.restore()

    def minimap_rect(self) -> QRect:
        lay = self.layout_
        if lay is None or not self.minimap_visible or lay.width <= 0 or lay.height <= 0:
            return QRect()
        if self.width() < 360 or self.height() < 240:
            return QRect()
        if lay.width * self.scale <= self.width() and lay.height * self.scale <= self.height():
            return QRect()      # the whole graph is on screen: nothing to navigate
        box = QSize(min(MINIMAP_MAX.width(), int(self.width() * 0.16)),
                    min(MINIMAP_MAX.height(), int(self.height() * 0.3)))
        # a tall, narrow graph gets a minimap stretched sideways (at least 40 px wide):
        # at one scale for both axes it would be a one-pixel line
        s = min(box.width() / lay.width, box.height() / lay.height)
        w = min(box.width(), max(40, int(lay.width * s)))
        h = min(box.height(), max(40, int(lay.height * s)))
        # never over the selected node or the current tick: the first free corner, else none
        avoid = [self._screen_rect(i) for i in list(self.selected) + [self.current] if i is not None]
        avoid = [r.adjusted(-6, -6, 6, 6) for r in avoid if r is not None]
        for x, y in ((self.width() - w - 12, self.height() - h - 12), (12, self.height() - h - 12),
                     (self.width() - w - 12, 12), (12, 12)):
            r = QRect(x, y, w, h)
            if not any(r.intersects(a) for a in avoid):
                return r
        return QRect()

    def _screen_rect(self, node: int) -> Optional[QRect]:
        lay = self.layout_
        if lay is None or not (0 <= node < len(lay.pos)):
            return None
        x, y, w, h = lay.rect(node)
        p = self.scene_to_screen(x, y)
        return QRectF(p.x(), p.y(), max(1.0, w * self.scale), max(1.0, h * self.scale)).toAlignedRect()

    def _minimap_scales(self, box: QSize) -> tuple[float, float]:
        lay = self.layout_
        return box.width() / lay.width, box.height() / lay.height

    def _render_minimap(self, size: QSize, pal: QPalette) -> QImage:
        """Every node as a block of pixels, written straight into the image with numpy
        (a QRectF per node cost 50-90 ms on GPT-2's first paint and each theme switch)."""
        w, h = size.width(), size.height()
        lay = self.layout_
        bg = pal.color(QPalette.ColorRole.Window)
        buf = np.empty((h, w), dtype=np.uint32)
        buf.fill(bg.rgba())
        sx, sy = self._minimap_scales(size)
        colors = class_colors(bg.lightness() < 128)
        if len(lay.pos):
            x0 = np.clip(((lay.pos[:, 0] - lay.size[:, 0] / 2) * sx).astype(np.int64), 0, w - 1)
            y0 = np.clip(((lay.pos[:, 1] - lay.size[:, 1] / 2) * sy).astype(np.int64), 0, h - 1)
            x1 = np.clip(np.maximum(x0 + 1, ((lay.pos[:, 0] + lay.size[:, 0] / 2) * sx).astype(np.int64)), 1, w)
            y1 = np.clip(np.maximum(y0 + 1, ((lay.pos[:, 1] + lay.size[:, 1] / 2) * sy).astype(np.int64)), 1, h)
            cls_index = {c: k for k, c in enumerate(OP_CLASSES)}
            palette = np.array([colors[c][1].rgba() for c in OP_CLASSES], dtype=np.uint32)
            col = palette[np.array([cls_index.get(nd.op_class, len(OP_CLASSES) - 1) for nd in lay.graph.nodes])]
            # boxes are a few pixels at minimap scale: one pass per pixel offset inside them
            for dy in range(int((y1 - y0).max())):
                for dx in range(int((x1 - x0).max())):
                    m = (dy < y1 - y0) & (dx < x1 - x0)
                    buf[y0[m] + dy, x0[m] + dx] = col[m]
        img = QImage(buf.data, w, h, 4 * w, QImage.Format.Format_ARGB32).copy()
        return img.convertToFormat(QImage.Format.Format_ARGB32_Premultiplied)

    # ------------------------------------------------------------------ export
    def render_image(self, max_side: int = 12000, scale: float = 1.0) -> QImage:
        """The whole graph at full detail, both sides at most ``max_side``. A tall graph is
        cut into vertical strips laid side by side (top to bottom, then left to right, like
        newspaper columns), so it keeps a legible scale instead of shrinking to a sliver."""
        lay = self.layout_
        if lay is None:
            return QImage()
        margin = 20.0
        w, h = lay.width + 2 * margin, lay.height + 2 * margin
        gap = 24.0
        s = min(scale, max_side / max(w, h))      # one column: the whole graph shrunk to fit
        cols = 1
        # columns use the square: the largest scale whose columns fit max_side both ways
        t = min(scale, max_side / math.sqrt(w * h))
        while t > s:
            c = int(math.ceil(h * t / max_side))
            if (w * c + gap * (c - 1)) * t <= max_side:
                s, cols = t, c
                break
            t *= 0.92
        strip_h = h / cols              # scene height per column
        self.last_export = (s, cols)    # what the export chose (tests, status messages)
        img = QImage(max(1, int((w * cols + gap * (cols - 1)) * s)), max(1, int(min(h, strip_h) * s)),
                     QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(self.palette().color(QPalette.ColorRole.Base))
        p = QPainter(img)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        for c in range(cols):
            p.save()
            p.setClipRect(QRectF((w + gap) * c * s, 0, w * s, strip_h * s))
            p.scale(s, s)
            p.translate((w + gap) * c + margin, margin - strip_h * c)
            self.paint_scene(p, QRectF(-margin, strip_h * c - margin, w, strip_h), max(s, LOD_DETAIL),
                             self.palette(), full_detail=True)
            p.restore()
        p.end()
        return img

    def render_svg(self, title: str = "NAC dataflow graph") -> bytes:
        """The whole graph at full detail as an SVG document."""
        from .image_files import svg_bytes

        lay = self.layout_
        if lay is None:
            raise ValueError("no graph to export")
        margin = 20.0
        w, h = lay.width + 2 * margin, lay.height + 2 * margin

        def paint(p: QPainter) -> None:
            p.fillRect(QRectF(0, 0, w, h), self.palette().color(QPalette.ColorRole.Base))
            p.translate(margin, margin)
            self.paint_scene(p, QRectF(-margin, -margin, w, h), 1.0, self.palette(), full_detail=True)
        return svg_bytes(QSize(int(math.ceil(w)), int(math.ceil(h))), QRectF(0, 0, w, h), paint, title)

    # ------------------------------------------------------------------ interaction
    def node_at(self, pos: QPointF) -> Optional[int]:
        if self.layout_ is None:
            return None
        x, y = self.screen_to_scene(pos)
        hit = self.layout_.node_at(x, y)
        if hit is None and self.scale < LOD_BOXES:     # tiny marks: accept a few pixels around
            tol = 4.0 / self.scale
            lay = self.layout_
            near = np.nonzero((np.abs(lay.pos[:, 0] - x) <= lay.size[:, 0] / 2 + tol) &
                              (np.abs(lay.pos[:, 1] - y) <= lay.size[:, 1] / 2 + tol))[0]
            hit = int(near[0]) if len(near) else None
        return hit

    def mousePressEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        if event.button() == Qt.MouseButton.LeftButton and self.minimap_rect().contains(pos.toPoint()):
            self._minimap_drag = True
            self._minimap_jump(pos)
            return
        if event.button() in (Qt.MouseButton.LeftButton, Qt.MouseButton.MiddleButton):
            self._drag_start = pos
            self._drag_offset = QPointF(self.offset)
            self._dragged = False
            self.setCursor(Qt.CursorShape.ClosedHandCursor)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        if self._minimap_drag:
            self._minimap_jump(pos)
            return
        if self._drag_start is not None:
            delta = pos - self._drag_start
            if abs(delta.x()) + abs(delta.y()) > 3:
                self._dragged = True
            if self._dragged:
                self.offset = self._drag_offset + delta
                self._changed()
            return
        hit = self.node_at(pos)
        if hit != self.hovered:
            self.hovered = hit
            self.update()
            self.hoveredChanged.emit(-1 if hit is None else hit)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._minimap_drag:
            self._minimap_drag = False
            return
        start, dragged = self._drag_start, self._dragged
        self._drag_start = None
        self.unsetCursor()
        if start is not None and not dragged and event.button() == Qt.MouseButton.LeftButton:
            hit = self.node_at(event.position())
            if hit is not None:
                self.nodeClicked.emit(hit)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        hit = self.node_at(event.position())
        if hit is not None:
            self.nodeActivated.emit(hit)

    def leaveEvent(self, _event) -> None:
        if self.hovered is not None:
            self.hovered = None
            self.update()
            self.hoveredChanged.emit(-1)

    def wheelEvent(self, event: QWheelEvent) -> None:
        delta = event.angleDelta()
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier or not delta.y() and not delta.x():
            self.zoom_by(1.0015 ** delta.y(), event.position())
        elif event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.offset += QPointF(delta.y() / 2, 0)
            self._changed()
        else:
            self.offset += QPointF(delta.x() / 2, delta.y() / 2)
            self._changed()
        event.accept()

    def keyPressEvent(self, event) -> None:
        key = event.key()
        step = 60.0
        if key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_by(1.25)
        elif key == Qt.Key.Key_Minus:
            self.zoom_by(0.8)
        elif key == Qt.Key.Key_F:
            self.fit()
        elif key == Qt.Key.Key_Left:
            self.offset += QPointF(step, 0)
            self._changed()
        elif key == Qt.Key.Key_Right:
            self.offset -= QPointF(step, 0)
            self._changed()
        elif key == Qt.Key.Key_Up:
            self.offset += QPointF(0, step)
            self._changed()
        elif key == Qt.Key.Key_Down:
            self.offset -= QPointF(0, step)
            self._changed()
        else:
            super().keyPressEvent(event)

    def _minimap_jump(self, pos: QPointF) -> None:
        rect = self.minimap_rect()
        if rect.isEmpty():
            return
        sx, sy = self._minimap_scales(rect.size())
        x = (pos.x() - rect.x()) / sx
        y = (pos.y() - rect.y()) / sy
        self.offset = QPointF(self.width() / 2 - x * self.scale, self.height() / 2 - y * self.scale)
        self._changed()

    def event(self, ev) -> bool:
        if ev.type() == ev.Type.ToolTip and self.layout_ is not None:
            hit = self.node_at(ev.position() if hasattr(ev, "position") else QPointF(ev.pos()))
            if hit is not None and self.tooltip_provider is not None:
                QToolTip.showText(ev.globalPos(), self.tooltip_provider(hit), self)
            else:
                QToolTip.hideText()
                ev.ignore()
            return True
        return super().event(ev)

    tooltip_provider = None   # callable(node index) -> str, set by the owner

    def sizeHint(self) -> QSize:
        return QSize(640, 480)


class _ClipSkippingPainter:
    """A QPainter stand-in for a partial repaint: texts and pills wholly outside ``clip`` are not
    drawn at all (text layout is the expensive part; Qt would clip them away anyway), the rest
    goes to the painter unchanged, so what lands inside ``clip`` is what a whole paint draws."""

    def __init__(self, painter: QPainter, clip: QRectF):
        self._painter, self._clip = painter, clip

    def __getattr__(self, name):
        return getattr(self._painter, name)

    def drawText(self, rect, *args):
        if not isinstance(rect, QRectF) or rect.intersects(self._clip):
            self._painter.drawText(rect, *args)

    def drawRoundedRect(self, rect, *args):
        if not isinstance(rect, QRectF) or rect.intersects(self._clip):
            self._painter.drawRoundedRect(rect, *args)


def _node_for(key: OverlayKey, index: dict, node_of_tick: list) -> int:
    """The node an overlay key stands for: a tick's node, or the node with that key (-1: none)."""
    if type(key) is int or isinstance(key, np.integer) and not isinstance(key, bool):
        return node_of_tick[key] if 0 <= key < len(node_of_tick) else -1
    return index.get(key, -1)


def _label_ink(styles: Optional[list], fg: QColor) -> QColor:
    """A node label's colour: the theme's, unless an overlay fill under it leaves too little
    contrast. Those fills are fixed light colours (the debugger's executed green, its current
    yellow), on which a dark theme's light text could not be read."""
    fill = _overlay_fill(styles)
    if fill is None or abs(fg.lightness() - fill.lightness()) >= 110:     # legible as it is
        return fg
    return QColor(28, 30, 34) if fill.lightness() >= 128 else QColor(240, 241, 243)


def _overlay_fill(styles: Optional[list]) -> Optional[QColor]:
    """The fill of the last overlay layer that gives one."""
    if not styles:
        return None
    return next((f for f, _o, _b in reversed(styles) if f is not None), None)


def edge_batches(lay: Optional[GraphLayout]) -> list:
    """The edges of ``lay`` as (bounds, path, arrowheads) batches of :data:`EDGE_BATCH` edges,
    grouped by vertical position so a view of part of the graph skips most batches."""
    out: list = []
    if lay is None or not len(lay.edge_points):
        return out
    # a value read far down the graph by many nodes: one edge, and a stub into each other reader
    stubbed = {e for _kept, rest in fanout_bundles(lay.graph.edges, lay.layer).values() for e in rest}
    top = np.array([p[:, 1].min() for p in lay.edge_points])
    order = [e for e in np.argsort(top, kind="stable").tolist() if e not in stubbed]
    for start in range(0, len(order), EDGE_BATCH):
        path = QPainterPath()
        heads = QPainterPath()
        for e in order[start:start + EDGE_BATCH]:
            _add_edge(path, heads, lay.edge_points[e], bool(lay.edge_routed[e]))
        out.append((path.boundingRect().adjusted(-4, -4, 4, 4), path, heads))
    stubs = sorted(stubbed, key=lambda e: float(lay.edge_points[e][-1, 1]))
    for start in range(0, len(stubs), EDGE_BATCH):
        path = QPainterPath()
        heads = QPainterPath()
        for e in stubs[start:start + EDGE_BATCH]:
            x, y = (float(v) for v in lay.edge_points[e][-1])
            _add_edge(path, heads, np.array([[x, y - STUB_LENGTH], [x, y]]), True)
        out.append((path.boundingRect().adjusted(-4, -4, 4, 4), path, heads))
    return out


def _add_edge(path: QPainterPath, heads: QPainterPath, pts: np.ndarray, routed: bool) -> None:
    """A layered edge: vertical-tangent cubic between consecutive points, arrowhead at the end."""
    if len(pts) < 2:
        return
    if len(pts) > 3:
        # bends in a straight vertical run add nothing to the drawing: keep the ends of each run
        x = pts[:, 0]
        keep = np.ones(len(pts), dtype=bool)
        keep[1:-1] = ~((x[1:-1] == x[:-2]) & (x[1:-1] == x[2:]))
        pts = pts[keep]
    x0, y0 = float(pts[0, 0]), float(pts[0, 1])
    path.moveTo(x0, y0)
    for x1, y1 in pts[1:].tolist():
        dy = y1 - y0
        if not routed:     # a long edge not routed through dummies: one wide S curve
            dy = min(dy, 240.0)
        path.cubicTo(x0, y0 + dy * 0.5, x1, y1 - dy * 0.5, x1, y1)
        x0, y0 = x1, y1
    a = 4.0
    heads.addPolygon(QPolygonF([QPointF(x0, y0), QPointF(x0 - a, y0 - 2 * a), QPointF(x0 + a, y0 - 2 * a),
                                QPointF(x0, y0)]))
