"""NAC engine: codec, ISA tools, interpreter, compiler and simulator for the NAC format.

Pure Python/numpy/torch; never imports Qt. The interpreter (``Session``, ``run``) loads
torch, so it is imported on first use: the codec and the ``nac`` CLI start fast.
"""
from .errors import NacEncodeError, NacFormatError
from .format import NacFile, read, write
from .format.verify import verify

__all__ = ["read", "write", "verify", "NacFile", "NacFormatError", "NacEncodeError", "Session", "run", "compile"]
__version__ = "0.1.0"


def __getattr__(name):
    if name in ("Session", "run"):
        from . import runtime
        return getattr(runtime, name)
    if name == "compile":
        from .compiler import compile
        return compile
    raise AttributeError(f"module 'nac_engine' has no attribute {name!r}")
