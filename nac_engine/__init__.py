"""NAC engine: codec, ISA tools, interpreter, compiler and simulator for the NAC format.

Pure Python/numpy/torch; never imports Qt.
"""
from .errors import NacEncodeError, NacFormatError
from .format import NacFile, read, write
from .format.verify import verify

__all__ = ["read", "write", "verify", "NacFile", "NacFormatError", "NacEncodeError"]
__version__ = "0.1.0"
