"""Colours and fonts shared by the views, derived from the current palette.

The Studio follows the system light/dark scheme: Qt reports it through
``QStyleHints.colorScheme()``; where the platform says nothing (offscreen, many X11
desktops) the palette's own lightness decides. Views ask :func:`is_dark` when painting
instead of storing colours, so a scheme change repaints correctly.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPalette

# One hue per section tag, so a section has the same colour in the hex view, the
# section strip and the structure tree.
SECTION_HUES = {
    "header": 215, "MMAP": 170, "OPS": 205, "CMAP": 265, "CNST": 320, "PERM": 32,
    "DATA": 125, "PROC": 52, "ORCH": 190, "RSRC": 15, "TRNG": 340, "ARRS": 85,
}
UNPARSED_HUE = 0


def is_dark(palette: QPalette | None = None) -> bool:
    pal = palette or QGuiApplication.palette()
    return pal.color(QPalette.ColorRole.Window).lightness() < 128


def section_color(tag: str, palette: QPalette | None = None, strong: bool = False) -> QColor:
    """Background tint for a section's bytes (``strong``: the chip in a legend)."""
    dark = is_dark(palette)
    if tag == "unparsed":
        return QColor.fromHsl(UNPARSED_HUE, 200, 70 if dark else 205) if not strong else QColor("#d23c3c")
    hue = SECTION_HUES.get(tag, (sum(map(ord, tag)) * 37) % 360)
    if strong:
        return QColor.fromHsl(hue, 150, 110 if dark else 150)
    return QColor.fromHsl(hue, 90 if dark else 150, 48 if dark else 234)


def mono_font(point_delta: float = 0.0) -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setStyleHint(QFont.StyleHint.Monospace)
    font.setFixedPitch(True)
    app_font = QGuiApplication.font()
    size = app_font.pointSizeF() if app_font.pointSizeF() > 0 else 10.0
    font.setPointSizeF(size + point_delta)
    return font


def dark_palette() -> QPalette:
    """A neutral dark palette for Fusion (used when the platform reports a dark scheme
    but offers no palette, and for ``--theme dark``)."""
    pal = QPalette()
    window = QColor(37, 39, 43)
    base = QColor(28, 30, 33)
    text = QColor(222, 224, 228)
    roles = {
        QPalette.ColorRole.Window: window, QPalette.ColorRole.WindowText: text,
        QPalette.ColorRole.Base: base, QPalette.ColorRole.AlternateBase: QColor(33, 35, 39),
        QPalette.ColorRole.ToolTipBase: QColor(48, 50, 55), QPalette.ColorRole.ToolTipText: text,
        QPalette.ColorRole.PlaceholderText: QColor(130, 134, 140),
        QPalette.ColorRole.Text: text, QPalette.ColorRole.Button: QColor(45, 47, 52),
        QPalette.ColorRole.ButtonText: text, QPalette.ColorRole.BrightText: QColor(255, 90, 90),
        QPalette.ColorRole.Light: QColor(70, 72, 78), QPalette.ColorRole.Midlight: QColor(55, 57, 62),
        QPalette.ColorRole.Mid: QColor(60, 62, 68), QPalette.ColorRole.Dark: QColor(22, 23, 26),
        QPalette.ColorRole.Shadow: QColor(10, 10, 12),
        QPalette.ColorRole.Highlight: QColor(56, 117, 215), QPalette.ColorRole.HighlightedText: QColor(255, 255, 255),
        QPalette.ColorRole.Link: QColor(110, 160, 240), QPalette.ColorRole.LinkVisited: QColor(160, 130, 230),
    }
    for role, color in roles.items():
        pal.setColor(QPalette.ColorGroup.All, role, color)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor(120, 123, 130))
    return pal


def light_palette() -> QPalette:
    pal = QPalette()
    roles = {
        QPalette.ColorRole.Window: QColor(242, 243, 245), QPalette.ColorRole.WindowText: QColor(28, 30, 34),
        QPalette.ColorRole.Base: QColor(255, 255, 255), QPalette.ColorRole.AlternateBase: QColor(246, 247, 249),
        QPalette.ColorRole.Text: QColor(28, 30, 34), QPalette.ColorRole.Button: QColor(236, 237, 240),
        QPalette.ColorRole.ButtonText: QColor(28, 30, 34), QPalette.ColorRole.Highlight: QColor(47, 111, 214),
        QPalette.ColorRole.HighlightedText: QColor(255, 255, 255),
        QPalette.ColorRole.ToolTipBase: QColor(255, 255, 240), QPalette.ColorRole.ToolTipText: QColor(20, 20, 20),
        QPalette.ColorRole.PlaceholderText: QColor(140, 144, 150),
        QPalette.ColorRole.Light: QColor(255, 255, 255), QPalette.ColorRole.Midlight: QColor(228, 229, 232),
        QPalette.ColorRole.Mid: QColor(200, 202, 206), QPalette.ColorRole.Dark: QColor(160, 162, 166),
        QPalette.ColorRole.Link: QColor(30, 100, 200),
    }
    for role, color in roles.items():
        pal.setColor(QPalette.ColorGroup.All, role, color)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor(150, 153, 158))
    return pal


def system_scheme_dark() -> bool | None:
    """True/False when the platform reports a scheme, ``None`` when it does not."""
    hints = QGuiApplication.styleHints()
    scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else Qt.ColorScheme.Unknown
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return None


_platform_palette: QPalette | None = None


def apply_theme(app, mode: str = "system") -> bool:
    """Fusion style plus a light or dark palette; returns whether the result is dark.

    ``mode``: ``"light"``, ``"dark"``, or ``"system"``: the Studio's light/dark palette
    when the platform reports a scheme, else the platform's own palette untouched (a
    desktop theme without a scheme hint still decides the colours).
    """
    global _platform_palette
    if _platform_palette is None:
        _platform_palette = QPalette(app.palette())
    style = app.style()
    if style is None or style.name().lower() != "fusion":
        app.setStyle("Fusion")     # setting it again re-polishes every widget: 70 ms for nothing
    if mode == "system":
        reported = system_scheme_dark()
        if reported is None:
            app.setPalette(_platform_palette)
            return is_dark(_platform_palette)
        dark = reported
    else:
        dark = mode == "dark"
    app.setPalette(dark_palette() if dark else light_palette())
    return dark
