"""The Studio's own icons: small SVGs drawn for this project, tinted to the palette.

Line icons are drawn in ``currentColor``; Qt's SVG renderer has no notion of a current
colour, so the loader substitutes the palette's text colour before rendering. That is
what lets one set of files serve light and dark palettes. Icons whose colour means
something (error red, warning amber) use fixed colours and are left alone.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPainter, QPalette, QPixmap
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


def pixmap(name: str, size: int = 16, color: str | None = None) -> QPixmap:
    """The icon rendered at ``size`` logical pixels (device-pixel-ratio aware)."""
    ratio = 1.0
    app = QGuiApplication.instance()
    if app is not None:
        ratio = max(1.0, app.devicePixelRatio())
    text = _svg(name).replace("currentColor", color or _ink())
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


def icon(name: str) -> QIcon:
    """A QIcon with normal and disabled modes in the current palette's colours."""
    key = (name, _ink(), _ink(True))
    cached = _cache.get(key)
    if cached is not None:
        return cached
    ic = QIcon()
    dim = QColor(_ink(True))
    for s in _SIZES:
        ic.addPixmap(pixmap(name, s), QIcon.Mode.Normal)
        ic.addPixmap(pixmap(name, s, dim.name()), QIcon.Mode.Disabled)
    _cache[key] = ic
    return ic


def clear_cache() -> None:
    """Call after the palette changes; the next :func:`icon` call re-tints."""
    _cache.clear()
