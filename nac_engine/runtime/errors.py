"""Errors raised while executing a NAC file."""
from __future__ import annotations


class NacRuntimeError(RuntimeError):
    """Base class of everything the interpreter raises about a file or its inputs."""


class NotSupported(NacRuntimeError):
    """The file uses something the spec leaves undefined or the interpreter cannot execute.

    ``tick`` is the instruction index (None when not tied to one instruction)."""

    def __init__(self, message: str, tick: int | None = None):
        super().__init__(message if tick is None else f"instruction {tick}: {message}")
        self.tick = tick


class InputShapeError(NacRuntimeError):
    """A given input's shape is not the one the file was compiled for (its shapes are fixed)."""


class MissingInputError(NacRuntimeError):
    """One or more ``<INPUT>`` values were not supplied.

    ``missing`` is a list of :class:`InputSlot` descriptions (see ``session.py``)."""

    def __init__(self, message: str, missing: list):
        super().__init__(message)
        self.missing = missing


class KernelError(NacRuntimeError):
    """A kernel raised; the message names the tick, op and the arguments' shapes/dtypes."""

    def __init__(self, message: str, tick: int | None = None, op: str | None = None):
        super().__init__(message)
        self.tick = tick
        self.op = op


class CoercionError(KernelError):
    """A stored constant cannot be converted exactly to the type the op uses it as (a float
    1.5 where a dim is meant): names the tick, the op, the argument and both types."""

    def __init__(self, tick: int | None, op: str | None, argument: str, stored: object, wanted: str):
        super().__init__(f"instruction {tick}: {op} argument {argument}: stored "
                         f"{type(stored).__name__} {stored!r} cannot be used as {wanted} exactly",
                         tick, op)
        self.argument = argument
        self.stored = stored
        self.wanted = wanted
