"""Per-instruction operand and result shapes: what the cost models and the engine read.

NAC files store parameter shapes but not input shapes, and nothing about intermediate
values, so :func:`program_shapes` runs the program's own kernels (the interpreter's
:class:`~nac_engine.runtime.session.Session`) on torch's ``meta`` device: parameters become
meta tensors of their ``TensorMeta`` shape, inputs meta tensors of the given shapes, and
every kernel computes only shapes and dtypes (no FLOPs, no memory).

A file is untrusted input, so the meta run is bounded: a tensor of more than 2**40 elements
(:data:`MAX_ELEMENTS`) is a :class:`ShapeBudgetError` naming the tick. An op that cannot run
on meta (no meta kernel, a data-dependent shape, ``.item()``) and a ``<CONTROL_FLOW>``
predicate need real values: only that op (or the predicate) is computed on the CPU, with the
values it reads, transitively, from the given input arrays (or zeros of the given shapes)
and the file's weights; every other op stays on meta. Those real values together may hold
at most ``cpu_budget`` bytes (:data:`DEFAULT_CPU_BUDGET`, 256 MiB; ``nac sim --cpu-budget``),
each checked from its meta shape *before* it is computed (details in
:mod:`._shape_session`); a file that needs more is a :class:`ShapeBudgetError` naming the
tick, the op and the size. The whole program never runs for real unless the caller asks for
``device="cpu"`` (trusted files: no budget). ``Program.shape_source`` says ``meta``,
``mixed`` (some values computed on the CPU, ``Program.cpu_ticks``) or ``cpu``.

The result, :class:`Program`, is plain data (picklable, no torch): the sweep sends it to
worker processes, and the engine never imports torch.

Input values may be arrays (numpy or torch), :class:`InputSpec` or spec strings
``"1x128:int64"`` (``"1x128"`` means float32; ``"scalar:int64"`` a 0-d tensor).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ..format.model import NacFile
from ..isa.coerce import InexactCoercion, as_used
from ..isa.optable import OP_CONTROL_FLOW, OP_INPUT, OP_OUTPUT
from ..format import layout as L
# the input grammar and limits live in input_spec (the torch-side session needs them too); re-exported
from .input_spec import (DEFAULT_CPU_BUDGET, MAX_ELEMENTS, InputSpec, ShapeBudgetError,  # noqa: F401
                         parse_input_spec, parse_size)

MMAP_SAVE_RESULT, MMAP_FREE, MMAP_FORWARD, MMAP_PRELOAD = (L.MMAP_SAVE_RESULT, L.MMAP_FREE,
                                                            L.MMAP_FORWARD, L.MMAP_PRELOAD)
_INPUT_KIND = {0: "input", 1: "param", 2: "state", 3: "lifted"}

@dataclass(frozen=True)
class TensorInfo:
    shape: tuple
    dtype: str          # torch dtype name without "torch." (float32, int64, ...)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= int(s)
        return n


@dataclass
class InstrInfo:
    """One instruction as the simulator sees it.

    ``args`` follows the signature: ``("t", TensorInfo)`` for a tensor, ``("tl", (TensorInfo,
    ...))`` for a tensor list, ``("c", value)`` for anything else (constants, ints computed
    by ``sym_size``). ``outputs`` are the tensors of the result (several for multi-output
    ops, none for scalars). ``stored`` is a parameter's stored dtype and shape (its DRAM
    bytes); ``reads`` the producer ticks whose values the instruction reads."""
    tick: int
    op: str
    kind: str           # input | param | state | lifted | op | output | subreturn | control | skipped
    args: tuple = ()
    outputs: tuple = ()
    reads: tuple = ()
    stored: Optional[TensorInfo] = None


@dataclass
class Program:
    name: str
    instructions: list
    mmap: dict                       # tick -> [(action, target), ...] in file order
    outputs: list                    # producer ticks of <OUTPUT B=0>
    has_schedule: bool
    shape_source: str = "meta"       # meta | mixed | cpu | none
    notes: list = field(default_factory=list)
    cpu_ticks: list = field(default_factory=list)   # values computed on the CPU (mixed)

    def __len__(self) -> int:
        return len(self.instructions)


# --------------------------------------------------------------------------- from a file
def program_shapes(nac: NacFile, inputs: Optional[Mapping[str, Any]] = None,
                   feeds: Optional[Sequence[Any]] = None, states: Optional[Mapping[int, Any]] = None,
                   name: Optional[str] = None, device: str = "meta",
                   cpu_budget: Any = DEFAULT_CPU_BUDGET, progress=None) -> Program:
    """Run ``nac`` for shapes and describe every instruction. ``device="meta"`` (the default)
    computes on the CPU only what cannot run on meta, within ``cpu_budget`` bytes (an int or
    ``"256M"``; see the module docstring); ``"cpu"`` runs the whole program on the CPU at once.
    ``progress(done, total)`` is called as the work goes on (the meta run, then describing the
    results, each one instruction at a time: ``total`` is twice the instruction count); it may
    raise to stop."""
    if device not in ("meta", "cpu"):
        raise ValueError(f"device must be 'meta' or 'cpu', not {device!r}")
    budget = parse_size(cpu_budget)
    label = name or (nac.path or "program")
    from ._shape_session import ShapeSession   # imports torch: only here, the engine stays torch-free
    if device == "cpu":
        s = ShapeSession(nac, inputs=_values(inputs, False), feeds=_feed_values(feeds, False),
                         states=_values(states, False), meta=False)
        s.run()
        return _describe(nac, s, "cpu", [], label)
    s = ShapeSession(nac, inputs=_values(inputs, True), feeds=_feed_values(feeds, True),
                     states=_values(states, True), meta=True, raw_inputs=inputs, raw_feeds=feeds,
                     raw_states=states, cpu_budget=budget)
    n = len(nac.instructions)
    if progress is not None:
        s.progress = lambda tick, _n: progress(tick, 2 * n)
    s.run()
    prog = _describe(nac, s, "mixed" if s.cpu_ticks else "meta", list(s.cpu_notes), label,
                     None if progress is None else (lambda k: progress(n + k, 2 * n)))
    prog.cpu_ticks = s.cpu_ticks
    if s.cpu_ticks:
        prog.notes.append(f"shapes: {len(s.cpu_ticks)} value(s) computed on the CPU "
                          f"({s.cpu_bytes:,} of the {budget:,}-byte budget); the rest on meta")
    return prog


def load_meta_kernels() -> None:
    """Load now what torch loads on its first meta-device op: the meta kernels, decompositions,
    symbolic shapes and sympy (~800 modules, 1.2-1.8 s of CPU here). For a process that forks
    workers that will run :func:`program_shapes` (the Studio's zygote): done once there, not in
    every child's first shape pass. A meta op computes nothing and starts no thread."""
    import torch
    torch.empty(1, device="meta") + 1


def _values(m: Optional[Mapping], meta: bool):
    if m is None:
        return None
    return {k: _value(v, meta) for k, v in m.items()}


def _feed_values(f: Optional[Sequence], meta: bool):
    if f is None:
        return None
    return [None if v is None else _value(v, meta) for v in f]


def _value(v: Any, meta: bool) -> Any:
    import numpy as np
    import torch
    if isinstance(v, str):
        v = parse_input_spec(v)
    if isinstance(v, InputSpec):
        n = 1
        for d in v.shape:
            n *= int(d)
        if n > MAX_ELEMENTS:
            raise ValueError(f"input of shape {list(v.shape)}: {n:,} elements; at most 2**40")
        dt = getattr(torch, v.dtype)
        return torch.empty(v.shape, dtype=dt, device="meta") if meta else torch.zeros(v.shape, dtype=dt)
    if isinstance(v, (bool, int, float, complex)):
        return v
    if meta:
        if isinstance(v, torch.Tensor):
            return torch.empty(tuple(v.shape), dtype=v.dtype, device="meta")
        arr = np.asarray(v)
        if arr.dtype == object:
            raise TypeError(f"input value of type {type(v).__name__} is not an array")
        dt = torch.from_numpy(np.zeros(1, dtype=arr.dtype)).dtype
        return torch.empty(arr.shape, dtype=dt, device="meta")
    return v


def _tensor_info(t) -> TensorInfo:
    return TensorInfo(tuple(int(s) for s in t.shape), str(t.dtype).replace("torch.", ""))


def _flatten_tensors(v) -> tuple:
    import torch
    if isinstance(v, torch.Tensor):
        return (_tensor_info(v),)
    if isinstance(v, (tuple, list)):
        out = []
        for x in v:
            if isinstance(x, torch.Tensor):
                out.append(_tensor_info(x))
        return tuple(out)
    return ()


def _used_or_stored(arg) -> Any:
    """A constant as the op uses it (``isa/coerce.py``: a shared ``1.0`` under ``i`` is dim
    1); the stored value when it cannot be used exactly (the shape pass already refused it)."""
    try:
        return as_used(arg.value, arg.code)
    except InexactCoercion:
        return arg.value


def _const(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)) and len(v) <= 64 and all(
            x is None or isinstance(x, (bool, int, float, str)) for x in v):
        return tuple(v)
    return repr(v)[:80]


