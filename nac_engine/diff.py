"""Differential debugging: run two programs on the same inputs and find where their values part.

``diff_files(a, b, ...)`` runs NAC file ``a`` (the reference) and NAC file ``b`` (its quantised
version, a recompile, the reference compiler's file of the same model) instruction by instruction;
``diff_eager(a, "model.py:make_model", ...)`` compares ``a`` with PyTorch eager of the factory's
model (its ``torch.export`` graph run node by node by ``torch.fx.Interpreter``).

Matching the values of the two runs, best first:

1. ``source-map`` — both files carry a source map (``nac-studio/source-map``): ticks with the same
   (module path, node name) pair up (what a quantised file or a recompile of the same model keeps);
2. ``structure`` — the instruction sequences aligned by op name (``difflib``'s longest matching
   blocks), so files that differ only in parameters match tick for tick;
3. ``outputs`` — the graph outputs, by position, always.

A pair whose shapes differ is listed but not compared. Per pair: max abs error, relative error
(max abs error over max |reference|) and cosine similarity. The first divergence is the first
pair, in the reference's tick order, whose ``metric`` passes ``tolerance`` (``cosine``: 1 − cosine).
Parameter loads are compared only with ``include_params`` (a quantised file's weights differ by
construction; its activations are what the user asks about).
"""
from __future__ import annotations

import difflib
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from .format.build_recipe import build_hf_options, build_seed
from .format.input_signature import read_input_signature
from .format.blocks import tick_blocks
from .format.model import NacFile
from .isa.optable import OP_INPUT, OP_OUTPUT, uninitialised

METRICS = ("max_abs", "relative", "cosine")


@dataclass
class PairError:
    """One matched pair of values and how far apart they are (``None`` metrics: not comparable)."""
    tick_a: int
    tick_b: Optional[int]          # None for an eager value (``node`` names it)
    label: str                     # module path / node, or the op name
    op_a: str
    op_b: str
    shape: tuple
    max_abs: Optional[float] = None
    relative: Optional[float] = None
    cosine: Optional[float] = None
    note: str = ""
    diverges: bool = False
    layer: str = ""                # the decoder layer (format/blocks.py) of tick_a; "" outside them

    def metric(self, name: str) -> Optional[float]:
        if name == "cosine":
            return None if self.cosine is None else 1.0 - self.cosine
        return getattr(self, name)


