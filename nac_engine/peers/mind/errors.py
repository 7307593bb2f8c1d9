"""The one error type of the MIND Core IR package: a :class:`NacFormatError` with line and column.

Syntax errors (the parser) and verification problems (the verifier) are both :class:`MindError`;
a verification problem also carries its rule's stable ``code`` (``E4003``…) and ``rule`` name.
``section`` reads ``"L:C"`` so the CLI and the Problems view show where without knowing the format.
"""
from __future__ import annotations

from typing import Optional

from ...errors import NacFormatError


class MindError(NacFormatError):
    def __init__(self, line: int, column: int, offset: int, reason: str, *, code: Optional[str] = None,
                 rule: Optional[str] = None, length: int = 0, severity: str = "error"):
        self.line = int(line)
        self.column = int(column)
        self.code = code
        self.rule = rule
        self.length = int(length)
        self.severity = severity
        text = f"{code}: {reason}" if code else reason
        super().__init__(f"{self.line}:{self.column}", offset, text)

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.reason}"

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(line=self.line, column=self.column, code=self.code, rule=self.rule, length=self.length,
                 severity=self.severity)
        return d
