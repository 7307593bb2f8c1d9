"""Stage 1: ``torch.export`` → a functional ATen graph → our :class:`~.graph.Graph`.

Decompositions: ``run_decompositions({})`` gives torch's *inference* IR — functional (no
in-place ops, no aliasing outputs), with the high-level ops torch preserves by default kept
as they are (``linear``, ``conv2d``, ``layer_norm``, ``softmax``, ``gelu``,
``scaled_dot_product_attention``, ``max_pool2d``, ``embedding``...) and composite ones lowered
(``batch_norm`` → ``_native_batch_norm_legit_no_training``, ``dropout`` → ``clone``,
``flatten`` → ``view``). The core-ATen table (``default_decompositions()``) would explode
``linear`` into ``permute``+``addmm`` and ``layer_norm`` into ``native_layer_norm`` tuples,
which neither our interpreter nor a hardware model wants; anything that remains is a plain
ATen op our interpreter runs by lookup. The exception: ops whose ``Tensor[]`` arguments NAC's
flattened encoding cannot delimit (:data:`LIST_AMBIGUOUS_OPS`: LSTM) are lowered with torch's own
decompositions, and the pipeline adds any other op :mod:`.tensor_lists` finds ambiguous.

Export failures become one :class:`CompileError` carrying torch's message (trimmed) and the
user's source line, found by walking the traceback for the deepest frame outside torch,
transformers' export plumbing and this package.
"""
from __future__ import annotations

import contextlib
import io
import logging
import operator
import sys
import traceback
import warnings
from typing import Any, Callable, Iterable, Optional

import torch
from torch._subclasses.fake_tensor import FakeTensor

from . import export_hints as hints
from .control_flow import is_cond
from .fx_source import fx_source as _fx_source, is_internal as _is_internal, map_fx
from .errors import CompileError
from .graph import Graph, Node, spec_of_value

_MAX_MESSAGE_LINES = 25
_SHORT_TORCH_LINES = 3       # torch's text after our own advice: its first lines say enough


def export_program(model: torch.nn.Module, args: tuple = (), kwargs: Optional[dict] = None,
                   decompose: Iterable = ()):
    """:func:`trace_program` then :func:`decompose_program` (``decompose``: ops beyond
    :data:`LIST_AMBIGUOUS_OPS` to lower)."""
    return decompose_program(trace_program(model, args, kwargs), decompose)


def trace_program(model: torch.nn.Module, args: tuple = (), kwargs: Optional[dict] = None):
    """``torch.export.export(model, args, kwargs, strict=False)``, not yet decomposed.

    The model is put in eval mode for the export and its training flag restored afterwards.
    An ``ExportedProgram`` passed as ``model`` is returned as it is."""
    if isinstance(model, torch.export.ExportedProgram):
        return model
    if not isinstance(model, torch.nn.Module):
        raise CompileError(f"expected a torch.nn.Module or ExportedProgram, got {type(model).__name__}",
                           stage="export")
    if not isinstance(args, tuple):
        args = (args,)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), _quiet_failures(), warnings.catch_warnings():
            # torch's own pytree deprecation, raised inside export: nothing the user can act on
            warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
            # nn.LSTM/GRU/RNN re-assign their own _flat_weights list during export
            warnings.filterwarnings("ignore", message=r".*_flat_weights\[0\].*were assigned during export",
                                    category=UserWarning)
            return torch.export.export(model, args, kwargs or {}, strict=False)
    except CompileError:
        raise
    except Exception as e:
        raise export_error(e, model=model) from None
    finally:
        model.train(was_training)


# Ops lowered during export because NAC cannot store their arguments unambiguously: it flattens
# every Tensor[] into one slot per tensor, and for these the interpreter cannot tell where one
# list ends (tensor_lists.py). Their recurrent siblings gru.input / rnn_tanh.input / rnn_relu.input
# have a single Tensor hx before their one list, so they regroup uniquely and stay whole.
LIST_AMBIGUOUS_OPS = {
    "aten.lstm.input": "hx: Tensor[] (h, c) directly followed by params: Tensor[]",
    "aten.lstm.data": "batch_sizes: Tensor, then hx: Tensor[] and params: Tensor[] side by side",
    "aten.lstm_cell.default": "hx: Tensor[] (h, c) directly followed by w_ih: Tensor, w_hh: Tensor",
}


def _overload(name: str):
    _, op, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, op), overload)


