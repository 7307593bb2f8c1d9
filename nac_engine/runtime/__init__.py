"""Interpreter: standard NAC kernels by hand, ATen ops by lookup, and the Session that runs OPS.

``run(nacfile, inputs=None, feeds=None) -> list[numpy.ndarray]`` for a plain run;
``Session`` for anything finer. The torch-free parts (the shape pass's front, ``input_spec``,
``expr``, the errors) import without torch: ``Session``, ``run``, ``Kernels`` and ``InputSlot``
are loaded on first use.
"""
from .errors import KernelError, MissingInputError, NacRuntimeError, NotSupported

__all__ = ["run", "Session", "Kernels", "InputSlot", "NacRuntimeError", "NotSupported",
           "MissingInputError", "KernelError"]


def __getattr__(name):
    if name in ("Session", "run", "InputSlot"):
        from . import session
        return getattr(session, name)
    if name == "Kernels":
        from .kernels import Kernels
        return Kernels
    raise AttributeError(f"module 'nac_engine.runtime' has no attribute {name!r}")
