"""The compiler's one error type."""
from __future__ import annotations

from typing import Optional


class CompileError(Exception):
    """A model that cannot be compiled (export failure, unsupported construct, a limit of the format).

    ``stage`` names the pipeline stage (``"export"``, ``"canonicalize"``, ``"tables"``, ``"emit"``, ...);
    ``source`` is ``"file:line: code"`` of the user's code that caused it, when known: the text
    leads with it (where to look), then says what is wrong and what to change.
    """

    def __init__(self, message: str, *, stage: str = "compile", source: Optional[str] = None):
        self.stage = stage
        self.source = source
        self.message = message
        text = message if source is None else f"{source}\n  {message}"
        super().__init__(text)
