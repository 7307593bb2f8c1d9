"""A heatmap: one image in a zoomable view, with a colour-scale bar and its histogram beside it.

pyqtgraph's ``ImageView`` does this and more (a ROI plot, a timeline, normalisation controls):
building one took 50–110 ms on the UI thread here, so every inspector panel opened with a visible
stall. This is the part the inspector uses (an ``ImageItem`` in a ``ViewBox``, a
``HistogramLUTItem`` for its levels), built in about a quarter of the time.
"""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
import pyqtgraph as pg

#: How non-finite cells are drawn, over the colour map (none of these is a viridis colour, and
#: the view's background is black: a NaN left to the colour map was drawn as a hole).
NONFINITE_COLOURS = {"NaN": (255, 0, 255), "+Inf": (255, 40, 40), "−Inf": (255, 255, 255)}


def nonfinite_legend(counts: dict[str, int], cells: int) -> str:
    """Rich text naming each non-finite kind's colour and count in a slice of ``cells`` values
    ("" when there is none)."""
    if not counts:
        return ""
    if len(counts) == 1 and next(iter(counts.values())) == cells:
        kind = next(iter(counts))
        return f"{_swatch(kind)} every value of this slice ({cells:,}) is {kind}"
    return " · ".join(f"{_swatch(kind)} {kind} {n:,}" for kind, n in counts.items()) + \
        f" of {cells:,} values in this slice"


def nonfinite_masks(values: np.ndarray) -> list:
    """``(kind, mask, count)`` of each non-finite kind present in a float array ([] when none)."""
    if values.dtype.kind != "f" or np.isfinite(values).all():
        return []
    out = []
    for kind, mask in (("NaN", np.isnan(values)), ("+Inf", values == np.inf), ("−Inf", values == -np.inf)):
        n = int(np.count_nonzero(mask))
        if n:
            out.append((kind, mask, n))
    return out


def nonfinite_kind(v) -> Optional[str]:
    """"NaN", "+Inf" or "−Inf" for such a float, else None."""
    if not isinstance(v, (float, np.floating)) or np.isfinite(v):
        return None
    return "NaN" if np.isnan(v) else "+Inf" if v > 0 else "−Inf"


def _swatch(kind: str) -> str:
    r, g, b = NONFINITE_COLOURS[kind]
    # a dark outline: the white of −Inf must show on a light palette too
    return f'<span style="color:#{r:02x}{g:02x}{b:02x}; background-color:#303030">&#9632;</span>'


class Heatmap(pg.GraphicsLayoutWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.view = self.addViewBox()
        self.view.invertY(True)
        self.view.setAspectLocked(False)
        self.image = pg.ImageItem()
        self.view.addItem(self.image)
        self.marks = pg.ImageItem()           # the non-finite cells, as RGBA over the image
        self.marks.setZValue(1)
        self.marks.hide()
        self.view.addItem(self.marks)
        #: the last image's non-finite cells by kind ("NaN", "+Inf", "−Inf") -> count
        self.nonfinite: dict[str, int] = {}
        self.histogram = pg.HistogramLUTItem()
        self.histogram.setImageItem(self.image)
        # the preset, not colormap.get("viridis"): its 256 stops would be 256 gradient ticks,
        # each painted on every histogram repaint
        self.histogram.gradient.loadPreset("viridis")
        # a fixed axis width: labels that change with the levels must not resize the gradient
        # (each resize rebuilds its lookup table and repaints the histogram)
        self.histogram.axis.setWidth(44)
        self.addItem(self.histogram)

    def getView(self) -> pg.ViewBox:
        return self.view

    def setImage(self, img, *, autoRange: bool, levels: tuple, pos: Optional[tuple] = None,
                 scale: Optional[tuple] = None, finite: bool = False) -> None:
        """Show ``img`` (columns × rows, as pyqtgraph's ImageItem takes it) at ``levels``; its
        pixel (i, j) sits at ``pos + (i, j) * scale`` in the view (default: at the origin, 1:1).
        NaN and ±Inf cells are drawn in :data:`NONFINITE_COLOURS` over it, unless ``finite``
        says the caller knows there is none (a 4096² slice need not be scanned for them)."""
        x0, y0 = pos or (0, 0)
        sx, sy = scale or (1, 1)
        masks = [] if finite else nonfinite_masks(img)
        self.nonfinite = {kind: n for kind, _mask, n in masks}
        if masks:
            rgba = np.zeros(img.shape + (4,), np.uint8)
            for kind, mask, _n in masks:
                rgba[mask] = NONFINITE_COLOURS[kind] + (255,)
            self.marks.setImage(rgba, autoLevels=False)
            self.marks.setRect(x0, y0, img.shape[0] * sx, img.shape[1] * sy)
        self.marks.setVisible(bool(self.nonfinite))
        with warnings.catch_warnings():
            # the level histogram of a slice with no finite value is empty (numpy says "All-NaN")
            warnings.simplefilter("ignore", RuntimeWarning)
            self.image.setImage(img, autoLevels=False, levels=levels)
        self.image.setRect(x0, y0, img.shape[0] * sx, img.shape[1] * sy)
        self.histogram.setLevels(*levels)
        self.histogram.setHistogramRange(*levels)
        if autoRange:
            self.view.autoRange(padding=0)

    def clear(self) -> None:
        self.image.clear()
        self.marks.hide()
        self.nonfinite = {}
