"""The text form of a binary peer file (``PeerFile.disassemble()``) for the IR Text pane.

TVMR prints its assembly source (``nac dis``), hwx its register-write listing, NEFF its engine
instruction slots. Where the decoder maps lines to bytes (TVMR: ``line_of_offset`` /
``offset_of_line``) a selection moves the text cursor to its line and a click on a line selects
its instruction's bytes. TVMR's mnemonics, registers, directives and comments are coloured by a
small highlighter; the other formats' listings are shown plain.
"""
from __future__ import annotations

from typing import Optional

from ..widgets.rule_highlighter import RuleHighlighter


def text_form(peer) -> Optional[str]:
    """The peer's text form, or ``None`` (no text form, or the decoder failed on a damaged file)."""
    try:
        return peer.disassemble()
    except Exception:        # a damaged file's text form is a nicety: the byte views still show it
        return None


def line_of_offset(peer, offset: int) -> Optional[int]:
    fn = getattr(peer, "line_of_offset", None)
    return fn(offset) if fn is not None else None


def offset_of_line(peer, line: int) -> Optional[int]:
    fn = getattr(peer, "offset_of_line", None)
    return fn(line) if fn is not None else None


class TvmrHighlighter(RuleHighlighter):
    """TVMR assembly: directives, labels, mnemonics, H/C registers, numbers, strings, comments."""

    RULES = (
        ("number", r"\b(0x[0-9A-Fa-f]+|-?\d+)\b"),
        ("register", r"\b[HC]\d+\b"),
        ("mnemonic", r"^\s+(\.insn|[a-z_][a-z0-9_]*(\.[a-z0-9_]+)?)\b"),
        ("directive", r"^\s*\.[a-z_]+\b"),
        ("label", r"^[A-Za-z_][A-Za-z0-9_]*:"),
        ("string", r'"[^"]*"'),
        ("comment", r";.*$"),
    )
    LIGHT = {"number": ("#b35900",), "register": ("#1f5fbf",), "mnemonic": ("#7a2da8", True),
             "directive": ("#9a3a3a", True), "label": ("#0f7a6b", True), "string": ("#2f7d32",),
             "comment": ("#7c7c7c", False, True)}
    DARK = {"number": ("#f0a45d",), "register": ("#79a9ff",), "mnemonic": ("#d29bff", True),
            "directive": ("#ff8f8f", True), "label": ("#5fd0bd", True), "string": ("#8fd18f",),
            "comment": ("#8a8a8a", False, True)}
