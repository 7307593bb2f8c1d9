"""The images the Studio writes (graph and plot exports, window screenshots): encoded in memory,
then written whole through the engine's atomic write. A failed or interrupted export leaves the
file that was there, and a path that is not a regular file (a FIFO a user picked by mistake) is
refused with ``OSError`` instead of blocking the window on an open that never returns.
:func:`could_not_write` is how every export (images, CSV, traces, ``.npy``) says it failed."""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, QSize
from PySide6.QtGui import QPainter

from nac_engine.format.writer import atomic_write


def could_not_write(path: str, exc: OSError) -> str:
    """The one line a failed export shows the user."""
    return f"Could not write {path}: {exc.strerror or exc}"


def png_bytes(image) -> bytes:
    """A QImage or QPixmap as PNG bytes."""
    buf = QByteArray()
    dev = QBuffer(buf)
    dev.open(QIODevice.OpenModeFlag.WriteOnly)
    ok = image.save(dev, "PNG")
    dev.close()
    if not ok:
        raise OSError("the image could not be encoded as PNG")
    return bytes(buf.data())


def svg_bytes(size: QSize, view_box: QRectF, paint: Callable[[QPainter], None], title: str,
              description: str = "Exported from NAC Studio") -> bytes:
    """What ``paint(painter)`` draws, as an SVG document of ``size`` showing ``view_box``."""
    from PySide6.QtSvg import QSvgGenerator
    buf = QByteArray()
    dev = QBuffer(buf)
    dev.open(QIODevice.OpenModeFlag.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(dev)
    gen.setSize(size)
    gen.setViewBox(view_box)
    gen.setTitle(title)
    gen.setDescription(description)
    painter = QPainter(gen)
    try:
        paint(painter)
    finally:
        painter.end()
        dev.close()
    return bytes(buf.data())


def write_png(image, path: str) -> None:
    """``image`` (QImage or QPixmap) to ``path`` as PNG, all or nothing; ``OSError`` when it cannot."""
    atomic_write(str(path), png_bytes(image))