def decomposition_for(op) -> Optional[Callable]:
    """torch's decomposition of ``op``: its ``torch._decomp`` entry, else its
    CompositeImplicitAutograd kernel as torch.export's own table traces it; None if neither."""
    from torch._decomp import get_decompositions
    table = get_decompositions([op])
    if op in table:
        return table[op]
    if not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return None
    cia = torch.export.default_decompositions()
    return cia[op] if op in cia else None


def decompose_program(ep, extra: Iterable = ()):
    """The inference decompositions (module docstring), plus :data:`LIST_AMBIGUOUS_OPS` and
    ``extra`` lowered when the graph calls them."""
    wanted = {_overload(n) for n in LIST_AMBIGUOUS_OPS} | set(extra)
    called = {n.target for n in ep.graph.nodes if n.op == "call_function"}
    table = {}
    for op in sorted(wanted & called, key=str):
        fn = decomposition_for(op)
        if fn is not None:
            table[op] = fn
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
            return ep.run_decompositions(table)
    except Exception as e:
        raise export_error(e, what="decomposition") from None


_QUIET_LOGGERS = (("torch.fx.experimental.symbolic_shapes", logging.ERROR),
                  ("torch._subclasses.fake_tensor", logging.CRITICAL))


@contextlib.contextmanager
def _quiet_failures():
    """On a failed export torch prints the half-traced graph to stderr and logs a guard warning;
    our error says what failed, once, with the user's line. So both are held back during the export
    and what was written to stderr is passed on only if the export succeeds."""
    # Their handlers hold the stderr of their creation, out of redirect_stderr's reach: the guard
    # warnings, and the fake-tensor pass's 20-line traceback of a shape error our message names.
    quieted = [(logging.getLogger(name), level) for name, level in _QUIET_LOGGERS]
    saved = [log.level for log, _ in quieted]
    for log, level in quieted:
        log.setLevel(level)
    held = io.StringIO()
    ok = False
    try:
        with contextlib.redirect_stderr(held):
            yield
        ok = True
    finally:
        for (log, _), level in zip(quieted, saved):
            log.setLevel(level)
        if ok and held.getvalue():
            sys.stderr.write(held.getvalue())


def export_error(e: BaseException, what: str = "torch.export", model: Any = None) -> CompileError:
    """One CompileError: torch's message (trimmed, without advice that does not apply), the fix
    where one is known (``export_hints``) and the user's line."""
    source = user_source_line(e)
    if hints.returns_cache(e):
        return CompileError(f"{what} failed: {hints.cache_hint(model)} ({type(e).__name__}: "
                            f"{str(e).strip().splitlines()[0][:200]})", stage="export",
                            source=source or (hints.forward_location(model) if model is not None else None))
    text = hints.without_dynamic_shapes_advice(str(e).strip()) or type(e).__name__
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # what to change first; torch's own text after it, shortened
    change = hints.transformer_causal_hint(e) or hints.data_dependent_hint(e) or \
        (hints.packed_quantized_hint(model) if model is not None else None)
    if change and hints.packed_quantized_hint(model) == change and source is None:
        where = hints.forward_location(model)          # the user's forward, not torch's own
        source = where if where and not _is_internal(where.split(":", 1)[0]) else None
    limit = _MAX_MESSAGE_LINES if change is None else _SHORT_TORCH_LINES
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more lines of torch's message)"]
    torch_text = f"{type(e).__name__}: " + "\n    ".join(lines)
    if change:
        return CompileError(f"{what} failed: {change}\n  torch says: {torch_text}", stage="export", source=source)
    return CompileError(f"{what} failed: {torch_text}", stage="export", source=source)


def user_source_line(e: BaseException) -> Optional[str]:
    """``file:line: code`` of the deepest traceback frame in the user's code, over the exception chain."""
    best = None
    seen = set()
    exc: Optional[BaseException] = e
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for fr in traceback.extract_tb(exc.__traceback__):
            if not _is_internal(fr.filename):
                best = f"{fr.filename}:{fr.lineno}: {(fr.line or '').strip()}"
        if best is not None:
            return best
        exc = exc.__cause__ or exc.__context__
    return best


