"""Byte counts as the Studio writes them: in binary units (KiB, MiB, GiB), everywhere — the status
bar's file size, the timeline's peaks and buffers, the hardware view's SRAM (set in KiB), and the
axes that plot them (``widgets.lanes_plot.set_bytes_axis``), so a number on an axis and the same
number in a label agree."""
from __future__ import annotations


def binary_unit(n: float) -> tuple[str, int]:
    """The unit ``n`` bytes are written in, and its size in bytes: B below 1 KiB, then KiB, MiB, GiB."""
    scale = 1
    for unit in ("B", "KiB", "MiB"):
        if abs(float(n)) < 1024 * scale:
            return unit, scale
        scale *= 1024
    return "GiB", scale


def human_bytes(n: float) -> str:
    """``1,234 B``, ``150.3 MiB``."""
    unit, scale = binary_unit(n)
    return f"{n / scale:,.0f} {unit}" if unit == "B" else f"{n / scale:,.1f} {unit}"
