"""Interpreter: standard NAC kernels by hand, ATen ops by lookup, and the Session that runs OPS.

``run(nacfile, inputs=None, feeds=None) -> list[numpy.ndarray]`` for a plain run;
``Session`` for anything finer.
"""
from .errors import KernelError, MissingInputError, NacRuntimeError, NotSupported
from .kernels import Kernels
from .session import InputSlot, Session, run

__all__ = ["run", "Session", "Kernels", "InputSlot", "NacRuntimeError", "NotSupported",
           "MissingInputError", "KernelError"]
