"""Re-plan an existing file's MMAP schedule in memory, and save a copy that differs only there.

The compiler plans the schedule once, from the sizes it knew at export time. A file on disk
carries no sizes for intermediate values, so re-planning it (the Studio's planner comparison,
"Save As with this schedule") first needs every result's byte size: :func:`value_nbytes`
takes them from the simulator's shape propagation (torch's meta device, bounded by
``cpu_budget``; see :mod:`nac_engine.runtime.shapes`), or :func:`value_nbytes_of` from a
:class:`~nac_engine.runtime.shapes.Program` already propagated (torch-free).

API
---
``Planner(mode, lookahead)`` names one planner; :data:`DEFAULT_PLANNERS` is the comparison set
(reference, reference-lookback, min-peak at the compiler's default lookahead) and
:func:`parse_planner` reads ``"reference"``, ``"min-peak"``, ``"lookahead 4"``.
``replan(nac, sizes, planner) -> MmapPlan`` is :func:`~nac_engine.compiler.schedule.plan_mmap`
for that planner; ``compare(nac, sizes, planners)`` gives one :class:`PlannerCurve` per planner
(plus the file's own schedule, measured with the same memory model, when it has one), whose
``peak`` equals what ``nac compile --report`` prints for the same planner and sizes.
``save_with_schedule(nac, records, path)`` writes ``nac`` with ``records`` as its MMAP
section, atomically; every other section is re-encoded from the same model, so its bytes are
unchanged (tested section by section).
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from ..format.model import MmapRecord, NacFile
from .schedule import MODES, MmapPlan, plan_mmap, resident_bytes

#: Bytes per element by torch dtype name (the simulator's shapes name dtypes this way).
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
               "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1, "complex64": 8,
               "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1}
DEFAULT_LOOKAHEAD = 2          # the compiler's default (nac compile --lookahead)
#: Ops whose trailing outputs eager CPU kernels return empty but meta kernels give a shape
#: (batch norm in inference: save_mean/save_invstd are [0] on the CPU, [C] on meta). Only the
#: leading outputs count, so sizes agree with the interpreter's (and mmap_check's trace).
_EAGER_EMPTY_TAIL = {"aten._native_batch_norm_legit_no_training.default": 1,
                     "_native_batch_norm_legit_no_training": 1}


@dataclass(frozen=True)
class Planner:
    mode: str                          # one of schedule.MODES
    lookahead: int = DEFAULT_LOOKAHEAD  # PRELOAD distance; only min-peak uses it

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown MMAP planner {self.mode!r} (known: {', '.join(MODES)}, lookahead N)")
        if not (0 <= self.lookahead <= 1 << 20):
            raise ValueError(f"lookahead {self.lookahead}: expected 0..{1 << 20}")

    @property
    def label(self) -> str:
        if self.mode != "min-peak":
            return self.mode
        return "min-peak" if self.lookahead == DEFAULT_LOOKAHEAD else f"lookahead {self.lookahead}"


DEFAULT_PLANNERS = (Planner("reference"), Planner("reference-lookback"), Planner("min-peak"))


def parse_planner(text: str) -> Planner:
    """``"reference"``, ``"reference-lookback"``, ``"min-peak"`` or ``"lookahead N"`` (min-peak
    PRELOADing N ticks ahead)."""
    t = text.strip().lower()
    if t.startswith("lookahead"):
        rest = t[len("lookahead"):].strip(" =:")
        if not rest.isdigit():
            raise ValueError(f"planner {text!r}: expected 'lookahead N' with N a whole number")
        return Planner("min-peak", int(rest))
    return Planner(t)


@dataclass
class PlannerCurve:
    label: str
    live_bytes: np.ndarray             # int64, bytes resident while each tick runs
    peak: int
    peak_tick: int
    records: list                      # the MMAP records (the file's own for "file")
    commands: dict                     # command counts by action name
    planner: Optional[Planner] = None  # None for the file's own schedule


# --------------------------------------------------------------------------- sizes
def value_nbytes_of(program: Any) -> dict[int, int]:
    """Bytes of each instruction's result from a propagated :class:`~nac_engine.runtime.shapes.Program`
    (a multi-output result counts all its tensors; skipped instructions and scalars count 0)."""
    out: dict[int, int] = {}
    for x in program.instructions:
        n = 0
        keep = _EAGER_EMPTY_TAIL.get(x.op, len(x.outputs))
        for t in x.outputs[:keep]:
            n += t.numel * DTYPE_BYTES.get(t.dtype, 4)
        out[x.tick] = n
    return out


def value_nbytes(nac: NacFile, inputs: Optional[Mapping[str, Any]] = None, feeds: Optional[Sequence[Any]] = None,
                 *, cpu_budget: Any = None) -> dict[int, int]:
    """Bytes of each instruction's result, by shape propagation on torch's meta device (loads torch)."""
    from ..runtime.shapes import DEFAULT_CPU_BUDGET, program_shapes
    prog = program_shapes(nac, inputs, feeds, cpu_budget=DEFAULT_CPU_BUDGET if cpu_budget is None else cpu_budget)
    return value_nbytes_of(prog)


# --------------------------------------------------------------------------- planning
def replan(nac: NacFile, sizes: Mapping[int, int], planner: Planner = Planner("min-peak")) -> MmapPlan:
    """Plan ``nac``'s schedule with ``planner`` (``nac.mmap`` is left untouched)."""
    return plan_mmap(nac, sizes, mode=planner.mode, preload_lookahead=planner.lookahead)


