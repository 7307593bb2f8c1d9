"""What ``nac compile`` records beside the program: the input signature and the source map.

* :func:`input_specs` — the example inputs' names, shapes, dtypes and value ranges
  (:mod:`nac_engine.format.input_signature`).
* :func:`fx_sources` + :func:`source_entries` — per instruction, the module path (the innermost
  entry of torch.export's ``nn_module_stack``), the exported node's name and the user's
  ``file:line`` with its text (the innermost ``stack_trace`` frame outside torch and this package,
  so transformers' own ``softmax`` call, not torch's ``functional.py``)
  (:mod:`nac_engine.format.source_map`).

Determinism: a path is stored relative to the library directory holding it (site-packages,
the standard library), else to its project's root (the nearest ancestor with ``.git``,
``pyproject.toml``, ``setup.py``), else to the working directory when under it; a file in the
temporary directory keeps only its name. So compiling the same model from two directories, or
from a factory in two temporary directories, writes the same bytes.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import re
import sys
import sysconfig
import tempfile
from typing import Any, Optional

import numpy as np
import torch

from ..format.input_signature import InputSpec, spec_from_example
from ..format.source_map import SourceEntry

# (module path, file, line, code, call stack) per exported fx node name; the stack is the user's
# frames outermost first, each (frame name, file, line, code)
FxSource = tuple[str, Optional[str], Optional[int], Optional[str], tuple]


# --------------------------------------------------------------------------- input signature
def input_specs(model: Any, args: tuple, kwargs: Optional[dict], graph) -> list[InputSpec]:
    """One spec per user input of ``graph``, in instruction order; the value range comes from the
    example value bound to the forward argument of the same name (shape and dtype from the graph
    when there is no such example)."""
    bound: dict = dict(kwargs or {})
    forward = getattr(model, "forward", None)
    if isinstance(model, torch.nn.Module) and forward is not None:
        try:
            bound = dict(inspect.signature(forward).bind_partial(*args, **(kwargs or {})).arguments)
        except (TypeError, ValueError):
            pass
    specs = []
    for node in graph.inputs:
        shape = tuple(int(d) for d in node.spec.shape) if node.spec is not None else None
        example = bound.get(node.name)
        spec = None
        if isinstance(example, torch.Tensor) and shape is not None and tuple(example.shape) == shape:
            spec = spec_from_example(node.name, example)
        if spec is None and node.spec is not None:
            dtype = _numpy_name(node.spec.dtype)
            if dtype is not None:
                spec = InputSpec(node.name, shape, dtype, "input")
        if spec is not None:
            specs.append(spec)
    return specs


def _numpy_name(dtype: torch.dtype) -> Optional[str]:
    try:
        return np.dtype(torch.empty((), dtype=dtype).numpy().dtype).name
    except (TypeError, RuntimeError):
        return None      # bfloat16 and other dtypes numpy has no name for


# --------------------------------------------------------------------------- source map
@contextlib.contextmanager
def full_stack_traces():
    """Around ``torch.export``: record every frame of a node's stack trace from the first
    ``forward`` on, not only the ``forward`` frames non-strict export keeps — so a call made in a
    helper function (transformers' ``eager_attention_forward`` calling ``softmax``) keeps its own
    line. Uses the tracer's documented override point, ``_filter_traceback_frames``; a torch
    without it is left alone (the source map then names the innermost ``forward`` line)."""
    try:
        from torch.fx.proxy import TracerBase
        original = TracerBase.__dict__["_filter_traceback_frames"]
    except (ImportError, KeyError):
        yield
        return

    def every_frame(self, summary):
        saved = getattr(self, "_record_forward_stack_traces_only", False)
        self._record_forward_stack_traces_only = False
        try:
            return original(self, summary)
        finally:
            self._record_forward_stack_traces_only = saved

    TracerBase._filter_traceback_frames = every_frame
    try:
        yield
    finally:
        TracerBase._filter_traceback_frames = original


def fx_sources(program) -> dict[str, FxSource]:
    """Exported fx node name → (module path, file, line, code, stack) for every call in ``program``."""
    out: dict[str, FxSource] = {}
    for fx in program.graph.nodes:
        if fx.op != "call_function":
            continue
        modules, trace = fx.meta.get("nn_module_stack"), fx.meta.get("stack_trace")
        out[fx.name] = (module_path(modules),) + user_frame(trace) + (call_stack(modules, trace),)
    return out


_INDEX = re.compile(r"\[(\d+)\]")
_SELF_PREFIX = re.compile(r"^L\['self'\]\.?|^L__self___?")


def module_path(stack: Optional[dict]) -> str:
    """The innermost module's dotted path (``encoder.layer.0.attention.self``); "" at top level."""
    if not stack:
        return ""
    value = list(stack.values())[-1]
    path = value[0] if isinstance(value, tuple) and value else str(value)
    path = _SELF_PREFIX.sub("", str(path))
    return _INDEX.sub(r".\1", path).replace("._modules['", ".").replace("']", "").strip(".")


def _trace_frames(stack_trace: Optional[str]) -> list[tuple[str, int, str, str]]:
    """(file, line, function, code) of every frame of a recorded stack trace, outermost first."""
    if not stack_trace:
        return []
    lines = stack_trace.strip().splitlines()
    frames = []
    for i, line in enumerate(lines):
        text = line.strip()
        if not text.startswith('File "'):
            continue
        fname, _, rest = text[6:].partition('", line ')
        number, _, function = rest.partition(", in ")
        try:
            lineno = int(number)
        except ValueError:
            continue
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        frames.append((fname, lineno, function.strip(), "" if nxt.startswith('File "') else lines[i + 1].rstrip()))
    return frames


def user_frame(stack_trace: Optional[str]) -> tuple[Optional[str], Optional[int], Optional[str]]:
    """(stable file path, line, code) of the innermost frame outside torch and this package."""
    from .fx_source import is_internal as _is_internal
    frames = _trace_frames(stack_trace)
    if not frames:
        return None, None, None
    fname, lineno, _, code = next((f for f in reversed(frames) if not _is_internal(f[0])), frames[-1])
    return stable_path(fname), lineno, code


# a line that only hands its arguments on: a decorator's wrapper
_PASS_THROUGH = re.compile(r"(?:return\s+|[\w\s,]+=\s*)?[\w.]+\((?:self,\s*)?\*args,\s*\*\*kwargs\)$")


def call_stack(stack: Optional[dict], stack_trace: Optional[str]) -> tuple:
    """The user's frames of a node's stack trace, outermost first, each ``(name, file, line,
    code)``. A ``forward`` frame is the next module of ``nn_module_stack`` (modules are entered
    outermost first, each through its ``forward``), so it is named ``path (Class.forward)``
    (``Class.forward`` for the model itself); another function is named after the module it
    runs in: ``path (helper)``. Frames inside torch and this package are left out, and so are
    decorators' wrappers that only pass their arguments on (``return func(self, *args, **kwargs)``):
    transformers 5.24 wraps every ``forward`` in one, which doubled a stack's length with frames
    that say nothing. A module's ``forward`` and the innermost frame (the op's own line) are
    always kept."""
    from .fx_source import is_internal as _is_internal
    modules = []
    for value in (stack or {}).values():
        path, kind = (value[0], value[1]) if isinstance(value, tuple) and len(value) >= 2 else (value, "")
        modules.append((module_path({"m": (path,)}), str(kind).rpartition(".")[2]))
    out = []
    k = -1
    frames = _trace_frames(stack_trace)
    for i, (fname, lineno, function, code) in enumerate(frames):
        if function == "forward" and k + 1 < len(modules):
            k += 1
        if _is_internal(fname) or (function != "forward" and i + 1 < len(frames)
                                       and _PASS_THROUGH.match(code.strip())):
            continue
        path, kind = modules[k] if k >= 0 else ("", "")
        what = f"{kind}.{function}" if function == "forward" and kind else function
        out.append((f"{path} ({what})" if path else what, stable_path(fname), lineno, code))
    return tuple(out)


def _library_roots() -> list[str]:
    roots = set()
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(os.path.realpath(p))
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p):
            roots.add(os.path.realpath(p))
    return sorted(roots, key=len, reverse=True)      # the deepest root that holds a file wins


_PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


def _project_root(directory: str) -> Optional[str]:
    """The nearest ancestor of ``directory`` holding a project marker (a repository's root)."""
    d = directory
    for _ in range(64):
        if any(os.path.exists(os.path.join(d, m)) for m in _PROJECT_MARKERS):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent
    return None


def stable_path(path: str) -> str:
    """``path`` made independent of where the compile ran (module docstring); '/'-separated."""
    if path.startswith("<"):
        return path
    real = os.path.realpath(path)
    for root in _library_roots():
        if real.startswith(root + os.sep):
            return os.path.relpath(real, root).replace(os.sep, "/")
    project = _project_root(os.path.dirname(real))
    if project is not None:
        return os.path.relpath(real, project).replace(os.sep, "/")
    tmp = os.path.realpath(tempfile.gettempdir())
    if real.startswith(tmp + os.sep):
        return os.path.basename(real)
    cwd = os.path.realpath(os.getcwd())
    if real.startswith(cwd + os.sep):
        return os.path.relpath(real, cwd).replace(os.sep, "/")
    return real.replace(os.sep, "/")


def source_entries(order_nodes: list, tick_of: dict[int, int], sources: dict[str, FxSource],
                   n_instructions: int) -> list[SourceEntry]:
    """One entry per instruction: graph nodes through ``tick_of``, the final ``<OUTPUT>`` at top level."""
    entries = []
    seen = set()
    for node in order_nodes:
        tick = tick_of.get(node.id)
        if tick is None or tick in seen:
            continue
        seen.add(tick)
        if node.kind == "op":
            module, file, line, code, stack = sources.get(node.name, ("", None, None, None, ()))
        elif node.kind == "param":
            module, file, line, code, stack = node.name.rpartition(".")[0], None, None, None, ()
        else:
            module, file, line, code, stack = "", None, None, None, ()
        entries.append(SourceEntry(tick, module, node.name, file, line, code, stack))
    if n_instructions and n_instructions - 1 not in seen:
        entries.append(SourceEntry(n_instructions - 1, "", "output"))
    return entries
