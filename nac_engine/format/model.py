"""The decoded file: plain Python objects, no I/O except lazy weight access.

Everything needed to write the file back byte for byte is kept here (raw C/D fields,
stored constant types, the physical section order, bytes a reader could not attribute),
so the writer encodes from this model and never copies the source wholesale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..isa.optable import (OP_INPUT, OP_OUTPUT, SYSTEM_OPS, INPUT_VARIANTS,
                           OUTPUT_VARIANTS, standard_ops)
from ..errors import NacFormatError
from . import layout as L
from .defuse import DefUse
from .name_records import byte_ids
from ..spans import Span
from .tensor_meta import TensorMeta   # re-exported: the record type every reader of NacFile names


# --------------------------------------------------------------------------- header
@dataclass
class Header:
    version: str = L.DEFAULT_VERSION
    quant_method: int = 0          # bits 0-6 (v1.6) / 0-5 (v1.7+) of byte 4
    weights_internal: bool = True  # bit 7 of byte 4
    trng_flag: bool = False        # bit 6 of byte 4 (v1.7+)
    num_inputs: int = 0
    num_outputs: int = 0
    reserved: int = 0              # byte 9
    d_model: int = 0
    padding: bytes = b"\0\0\0\0"   # v1.6 bytes 84-87

    @property
    def quant_name(self) -> str:
        return L.QUANT_NAMES.get(self.quant_method, f"unknown({self.quant_method})")


# --------------------------------------------------------------------------- tables
@dataclass(slots=True)      # a CNST table holds up to 65,535: no per-object __dict__
class Constant:
    id: int
    type: int                  # CNST type code; what is stored, not what Python would infer
    value: Any                 # None, bool, int, float, str, tuple[int], tuple[float]
    length_field: Optional[int] = None   # raw length of null/bool records (spec: ignored)

    @property
    def type_name(self) -> str:
        return L.CONST_TYPE_NAMES.get(self.type, f"type{self.type}")



def is_tensor_placeholder(v: Any) -> bool:
    """The compiler's stand-in for a tensor it did not store, e.g.
    ``"Tensor_torch.Size([])_torch.int32"`` (research §6.2, §8.3). Here, not in the runtime, so
    readers of a file's constants (the Studio's Inputs) need no torch."""
    return isinstance(v, str) and v.startswith("Tensor_torch.Size(")

@dataclass(slots=True)      # a big MMAP holds millions: no per-object __dict__
class MmapCommand:
    action: int
    target: int

    @property
    def name(self) -> str:
        return L.MMAP_ACTION_NAMES.get(self.action, f"ACTION_{self.action}")


@dataclass(slots=True)      # one per MMAP record
class MmapRecord:
    tick: int
    commands: list[MmapCommand]
    offset: int = -1


# --------------------------------------------------------------------------- instructions
class Instruction:
    """One ABCD instruction. ``c``/``d`` are the raw int16 fields (``c`` includes its
    length prefix) or ``None`` when the field is absent from the bytes."""

    __slots__ = ("index", "a", "b", "c", "d", "offset")

    def __init__(self, index: int, a: int, b: int, c: Optional[tuple], d: Optional[tuple], offset: int = -1):
        self.index = index
        self.a = a
        self.b = b
        self.c = c
        self.d = d
        self.offset = offset

    @property
    def nbytes(self) -> int:
        return 2 + 2 * (len(self.c) if self.c else 0) + 2 * (len(self.d) if self.d else 0)

    @property
    def const_ids(self) -> tuple:
        """Constant IDs in C after the length prefix (regular ops and system payloads)."""
        if not self.c:
            return ()
        return tuple(self.c[1:])

    def producers(self) -> list[int]:
        """Absolute indices this instruction reads (non-zero D entries)."""
        if not self.d:
            return []
        if self.a == 7:   # <CONVERGENCE>: D is not a list of relative producers
            return []
        return [self.index + x for x in self.d if x != 0]

    def same_encoding(self, other: "Instruction") -> bool:
        return (self.a, self.b, self.c, self.d) == (other.a, other.b, other.c, other.d)

    def __repr__(self) -> str:
        return f"Instruction({self.index}: A={self.a} B={self.b} C={self.c} D={self.d})"


@dataclass
class Argument:
    """One resolved argument of a regular instruction."""
    code: str                       # signature character
    kind: str                       # "ref" (producer) or "const"
    producer: Optional[int] = None  # absolute instruction index for refs
    const_id: Optional[int] = None
    value: Any = None               # constant value for consts


# --------------------------------------------------------------------------- parameters
@dataclass(slots=True)      # one per parameter: no per-object __dict__
class Parameter:
    id: int
    name: str
    meta: Optional[TensorMeta] = None       # internal weights only (or from safetensors)
    data_offset: int = -1                   # absolute file offset of raw data (internal)
    data_length: int = 0
    _payload: Any = field(default=None, repr=False)   # raw bytes provider for new/edited tensors
    _file: Any = field(default=None, repr=False)      # back-reference for lazy loads

    def raw(self) -> np.ndarray:
        """Stored values (quantised ints for quantised params), zero-copy when memory-mapped."""
        from .weights import raw_tensor
        return raw_tensor(self)

    def array(self) -> np.ndarray:
        """Dequantised values (float32 for quantised/float params; ints stay ints)."""
        from .weights import dequantized_tensor
        return dequantized_tensor(self)

    @property
    def shape(self) -> Optional[tuple]:
        return self.meta.logical_shape if self.meta else None

    @property
    def dtype(self) -> Optional[str]:
        return self.meta.dtype_name if self.meta else None

    @property
    def quant_name(self) -> str:
        return L.QUANT_NAMES.get(self.meta.quant, "?") if self.meta else "none"


@dataclass
class InputName:
    index: int      # OPS instruction index of the <INPUT B=0>
    name: str


@dataclass(slots=True)      # RSRC may hold 20k files: no per-object __dict__
class Resource:
    name: str
    data_offset: int = -1
    data_length: int = 0
    _payload: Optional[bytes] = field(default=None, repr=False)
    _file: Any = field(default=None, repr=False)

    @property
    def data(self) -> bytes:
        if self._payload is not None:
            return bytes(self._payload)
        from .mapped import read_at
        return bytes(read_at(self._file, self.data_offset, self.data_length, "RSRC", self.name))


@dataclass
class NamedArray:
    """ARRS (v1.8) entry."""
    name: str
    dtype: int
    shape: tuple
    data_offset: int = -1
    data_length: int = 0
    _payload: Optional[bytes] = field(default=None, repr=False)
    _file: Any = field(default=None, repr=False)

    @property
    def data(self) -> bytes:
        if self._payload is not None:
            return bytes(self._payload)
        from .mapped import read_at
        return bytes(read_at(self._file, self.data_offset, self.data_length, "ARRS", self.name))

    def problem(self) -> Optional[str]:
        """Why the dtype and shape do not describe the data (``None`` when they do). Sizes are
        exact Python integers: a shape whose product overflows int64 is simply too big."""
        if self.dtype not in L.NUMPY_STORAGE:
            return f"array {self.name!r}: dtype code {self.dtype} is not an array dtype"
        need = math.prod(self.shape) * L.storage_dtype(self.dtype).itemsize
        have = self.data_length if self._payload is None else len(self._payload)
        if need != have:
            return (f"array {self.name!r}: shape {list(self.shape)} of {L.dtype_name(self.dtype)} needs "
                    f"{need:,} bytes, the record holds {have:,}")
        return None

    def array(self) -> np.ndarray:
        """The values, shaped; an array whose dtype and shape do not describe its bytes raises
        :class:`NacFormatError` (``verify`` reports the same)."""
        problem = self.problem()
        if problem:
            raise NacFormatError("ARRS", max(self.data_offset, 0), problem)
        return np.frombuffer(self.data, dtype=L.storage_dtype(self.dtype)).reshape(self.shape)


@dataclass
class Orch:
    bytecode: bytes = b""
    pool: list[Constant] = field(default_factory=list)
    instructions: list = field(default_factory=list)   # decoded MepInstruction (view only)

    @property
    def is_empty(self) -> bool:
        return not self.bytecode and not self.pool


@dataclass
class Proc:
    manifest: bytes = b""
    decoded: Any = None      # TisaManifest (view only)


# --------------------------------------------------------------------------- the file
@dataclass
class NacFile:
    header: Header = field(default_factory=Header)
    mmap: list[MmapRecord] = field(default_factory=list)
    instructions: list[Instruction] = field(default_factory=list)
    cmap: dict[int, str] = field(default_factory=dict)
    constants: dict[int, Constant] = field(default_factory=dict)
    perms: dict[int, str] = field(default_factory=dict)
    params: dict[int, Parameter] = field(default_factory=dict)      # block-1 order
    input_names: list[InputName] = field(default_factory=list)
    tensor_order: list[int] = field(default_factory=list)            # block-3 record order (param ids)
    proc: Optional[Proc] = None
    orch: Optional[Orch] = None
    rsrc: Optional[list[Resource]] = None
    trng: Optional[list[Instruction]] = None
    arrs: Optional[list[NamedArray]] = None
    # Physical order of the sections as written (tags without padding). The writer keeps it.
    layout: list[str] = field(default_factory=list)
    # Bytes after a region's decoded content and before the next region: region -> bytes.
    trailing: dict[str, bytes] = field(default_factory=dict)
    # Filled by the reader
    spans: Optional[Span] = None
    problems: list = field(default_factory=list)
    header_decoded: bool = False   # False: not a readable NAC header (lenient reads only)
    path: Optional[str] = None
    weights_path: Optional[str] = None
    #: True when the bytes are this object's own copy of the file (read whole, not mapped, not
    #: bytes the caller still holds): nothing outside can change or shrink them.
    private_buffer: bool = False
    #: Write each internal tensor's data at a 64-byte file offset, by zero bytes at the end of its
    #: metadata block (whose length field covers them). Set by the compiler for the files it
    #: makes; a file read from disk keeps its own bytes (ARCHITECTURE.md, "Aligned weights").
    align_tensors: bool = False
    _buf: Any = None
    _closer: Any = None
    _fd: Optional[int] = None       # a mapped file's own descriptor: its bytes are read with pread
    _op_names: Optional[dict] = None
    _param_by_name: Optional[dict] = None
    _def_use: Any = field(default=None, repr=False, compare=False)
    _mmap_by_tick: Any = field(default=None, repr=False, compare=False)

    # -- lifecycle --------------------------------------------------------------------
    def close(self) -> None:
        """Release the mapping and the descriptor. Nothing outside the reader views the mapping
        (weights, payloads and byte views are read with pread); should a view still be alive,
        the mapping is left to be freed with it instead of failing (closing a tab must not raise)."""
        if self._closer is not None:
            closer, self._closer = self._closer, None
            try:
                closer()
            except BufferError:
                pass

    def __enter__(self) -> "NacFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def version(self) -> str:
        return self.header.version

    @property
    def size(self) -> int:
        return len(self._buf) if self._buf is not None else 0

    @property
    def buffer(self) -> Any:
        """The file's bytes for byte views (hex, previews; read-only): the bytes themselves for a
        file held in memory, a :class:`~.mapped.FileBytes` (``pread``, safe when another program
        shrinks the file) for a mapped one; None for a file built in memory."""
        if self._fd is not None and self._closer is not None:
            from .mapped import FileBytes
            return FileBytes(self._fd, len(self._buf))
        return self._buf

    # -- names ----------------------------------------------------------------------
    @property
    def op_names(self) -> dict[int, str]:
        """Standard table of the file's version, system ops, overridden by CMAP (its ids 0..255:
        an instruction's A is a byte; a hostile CMAP holds 65,536)."""
        if self._op_names is None:
            table = dict(SYSTEM_OPS)
            table.update(standard_ops(self.header.version))
            table.update(byte_ids(self.cmap))
            self._op_names = table
        return self._op_names

    def invalidate(self) -> None:
        """Call after editing tables in place so cached lookups are rebuilt."""
        self._op_names = None
        self._param_by_name = None
        self._def_use = None
        self._mmap_by_tick = None

    def op_name(self, a: int) -> str:
        return self.op_names.get(a, f"<op {a}>")

    def instruction_name(self, ins: Instruction) -> str:
        if ins.a == OP_INPUT:
            return INPUT_VARIANTS.get(ins.b, f"input.b{ins.b}")
        if ins.a == OP_OUTPUT:
            return OUTPUT_VARIANTS.get(ins.b, f"output.b{ins.b}")
        return self.op_name(ins.a)

    def signature(self, ins: Instruction) -> Optional[str]:
        if ins.a < 10:
            return None
        return self.perms.get(ins.b, "" if ins.b == 0 else None)

    def param_by_name(self, name: str) -> Optional[Parameter]:
        if self._param_by_name is None:
            self._param_by_name = {p.name: p for p in self.params.values()}
        return self._param_by_name.get(name)

    @property
    def input_name_map(self) -> dict[int, str]:
        return {n.index: n.name for n in self.input_names}

    def param_for(self, ins: Instruction) -> Optional[Parameter]:
        if ins.a == OP_INPUT and ins.b == 1 and ins.c and len(ins.c) >= 2:
            return self.params.get(ins.c[1])
        return None

    # -- arguments ----------------------------------------------------------------------
    def arguments(self, ins: Instruction) -> list[Argument]:
        """Seed 000 §8.3: D non-zero → producer ``i + D``; zero → next constant from C."""
        sig = self.signature(ins)
        if sig is None or not ins.d:
            return []
        const_ids = iter(ins.const_ids)
        args = []
        for code, dv in zip(sig, ins.d):
            if dv != 0:
                args.append(Argument(code, "ref", producer=ins.index + dv))
            else:
                cid = next(const_ids, None)
                const = self.constants.get(cid) if cid is not None else None
                args.append(Argument(code, "const", const_id=cid, value=const.value if const else None))
        return args

    def mmap_by_tick(self) -> dict[int, list[MmapCommand]]:
        """tick -> its MMAP commands, built on first call and shared (read it, do not change
        it: the Properties pane asks at every selection, the disassembly as a file opens).
        Rebuilt when the MMAP list is replaced or grows/shrinks; after editing records in
        place, call :meth:`invalidate`."""
        key = (id(self.mmap), len(self.mmap))
        cached = self._mmap_by_tick
        if cached is None or cached[0] != key:
            out: dict[int, list[MmapCommand]] = {}
            for rec in self.mmap:
                out.setdefault(rec.tick, []).extend(rec.commands)
            cached = self._mmap_by_tick = (key, out)
        return cached[1]

    def def_use(self):
        """The file's one def-use index (:class:`~nac_engine.format.defuse.DefUse`: ``users()``,
        ``kind()``, ``last_use()``), built on first call and cached. Rebuilt when the
        instruction list is replaced or grows/shrinks; after editing instructions in place,
        call :meth:`invalidate`."""
        key = (id(self.instructions), len(self.instructions))
        cached = self._def_use
        if cached is None or cached[0] != key:
            cached = self._def_use = (key, DefUse.of(self))
        return cached[1]

    def users(self, v: int) -> tuple:
        """Ticks of the instructions that read value ``v`` (ascending; see :meth:`def_use`)."""
        return self.def_use().users(v)

    def output_producers(self) -> list[int]:
        for ins in reversed(self.instructions):
            if ins.a == OP_OUTPUT and ins.b == 0:
                return ins.producers()
        return []

    def span_at(self, offset: int) -> Optional[Span]:
        return self.spans.span_at(offset) if self.spans is not None else None