# --------------------------------------------------------------------------- to our graph
def to_graph(ep) -> Graph:
    """Our IR of a decomposed ExportedProgram: placeholders classified by the export signature."""
    from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind

    g = Graph()
    sig = ep.graph_signature
    env: dict[str, Any] = {}      # fx node name -> Node or constant value
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(sig.input_specs):
        raise CompileError(f"export signature lists {len(sig.input_specs)} inputs but the graph has "
                           f"{len(placeholders)} placeholders", stage="export")
    state = ep.state_dict
    consts = ep.constants
    same_tensor: dict[tuple, Node] = {}
    for ph, spec in zip(placeholders, sig.input_specs):
        kind = spec.kind
        if kind == InputKind.USER_INPUT:
            if isinstance(spec.arg, ConstantArgument):
                env[ph.name] = spec.arg.value      # a Python value torch specialised on
                continue
            val = ph.meta.get("val")
            if not isinstance(val, torch.Tensor):
                env[ph.name] = val
                continue
            env[ph.name] = g.append(g.new_node("input", ph.name, spec=spec_of_value(val)))
        elif kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            target = spec.target
            if target in state:
                tensor = state[target]
            elif target in consts:
                tensor = consts[target]
            else:
                raise CompileError(f"{kind.name.lower()} {target!r} has no value in the exported program",
                                   stage="export")
            if not isinstance(tensor, torch.Tensor):
                raise CompileError(f"{kind.name.lower()} {target!r} is a {type(tensor).__name__}, not a tensor",
                                   stage="export")
            key = _tensor_identity(tensor)
            tensor = tensor.detach()
            if key is not None and key in same_tensor:     # tied weights, a constant lifted twice
                env[ph.name] = same_tensor[key]
                continue
            origin = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer"}.get(kind, "constant")
            env[ph.name] = g.append(g.new_node("param", target, spec=spec_of_value(tensor), tensor=tensor,
                                               origin=origin))
            if key is not None:
                same_tensor[key] = env[ph.name]
        else:
            raise CompileError(f"export input {ph.name!r} of kind {kind.name} (custom objects, tokens) "
                               f"cannot be represented in NAC", stage="export")

    resolve = lambda n: env[n.name]   # noqa: E731
    for fx in ep.graph.nodes:
        if fx.op == "placeholder":
            continue
        if fx.op == "output":
            results = fx.args[0]
            break
        if fx.op == "get_attr" and isinstance(getattr(ep.graph_module, fx.target, None), torch.fx.GraphModule):
            env[fx.name] = getattr(ep.graph_module, fx.target)     # a torch.cond branch
            continue
        if fx.op != "call_function":
            raise CompileError(f"graph node {fx.name!r} ({fx.op} {fx.target}) is not a function call: control "
                               f"flow and submodules (torch.cond, map, ...) are not supported", stage="export",
                               source=_fx_source(fx))
        if isinstance(fx.target, torch._ops.HigherOrderOperator) and not is_cond(fx.target):
            raise CompileError(f"{fx.target.__name__} at {fx.name!r}: higher-order ops (control flow, "
                               f"wrap_with_*) are not supported by NAC", stage="export", source=_fx_source(fx))
        if not isinstance(fx.target, torch._ops.OpOverload) and fx.target is not operator.getitem \
                and not is_cond(fx.target):
            raise CompileError(f"{fx.name!r} calls {getattr(fx.target, '__name__', fx.target)}, which is "
                               f"neither an ATen op nor getitem (symbolic shape arithmetic? export with "
                               f"static shapes)", stage="export", source=_fx_source(fx))
        args = map_fx(fx.args, resolve)
        kwargs = map_fx(dict(fx.kwargs), resolve)
        try:
            spec = spec_of_value(fx.meta.get("val"))
        except CompileError as e:
            raise CompileError(f"{fx.name} ({fx.target}): {e.message}", stage="export", source=_fx_source(fx)) from None
        node = g.new_node("op", fx.name, target=fx.target, args=args, kwargs=kwargs, spec=spec)
        node.origin = _fx_source(fx) or ""
        env[fx.name] = g.append(node)
    else:
        raise CompileError("exported graph has no output node", stage="export")

    for value, spec in zip(results, sig.output_specs):
        if spec.kind != OutputKind.USER_OUTPUT:
            g.warnings.append(f"export output {spec.arg} ({spec.kind.name}) dropped: NAC has no "
                              f"instruction that writes state back")
            continue
        v = map_fx(value, resolve)
        if isinstance(v, Node):
            g.outputs.append(v)
        else:
            g.warnings.append(f"non-tensor output {v!r} dropped")
    if not g.outputs:
        raise CompileError("the model returns no tensor", stage="export")
    return g


def _tensor_identity(t: torch.Tensor):
    """Same storage, offset, shape, strides and dtype: the very same values (None for empty tensors)."""
    if t.numel() == 0 or t.is_meta:
        return None
    if isinstance(t, FakeTensor):    # weights not loaded (compiler/deferred.py): tied ones are one object
        return ("fake", id(t))
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


__all__ = ["export_program", "trace_program", "decompose_program", "decomposition_for", "LIST_AMBIGUOUS_OPS",
           "to_graph", "export_error", "user_source_line"]
