"""How a diff's errors look on the graph: a green → yellow → red scale over log10 of the error,
the overlay layer built from a :class:`~nac_engine.diff.DiffResult`, and the colour bar
that names the scale on the canvas.

The colour is the result's own metric (the one its tolerance applies to: max abs, relative, or
1 − cosine), so "red" and "over the tolerance" agree with the Diff pane's table. The scale spans
fixed decades (``DECADES``): float32 round-off (~1e-7) sits at the green end, an error as large as
the value itself at the red end, and the tolerance is marked on the bar. A pair that is not
comparable (shapes differ, not a tensor) and every unmatched node are left untouched.
"""
from __future__ import annotations

import math
from typing import Optional

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QLinearGradient, QPainter, QPen
from PySide6.QtWidgets import QWidget

from .widgets.canvas_legend import CanvasLegend

LAYER = "diff.error"
#: log10 of the error at the two ends of the scale.
DECADES = (-8.0, 0.0)
#: ColorBrewer RdYlGn, reversed: low error green, high red.
STOPS = ("#1a9850", "#91cf60", "#d9ef8b", "#fee08b", "#fc8d59", "#d73027")
NOT_FINITE = QColor("#7b1fa2")      # NaN/Inf error: off the scale
METRIC_TITLES = {"max_abs": "max abs error", "relative": "relative error", "cosine": "1 − cosine"}


def scale_position(error: float) -> float:
    """Where ``error`` sits on the scale, 0 (green end) .. 1 (red end); 0 for an exact match."""
    if error <= 0:
        return 0.0
    lo, hi = DECADES
    return min(1.0, max(0.0, (math.log10(error) - lo) / (hi - lo)))


def error_color(error: Optional[float]) -> Optional[QColor]:
    """The fill for an error (``None``: not comparable, leave the node alone)."""
    if error is None:
        return None
    if not math.isfinite(error):
        return QColor(NOT_FINITE)
    x = scale_position(error) * (len(STOPS) - 1)
    k = min(int(x), len(STOPS) - 2)
    a, b, f = QColor(STOPS[k]), QColor(STOPS[k + 1]), x - k
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * f, a.greenF() + (b.greenF() - a.greenF()) * f,
                           a.blueF() + (b.blueF() - a.blueF()) * f)


def overlay_styles(result) -> dict:
    """Tick → (fill, outline, badge) for the graph canvas: each matched value filled by its error,
    a red frame on values over the tolerance, a "≠" badge on the first divergence. Ticks are
    ordered by error so that on a collapsed block (several ticks, one node) the worst one wins
    (the canvas draws the last fill given)."""
    if result is None:
        return {}
    rated = [(p.metric(result.metric), p) for p in result.pairs]
    rated = [(e, p) for e, p in rated if e is not None]
    rated.sort(key=lambda ep: ep[0] if math.isfinite(ep[0]) else math.inf)     # NaN/Inf last: the worst
    first = result.first_divergence
    frame = QColor("#b2182b")
    out = {}
    for e, p in rated:
        out[p.tick_a] = (error_color(e), frame if p.diverges else None, "≠" if p is first else None)
    return out


class ErrorScaleLegend(CanvasLegend):
    """The colour bar, bottom left of the graph canvas: title, gradient, decade labels and the
    tolerance mark."""

    def __init__(self, canvas: QWidget):
        self.metric_name = "relative"     # not "metric": QPaintDevice.metric() is what QPainter calls
        self.tolerance: Optional[float] = None
        super().__init__(canvas, "diffErrorLegend", 190, "log10 max abs error  (tol 1e-03)")

    def set_scale(self, metric: str, tolerance: Optional[float]) -> None:
        self.metric_name, self.tolerance = metric, tolerance
        self.setToolTip(f"Graph nodes coloured by log10 of the {METRIC_TITLES.get(metric, metric)} against the "
                        "compared file; red frame: over the tolerance; ≠: first divergence; purple: NaN/Inf")
        self.update()

    def title(self) -> str:
        tol = f"  (tol {self.tolerance:.0e})" if self.tolerance else ""
        return f"log10 {METRIC_TITLES.get(self.metric_name, self.metric_name)}{tol}"

    def place(self) -> None:
        """Bottom-left corner of the canvas (the minimap takes the bottom right)."""
        parent = self.parentWidget()
        if parent is not None:
            self.move(self.MARGIN, parent.height() - self.height() - self.MARGIN)

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        bar, fm, text = self.paint_card(p)
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        for k, c in enumerate(STOPS):
            grad.setColorAt(k / (len(STOPS) - 1), QColor(c))
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QBrush(grad))
        p.drawRect(bar)
        lo, hi = DECADES
        p.setPen(text)
        for d in range(int(lo), int(hi) + 1, 2):
            x = bar.left() + (d - lo) / (hi - lo) * bar.width()
            p.drawLine(QPointF(x, bar.bottom()), QPointF(x, bar.bottom() + 2))
            label = str(d)
            w = fm.horizontalAdvance(label)
            p.drawText(QPointF(min(max(x - w / 2, 2), self.width() - w - 2), bar.bottom() + 3 + fm.ascent()), label)
        if self.tolerance:
            x = bar.left() + scale_position(self.tolerance) * bar.width()
            p.setPen(QPen(text, 2))
            p.drawLine(QPointF(x, bar.top() - 2), QPointF(x, bar.bottom() + 2))
        p.end()


__all__ = ["LAYER", "DECADES", "ErrorScaleLegend", "error_color", "overlay_styles", "scale_position"]
