"""A heatmap: one image in a zoomable view, with a colour-scale bar and its histogram beside it.

pyqtgraph's ``ImageView`` does this and more (a ROI plot, a timeline, normalisation controls):
building one took 50–110 ms on the UI thread here, so every inspector panel opened with a visible
stall. This is the part the inspector uses (an ``ImageItem`` in a ``ViewBox``, a
``HistogramLUTItem`` for its levels), built in about a quarter of the time.
"""
from __future__ import annotations

from typing import Optional

import pyqtgraph as pg


class Heatmap(pg.GraphicsLayoutWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.view = self.addViewBox()
        self.view.invertY(True)
        self.view.setAspectLocked(False)
        self.image = pg.ImageItem()
        self.view.addItem(self.image)
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
                 scale: Optional[tuple] = None) -> None:
        """Show ``img`` (columns × rows, as pyqtgraph's ImageItem takes it) at ``levels``; its
        pixel (i, j) sits at ``pos + (i, j) * scale`` in the view (default: at the origin, 1:1)."""
        self.image.setImage(img, autoLevels=False, levels=levels)
        x0, y0 = pos or (0, 0)
        sx, sy = scale or (1, 1)
        self.image.setRect(x0, y0, img.shape[0] * sx, img.shape[1] * sy)
        self.histogram.setLevels(*levels)
        self.histogram.setHistogramRange(*levels)
        if autoRange:
            self.view.autoRange(padding=0)

    def clear(self) -> None:
        self.image.clear()
