"""Lanes on a shared x axis (ticks or cycles), drawn in batches: the MMAP timeline and the
hardware view's unit/DMA/stall lanes (pyqtgraph).

* :class:`RectBatch` is one graphics item for *all* the rectangles of a lane (or of every
  buffer bar): it paints only those in view, and when several fall into one pixel column it
  merges them into one cell per (row, pixel) (level of detail), so a 100k-instruction file
  pans as fast as a small one. Labels appear when a bar is wide enough to hold one; hovering
  a bar shows ``tooltip(index)``.
* :class:`LanesPlot` stacks plots (lanes, bars, curves) with their x axes linked and Perfetto's
  keys: **W/S** zoom around the mouse, **A/D** pan, **drag** selects a range
  (``rangeSelected``), **click** picks an x (``clicked``), the wheel zooms x. A cursor line
  (the document's tick) and an execution line (the debugger's) run through every plot.

pyqtgraph is imported with this module; views import it on first use (it costs ~0.4 s).
"""
from __future__ import annotations

import math

from typing import Callable, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QToolTip

from ..model.byte_sizes import binary_unit

#: Colour ramp for magnitudes (bytes, cycles): light to dark, colour-blind friendly (viridis stops).
RAMP = ("#fde725", "#b5de2b", "#6ece58", "#35b779", "#1f9e89", "#26828e", "#31688e", "#3e4989", "#482878",
        "#440154")
#: Above this many visible rectangles, bars narrower than a pixel are merged per pixel.
LOD_THRESHOLD = 500


def ramp_index(values: np.ndarray, lo: Optional[float] = None, hi: Optional[float] = None) -> np.ndarray:
    """Bins of ``log2(values)`` over ``RAMP`` (0 = smallest)."""
    v = np.log2(np.maximum(np.asarray(values, dtype=np.float64), 1.0))
    lo = float(v.min()) if lo is None and v.size else (np.log2(max(lo, 1)) if lo else 0.0)
    hi = float(v.max()) if hi is None and v.size else (np.log2(max(hi, 1)) if hi else 1.0)
    span = max(hi - lo, 1e-9)
    return np.clip(((v - lo) / span * (len(RAMP) - 1)).round(), 0, len(RAMP) - 1).astype(np.int16)


def set_bytes_axis(plot, label: str, top: float) -> None:
    """Label ``plot``'s left axis ``label (KiB)`` and tick it in the binary unit of ``top``, the
    unit the views write byte counts in (SRAM sizes are set in KiB; a peak reads "150.3 MiB").
    pyqtgraph's automatic prefix is decimal: a 150.3 MiB peak stood above the "157" of an axis
    in MB, and a 512 KiB capacity line at "524 kB"."""
    unit, scale = binary_unit(top)
    axis = plot.getAxis("left")
    axis.enableAutoSIPrefix(False)
    axis.setScale(1 / scale)
    plot.setLabel("left", f"{label} ({unit})")


