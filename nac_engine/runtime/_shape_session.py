"""A Session that runs for shapes: parameters as meta tensors, outputs kept as tensors.

Kept apart from :mod:`.shapes` because it subclasses the interpreter (and so imports torch);
``shapes`` imports it only when a program is actually run.

On the meta device (``meta=True``) every op runs its meta kernel. Where one cannot (no meta
kernel, a data-dependent shape, ``.item()``) or where a ``<CONTROL_FLOW>`` predicate needs its
value, the session computes real values on the CPU: of that op, and of the values it reads,
transitively, on demand (:meth:`ShapeSession.real_value`). Those real values are held in one
cache whose bytes together never exceed ``cpu_budget``; each is charged before it is
computed, from the shape the meta run already gave it. The failing op itself has no meta
shape: its inputs are in the budget before it runs and its output is charged right after;
ops whose output is not bounded by their inputs' sizes (``repeat_interleave`` with a
repeats tensor, ``bincount``) have their output size computed from their input values
first. A file the budget cannot cover is a :class:`~.shapes.ShapeBudgetError` naming the
tick and op, never an unbounded allocation. After a real computation the meta run goes on
with meta tensors of the real results' shapes.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import torch
# TorchDispatchMode is how torch itself intercepts every ATen call (FakeTensorMode is one);
# its module is underscored but it is the documented extension point for this.
from torch.utils._python_dispatch import TorchDispatchMode

from ..format.layout import QUANT_NONE
from ..format.weights import external_metas
from ..isa.optable import OP_CONTROL_FLOW, OP_INPUT, OP_OUTPUT
from .errors import KernelError, NacRuntimeError
from .kernels import Kernels, describe_args, first_of_multi
from .session import Session
from .input_spec import DEFAULT_CPU_BUDGET, MAX_ELEMENTS, InputSpec, ShapeBudgetError, parse_input_spec

_NATIVE = {"float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "float32": torch.float32, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
           "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}


def _tensors(v: Any):
    if isinstance(v, torch.Tensor):
        yield v
    elif isinstance(v, (tuple, list)):
        for x in v:
            if isinstance(x, torch.Tensor):
                yield x


def _nbytes(v: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(v))


def _holds_meta(v: Any) -> bool:
    return any(t.is_meta for t in _tensors(v))


def _to_meta(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return torch.empty(tuple(v.shape), dtype=v.dtype, device="meta")
    if isinstance(v, (tuple, list)) and any(isinstance(x, torch.Tensor) for x in v):
        return type(v)(_to_meta(x) for x in v)
    return v


class _FactoriesOnMeta(TorchDispatchMode):
    """Factory ops (``ones``, ``arange``, ``full``, ...) called without a device allocate on
    the CPU even in a meta run (a file's ``ones([50000, 50000])`` would take 10 GB): while
    active, every ATen op that takes a ``device`` and was given none (or the CPU) gets meta."""

    _takes_device: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        takes = self._takes_device.get(func)
        if takes is None:
            takes = self._takes_device[func] = any(a.name == "device" for a in func._schema.arguments)
        if takes:
            kwargs = dict(kwargs or {})
            dev = kwargs.get("device")
            if dev is None or torch.device(dev).type == "cpu":
                kwargs["device"] = _META
        return func(*args, **(kwargs or {}))


_META = torch.device("meta")
_TAKES_DEVICE: dict = {}        # op name -> whether its ATen schema has a device argument


def _takes_device(name: str) -> bool:
    """Whether the NAC op ``name`` may create a tensor from no tensor (only those need
    :class:`_FactoriesOnMeta`: inside other ops' meta kernels, torch takes the device from
    the inputs). Names that do not resolve count as True."""
    v = _TAKES_DEVICE.get(name)
    if v is None:
        parts = name.split(".")
        if parts[0] not in ("aten", "nac") or len(parts) < 2:
            v = False
        else:
            try:
                packet = getattr(torch.ops.aten, parts[1])
                op = getattr(packet, parts[2] if parts[0] == "aten" and len(parts) == 3 else "default")
                v = any(a.name == "device" for a in op._schema.arguments)
            except (AttributeError, RuntimeError):
                v = True
        _TAKES_DEVICE[name] = v
    return v


# Meta results by (op, argument metadata): a transformer's layers call the same ops on the
# same shapes, and torch's meta kernels are Python (tens of microseconds each), so a repeated
# call is rebuilt from its recorded result instead. The key holds every argument's shape,
# strides, dtype and storage offset and every constant's type and value: all a meta kernel
# sees. In-place ops (``add_``) are not memoised (they return their argument). Bounded:
# cleared when full.
_META_MEMO: dict = {}
_MEMO_ENTRIES = 16384


class _Unkeyable(Exception):
    pass


def _arg_key(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        if not v.is_meta:
            raise _Unkeyable
        return ("T", tuple(v.shape), v.stride(), v.dtype, v.storage_offset())
    if v is None or isinstance(v, (bool, int, float, str)):
        return (type(v), v)
    if isinstance(v, (tuple, list)):
        return (type(v), tuple(_arg_key(x) for x in v))
    if isinstance(v, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(v), v)
    raise _Unkeyable


def _memo_key(name: str, args: list) -> Optional[tuple]:
    if name.split(".")[1 if name.startswith("aten.") else 0].endswith("_"):
        return None
    try:
        return (name, tuple(_arg_key(a) for a in args))
    except _Unkeyable:
        return None


def _freeze(v: Any) -> Any:
    """A meta result as plain metadata (None when it holds something else)."""
    if isinstance(v, torch.Tensor):
        return ("T", tuple(v.shape), v.stride(), v.dtype) if v.is_meta else None
    if v is None or isinstance(v, (bool, int, float, str)):
        return ("v", v)
    if isinstance(v, (tuple, list)):
        parts = [_freeze(x) for x in v]
        return None if any(p is None for p in parts) else (type(v), tuple(parts))
    return None


def _thaw(d: Any) -> Any:
    if d[0] == "T":
        return torch.empty_strided(d[1], d[2], dtype=d[3], device=_META)
    if d[0] == "v":
        return d[1]
    return d[0](_thaw(x) for x in d[1])


def _describe_value(v: Any) -> str:
    ts = list(_tensors(v))
    if not ts:
        return type(v).__name__
    return ", ".join(f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in ts[:3]) \
        + (", ..." if len(ts) > 3 else "")


def _size(n: int) -> str:
    return f"{n:,} bytes"


class ShapeSession(Session):
    """``meta=True``: parameters are meta tensors of their TensorMeta shape, in the dtype the
    interpreter would give them (float32 when dequantised); no weight byte is read unless an
    op needs real values (module docstring). External weights (no TensorMeta) are loaded
    once and turned into meta tensors.

    ``raw_inputs``/``raw_feeds``/``raw_states`` are the caller's values (arrays or
    :class:`~.shapes.InputSpec`) from which real input values are made when needed;
    ``inputs``/``feeds``/``states`` are what the meta run reads."""

    def __init__(self, nacfile, inputs=None, feeds=None, *, states=None, meta: bool = True,
                 raw_inputs: Optional[Mapping] = None, raw_feeds: Optional[Sequence] = None,
                 raw_states: Optional[Mapping] = None, cpu_budget: int = DEFAULT_CPU_BUDGET):
        super().__init__(nacfile, inputs=inputs, feeds=feeds, states=states,
                         device="meta" if meta else "cpu")
        self.meta = meta
        self._header_metas = False      # external parameters' shapes read from the weights header
        self.output_values: list = []
        self.cpu_budget = cpu_budget
        self.cpu_bytes = 0                  # bytes held by ``_real``
        self.cpu_notes: list[str] = []
        self._real: dict[int, Any] = {}     # tick -> value computed on the CPU
        self._raw_inputs = dict(raw_inputs or {})
        self._raw_feeds = list(raw_feeds or [])
        self._raw_states = dict(raw_states or {})
        self._slot_by_tick = {s.tick: s for s in self.slots}
        self._cpu_kernels: Optional[Kernels] = None
        self._cpu_loader: Optional[Session] = None

    @property
    def cpu_ticks(self) -> list[int]:
        """Ticks whose values were computed on the CPU, in tick order."""
        return sorted(self._real)

    #: the shape pass reads every instruction's value after the run (Session.run would drop them)
    keep_results = True

    #: ``progress(tick, n)`` before each instruction, or ``None``; it may raise to stop the run
    #: (the Studio's Cancel)
    progress: Optional[Callable[[int, int], None]] = None

    # -- meta run ------------------------------------------------------------------------------
    def run_instruction(self, i: int) -> Any:
        if self.progress is not None:
            self.progress(i, len(self.instructions))
        value = super().run_instruction(i)
        if self.meta:
            for t in _tensors(value):
                if t.numel() > MAX_ELEMENTS:
                    ins = self.instructions[i]
                    raise ShapeBudgetError(
                        f"tick {i} ({self.nac.instruction_name(ins)}) gives a tensor of shape "
                        f"{list(t.shape)} ({t.numel():,} elements); shapes are limited to 2**40 elements",
                        i, self.nac.instruction_name(ins), t.numel() * t.element_size())
        return value

    def load_param(self, ins):
        if not self.meta:
            return super().load_param(ins)
        p = self.nac.param_for(ins)
        if p is not None and p.meta is None and not self._header_metas:
            self._header_metas = True         # external weights: every shape from the header, no data
            external_metas(self.nac)
        if p is None or p.meta is None:
            t = super().load_param(ins)
            return torch.empty(tuple(t.shape), dtype=t.dtype, device="meta")
        m = p.meta
        quantised = m.quant != QUANT_NONE or self.nac.header.quant_method != QUANT_NONE
        dt = _NATIVE.get(m.dtype_name, torch.float32)
        if quantised and (dt.is_floating_point or m.quant != QUANT_NONE):
            dt = torch.float32
        n = 1
        for s in m.logical_shape:
            n *= int(s)
        if n > MAX_ELEMENTS:
            name = self.nac.instruction_name(ins)
            raise ShapeBudgetError(f"tick {ins.index} ({name} {p.name!r}) claims shape {list(m.logical_shape)} "
                                   f"({n:,} elements); shapes are limited to 2**40 elements", ins.index, name,
                                   n * dt.itemsize)
        return torch.empty(tuple(m.logical_shape), dtype=dt, device="meta")

    def call_op(self, ins) -> Any:
        if not self.meta:
            return super().call_op(ins)
        name = self.nac.op_name(ins.a)
        key = _memo_key(name, self.gather(ins))
        hit = _META_MEMO.get(key) if key is not None else None
        if hit is not None:
            return _thaw(hit)
        try:
            if _takes_device(name):
                with _FactoriesOnMeta():
                    value = super().call_op(ins)
            else:
                value = super().call_op(ins)
            if key is not None:
                frozen = _freeze(value)
                if frozen is not None:
                    if len(_META_MEMO) >= _MEMO_ENTRIES:
                        _META_MEMO.clear()
                    _META_MEMO[key] = frozen
            return value
        except KernelError as e:          # the meta kernel could not compute it
            cause = e.__cause__ or e
            reason = f"{type(cause).__name__}: " + str(cause).split("\n")[0].split(". ")[0]
            reason = reason if len(reason) <= 160 else reason[:157] + "..."
        value = self.real_value(ins.index, ins.index, failing=True)
        self.cpu_notes.append(f"shapes: tick {ins.index} ({self.nac.op_name(ins.a)}) has no meta result "
                              f"({reason}); computed on the CPU")
        return _to_meta(value)

    def branch(self, ins) -> bool:
        d = ins.d or ()
        src = ins.index + d[0] if len(d) == 1 else None
        if not self.meta or src is None or src not in self.results or not _holds_meta(self.results[src]):
            return super().branch(ins)
        # The predicate needs its value: compute it (and what it reads) on the CPU, let the
        # interpreter's branch() validate and read it, then put the meta value back.
        real = self.real_value(src, ins.index)
        self.cpu_notes.append(f"shapes: tick {ins.index} (<CONTROL_FLOW>) reads its predicate "
                              f"(tick {src}) computed on the CPU")
        meta_value = self.results[src]
        self.results[src] = real
        try:
            return super().branch(ins)
        finally:
            self.results[src] = meta_value

    def convert_outputs(self, values: list) -> list:
        # Meta tensors have no data to convert to numpy; the simulator reads output_values.
        return []

    # -- real values on demand -----------------------------------------------------------------
    def real_value(self, target: int, asked_by: int, failing: bool = False) -> Any:
        """The value of tick ``target`` computed on the CPU, with every value it reads
        (iteratively: a long chain must not hit Python's recursion limit). ``failing``: the
        target is the op whose meta kernel failed (it has no meta result yet)."""
        stack = [target]
        while stack:
            j = stack[-1]
            if j in self._real:
                stack.pop()
                continue
            pending = [p for p in self._producers(j) if p not in self._real and _holds_meta(self.results.get(p))]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            self._real[j] = self._compute(j, asked_by, failing and j == target)
        return self._real[target]

    def _producers(self, j: int) -> list[int]:
        ins = self.instructions[j]
        if ins.a == OP_INPUT:
            return []
        if ins.a == OP_OUTPUT:
            return [p for p in ins.producers() if p < j]
        return [a.producer for a in self.nac.arguments(ins) if a.kind == "ref" and a.producer < j]

    def _read_real(self, p: int) -> Any:
        return self._real[p] if p in self._real else self.results[p]

    def _charge(self, nbytes: int, j: int, asked_by: int, what: str, keep: bool = True) -> None:
        """Count ``nbytes`` more in the cache (``keep=False``: only check they would fit)."""
        if self.cpu_bytes + nbytes > self.cpu_budget:
            asker = self.nac.instruction_name(self.instructions[asked_by])
            name = self.nac.instruction_name(self.instructions[j])
            need = (f"tick {asked_by} ({asker}) needs real values" if j != asked_by
                    else f"tick {j} ({name}) has no meta result")
            raise ShapeBudgetError(
                f"{need}: computing tick {j} ({name}, {what}) on the CPU takes {_size(nbytes)}, "
                f"over the shape-propagation CPU budget of {_size(self.cpu_budget)} "
                f"({_size(self.cpu_bytes)} in use); raise it with --cpu-budget / cpu_budget= "
                f"if the file is trusted", j, name, nbytes)
        if keep:
            self.cpu_bytes += nbytes

    def _compute(self, j: int, asked_by: int, failing: bool) -> Any:
        ins = self.instructions[j]
        meta_value = self.results.get(j)
        if ins.a == OP_INPUT:
            return self._real_input(ins, meta_value, asked_by)
        if ins.a == OP_OUTPUT:          # <OUTPUT B=1>: the value a branch hands on
            values = [self._read_real(p) for p in ins.producers()]
            return values[0] if len(values) == 1 else tuple(values)
        if ins.a == OP_CONTROL_FLOW or ins.a < 10:
            raise NacRuntimeError(f"instruction {j}: a system instruction has no value to compute")
        name = self.nac.op_name(ins.a)
        args = self._real_args(ins)
        if not failing:
            self._charge(_nbytes(meta_value), j, asked_by, _describe_value(meta_value))
        else:
            bound = _output_bound(name, args)
            if bound is not None:
                self._charge(bound, j, asked_by, "its output as its input values bound it", keep=False)
        if self._cpu_kernels is None:
            self._cpu_kernels = Kernels("cpu")
        fn = self._cpu_kernels(name)
        try:
            value = fn(*args)
        except NacRuntimeError:
            raise
        except Exception as e:
            raise KernelError(f"instruction {j}: {name}({describe_args(args)}) failed on the CPU: "
                              f"{type(e).__name__}: {e}", j, name) from e
        if failing:
            self._charge(_nbytes(value), j, asked_by, _describe_value(value))
        return value

    def _real_args(self, ins) -> list:
        """The instruction's arguments with real values (the meta gather already validated
        its constants)."""
        keep_tuples = self.nac.op_name(ins.a) in ("getitem", "operator.getitem")
        out = []
        for arg in self.nac.arguments(ins):
            if arg.kind == "ref":
                v = self._read_real(arg.producer)
                out.append(v if keep_tuples else first_of_multi(v))
            else:
                out.append(self._used_constant(ins, len(out), arg))
        return out

    def _real_input(self, ins, meta_value: Any, asked_by: int) -> Any:
        if not _holds_meta(meta_value):
            return meta_value           # a stored constant or a Python scalar: already real
        i = ins.index
        if ins.b == 1:
            p = self.nac.param_for(ins)
            self._charge(_nbytes(meta_value), i, asked_by,
                         f"parameter {p.name if p is not None else '?'} {_describe_value(meta_value)}")
            if self._cpu_loader is None:
                self._cpu_loader = Session(self.nac, device="cpu")
            return self._cpu_loader.load_param(ins)
        raw = self._raw_value(ins)
        if raw is None:
            raise NacRuntimeError(f"instruction {i}: no value was supplied to compute on the CPU")
        if isinstance(raw, str):
            raw = parse_input_spec(raw)
        if isinstance(raw, InputSpec):
            self._charge(_nbytes(meta_value), i, asked_by, f"zeros {_describe_value(meta_value)}")
            return torch.zeros(raw.shape, dtype=getattr(torch, raw.dtype))
        if isinstance(raw, torch.Tensor):
            self._charge(_nbytes(meta_value), i, asked_by, _describe_value(meta_value))
            return raw.detach().cpu().clone()
        arr = np.asarray(raw)
        self._charge(int(arr.nbytes), i, asked_by, _describe_value(meta_value))
        return torch.from_numpy(np.array(arr, copy=True))

    def _raw_value(self, ins) -> Any:
        """What the caller gave for this <INPUT>, by the interpreter's precedence (a feed,
        then the DATA name; states by id, then by name)."""
        i = ins.index
        if ins.b == 2:
            sid = ins.c[1] if ins.c and len(ins.c) >= 2 else None
            if sid in self._raw_states:
                return self._raw_states[sid]
            return self._raw_inputs.get(self.nac.input_name_map.get(i))
        slot = self._slot_by_tick.get(i)
        if slot is None:
            return None
        if slot.position < len(self._raw_feeds) and self._raw_feeds[slot.position] is not None:
            return self._raw_feeds[slot.position]
        return self._raw_inputs.get(slot.name) if slot.name else None


def _output_bound(name: str, args: list) -> Optional[int]:
    """Bytes an op's output can take, from its input values, for ops without a meta kernel
    whose output size is not bounded by their inputs' sizes; None for the others (nonzero,
    masked_select, unique, boolean indexing: at most a small multiple of their inputs)."""
    base = name.split(".")[1] if name.startswith("aten.") and "." in name[5:] else name
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if base == "repeat_interleave" and tensors:
        reps = tensors[-1]
        if reps.is_floating_point() or reps.is_complex():
            return None
        total = int(reps.clamp(min=0).sum()) if reps.numel() else 0
        if len(tensors) >= 2:      # self_Tensor: each repeat copies a slice of self
            total *= max(1, tensors[0].numel() // max(1, reps.numel()))
            return total * tensors[0].element_size()
        return total * 8
    if base == "bincount" and tensors:
        x = tensors[0]
        n = int(x.max()) + 1 if x.numel() else 0
        for a in args:
            if isinstance(a, int) and not isinstance(a, bool):
                n = max(n, a)
        return n * 8
    return None
