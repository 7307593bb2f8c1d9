"""The compile pipeline: export → passes → canonicalise → tables/emit → quantise → tokenizer → MMAP.

``compile_model(...) -> CompileResult(nac, report)``; ``nac_engine.compile`` returns ``.nac``.
"""
from __future__ import annotations

import collections
import contextlib
import time
from dataclasses import dataclass
from typing import Any, Optional

import torch

from ..format.input_signature import set_input_signature
from ..format.output_names import pytree_output_names, set_output_names
from ..format.source_map import set_source_map
from ..isa.optable import OP_CONTROL_FLOW
from .canonicalize import canonicalize
from .deferred import defer_large
from .debug_info import full_stack_traces, fx_sources, input_specs, source_entries
from .emit import emit
from .errors import CompileError
from .export import decompose_program, decomposition_for, to_graph, trace_program
from .passes import optimize as run_passes
from .control_flow import expand_control_flow
from .passes.complex_pairs import complex_params_as_pairs
from .report import CompileReport
from .tensor_lists import regroup_error, regroup_problems

VERSIONS = ("1.6", "1.8")
WEIGHTS = ("internal", "external")
MMAP_MODES = ("min-peak", "reference")
QUANT_METHODS = ("none", "fp16", "int8_tensor", "int8_channel", "block_fp8")
_D_MODEL_ATTRS = ("hidden_size", "d_model", "n_embd", "hidden_dim", "dim", "embed_dim")


@dataclass
class CompileResult:
    nac: Any              # NacFile
    report: CompileReport


def derive_d_model(model: Any) -> int:
    """The model width: a config's hidden size, else the embedding width of the last attention or
    LayerNorm, else the input width of the last ``nn.Linear`` (the reference's fallback); 0 if none."""
    config = getattr(model, "config", None)
    for attr in _D_MODEL_ATTRS:
        v = getattr(config, attr, None) if config is not None else None
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    if not isinstance(model, torch.nn.Module):
        return 0
    modules = list(model.modules())
    for m in reversed(modules):
        if isinstance(m, torch.nn.MultiheadAttention):
            return int(m.embed_dim)
    for m in reversed(modules):
        if isinstance(m, torch.nn.LayerNorm) and m.normalized_shape:
            return int(m.normalized_shape[-1])
    for m in reversed(modules):
        if isinstance(m, torch.nn.Linear):
            return int(m.in_features)
    return 0


def _check_options(quantization, weights, version, mmap, preload_lookahead) -> Optional[str]:
    if version not in VERSIONS:
        raise CompileError(f"version must be one of {', '.join(VERSIONS)}, not {version!r}", stage="options")
    if weights not in WEIGHTS:
        raise CompileError(f"weights must be 'internal' or 'external', not {weights!r}", stage="options")
    if mmap not in MMAP_MODES:
        raise CompileError(f"mmap must be one of {', '.join(MMAP_MODES)}, not {mmap!r}", stage="options")
    if not isinstance(preload_lookahead, int) or isinstance(preload_lookahead, bool) or preload_lookahead < 0:
        raise CompileError(f"preload_lookahead must be an integer >= 0, not {preload_lookahead!r}", stage="options")
    q = None if quantization is None else str(quantization).lower()
    if q is not None and q not in QUANT_METHODS:
        raise CompileError(f"quantization must be one of {', '.join(QUANT_METHODS)}, not {quantization!r}",
                           stage="options")
    return None if q == "none" else q