class RectBatch(pg.GraphicsObject):
    """Rectangles ``[x0, x1) × [row + pad, row + 1 - pad)`` in one item (module docstring)."""

    def __init__(self, palette: Sequence = RAMP, pad: float = 0.12):
        super().__init__()
        self.palette = [QColor(c) for c in palette]
        self.pad = pad
        self.x0 = self.x1 = np.zeros(0)
        self.row = np.zeros(0, dtype=np.int32)
        self.color = np.zeros(0, dtype=np.int16)
        self.labels: Optional[Callable[[int], str]] = None
        self.tooltip: Optional[Callable[[int], str]] = None
        self.min_width_px = 1.0
        self.drawn = 0                 # rectangles painted last time (benchmarks, tests)
        self._bounds = QRectF()
        self.setAcceptHoverEvents(True)
        # Panning only translates the view: Qt scrolls the cached pixels and paints just the
        # strip that came into view, instead of every rectangle each frame.
        self.setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def set_data(self, x0, x1, row, color=None, *, labels=None, tooltip=None) -> None:
        self.prepareGeometryChange()
        self.x0 = np.asarray(x0, dtype=np.float64)
        self.x1 = np.maximum(np.asarray(x1, dtype=np.float64), self.x0)
        self.row = np.asarray(row, dtype=np.int32)
        self.color = np.zeros(self.x0.size, dtype=np.int16) if color is None else np.asarray(color, dtype=np.int16)
        self.labels, self.tooltip = labels, tooltip
        if self.x0.size:
            self._bounds = QRectF(float(self.x0.min()), float(self.row.min()),
                                  max(float(self.x1.max() - self.x0.min()), 1e-9),
                                  float(self.row.max() - self.row.min() + 1))
        else:
            self._bounds = QRectF()
        self.update()

    def boundingRect(self) -> QRectF:
        return QRectF(self._bounds)

    def __len__(self) -> int:
        return int(self.x0.size)

    def visible(self) -> np.ndarray:
        vr = self.viewRect()
        if vr is None or not self.x0.size:
            return np.zeros(0, dtype=np.int64)
        return np.nonzero((self.x1 >= vr.left()) & (self.x0 <= vr.right())
                          & (self.row + 1 >= vr.top()) & (self.row <= vr.bottom()))[0]

    def paint(self, p, *_args) -> None:
        idx = self.visible()
        self.drawn = 0
        if not idx.size:
            return
        pw = self.pixelWidth() or 1.0
        ph = self.pixelHeight() or 1.0
        x0, x1, row, col = self.x0[idx], self.x1[idx], self.row[idx], self.color[idx]
        width = np.maximum(x1 - x0, pw * self.min_width_px)
        if idx.size > LOD_THRESHOLD:
            # Level of detail: bars under two pixels become one cell per (row, pixel column),
            # coloured by the largest value that fell into it.
            narrow = width < 2 * pw
            if narrow.any():
                left = self.viewRect().left()
                px = np.floor((x0[narrow] - left) / pw).astype(np.int64)
                key = row[narrow].astype(np.int64) * (1 << 32) + (px - px.min())
                order = np.argsort(key, kind="stable")
                key_s = key[order]
                starts = np.nonzero(np.r_[True, key_s[1:] != key_s[:-1]])[0]
                cell_col = np.maximum.reduceat(col[narrow][order], starts)
                cell_px = px[order][starts]
                cell_row = row[narrow][order][starts]
                # Runs of neighbouring cells on one row with one colour become one rectangle.
                brk = np.r_[True, (cell_row[1:] != cell_row[:-1]) | (cell_px[1:] != cell_px[:-1] + 1)
                            | (cell_col[1:] != cell_col[:-1])]
                run_start = np.nonzero(brk)[0]
                run_len = np.diff(np.r_[run_start, cell_px.size])
                wide = ~narrow
                x0 = np.r_[x0[wide], left + cell_px[run_start] * pw]
                width = np.r_[width[wide], run_len * pw]
                row = np.r_[row[wide], cell_row[run_start]]
                col = np.r_[col[wide], cell_col[run_start]]
                idx = np.r_[idx[wide], np.full(run_start.size, -1)]
        p.setPen(Qt.PenStyle.NoPen)
        h = 1.0 - 2 * self.pad
        for c in np.unique(col):
            sel = np.nonzero(col == c)[0]
            p.setBrush(QBrush(self.palette[int(c) % len(self.palette)]))
            p.drawRects([QRectF(float(a), float(r) + self.pad, float(w), h)
                         for a, r, w in zip(x0[sel], row[sel], width[sel])])
            self.drawn += int(sel.size)
        if self.labels is not None and self.drawn <= 400:
            self._paint_labels(p, idx, x0, width, row, col, pw, ph)

    def _paint_labels(self, p, idx, x0, width, row, col, pw, ph) -> None:
        # Text in device pixels: undo the view's scaling around each label's anchor; dark text
        # on light fills, white on dark ones.
        p.save()
        ink = [QColor("#1a1a1a") if c.lightness() > 140 else QColor("#ffffff") for c in self.palette]
        font = p.font()
        font.setPointSizeF(7.5)
        p.setFont(font)
        for k, a, w, r, c in zip(idx, x0, width, row, col):
            if k < 0 or w / pw < 34:
                continue
            text = self.labels(int(k))
            if not text:
                continue
            p.setPen(QPen(ink[int(c) % len(ink)]))
            p.save()
            p.translate(QPointF(float(a), float(r) + 0.5))
            p.scale(pw, ph)
            p.drawText(QRectF(3, -8, w / pw - 6, 16), int(Qt.AlignmentFlag.AlignVCenter), text)
            p.restore()
        p.restore()

    def index_at(self, x: float, y: float) -> Optional[int]:
        if not self.x0.size:
            return None
        hit = np.nonzero((self.x0 <= x) & (np.maximum(self.x1, self.x0 + (self.pixelWidth() or 0)) > x)
                         & (self.row <= y) & (self.row + 1 > y))[0]
        return int(hit[-1]) if hit.size else None      # the one drawn last is on top

    def hoverMoveEvent(self, ev) -> None:
        if self.tooltip is None:
            return
        pos = ev.pos()
        k = self.index_at(pos.x(), pos.y())
        text = self.tooltip(k) if k is not None else ""
        if text:
            QToolTip.showText(ev.screenPos(), text)
        else:
            QToolTip.hideText()

    def hoverLeaveEvent(self, ev) -> None:
        QToolTip.hideText()


