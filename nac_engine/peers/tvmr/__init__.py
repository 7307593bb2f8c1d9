"""TVMR — the Ternsig Virtual Mainframe Runtime binary (seed 004), as a peer format.

``format`` reads the binary (header, extension table, register definitions, 8-byte instructions,
both checksum variants, legacy TERN detection); ``isa`` holds the core and extension opcode tables;
``asm`` is the ``.ternsig`` assembler and the disassembler that prints it back; ``dataflow`` builds the
register-dataflow graph; ``interp`` is a stepping integer interpreter for the core and compute
extensions.
"""
from __future__ import annotations

from .format import MAGIC, LEGACY_MAGIC, TvmrFile, decode, sniff

FORMAT = "tvmr"
EXTENSIONS = (".tvmr",)

__all__ = ["FORMAT", "EXTENSIONS", "LEGACY_MAGIC", "MAGIC", "TvmrFile", "decode", "sniff"]
