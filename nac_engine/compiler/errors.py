"""The compiler's one error type."""
from __future__ import annotations

from typing import Optional


class CompileError(Exception):
    """A model that cannot be compiled (export failure, unsupported construct, a limit of the format).

    ``stage`` names the pipeline stage (``"export"``, ``"canonicalize"``, ``"tables"``, ``"emit"``, ...);
    ``source`` is ``"file:line: code"`` of the user's code that caused it, when known.
    """

    def __init__(self, message: str, *, stage: str = "compile", source: Optional[str] = None):
        self.stage = stage
        self.source = source
        self.message = message
        text = message if source is None else f"{message}\n  at {source}"
        super().__init__(text)