class _LanesViewBox(pg.ViewBox):
    """Left drag selects an x range; click picks an x; the wheel zooms x only."""

    def __init__(self, owner: "LanesPlot", **kw):
        super().__init__(**kw)
        self.owner = owner
        self.setMouseEnabled(x=True, y=False)

    def mouseDragEvent(self, ev, axis=None) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return super().mouseDragEvent(ev, axis)
        ev.accept()
        a = self.mapSceneToView(ev.buttonDownScenePos()).x()
        b = self.mapSceneToView(ev.scenePos()).x()
        self.owner._drag(min(a, b), max(a, b), ev.isFinish())

    def mouseClickEvent(self, ev) -> None:
        if ev.button() == Qt.MouseButton.LeftButton:
            ev.accept()
            pt = self.mapSceneToView(ev.scenePos())
            self.owner.clicked.emit(float(pt.x()), self.owner.key_of(self), float(pt.y()))
            return
        super().mouseClickEvent(ev)


def count_labels(values: Sequence[float], spacing: float) -> list[str]:
    """Axis labels for counts (ticks, cycles): one unit for the whole axis, picked by its
    largest value, and as many decimals as the spacing needs (``10M 20M``, ``0.5M 1.0M``)
    instead of pyqtgraph's ``1e+07``."""
    top = max((abs(v) for v in values), default=0.0)
    div, suffix = next(((d, u) for d, u in ((1e9, "G"), (1e6, "M"), (1e3, "k")) if top >= d), (1.0, ""))
    step = spacing / div if spacing > 0 else 1.0
    decimals = 0
    while decimals < 3 and abs(step * 10 ** decimals - round(step * 10 ** decimals)) > 1e-6:
        decimals += 1
    return ["0" if v == 0 else f"{v / div:.{decimals}f}{suffix}" for v in values]


class _CountAxis(pg.AxisItem):
    def tickStrings(self, values, scale, spacing):
        return count_labels([v * scale for v in values], spacing * scale)


#: Pixels of a lane plot besides its lanes (the view box's padding, the hidden bottom axis).
LANE_PLOT_MARGIN = 14