def measure(nac: NacFile, records: Iterable[MmapRecord], sizes: Mapping[int, int],
            label: str = "file") -> PlannerCurve:
    """Any schedule (the file's own, say) in the planners' memory model."""
    records = list(records)
    live = np.asarray(resident_bytes(nac, records, sizes), dtype=np.int64)
    tick = int(np.argmax(live)) if live.size else 0
    counts: dict[str, int] = {}
    for r in records:
        for c in r.commands:
            counts[c.name] = counts.get(c.name, 0) + 1
    return PlannerCurve(label, live, int(live[tick]) if live.size else 0, tick, records, counts)


def compare(nac: NacFile, sizes: Mapping[int, int], planners: Iterable[Planner] = DEFAULT_PLANNERS,
            *, include_file: bool = True) -> list[PlannerCurve]:
    """One curve per planner, the file's own schedule first when it has one."""
    out = []
    if include_file and nac.mmap:
        out.append(measure(nac, nac.mmap, sizes, "file"))
    for p in planners:
        plan = replan(nac, sizes, p)
        out.append(PlannerCurve(p.label, np.asarray(plan.live_bytes, dtype=np.int64), int(plan.peak_live_bytes),
                                int(plan.peak_tick), list(plan.records), dict(plan.stats), p))
    return out


# --------------------------------------------------------------------------- saving
def with_schedule(nac: NacFile, records: Iterable[MmapRecord]) -> NacFile:
    """A shallow copy of ``nac`` whose MMAP is ``records`` (everything else shared, read-only)."""
    twin = copy.copy(nac)
    twin.mmap = [MmapRecord(r.tick, list(r.commands)) for r in records]
    return twin


def encode_with_schedule(nac: NacFile, records: Iterable[MmapRecord]) -> bytes:
    from ..format.writer import encode
    return encode(with_schedule(nac, records))


def save_with_schedule(nac: NacFile, records: Iterable[MmapRecord], path: str | os.PathLike) -> int:
    """Write ``nac`` with ``records`` as its schedule to ``path`` atomically; returns the size.

    Encoded completely before the temp file is opened, so an encoding error leaves ``path``
    untouched (the source file may be ``path`` itself: the model's weights are memory-mapped
    from it, and the rename only happens after every byte is written)."""
    from ..format.writer import atomic_write
    data = encode_with_schedule(nac, records)
    atomic_write(os.fspath(path), data)
    return len(data)


__all__ = ["DTYPE_BYTES", "DEFAULT_PLANNERS", "Planner", "PlannerCurve", "compare", "encode_with_schedule",
           "measure", "parse_planner", "replan", "save_with_schedule", "value_nbytes", "value_nbytes_of",
           "with_schedule"]
