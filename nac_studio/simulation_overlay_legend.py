"""The colour scale of the graph's hardware overlay: what the light and the dark end mean.

The overlay (``simulation_commands``) fills each instruction's node by a value in 0..1 of the
chosen metric; this module turns the same run back into units — cycles per instruction, MACs per
cycle, percent of an instruction's cycles spent stalled — and draws a small bar in a corner of the
graph canvas: the metric's name, the gradient from 0 to the run's maximum, the two ends' values
and the observed minimum and maximum. It is a child widget of the canvas, so the canvas's own
painting and cached picture are untouched, and it is hidden whenever the overlay is cleared.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QLinearGradient, QPainter, QPen
from PySide6.QtWidgets import QWidget

from .widgets.canvas_legend import CanvasLegend

#: Light to dark: more cycles / higher utilisation / more stalling is darker (the overlay's
#: colours, ``simulation_commands.scale_color``, and this legend's bar).
SCALE = ("#fff7ec", "#fee8c8", "#fdd49e", "#fdbb84", "#fc8d59", "#ef6548", "#d7301f", "#b30000", "#7f0000")


@dataclass(frozen=True)
class OverlayScale:
    """The overlay's metric in units: colour 0 is ``zero``, colour 1 is ``full``; ``low``/``high``
    are the smallest and largest value among the run's instructions."""
    metric: str
    unit: str
    zero: float
    full: float
    low: float
    high: float

    def format(self, v: float) -> str:
        if self.unit == "%":
            return f"{v:.0f} %"
        if self.unit == "cycles":
            return f"{v:,.0f} cycles"
        return f"{v:,.3g} {self.unit}"


def overlay_scale(state) -> Optional[OverlayScale]:
    """The scale of ``state``'s (a ``SimulationState``) overlay for its current run; ``None`` when
    no overlay is shown. Mirrors ``SimulationState.overlay_values``' normalisation."""
    if state is not None and state.overlay == "measured time":
        shown = state.overlay_values()
        vals = [v for t, v in state.measured().items() if t in shown]
        if not vals:
            return None
        unit, k = ("ms", 1e3) if max(vals) >= 1e-3 else ("µs", 1e6)
        vals = [v * k for v in vals]
        return OverlayScale("measured time", unit, 0.0, max(vals), min(vals), max(vals))
    run = getattr(state, "run", None)
    if state is None or state.overlay is None or run is None:
        return None
    recs = [r for r in run.result.instructions if r.kind == "op"]
    if not recs:
        return None
    if state.overlay == "cycles":
        vals = [float(r.end_cycle - r.issue_cycle) for r in recs]
        return OverlayScale("cycles", "cycles", 0.0, max(vals) or 1.0, min(vals), max(vals))
    if state.overlay == "stall share":
        vals = [100.0 * r.stall_cycles / (r.end_cycle - r.issue_cycle) if r.end_cycle > r.issue_cycle else 0.0
                for r in recs]
        return OverlayScale("stall share", "%", 0.0, 100.0, min(vals), max(vals))
    vals = [r.macs / max(r.compute_cycles, 1) for r in recs]
    return OverlayScale("utilisation", "MAC/cycle", 0.0, max(vals) or 1.0, min(vals), max(vals))


class OverlayScaleLegend(CanvasLegend):
    """Title, gradient bar, end labels; top-left corner of the canvas (the Diff overlay's colour bar
    takes the bottom left and the minimap the bottom right)."""

    def __init__(self, canvas: QWidget):
        self.scale: Optional[OverlayScale] = None
        super().__init__(canvas, "hardwareOverlayLegend", 220, "utilisation  min 0.000 · max 1,000 MAC/cycle")

    def set_scale(self, scale: Optional[OverlayScale]) -> None:
        self.scale = scale
        if scale is None:
            self.hide()
            return
        self.setToolTip(f"Graph nodes coloured by {scale.metric} on the Hardware pane's run: lightest "
                        f"{scale.format(scale.zero)}, darkest {scale.format(scale.full)}")
        self.show()
        self.raise_()
        self.update()

    def title(self) -> str:
        s = self.scale
        if s is None:
            return ""
        return f"{s.metric}  min {s.format(s.low)} · max {s.format(s.high)}"

    def end_labels(self) -> tuple[str, str]:
        s = self.scale
        return ("", "") if s is None else (s.format(s.zero), s.format(s.full))

    def paintEvent(self, _event) -> None:
        if self.scale is None:
            return
        p = QPainter(self)
        bar, fm, text = self.paint_card(p)
        # the overlay rounds a value to the nearest of SCALE's steps (scale_color): the bar shows the
        # same steps over the same intervals
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        last = len(SCALE) - 1
        for k, c in enumerate(SCALE):
            grad.setColorAt(max(0.0, (k - 0.5) / last), QColor(c))
            grad.setColorAt(min(1.0, (k + 0.5) / last - 1e-6), QColor(c))
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QBrush(grad))
        p.drawRect(bar)
        p.setPen(text)
        left, right = self.end_labels()
        y = bar.bottom() + 3 + fm.ascent()
        p.drawText(QPointF(bar.left(), y), left)
        p.drawText(QPointF(bar.right() - fm.horizontalAdvance(right), y), right)
        s = self.scale
        span = (s.full - s.zero) or 1.0
        for v in (s.low, s.high):        # the run's extremes marked on the bar
            x = bar.left() + min(1.0, max(0.0, (v - s.zero) / span)) * bar.width()
            p.setPen(QPen(text, 2))
            p.drawLine(QPointF(x, bar.top() - 2), QPointF(x, bar.bottom() + 2))
        p.end()


__all__ = ["OverlayScale", "OverlayScaleLegend", "overlay_scale"]