class LanesPlot(pg.GraphicsLayoutWidget):
    clicked = Signal(float, str, float)          # x, plot key, y
    rangeSelected = Signal(float, float, bool)   # x0, x1, finished

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setBackground(None)
        self.plots: dict[str, pg.PlotItem] = {}
        self.cursors: dict[str, pg.InfiniteLine] = {}
        self.exec_lines: dict[str, pg.InfiniteLine] = {}
        self.regions: dict[str, pg.LinearRegionItem] = {}
        self.selected_range: Optional[tuple[float, float]] = None
        self._first: Optional[pg.PlotItem] = None
        self._row = 0
        self.x_limits = (0.0, 1.0)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    # -- building ------------------------------------------------------------------------
    def add_plot(self, key: str, *, stretch: int = 1, y_mouse: bool = False, lanes: Sequence[str] = (),
                 left_label: str = "") -> pg.PlotItem:
        vb = _LanesViewBox(self)
        vb.setMouseEnabled(x=True, y=y_mouse)
        plot = self.addPlot(row=self._row, col=0, viewBox=vb, axisItems={"bottom": _CountAxis("bottom")})
        self.ci.layout.setRowStretchFactor(self._row, stretch)
        plot.layout_row = self._row
        self._row += 1
        plot.hideButtons()
        plot.setMenuEnabled(False)
        plot.getAxis("left").setWidth(92)
        if left_label:
            plot.setLabel("left", left_label)
        if lanes:
            self.set_lanes(plot, lanes, named=len(lanes))
        if self._first is None:
            self._first = plot
        else:
            plot.setXLink(self._first)
        if self._first is not plot:
            self._first.getAxis("bottom").setStyle(showValues=False)
            for other in self.plots.values():
                other.getAxis("bottom").setStyle(showValues=False)
        cursor = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#d62728", width=1.5))
        cursor.setZValue(50)
        cursor.hide()
        execl = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#2ca02c", width=2, style=Qt.PenStyle.DashLine))
        execl.setZValue(49)
        execl.hide()
        region = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(80, 140, 255, 45),
                                     pen=pg.mkPen(80, 140, 255, 140))
        region.setZValue(40)
        region.hide()
        for item in (cursor, execl, region):
            plot.addItem(item, ignoreBounds=True)
        self.plots[key] = plot
        self.cursors[key], self.exec_lines[key], self.regions[key] = cursor, execl, region
        return plot

    def set_lanes(self, plot, names: Sequence[str], named: int = 0) -> None:
        """``named``: lanes whose names the plot keeps room for whatever height the stretch
        factors leave it (a short dock then shrinks the plots below, not these names); lanes
        beyond it are thinned out when the plot is short."""
        plot.lane_names = list(names)
        self.ci.layout.setRowMinimumHeight(plot.layout_row, min(len(names), named) * self.fontMetrics().height()
                                           + (LANE_PLOT_MARGIN if named else 0))
        self._label_lanes(plot)
        plot.setYRange(0, max(len(names), 1), padding=0.02)
        plot.getViewBox().invertY(True)
        if not getattr(plot, "lanes_follow_height", False):     # relabelled as its height changes
            plot.getViewBox().sigResized.connect(lambda _vb, p=plot: self._label_lanes(p))
            plot.lanes_follow_height = True

    def _label_lanes(self, plot) -> None:
        """Name every lane when the plot is tall enough for a line of text per lane; in a short
        plot every k-th (labels drawn over each other are read as none; a bar's tooltip names its
        lane either way)."""
        names = getattr(plot, "lane_names", [])
        per_lane = plot.getViewBox().height() / max(len(names), 1)
        step = max(1, math.ceil(self.fontMetrics().height() / per_lane)) if per_lane > 0 else 1
        plot.getAxis("left").setTicks([[(i + 0.5, n) for i, n in enumerate(names) if i % step == 0]])

    def key_of(self, vb) -> str:
        return next((k for k, p in self.plots.items() if p.getViewBox() is vb), "")

    def set_x_limits(self, lo: float, hi: float) -> None:
        self.x_limits = (float(lo), float(max(hi, lo + 1)))
        pad = (self.x_limits[1] - self.x_limits[0]) * 0.02
        for p in self.plots.values():
            p.getViewBox().setLimits(xMin=lo - pad, xMax=hi + pad)

    def show_all(self) -> None:
        if self._first is not None:
            self._first.setXRange(*self.x_limits, padding=0.01)

    # -- cursors and ranges -------------------------------------------------------------------
    def set_cursor(self, x: Optional[float], *, follow: bool = True) -> None:
        for line in self.cursors.values():
            if x is None:
                line.hide()
            else:
                line.setValue(x)
                line.show()
        if x is not None and follow:
            self.ensure_visible(x)

    def set_exec_cursor(self, x: Optional[float], *, follow: bool = True) -> None:
        """The execution point's line (None: no run stopped), brought into view by default."""
        for line in self.exec_lines.values():
            if x is None:
                line.hide()
            else:
                line.setValue(x)
                line.show()
        if x is not None and follow:
            self.ensure_visible(x)

    def ensure_visible(self, x: float) -> None:
        if self._first is None:
            return
        lo, hi = self.x_range()
        if lo <= x <= hi:
            return
        w = hi - lo
        self._first.setXRange(x - w / 2, x + w / 2, padding=0)

    def x_range(self) -> tuple[float, float]:
        if self._first is None:
            return (0.0, 1.0)
        lo, hi = self._first.getViewBox().viewRange()[0]
        return float(lo), float(hi)

    def set_region(self, x0: Optional[float], x1: Optional[float] = None) -> None:
        self.selected_range = None if x0 is None else (float(x0), float(x1))
        for reg in self.regions.values():
            if x0 is None:
                reg.hide()
            else:
                reg.setRegion((x0, x1))
                reg.show()

    def _drag(self, x0: float, x1: float, finished: bool) -> None:
        self.set_region(x0, x1)
        self.rangeSelected.emit(x0, x1, finished)

    # -- keys (Perfetto) -----------------------------------------------------------------------
    def zoom(self, factor: float, center: Optional[float] = None) -> None:
        lo, hi = self.x_range()
        c = (lo + hi) / 2 if center is None else center
        self._first.setXRange(c - (c - lo) * factor, c + (hi - c) * factor, padding=0)

    def pan(self, fraction: float) -> None:
        lo, hi = self.x_range()
        d = (hi - lo) * fraction
        self._first.setXRange(lo + d, hi + d, padding=0)

    def _mouse_x(self) -> Optional[float]:
        if self._first is None:
            return None
        pos = self.mapFromGlobal(self.cursor().pos())
        if not self.rect().contains(pos):
            return None
        x = self._first.getViewBox().mapSceneToView(self.mapToScene(pos)).x()
        lo, hi = self.x_range()
        return x if lo <= x <= hi else None

    def keyPressEvent(self, ev) -> None:
        key = ev.key()
        if key == Qt.Key.Key_W:
            self.zoom(0.7, self._mouse_x())
        elif key == Qt.Key.Key_S:
            self.zoom(1 / 0.7, self._mouse_x())
        elif key == Qt.Key.Key_A:
            self.pan(-0.2)
        elif key == Qt.Key.Key_D:
            self.pan(0.2)
        elif key == Qt.Key.Key_Escape:
            self.set_region(None)
        else:
            super().keyPressEvent(ev)
            return
        ev.accept()

    # -- export --------------------------------------------------------------------------------
    def export(self, path: str) -> None:
        """PNG or SVG (by extension) of every plot, as shown; written atomically."""
        export_scene(self.scene(), path)


def export_scene(scene, path: str) -> None:
    """A pyqtgraph scene to PNG or SVG (by extension), written whole (``image_files``)."""
    import pyqtgraph.exporters as ex

    from nac_engine.format.writer import atomic_write

    from .image_files import png_bytes, svg_bytes
    if str(path).lower().endswith(".svg"):
        # Qt's own SVG generator: pyqtgraph's SVG exporter fails on batched rectangle paths
        rect = scene.sceneRect()
        data = svg_bytes(rect.size().toSize(), rect, lambda painter: scene.render(painter, rect, rect), "NAC Studio")
    else:
        data = png_bytes(ex.ImageExporter(scene).export(toBytes=True))
    atomic_write(str(path), data)


__all__ = ["LOD_THRESHOLD", "RAMP", "LanesPlot", "RectBatch", "export_scene", "ramp_index"]