@dataclass
class DiffResult:
    method: str                    # "source-map", "structure" or "outputs"
    metric: str
    tolerance: float
    pairs: list[PairError] = field(default_factory=list)
    outputs: list[PairError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    a_name: str = "A"
    b_name: str = "B"
    #: (value in A, value in B) of the first divergence only, keyed by ``id`` of its pair (the Studio
    #: shows both side by side; keeping every pair's values would hold two whole runs)
    kept_values: dict[int, tuple] = field(default_factory=dict, repr=False, compare=False)

    @property
    def first_divergence(self) -> Optional[PairError]:
        return next((p for p in self.pairs if p.diverges), None) or \
            next((p for p in self.outputs if p.diverges), None)

    @property
    def diverged(self) -> bool:
        return self.first_divergence is not None

    def layers(self) -> list[tuple[str, int, Optional[float], Optional[float]]]:
        """How the error grows through the model: per decoder layer in order, (layer, matched
        values, the metric at its last value — what the layer hands on —, the largest in it)."""
        out: dict[str, list] = {}
        for p in self.pairs:
            if not p.layer:
                continue
            m = p.metric(self.metric)
            row = out.setdefault(p.layer, [p.layer, 0, None, None])
            row[1] += 1
            if m is not None:
                row[2] = m
                row[3] = m if row[3] is None else max(row[3], m)
        return [tuple(r) for r in out.values()]

    def values_of(self, pair: PairError) -> Optional[tuple]:
        """(value in A, value in B) of ``pair`` as the runs produced them (tensors in their own dtype),
        kept for the first divergence only (``None`` for any other pair)."""
        return self.kept_values.get(id(pair))

    def _keep_first(self, pair: PairError, va: Any, vb: Any) -> None:
        if pair.diverges and not self.kept_values:
            self.kept_values[id(pair)] = (va, vb)

    def to_data(self) -> dict:
        """Every field as plain data, the first divergence's values as numpy arrays
        (:meth:`from_data` gives the same result back): how a diff crosses from the Studio's
        engine host to its window."""
        from .runtime.tick_result import as_numpy
        kept = []
        for group in ("pairs", "outputs"):
            for i, p in enumerate(getattr(self, group)):
                values = self.kept_values.get(id(p))
                if values is not None:
                    kept.append({"group": group, "index": i, "a": as_numpy(values[0]), "b": as_numpy(values[1])})
        return {"method": self.method, "metric": self.metric, "tolerance": self.tolerance,
                "pairs": [asdict(p) for p in self.pairs], "outputs": [asdict(p) for p in self.outputs],
                "notes": list(self.notes), "a_name": self.a_name, "b_name": self.b_name, "kept": kept}

    @classmethod
    def from_data(cls, d: dict) -> "DiffResult":
        def pair(x: dict) -> PairError:
            return PairError(**{**x, "shape": tuple(x.get("shape") or ())})
        r = cls(d["method"], d["metric"], float(d["tolerance"]), [pair(x) for x in d.get("pairs") or []],
                [pair(x) for x in d.get("outputs") or []], list(d.get("notes") or []), d.get("a_name", "A"),
                d.get("b_name", "B"))
        for k in d.get("kept") or []:
            group = getattr(r, k["group"])
            if 0 <= k["index"] < len(group):
                r.kept_values[id(group[k["index"]])] = (k["a"], k["b"])
        return r

    def to_json(self) -> dict:
        first = self.first_divergence
        return {"a": self.a_name, "b": self.b_name, "method": self.method, "metric": self.metric,
                "tolerance": self.tolerance, "diverged": self.diverged,
                "first_divergence": None if first is None else _json_pair(first),
                "pairs": [_json_pair(p) for p in self.pairs], "outputs": [_json_pair(p) for p in self.outputs],
                "notes": list(self.notes)}


def _json_pair(p: PairError) -> dict:
    d = asdict(p)
    d["shape"] = list(p.shape)
    for k in ("max_abs", "relative", "cosine"):
        if d[k] is not None and not math.isfinite(d[k]):
            d[k] = str(d[k])           # JSON has no inf/NaN
    return d


# --------------------------------------------------------------------------- errors of one pair
def compare_values(a: Any, b: Any) -> tuple[Optional[float], Optional[float], Optional[float], str]:
    """(max abs, relative, cosine, note) of two values; NaN in the same place in both is equal."""
    x, y = _array(a), _array(b)
    if x is None or y is None:
        return None, None, None, "not a tensor"
    if x.shape != y.shape:
        return None, None, None, f"shapes differ: {list(x.shape)} vs {list(y.shape)}"
    if x.size == 0:
        return 0.0, 0.0, 1.0, ""
    x, y = np.atleast_1d(x), np.atleast_1d(y)       # 0-d values: elementwise assignment below
    both_nan = np.isnan(x) & np.isnan(y)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(x - y)
    same_inf = np.isinf(x) & (x == y)
    d[both_nan | same_inf] = 0.0
    d[np.isnan(d)] = np.inf
    max_abs = float(d.max())
    xf = np.where(np.isfinite(x), x, 0.0)
    yf = np.where(np.isfinite(y), y, 0.0)
    scale = float(np.abs(xf).max())
    relative = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    nx, ny = float(np.linalg.norm(xf)), float(np.linalg.norm(yf))
    if nx == 0 and ny == 0:
        cosine = 1.0
    elif nx == 0 or ny == 0:
        cosine = 0.0
    else:
        cosine = float(np.clip(np.dot(xf.ravel(), yf.ravel()) / (nx * ny), -1.0, 1.0))
    return max_abs, relative, cosine, ""


def _array(v: Any) -> Optional[np.ndarray]:
    try:
        import torch
        if isinstance(v, torch.Tensor):
            v = v.detach().cpu()
            if v.is_complex():
                v = torch.view_as_real(v)
            return v.to(torch.float64).numpy()
    except ImportError:      # pragma: no cover
        pass
    if isinstance(v, (tuple, list)):
        return _array(v[0]) if v else None
    if isinstance(v, (bool, int, float, np.number, np.ndarray)):
        return np.asarray(v, dtype=np.float64)
    return None


# --------------------------------------------------------------------------- running
def _kind(nac: NacFile, tick: int) -> str:
    ins = nac.instructions[tick]
    if ins.a == OP_INPUT:
        return "param" if ins.b == 1 else "input"
    if ins.a == OP_OUTPUT:
        return "output"
    return "op"


def run_values(nac: NacFile, inputs=None, feeds=None, keep: Optional[set] = None,
               cancel: Optional[Callable[[], bool]] = None, progress: Optional[Callable[[int, int], None]] = None):
    """Run ``nac`` once; (tick → value for the ticks in ``keep`` (all when None), outputs)."""
    from .runtime.errors import MissingInputError, NacRuntimeError
    from .runtime.session import Session
    kept: dict[int, Any] = {}
    with Session(nac, inputs=inputs, feeds=feeds) as session:
        missing = session.missing_inputs()
        if missing:
            raise MissingInputError(f"{len(missing)} input value(s) missing: "
                                    + "; ".join(s.describe() for s in missing), missing)
        session.reset()
        total = len(nac.instructions)
        dead = session.dead_values()     # released as run() releases them: an LLM's weights are GBs
        while not session.finished:
            if cancel is not None and cancel():
                raise DiffCancelled("cancelled")
            i = session.tick
            session.run_instruction(i)
            if (keep is None or i in keep) and i in session.results:
                v = session.results[i]
                kept[i] = v.detach().clone() if hasattr(v, "detach") else v
            for v in dead.get(i, ()):
                session.results.pop(v, None)
            if progress is not None:
                progress(i + 1, total)
        if session.outputs is None:
            raise NacRuntimeError("the program ended without <OUTPUT B=0>")
        return kept, list(session.outputs)


class DiffCancelled(Exception):
    pass


# --------------------------------------------------------------------------- matching
def _source_keys(nac: NacFile) -> Optional[dict[tuple, int]]:
    from .errors import NacFormatError
    from .format.source_map import read_source_map
    try:
        smap = read_source_map(nac)
    except NacFormatError:
        return None
    if smap is None:
        return None
    keys: dict[tuple, int] = {}
    dup = set()
    for e in smap.entries:
        if e.tick >= len(nac.instructions):
            continue
        k = (e.module_path, e.node_name)
        if k in keys:
            dup.add(k)
        keys[k] = e.tick
    for k in dup:
        del keys[k]
    return keys


def match_ticks(a: NacFile, b: NacFile) -> tuple[str, list[tuple[int, int, str]]]:
    """(method, [(tick in a, tick in b, label)]) over every instruction but the final outputs."""
    ka, kb = _source_keys(a), _source_keys(b)
    if ka and kb:
        common = [(ta, kb[k], (k[0] + " / " if k[0] else "") + k[1]) for k, ta in ka.items() if k in kb]
        if common:
            return "source-map", sorted(common)
    ops_a = [a.instruction_name(i) for i in a.instructions]
    ops_b = [b.instruction_name(i) for i in b.instructions]
    sm = difflib.SequenceMatcher(None, ops_a, ops_b, autojunk=False)
    pairs = []
    for block in sm.get_matching_blocks():
        for k in range(block.size):
            pairs.append((block.a + k, block.b + k, ops_a[block.a + k]))
    return "structure", pairs


# --------------------------------------------------------------------------- the diffs
def diff_files(a, b, inputs: Optional[Mapping[str, Any]] = None, feeds: Optional[Sequence[Any]] = None, *,
               tolerance: float = 1e-3, metric: str = "max_abs", include_params: bool = False, seed: int = 0,
               cancel: Optional[Callable[[], bool]] = None,
               progress: Optional[Callable[[int, int], None]] = None) -> DiffResult:
    """Run NAC files ``a`` and ``b`` (paths or NacFiles) on the same inputs and compare (module docstring).
    Inputs default to ``a``'s recorded input signature (else ``b``'s), drawn with ``seed``."""
    _check_metric(metric, tolerance)
    na, nb, owned = _open(a), _open(b), []
    owned += [x for x, given in ((na, a), (nb, b)) if x is not given]
    try:
        if inputs is None and feeds is None:
            inputs = _default_inputs(na, seed) or _default_inputs(nb, seed)
        method, pairs = match_ticks(na, nb)
        pairs = [(ta, tb, label) for ta, tb, label in pairs
                 if _kind(na, ta) in (("op", "param") if include_params else ("op",))
                 and _kind(nb, tb) == _kind(na, ta)]
        total = len(na.instructions) + len(nb.instructions)
        step = (lambda off: (lambda i, n: progress(off + i, total))) if progress else (lambda off: None)
        va, outs_a = run_values(na, inputs, feeds, {p[0] for p in pairs}, cancel, step(0))
        vb, outs_b = run_values(nb, _only_known(nb, inputs), feeds, {p[1] for p in pairs}, cancel,
                                step(len(na.instructions)))
        result = DiffResult(method, metric, tolerance, a_name=_name(na, a), b_name=_name(nb, b))
        blocks = tick_blocks(na)
        for ta, tb, label in pairs:
            if ta not in va or tb not in vb:
                continue
            value_a = va.pop(ta)
            result.pairs.append(_pair(ta, tb, label, na.instruction_name(na.instructions[ta]),
                                      nb.instruction_name(nb.instructions[tb]), value_a, vb[tb],
                                      metric, tolerance))
            result.pairs[-1].layer = blocks[ta] or ""
            result._keep_first(result.pairs[-1], value_a, vb[tb])
        _outputs(result, na, outs_a, outs_b, metric, tolerance)
        if not result.pairs:
            result.notes.append("no intermediate values matched (different op sequences and no common source "
                                "map): only the outputs are compared")
            result.method = "outputs"
        return result
    finally:
        for x in owned:
            x.close()


def is_hf_source(ref: str) -> bool:
    """A Hugging Face model's directory (or its config.json) rather than ``FILE.py:FACTORY``."""
    return os.path.isdir(ref) or os.path.basename(ref) == "config.json" and os.path.isfile(ref)


def _signature_shapes(nac) -> Optional[list]:
    """The file's recorded user inputs as ``SHAPE:DTYPE`` (what ``nac compile --input`` takes)."""
    specs = read_input_signature(nac)
    if not specs:
        return None
    return ["x".join(map(str, s.shape)) + ":" + s.dtype for s in specs if s.kind == "input"]


def diff_eager(a, factory: str, inputs: Optional[Mapping[str, Any]] = None, *, tolerance: float = 1e-3,
               metric: str = "max_abs", seed: int = 0, cancel: Optional[Callable[[], bool]] = None,
               progress: Optional[Callable[[int, int], None]] = None) -> DiffResult:
    """``a`` against PyTorch eager of ``FILE.py:FACTORY``'s model (or of a Hugging Face directory's,
    built with the ``--hf`` options ``a`` records): its ``torch.export`` graph (decomposed as the
    compiler does) run node by node, each node's value matched by ``a``'s source map node name."""
    import torch

    from .compiler.command import model_from_factory
    from .compiler.export import decompose_program, trace_program
    _check_metric(metric, tolerance)
    na = _open(a)
    try:
        if inputs is None:
            inputs = _default_inputs(na, seed)
            if inputs is None:
                raise ValueError(f"{_name(na, a)} records no input signature: give the inputs")
        # the model as nac compile built it: the same seed before the factory (its random
        # initialisation), and for a factory returning a bare module the file's recorded inputs
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(build_seed(na))
            if is_hf_source(factory):
                from .compiler.command import hf_model
                model, args, kwargs = hf_model(factory, build_hf_options(na), build_seed(na), stream=False)[:3]
            else:
                model, args, kwargs = model_from_factory(factory, _signature_shapes(na))
        program = decompose_program(trace_program(model, args, kwargs), set())
        eager_values, eager_outputs = _run_program(program, inputs, cancel)
        keys = _source_keys(na) or {}
        ticks = {node: (tick, module) for (module, node), tick in keys.items() if _kind(na, tick) == "op"}
        va, outs_a = run_values(na, inputs, None, {t for t, _ in ticks.values()}, cancel, progress)
        result = DiffResult("source-map", metric, tolerance, a_name=_name(na, a), b_name=f"eager {factory}")
        for node, (tick, module) in sorted(ticks.items(), key=lambda kv: kv[1][0]):
            if node in eager_values and tick in va:
                op = na.instruction_name(na.instructions[tick])
                label = (module + " / " if module else "") + node
                value_a = va.pop(tick)
                result.pairs.append(_pair(tick, None, label, op, "eager", value_a, eager_values[node],
                                          metric, tolerance))
                result._keep_first(result.pairs[-1], value_a, eager_values[node])
        _outputs(result, na, outs_a, [t.detach().numpy() for t in eager_outputs if isinstance(t, torch.Tensor)],
                 metric, tolerance)
        if not result.pairs:
            result.method = "outputs"
            result.notes.append("no source map node matched the exported graph: only the outputs are compared")
        return result
    finally:
        if na is not a:
            na.close()


def _run_program(program, inputs: Mapping[str, Any], cancel) -> tuple[dict, list]:
    """Each call node's value by fx name, and the user outputs, of an ExportedProgram run eagerly."""
    import torch
    from torch.export.graph_signature import InputKind, OutputKind
    values, state, consts = [], program.state_dict, program.constants
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            name = spec.arg.name
            if name not in inputs:
                raise ValueError(f"the factory's model takes input {name!r}, which was not given")
            values.append(torch.as_tensor(np.asarray(inputs[name])))
        else:
            values.append(state[spec.target] if spec.target in state else consts[spec.target])
    seen: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            if cancel is not None and cancel():
                raise DiffCancelled("cancelled")
            out = super().run_node(n)
            if n.op == "call_function":
                seen[n.name] = out.detach().clone() if isinstance(out, torch.Tensor) else out
            return out

    with torch.no_grad():
        outs = Recorder(program.graph_module).run(*values)
    kinds = [s.kind for s in program.graph_signature.output_specs]
    outs = [o for o, k in zip(outs, kinds) if k == OutputKind.USER_OUTPUT]
    return seen, outs


def _pair(ta, tb, label, op_a, op_b, va, vb, metric, tolerance) -> PairError:
    shape = tuple(_array(va).shape) if _array(va) is not None else ()
    if uninitialised(op_a) or uninitialised(op_b):
        # whatever the allocator handed out (the op that fills it is compared after it): two runs
        # of the same file differ here too
        return PairError(ta, tb, label, op_a, op_b, shape, note="uninitialised memory: not compared")
    max_abs, rel, cos, note = compare_values(va, vb)
    p = PairError(ta, tb, label, op_a, op_b, shape, max_abs, rel, cos, note)
    m = p.metric(metric)
    p.diverges = m is not None and (m > tolerance or math.isnan(m))
    return p


def _outputs(result: DiffResult, na: NacFile, outs_a, outs_b, metric, tolerance) -> None:
    out_tick = len(na.instructions) - 1
    if len(outs_a) != len(outs_b):
        result.notes.append(f"{len(outs_a)} outputs vs {len(outs_b)}: the first {min(len(outs_a), len(outs_b))} "
                            f"are compared")
    from .format.output_names import output_labels
    labels = output_labels(na, min(len(outs_a), len(outs_b)))
    for k, (x, y) in enumerate(zip(outs_a, outs_b)):
        result.outputs.append(_pair(out_tick, None, labels[k], "output", "output", x, y, metric, tolerance))
        if not any(p.diverges for p in result.pairs):
            result._keep_first(result.outputs[-1], x, y)


def _check_metric(metric: str, tolerance: float) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    if not (isinstance(tolerance, (int, float)) and tolerance >= 0 and math.isfinite(tolerance)):
        raise ValueError(f"tolerance must be a finite number >= 0, not {tolerance!r}")


def _open(x) -> NacFile:
    if isinstance(x, NacFile):
        return x
    from .format import read
    return read(str(x))


def _name(nac: NacFile, given) -> str:
    import os
    return os.path.basename(nac.path) if getattr(nac, "path", None) else (given if isinstance(given, str) else "A")


def _default_inputs(nac: NacFile, seed: int):
    from .format.input_signature import signature_inputs
    return signature_inputs(nac, seed=seed)


def _only_known(nac: NacFile, inputs):
    """The inputs ``nac`` names (a recompile may drop an input the other file has)."""
    if not inputs:
        return inputs
    names = {n.name for n in nac.input_names}
    return {k: v for k, v in inputs.items() if k in names}
