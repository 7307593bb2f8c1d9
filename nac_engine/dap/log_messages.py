"""Logpoint messages: text with ``{expression}`` parts, printed instead of stopping.

DAP's ``logMessage`` on a breakpoint (``max {max(abs(x))} at {v12[0, :3]}``): each ``{...}`` is
an expression of the engine's language, evaluated where the run passes the breakpoint; ``{{``
and ``}}`` are literal braces. A number (and a one-element tensor) prints as one (``%.6g``), a
larger tensor as its one-line summary (``f32[1,16] min -2 max 2 mean 0.01 NaN 0``).
"""
from __future__ import annotations

from typing import Any, Callable

from . import values as V

#: A message this long is refused (an editor sends what the user typed; the console shows it per hit).
MAX_MESSAGE = 2000


class LogMessageError(ValueError):
    pass


def parse(template: str) -> list[tuple[str, str]]:
    """``[("text", ...), ("expr", ...)]`` in order; braces must pair."""
    if len(template) > MAX_MESSAGE:
        raise LogMessageError(f"a log message of {len(template):,} characters; at most {MAX_MESSAGE:,}")
    parts: list[tuple[str, str]] = []
    text, i = [], 0
    while i < len(template):
        c = template[i]
        if c in "{}" and template[i + 1:i + 2] == c:            # {{ and }}: the brace itself
            text.append(c)
            i += 2
        elif c == "}":
            raise LogMessageError(f"'}}' at column {i + 1} closes no '{{' (write '}}}}' for a brace)")
        elif c == "{":
            end = template.find("}", i + 1)
            if end < 0:
                raise LogMessageError(f"'{{' at column {i + 1} is not closed")
            expr = template[i + 1:end].strip()
            if not expr:
                raise LogMessageError(f"'{{}}' at column {i + 1} holds no expression")
            if text:
                parts.append(("text", "".join(text)))
                text = []
            parts.append(("expr", expr))
            i = end + 1
        else:
            text.append(c)
            i += 1
    if text:
        parts.append(("text", "".join(text)))
    return parts


def check(template: str, extra_names=()) -> str:
    """Why the message cannot be used ("" when it can): its braces, or an expression that does
    not parse."""
    from ..runtime.expr import Expr, ExprError
    try:
        for kind, text in parse(template):
            if kind == "expr":
                Expr(text, frozenset(extra_names))
    except (LogMessageError, ExprError) as e:
        return str(e)
    return ""


def render(parts: list[tuple[str, str]], evaluate: Callable[[str], Any]) -> str:
    """The message with each expression's value; an expression that fails there reads
    ``<error: ...>`` (the run goes on: a logpoint never stops it)."""
    out = []
    for kind, text in parts:
        if kind == "text":
            out.append(text)
            continue
        try:
            out.append(_shown(evaluate(text)))
        except Exception as e:     # noqa: BLE001 - ExprError and the value's own errors, said in the line
            out.append(f"<error: {e}>")
    return "".join(out)


def _shown(v: Any) -> str:
    """A value as the debugger gives it (a one-element tensor already a Python number)."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.6g}"
    return V.summary(v) if V.is_tensor(v) else str(v)