def compile_model(model, args=(), kwargs=None, *, optimize: bool = True, quantization: Optional[str] = None,
                  weights: str = "internal", version: str = "1.6", mmap: str = "min-peak",
                  preload_lookahead: int = 2, tokenizer: Optional[str] = None,
                  d_model: Optional[int] = None, debug_info: bool = True,
                  checkpoint=None) -> CompileResult:
    """Compile ``model`` called as ``model(*args, **kwargs)``. See :func:`nac_engine.compiler.compile`.
    ``checkpoint``: where the weights of a model built without them are (``hf.load_model``)."""
    quant = _check_options(quantization, weights, version, mmap, preload_lookahead)
    report = CompileReport(model=type(model).__name__, options=dict(
        optimize=bool(optimize), quantization=quant, weights=weights, version=version, mmap=mmap,
        preload_lookahead=preload_lookahead, tokenizer=tokenizer))
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        report.timings[stage] = report.timings.get(stage, 0.0) + now - clock
        clock = now

    args = args if isinstance(args, tuple) else (args,)
    graph, sources, output_names = _export_graph(model, args, kwargs, report, debug_info)
    if checkpoint is None:                       # a model hf.load_model built without its weights
        checkpoint = getattr(model, "_nac_checkpoint", None)
    defer_large(graph, checkpoint)               # large weights are read when written: deferred.py
    signature = input_specs(model, args, kwargs, graph)
    report.warnings.extend(graph.warnings)
    report.instructions_exported = graph.instruction_count()
    lap("export")
    if optimize:
        report.passes = run_passes(graph)
        problems = regroup_problems(graph)       # a pass that wrote a new list op must keep it readable
        if problems:
            raise regroup_error(problems[0], stage="passes")
    complex_params_as_pairs(graph)               # DATA has no complex dtype: real pairs + view_as_complex
    if expand_control_flow(graph):               # torch.cond -> <CONTROL_FLOW>, after the passes
        report.warnings.append("torch.cond compiled to <CONTROL_FLOW> blocks (the code after it is in both); "
                               "no MMAP schedule: the planner does not model branches")
    lap("passes")
    ops = canonicalize(graph)
    width = derive_d_model(model) if d_model is None else int(d_model)
    if width > 0xFFFF:
        report.warnings.append(f"d_model {width} does not fit the header's u16 field; written as 0 (unknown)")
        width = 0
    emitted = emit(graph, ops, version=version, weights_internal=(weights == "internal"), d_model=width)
    nac = emitted.nac
    entries = source_entries(graph.nodes, emitted.tick_of, sources, len(nac.instructions)) \
        if debug_info else None
    del graph
    lap("emit")
    report.float_param_bytes = sum(p.meta.stored_nbytes for p in nac.params.values())
    if quant is not None:
        from .quantize import quantize_parameters
        report.quant = quantize_parameters(nac, quant)
        lap("quantize")
    if tokenizer:
        try:
            from .tokenizer import embed_tokenizer
        except ImportError as e:
            raise CompileError(f"tokenizer embedding is not available ({e})", stage="tokenizer") from None
        try:
            report.tokenizer_files = list(embed_tokenizer(nac, str(tokenizer)))
        except (OSError, ValueError) as e:
            raise CompileError(f"tokenizer {tokenizer}: {e}", stage="tokenizer") from None
        lap("tokenizer")
    # This project's RSRC extensions (README): default inputs for nac run/sim, and tick -> user code.
    set_input_signature(nac, signature)
    if output_names and len(output_names) == nac.header.num_outputs:     # (a pass may have merged some)
        set_output_names(nac, output_names)
    if entries is not None:
        set_source_map(nac, entries)
    if any(i.a == OP_CONTROL_FLOW for i in nac.instructions):
        nac.mmap = []                            # see control_flow.py: no plan across branches
    else:
        _schedule(nac, emitted.value_nbytes, mmap, preload_lookahead, report)
    lap("mmap")

    report.instructions = len(nac.instructions)
    report.params = len(nac.params)
    report.param_bytes = sum(p.meta.stored_nbytes for p in nac.params.values())
    report.custom_ops = len(nac.cmap)
    report.signatures = len([s for s in nac.perms.values() if s])
    report.constants = len(nac.constants)
    report.op_histogram = dict(collections.Counter(nac.instruction_name(i) for i in nac.instructions))
    return CompileResult(nac, report)


def _export_graph(model, args: tuple, kwargs, report: CompileReport, debug_info: bool = True):
    """Export and decompose until every flattened tensor list reads back as written: an op whose
    lists the interpreter would regroup differently is decomposed when torch can (noted in the
    report), else the compile stops naming it and the user's line (see :mod:`.tensor_lists`)."""
    with full_stack_traces() if debug_info else contextlib.nullcontext():
        program = trace_program(model, args, kwargs)
    lowered: set = set()
    while True:
        decomposed = decompose_program(program, lowered)
        graph = to_graph(decomposed)
        problems = regroup_problems(graph)
        if not problems:
            names = pytree_output_names(getattr(program, "call_spec", None) and program.call_spec.out_spec)
            return graph, (fx_sources(decomposed) if debug_info else {}), names
        new = {}
        for p in problems:
            if p.op in lowered or p.op in new:
                continue
            if decomposition_for(p.op) is None:
                raise regroup_error(p)
            new[p.op] = p
        if not new:                    # decomposed, yet the op is still there: torch kept it
            raise regroup_error(problems[0])
        for op, p in new.items():
            report.warnings.append(f"{op} decomposed into simpler ops: {p.reason}")
        lowered |= set(new)


def _schedule(nac, value_nbytes: dict, mode: str, lookahead: int, report: CompileReport) -> None:
    """Plan the written mode and, for the report, the other one; the written plan must lint clean."""
    from ..format.mmap_lint import check_schedule
    from .schedule import plan_mmap
    chosen = None
    for m in (mode,) + tuple(x for x in MMAP_MODES if x != mode):
        plan = plan_mmap(nac, value_nbytes, mode=m, preload_lookahead=lookahead)
        report.mmap[m] = {"peak": int(plan.peak_live_bytes), "tick": int(plan.peak_tick),
                          "commands": sum(len(r.commands) for r in plan.records)}
        if m == mode:
            chosen = plan
    nac.mmap = chosen.records
    lint = check_schedule(nac)
    if lint.violations:
        first = lint.violations[0]
        raise CompileError(f"internal error: the {mode} MMAP plan has {len(lint.violations)} violation(s), "
                           f"first: tick {first.tick}: {first.kind}: {first.message}", stage="mmap")
