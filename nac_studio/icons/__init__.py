"""The Studio's own icons: small SVGs drawn for this project, tinted to the palette.

Line icons are drawn in ``currentColor``; Qt's SVG renderer has no notion of a current
colour, so the loader substitutes the palette's text colour before rendering. That is
what lets one set of files serve light and dark palettes. Icons whose colour means
something (error red, warning amber) use fixed colours and are left alone.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QGuiApplication, QIcon, QIconEngine, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

HERE = Path(__file__).resolve().parent
_SIZES = (16, 20, 24, 32, 48)


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.svg"))


def _ink(disabled: bool = False) -> str:
    pal = QGuiApplication.palette()
    group = QPalette.ColorGroup.Disabled if disabled else QPalette.ColorGroup.Active
    return pal.color(group, QPalette.ColorRole.WindowText).name()


@lru_cache(maxsize=64)
def _svg(name: str) -> str:
    path = HERE / f"{name}.svg"
    if not path.is_file():
        raise KeyError(f"no icon named {name!r} in {HERE}")
    return path.read_text(encoding="utf-8")


_FIXED_COLOUR = re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b")


def pixmap(name: str, size: int = 16, color: str | None = None, flat: bool = False) -> QPixmap:
    """The icon rendered at ``size`` logical pixels (device-pixel-ratio aware). ``flat``: every
    colour, the fixed ones too, drawn in ``color`` (a disabled icon: a green Continue that keeps
    its green looks as if F5 would run)."""
    ratio = 1.0
    app = QGuiApplication.instance()
    if app is not None:
        ratio = max(1.0, app.devicePixelRatio())
    text = _svg(name).replace("currentColor", color or _ink())
    if flat:
        text = _FIXED_COLOUR.sub(color or _ink(), text)
    renderer = QSvgRenderer(QByteArray(text.encode("utf-8")))
    side = int(round(size * ratio))
    pm = QPixmap(side, side)
    pm.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pm)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, side, side))
    painter.end()
    pm.setDevicePixelRatio(ratio)
    return pm


_cache: dict[tuple, QIcon] = {}
_engines: list = []      # the Python engines stay alive as long as their icons can be used


class _TintedIconEngine(QIconEngine):
    """Renders an icon's SVG at the size and mode asked for, when first asked, then keeps
    it: a theme switch re-tints a couple of hundred icons, and rendering every size of
    every one up front (as ``addPixmap`` needs) took half a second of UI thread."""

    def __init__(self, name: str, ink: str, dim: str):
        super().__init__()
        self.name, self.ink, self.dim = name, ink, dim
        self._pixmaps: dict[tuple, QPixmap] = {}

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:  # noqa: N802
        side = max(1, min(size.width(), size.height()))
        disabled = mode == QIcon.Mode.Disabled
        key = (side, disabled)
        pm = self._pixmaps.get(key)
        if pm is None:
            pm = pixmap(self.name, side, self.dim if disabled else self.ink, flat=disabled)
            self._pixmaps[key] = pm
        return pm

    def paint(self, painter: QPainter, rect, mode: QIcon.Mode, state: QIcon.State) -> None:
        painter.drawPixmap(rect, self.pixmap(rect.size(), mode, state))

    def actualSize(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QSize:  # noqa: N802
        side = min(size.width(), size.height())
        return QSize(side, side)

    def availableSizes(self, mode=QIcon.Mode.Normal, state=QIcon.State.Off) -> list:  # noqa: N802
        return [QSize(s, s) for s in _SIZES]

    def clone(self) -> "QIconEngine":
        twin = _TintedIconEngine(self.name, self.ink, self.dim)
        _engines.append(twin)
        return twin


def icon(name: str) -> QIcon:
    """A QIcon with normal and disabled modes in the current palette's colours (cached
    per colour pair, so switching back to a theme costs nothing)."""
    key = (name, _ink(), _ink(True))
    cached = _cache.get(key)
    if cached is not None:
        return cached
    _svg(name)      # an unknown name is a KeyError here, as before, not a blank icon later
    engine = _TintedIconEngine(name, key[1], key[2])
    _engines.append(engine)
    ic = QIcon(engine)
    _cache[key] = ic
    return ic


def clear_cache() -> None:
    """Kept for callers from before the cache was keyed by colour: icons in the new
    palette's colours are made on the next :func:`icon` call either way."""
