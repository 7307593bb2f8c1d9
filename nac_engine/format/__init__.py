"""The NAC container codec: bytes ↔ NacFile with byte spans."""
from .model import (Argument, Constant, Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile,
                    NamedArray, Orch, Parameter, Proc, Resource, TensorMeta)
from .reader import read
from ..spans import Span
from .writer import write

__all__ = ["read", "write", "NacFile", "Header", "Instruction", "Argument", "Constant", "MmapRecord",
           "MmapCommand", "Parameter", "TensorMeta", "InputName", "Resource", "NamedArray", "Orch", "Proc",
           "Span"]
