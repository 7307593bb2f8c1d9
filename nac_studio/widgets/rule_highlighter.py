"""Syntax colouring by regular-expression rules, in light and dark palettes.

A subclass lists ``RULES`` (token class, pattern) and per-theme colours ``LIGHT``/``DARK``
(token class -> ``(colour, bold?, italic?)``); later rules paint over earlier ones, so strings
and comments go last. Used by the IR text (MIND) and peer text (TVMR assembly) panes.
"""
from __future__ import annotations

from PySide6.QtCore import QRegularExpression
from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat


def char_format(color: str, bold: bool = False, italic: bool = False) -> QTextCharFormat:
    f = QTextCharFormat()
    f.setForeground(QColor(color))
    if bold:
        f.setFontWeight(QFont.Weight.Bold)
    f.setFontItalic(italic)
    return f


class RuleHighlighter(QSyntaxHighlighter):
    RULES: tuple = ()
    LIGHT: dict = {}
    DARK: dict = {}

    def __init__(self, document, dark: bool = False):
        super().__init__(document)
        self.set_dark(dark)

    def set_dark(self, dark: bool) -> None:
        colors = self.DARK if dark else self.LIGHT
        self._rules = [(QRegularExpression(rx), char_format(*colors[name])) for name, rx in self.RULES]
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:
        for rx, fmt in self._rules:       # later rules (strings, comments) paint over earlier ones
            it = rx.globalMatch(text)
            while it.hasNext():
                m = it.next()
                self.setFormat(m.capturedStart(), m.capturedLength(), fmt)
