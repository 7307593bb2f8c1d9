"""The simulator's Python API: ``simulate(program, hw, inputs=..., feeds=...) -> SimResult``.

``program`` is a path, a :class:`~nac_engine.format.model.NacFile`, or a
:class:`~nac_engine.runtime.shapes.Program` whose shapes were already propagated (what a sweep
reuses). ``hw`` is anything :func:`~nac_engine.sim.config.load_hardware` takes. ``inputs``
maps DATA input names and ``feeds`` lists positional values for every ``<INPUT B=0>``/``<INPUT
B=3>``, as for the interpreter, except that a value may be a shape instead of an array
(``"1x128:int64"`` or :class:`~nac_engine.runtime.shapes.InputSpec`): the simulator only needs shapes.
``cpu_budget`` bounds the bytes shape propagation may compute for real (ops without a meta
kernel, ``<CONTROL_FLOW>`` predicates; 256 MiB by default): see :mod:`.shapes`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..format.model import NacFile
from .config import HardwareConfig, load_hardware
from .engine import run_event
from .result import SimResult
from ..runtime.shapes import DEFAULT_CPU_BUDGET, Program, program_shapes


def prepare(program: Any, inputs: Optional[Mapping[str, Any]] = None, feeds: Optional[Sequence[Any]] = None,
            states: Optional[Mapping[int, Any]] = None, *, cpu_budget: Any = DEFAULT_CPU_BUDGET,
            progress=None) -> Program:
    """Shapes of every instruction (runs the program on the meta device). ``progress(done, total)``
    is called as the work goes on and may raise to stop (see :func:`.shapes.program_shapes`)."""
    if isinstance(program, Program):
        return program
    if isinstance(program, NacFile):
        return program_shapes(program, inputs, feeds, states, cpu_budget=cpu_budget, progress=progress)
    from ..format import read
    with read(str(program)) as nac:
        return program_shapes(nac, inputs, feeds, states, name=Path(str(program)).name, cpu_budget=cpu_budget,
                              progress=progress)


def simulate(program: Any, hw: Any = "edge-32x32", *, inputs: Optional[Mapping[str, Any]] = None,
             feeds: Optional[Sequence[Any]] = None, states: Optional[Mapping[int, Any]] = None,
             overrides: Optional[Mapping[str, Any]] = None, cpu_budget: Any = DEFAULT_CPU_BUDGET,
             progress=None) -> SimResult:
    """Simulate ``program`` on ``hw``; see the module docstring and :mod:`.engine`.
    ``progress(stage, done, total)`` (stage ``"shapes"`` then ``"simulate"``) is called as the
    work goes on and may raise to stop it (the Studio's Cancel)."""
    cfg: HardwareConfig = load_hardware(hw, overrides)
    if cfg.core.model == "refcore":
        return _refcore(program, cfg, inputs, feeds, states, cpu_budget)
    shapes_cb = (lambda d, t: progress("shapes", d, t)) if progress is not None else None
    sim_cb = (lambda d, t: progress("simulate", d, t)) if progress is not None else None
    return run_event(prepare(program, inputs, feeds, states, cpu_budget=cpu_budget, progress=shapes_cb), cfg,
                     progress=sim_cb)


def _refcore(program, cfg, inputs, feeds, states, cpu_budget) -> SimResult:
    from .refcore import RefcoreError, run_refcore
    if isinstance(program, Program):
        raise RefcoreError("reference-core mode needs the NAC file (instruction bytes), not only shapes")
    rc = cfg.refcore
    needs_shapes = rc.klat == "derived" or "dma" in rc.latency.values()
    if isinstance(program, NacFile):
        prog = program_shapes(program, inputs, feeds, states, cpu_budget=cpu_budget) if needs_shapes else None
        return run_refcore(program, cfg, prog)
    from ..format import read
    with read(str(program)) as nac:
        prog = program_shapes(nac, inputs, feeds, states, name=Path(str(program)).name,
                              cpu_budget=cpu_budget) if needs_shapes else None
        return run_refcore(nac, cfg, prog)