def _arg(v: Any):
    import numpy as np
    import torch
    from .kernels import first_of_multi
    v = first_of_multi(v)
    if isinstance(v, torch.Tensor):
        return ("t", _tensor_info(v))
    if isinstance(v, (tuple, list)) and v and all(isinstance(x, torch.Tensor) for x in v):
        return ("tl", tuple(_tensor_info(x) for x in v))
    if isinstance(v, np.generic):
        return ("c", _const(v.item()))
    return ("c", _const(v))


def _describe(nac: NacFile, session, source: str, notes: list, name: str, progress=None) -> Program:
    """``progress(k)`` every 256 instructions (as long as the run itself on a long program)."""
    from .session import NotTaken
    results = session.results
    out: list[InstrInfo] = []
    for k, ins in enumerate(nac.instructions):
        if progress is not None and not k & 255:
            progress(k)
        i = ins.index
        value = results.get(i)
        op = nac.instruction_name(ins)
        if isinstance(value, NotTaken) or i not in results:
            # a branch not taken, or after the <OUTPUT B=0> that ended the run
            out.append(InstrInfo(i, op, "skipped"))
            continue
        reads = tuple(sorted(set(p for p in ins.producers() if 0 <= p < i)))
        if ins.a == OP_INPUT:
            kind = _INPUT_KIND.get(ins.b, "input")
            outs = _flatten_tensors(value)
            stored = None
            if kind == "param":
                p = nac.param_for(ins)
                if p is not None and p.meta is not None:
                    stored = TensorInfo(tuple(int(s) for s in p.meta.shape), p.meta.dtype_name)
                elif outs:
                    stored = outs[0]
            out.append(InstrInfo(i, op, kind, (), outs, (), stored))
        elif ins.a == OP_OUTPUT:
            args = tuple(_arg(results[p]) for p in ins.producers() if p in results)
            out.append(InstrInfo(i, op, "output" if ins.b == 0 else "subreturn", args,
                                 _flatten_tensors(value) if ins.b != 0 else (), reads))
        elif ins.a == OP_CONTROL_FLOW:
            out.append(InstrInfo(i, op, "control", (), (), reads))
        else:
            keep = op in ("getitem", "operator.getitem")
            args = []
            for a in nac.arguments(ins):
                if a.kind == "ref":
                    v = results.get(a.producer)
                    args.append(_arg(v) if not keep else ("c", None) if not _flatten_tensors(v)
                                else ("tl", _flatten_tensors(v)))
                else:
                    args.append(("c", _const(_used_or_stored(a))))
            out.append(InstrInfo(i, op, "op", tuple(args), _flatten_tensors(value), reads))
    mmap: dict[int, list] = {}
    for rec in nac.mmap:
        mmap.setdefault(rec.tick, []).extend((c.action, c.target) for c in rec.commands)
    return Program(name=str(name), instructions=out, mmap=mmap, outputs=list(nac.output_producers()),
                   has_schedule=bool(nac.mmap), shape_source=source, notes=notes)
