"""Per-instruction cost models: which unit runs an op and for how many cycles.

Units: ``systolic`` (GEMMs: matmul, linear, convolution via im2col), ``vector`` (element-wise,
compare, reductions, the passes of softmax / layer-norm), ``sfu`` (transcendentals: exp,
tanh, GELU, rsqrt, ...), ``mover`` (copies: transpose, permute, cat, slice, gather,
embedding, fills) and ``core`` (system instructions and aliasing ops that only rewrite a
descriptor).

Systolic fold formulas (research note simulator_anchors.md §3), array R rows × C columns,
GEMM M×K · K×N:

=========  =========  ===========  =========  ==========================
dataflow   rows hold  columns hold  streamed   cycles per fold F
=========  =========  ===========  =========  ==========================
OS         M          N            K          T + R + C − 2
WS         K          N            M          2R + C + T − 2
IS         K          M            N          2R + C + T − 2
=========  =========  ===========  =========  ==========================

``folds = ceil(S_r/R) · ceil(S_c/C)``. Timing models (``array.timing``):

* ``scalesim`` — ``folds·F − 1`` per GEMM, SCALE-Sim v2/v3's printed "compute cycles"
  exactly (it reports the index of the last output write). Batched GEMMs count one layer
  per batch element, as a SCALE-Sim topology would list them.
* ``pipelined`` (derived) — the next fold's stationary-operand load is hidden behind the
  current stream: ``batch·folds·max(T, P) + P + R + C − 2`` with ``P = R`` for WS/IS and 0
  for OS (one fill and drain per instruction, ONNXim's tile model).
* ``tile`` (derived) — the reference core's standalone systolic block, DIM = R (square):
  ``batch·ceil(M/R)·ceil(N/R)·(K + 3R − 2)``, tiles not overlapped.

Convolution is its im2col GEMM: ``M = batch·H_out·W_out``, ``K = C_in/groups·k_h·k_w``,
``N = C_out/groups``, repeated per group (from the output and weight shapes, so stride,
padding and dilation need no parsing). A transposed convolution is costed as the GEMM of its
col2im form (``M = batch·H_in·W_in``, ``K = C_in/groups``, ``N = C_out/groups·k_h·k_w``). A
linear layer's bias add is folded into the accumulator (no cost), as in SCALE-Sim.

Recurrent layers (``aten.lstm/gru/rnn_tanh/rnn_relu``), per layer and direction, hidden
size H, G gates (LSTM 4, GRU 3, RNN 1), T timesteps of batch B: the input projection of all
timesteps is one GEMM ``(T·B)×in · in×(G·H)`` (its inputs are known up front); then each step
is its recurrent GEMM ``B×H · H×(G·H)``, one vector pass over the gates and the state update
(≈ ``B·(G·H + 3H)`` elements) and the gate activations on the SFU (sigmoid/tanh, ``B·G·H``
elements, ``+ B·H`` for the LSTM's tanh(c); none for ``rnn_relu``), and the steps run one
after another (step t+1 reads step t's state), so nothing overlaps across steps.

Interpolation (``upsample_bilinear2d`` and kin): one vector pass per tap over the output
(linear 2, bilinear 4, trilinear 8, bicubic 16). Gathers (``take``, ``take_along_dim``,
``nonzero``, ...) are copies, costed by the bytes they write; bitwise and logical element-wise
ops (``__and__``, ``bitwise_or``, shifts) are vector element-wise passes.

Vector ops: ``passes · ceil(elements/lanes) · cycles_per_vector[class] + latency``. SFU ops:
``ceil(elements/sfu.lanes) · sfu.cycles_per_vector + sfu.latency``. Softmax = 4 vector passes
(max, subtract, sum, scale) + one SFU exp pass; layer/RMS/group-norm = 5 vector passes
(sum, subtract, square, sum, scale) + one SFU rsqrt per row; batch-norm (inference) = 2
vector passes + one rsqrt per channel. Copies: ``ceil(bytes_out/movement.bytes_per_cycle) +
movement.latency``. Aliasing ops: ``movement.view_cycles``.

``aten.einsum`` is the batched GEMM(s) its subscripts describe (``einsum_cost.py``: batch,
M, K and N letters; more operands contract left to right); one operand is a reduction pass.

**Unknown ops** (not in the tables below) are costed as one element-wise vector pass over
``max(elements in, elements out)`` with ``cycles_per_vector["unknown"]`` and listed in the
result's ``unknown_ops``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil
from typing import Optional

from ..isa.optable import CUSTOM_OP_KIN
from .config import HardwareConfig
from .einsum_cost import Gemm, einsum_gemms  # Gemm: the record both build
from ..runtime.shapes import InstrInfo, TensorInfo

UNITS = ("core", "systolic", "vector", "sfu", "mover")


@dataclass
class Cost:
    unit: str
    cycles: int
    busy: dict = field(default_factory=dict)     # unit -> busy cycles (sums to cycles)
    macs: int = 0
    op_class: str = ""
    known: bool = True
    detail: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- op tables
def base_name(op: str) -> str:
    """``aten.add.Tensor`` → ``add``; ``nac.matmul`` → ``matmul``; ``getitem`` → ``getitem``;
    a library custom op (:data:`~nac_engine.isa.optable.CUSTOM_OP_KIN`) → its ATen kin's."""
    op = CUSTOM_OP_KIN.get(op, op)
    if op.startswith("aten.") or op.startswith("nac."):
        parts = op.split(".")
        return parts[1] if len(parts) > 1 else op
    if op.startswith("operator."):
        return op[9:]
    return op


GEMM_OPS = {"mm", "bmm", "matmul", "linear", "einsum", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "_grouped_mm",
            "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
            "conv_transpose2d", "conv_transpose3d", "scaled_dot_product_attention",
            "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention"}
ALIAS_OPS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "expand", "expand_as",
             "alias", "detach", "pass", "dropout", "getitem", "lift_fresh", "flatten", "unflatten",
             "view_as", "sym_size", "sym_numel", "sym_stride", "size", "dim", "numel", "_assert_async",
             "_assert_scalar", "lift_fresh_copy_", "t_", "feature_dropout", "unbind", "split",
             "split_with_sizes", "chunk", "as_strided", "_local_scalar_dense", "item",
             "scalar_tensor", "contiguous_view", "view_as_complex", "view_as_real"}
COPY_OPS = {"transpose", "t", "permute", "clone", "contiguous", "cat", "concat", "concatenate",
            "stack", "slice", "select", "narrow", "index_select", "gather", "embedding", "index",
            "repeat", "repeat_interleave", "tile", "constant_pad_nd", "pad", "flip", "roll",
            "copy", "_to_copy_layout", "masked_select", "index_put", "scatter", "scatter_add",
            "slice_scatter", "select_scatter", "diagonal", "tril", "triu", "zeros", "zeros_like",
            "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "empty", "empty_like",
            "new_empty", "fill", "lift_fresh_copy", "movedim", "swapaxes", "unfold", "im2col",
            "pixel_shuffle", "upsample_nearest2d", "new_full", "_unsafe_index", "split_copy",
            "take", "take_along_dim", "nonzero", "nonzero_static", "argwhere", "unique", "_unique2",
            "unique_consecutive", "unique_dim", "index_copy", "index_fill", "index_add", "masked_scatter",
            "upsample_nearest1d", "upsample_nearest3d", "_upsample_nearest_exact1d",
            "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "pixel_unshuffle", "channel_shuffle"}
ELEMENTWISE_OPS = {"add", "sub", "mul", "div", "neg", "abs", "relu", "relu6", "hardtanh", "clamp",
                   "clamp_min", "clamp_max", "where", "masked_fill", "maximum", "minimum", "rsub",
                   "_to_copy", "to", "type_as", "float", "half", "bfloat16", "int", "long",
                   "leaky_relu", "hardswish", "hardsigmoid", "square", "floor", "ceil", "round",
                   "trunc", "sign", "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor",
                   "logical_and", "logical_or", "logical_not", "logical_xor", "remainder", "fmod",
                   "floor_divide", "true_divide", "arange", "cumsum", "cumprod", "addcmul", "addcdiv",
                   "lerp", "fma", "truediv", "floordiv", "mod", "pos", "invert", "and_", "or_", "xor",
                   "lshift", "rshift", "threshold", "nan_to_num", "frac", "copysign", "heaviside",
                   "linspace", "triu_indices", "tril_indices", "one_hot", "bucketize",
                   "__and__", "__or__", "__xor__", "__invert__", "__lshift__", "__rshift__", "__iand__",
                   "__ior__", "__ixor__", "__ilshift__", "__irshift__", "bitwise_left_shift",
                   "bitwise_right_shift"}
COMPARE_OPS = {"gt", "lt", "ge", "le", "eq", "ne", "isnan", "isinf", "isfinite", "any", "all",
               "clamp_compare", "isin", "not_", "truth"}
REDUCTION_OPS = {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod",
                 "norm", "linalg_vector_norm", "count_nonzero", "logsumexp", "nansum", "aminmax",
                 "topk", "sort", "argsort", "cummax", "cummin", "max_pool1d", "max_pool2d",
                 "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
                 "adaptive_avg_pool2d", "adaptive_max_pool2d", "_adaptive_avg_pool2d",
                 "max_pool2d_with_indices"}
TWO_PASS_REDUCTIONS = {"var", "std", "var_mean", "std_mean"}
SFU_OPS = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "gelu",
           "silu", "mish", "erf", "erfc", "erfinv", "sqrt", "rsqrt", "reciprocal", "pow", "sin",
           "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "softplus", "elu", "selu",
           "celu", "logit", "log_sigmoid", "glu", "xlogy", "special_erf", "polar"}
SOFTMAX_OPS = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"}
NORM_OPS = {"layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm", "group_norm",
            "native_group_norm", "instance_norm"}
BATCHNORM_OPS = {"batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm",
                 "_native_batch_norm_legit", "cudnn_batch_norm"}
SCALAR_OPS = {"sym_size", "add_int", "mul_int"}
RECURRENT_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
INTERPOLATION_TAPS = {"upsample_linear1d": 2, "upsample_bilinear2d": 4, "_upsample_bilinear2d_aa": 4,
                      "upsample_trilinear3d": 8, "upsample_bicubic2d": 16, "_upsample_bicubic2d_aa": 16,
                      "grid_sampler_2d": 4, "grid_sampler_3d": 8}


def op_class(op: str) -> str:
    b = base_name(op)
    if b.endswith("_") and b[:-1] in ELEMENTWISE_OPS | SFU_OPS | COMPARE_OPS:
        b = b[:-1]          # in-place variants cost what their functional form costs
    for cls, table in (("gemm", GEMM_OPS), ("recurrent", RECURRENT_GATES), ("interpolation", INTERPOLATION_TAPS),
                       ("alias", ALIAS_OPS), ("copy", COPY_OPS),
                       ("softmax", SOFTMAX_OPS), ("norm", NORM_OPS), ("batchnorm", BATCHNORM_OPS),
                       ("sfu", SFU_OPS), ("reduction", REDUCTION_OPS), ("reduction2", TWO_PASS_REDUCTIONS),
                       ("compare", COMPARE_OPS), ("elementwise", ELEMENTWISE_OPS)):
        if b in table:
            return cls
    return "unknown"


# --------------------------------------------------------------------------- GEMM shapes
def _tensors(ins: InstrInfo) -> list[TensorInfo]:
    return [a[1] for a in ins.args if a[0] == "t"]


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _matmul_dims(a: TensorInfo, b: TensorInfo, out: Optional[TensorInfo]) -> Gemm:
    sa, sb = a.shape, b.shape
    k = sa[-1] if sa else 1
    m = sa[-2] if len(sa) >= 2 else 1
    n = sb[-1] if len(sb) >= 2 else 1
    batch = 1
    if out is not None and m * n:
        batch = max(1, out.numel // (m * n))
    return Gemm(m, k, n, batch)


def gemms(ins: InstrInfo) -> list[Gemm]:
    """The GEMMs an instruction performs (empty if its shapes do not say)."""
    b = base_name(ins.op)
    ts = _tensors(ins)
    out = ins.outputs[0] if ins.outputs else None
    try:
        if b in ("mm", "bmm", "matmul", "mv", "dot"):
            return [_matmul_dims(ts[0], ts[1], out)]
        if b in ("addmm", "baddbmm", "addbmm", "addmv"):
            return [_matmul_dims(ts[1], ts[2], out)]
        if b == "_grouped_mm":            # each of the S rows times one expert's K×N weight
            return [Gemm(ts[0].shape[0], ts[0].shape[1], ts[1].shape[-1])]
        if b == "linear":
            x, w = ts[0], ts[1]
            k = x.shape[-1] if x.shape else 1
            n = w.shape[0] if len(w.shape) == 2 else 1
            return [Gemm(max(1, x.numel // k) if k else 0, k, n)]
        if b in ("convolution", "_convolution", "conv1d", "conv2d", "conv3d",
                 "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
            return [_conv_gemm(ins, ts, out)]
        if b == "einsum":
            return einsum_gemms(*_einsum_operands(ins))
        if b.startswith("scaled_dot_product") or b.startswith("_scaled_dot_product"):
            q, k_, v = ts[0], ts[1], ts[2]
            L, E = q.shape[-2], q.shape[-1]
            S, Ev = k_.shape[-2], v.shape[-1]
            batch = max(1, q.numel // (L * E)) if L * E else 1
            return [Gemm(L, E, S, batch), Gemm(L, S, Ev, batch)]
    except (IndexError, ZeroDivisionError):
        return []
    return []


def _einsum_operands(ins: InstrInfo) -> tuple[str, list]:
    """``aten.einsum(equation, tensors)``: the equation and the operands' shapes (the tensor
    list arrives flattened, one slot per tensor, or as one list)."""
    eq = next((v for k, v in ins.args if k == "c" and isinstance(v, str)), "")
    shapes = []
    for kind, v in ins.args:
        if kind == "t":
            shapes.append(v.shape)
        elif kind == "tl":
            shapes.extend(t.shape for t in v)
    return eq, shapes


def _conv_gemm(ins: InstrInfo, ts: list, out: Optional[TensorInfo]) -> Gemm:
    x, w = ts[0], ts[1]
    transposed = "transpose" in base_name(ins.op) or _conv_transposed_flag(ins)
    nbatch = x.shape[0]
    if transposed:
        cin, cout_g = w.shape[0], w.shape[1]
        groups = max(1, out.shape[1] // cout_g) if out is not None and len(out.shape) > 1 and cout_g else 1
        return Gemm(nbatch * _prod(x.shape[2:]), cin // groups, cout_g * _prod(w.shape[2:]), groups)
    cout, cin_g = w.shape[0], w.shape[1]
    groups = max(1, x.shape[1] // cin_g) if cin_g else 1
    m = (out.numel // out.shape[1]) if out is not None and len(out.shape) > 1 and out.shape[1] else 0
    return Gemm(m, cin_g * _prod(w.shape[2:]), cout // groups, groups)


def _conv_transposed_flag(ins: InstrInfo) -> bool:
    # aten.convolution(input, weight, bias, stride, padding, dilation, transposed, ...): the
    # first bool constant after the tensors is `transposed`.
    if base_name(ins.op) not in ("convolution", "_convolution"):
        return False
    for kind, v in ins.args[3:]:
        if kind == "c" and isinstance(v, bool):
            return v
    return False


def gemm_cycles(g: Gemm, hw: HardwareConfig) -> tuple[int, dict]:
    """Cycles of one GEMM instruction's worth of (batched) GEMMs, and SCALE-Sim's counters."""
    R, C = hw.array.rows, hw.array.cols
    df, timing = hw.array.dataflow, hw.array.timing
    if g.m <= 0 or g.k <= 0 or g.n <= 0:
        return 0, {}
    if timing == "tile":
        tiles = ceil(g.m / R) * ceil(g.n / R)
        return g.batch * tiles * (g.k + 3 * R - 2), {"tiles": tiles * g.batch}
    sr, sc, t = {"os": (g.m, g.n, g.k), "ws": (g.k, g.n, g.m), "is": (g.k, g.m, g.n)}[df]
    fr, fc = ceil(sr / R), ceil(sc / C)
    folds = fr * fc
    pre = R if df in ("ws", "is") else 0
    f = t + pre + R + C - 2
    detail = {"M": g.m, "K": g.k, "N": g.n, "batch": g.batch, "folds": folds * g.batch,
              "cycles_per_fold": f, **scalesim_sram_words(g, R, C, df, fr, fc, folds)}
    if timing == "scalesim":
        return g.batch * (folds * f - 1), detail
    return g.batch * folds * max(t, pre) + pre + R + C - 2, detail


def scalesim_sram_words(g: Gemm, R: int, C: int, df: str, fr: int, fc: int, folds: int) -> dict:
    """SCALE-Sim's SRAM access counts (words) per dataflow, research §3.4 (OS keeps its
    ``+ (R + C)`` per fold write quirk so that the numbers compare)."""
    mk, kn, mn = g.m * g.k, g.k * g.n, g.m * g.n
    if df == "os":
        r = (fc * mk, fr * kn, mn + folds * (R + C))
    elif df == "ws":
        r = (fc * mk, kn, fr * mn)
    else:
        r = (mk, fc * kn, fr * mn)
    return {"ifmap_sram_reads": r[0] * g.batch, "filter_sram_reads": r[1] * g.batch,
            "ofmap_sram_writes": r[2] * g.batch}


# --------------------------------------------------------------------------- recurrent layers
@dataclass(frozen=True)
class RecurrentShape:
    timesteps: int
    batch: int
    gates: int
    layers: tuple              # ((input size, hidden size), ...) per layer and direction


def recurrent_shape(ins: InstrInfo) -> Optional[RecurrentShape]:
    """Timesteps, batch and per-layer sizes of an ``aten.lstm/gru/rnn_*.input`` instruction,
    from its shapes: ``(input, hx..., params..., has_biases, num_layers, dropout, train,
    bidirectional, batch_first)``; the weights are the 2-D tensors, in (w_ih, w_hh) pairs per
    layer and direction. None when the shapes do not say (e.g. the packed ``.data`` form)."""
    gates = RECURRENT_GATES.get(base_name(ins.op))
    ts: list[TensorInfo] = []
    for kind, v in ins.args:
        if kind == "t":
            ts.append(v)
        elif kind == "tl":
            ts.extend(v)
    bools = [v for kind, v in ins.args if kind == "c" and isinstance(v, bool)]
    if gates is None or not ts or ins.op.endswith(".data"):
        return None
    x = ts[0]
    batch_first = bools[-1] if len(bools) >= 4 else False
    if len(x.shape) == 3:
        t, b = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    elif len(x.shape) == 2:                     # unbatched
        t, b = x.shape[0], 1
    else:
        return None
    weights = [w for w in ts[1:] if len(w.shape) == 2]
    if not weights or len(weights) % 2:
        return None
    layers = []
    for w_ih, w_hh in zip(weights[::2], weights[1::2]):
        h = w_hh.shape[1]
        if not h or w_ih.shape[0] != gates * h or w_hh.shape[0] != gates * h:
            return None
        layers.append((w_ih.shape[1], h))
    return RecurrentShape(int(t), int(b), gates, tuple(layers))


@dataclass(frozen=True)
class RecurrentLayer:
    """One layer and direction: its input projection, one step's recurrent GEMM, and one
    step's vector and SFU elements (repeated ``timesteps`` times, in sequence)."""
    projection: Gemm
    step: Gemm
    step_vector_elements: int
    step_sfu_elements: int


def recurrent_layers(ins: InstrInfo) -> Optional[tuple[int, list]]:
    """``(timesteps, [RecurrentLayer, ...])`` of a recurrent instruction (None: shapes unknown)."""
    rs = recurrent_shape(ins)
    if rs is None:
        return None
    b = base_name(ins.op)
    T, B, G = rs.timesteps, rs.batch, rs.gates
    out = []
    for n_in, h in rs.layers:
        sfu = 0 if b == "rnn_relu" else B * (G * h + (h if b == "lstm" else 0))
        out.append(RecurrentLayer(Gemm(T * B, n_in, G * h), Gemm(B, h, G * h), B * (G * h + 3 * h), sfu))
    return T, out


def recurrent_cost(ins: InstrInfo, hw: HardwareConfig) -> Optional[Cost]:
    """The layer as the module docstring describes it; None when its shapes do not say."""
    parts = recurrent_layers(ins)
    if parts is None:
        return None
    T, layers = parts
    busy = {"systolic": 0, "vector": 0, "sfu": 0}
    macs = 0
    for lay in layers:
        busy["systolic"] += gemm_cycles(lay.projection, hw)[0] + T * gemm_cycles(lay.step, hw)[0]
        busy["vector"] += T * vector_cycles(lay.step_vector_elements, 1, "elementwise", hw)
        busy["sfu"] += T * sfu_cycles(lay.step_sfu_elements, hw)
        macs += lay.projection.macs + T * lay.step.macs
    detail = {"timesteps": T, "batch": layers[0].step.m, "layers": len(layers),
              "hidden": [lay.step.k for lay in layers]}
    return Cost("systolic", sum(busy.values()), {u: c for u, c in busy.items() if c}, macs, "recurrent",
                True, detail)


# --------------------------------------------------------------------------- vector / SFU
def _elements_in(ins: InstrInfo) -> int:
    n = 0
    for kind, v in ins.args:
        if kind == "t":
            n = max(n, v.numel)
        elif kind == "tl":
            n = max(n, sum(t.numel for t in v))
    return n


def _elements_out(ins: InstrInfo) -> int:
    return ins.outputs[0].numel if ins.outputs else 0


def _bytes_out(ins: InstrInfo, hw: HardwareConfig) -> int:
    return sum(t.numel * hw.element_bytes(t.dtype) for t in ins.outputs)


def vector_cycles(elements: int, passes: int, cls: str, hw: HardwareConfig) -> int:
    if elements <= 0:
        return 0
    v = hw.vector
    return passes * ceil(elements / v.lanes) * v.cycles_per_vector.get(cls, 1) + v.latency


def sfu_cycles(elements: int, hw: HardwareConfig) -> int:
    if elements <= 0:
        return 0
    s = hw.sfu
    return ceil(elements / s.lanes) * s.cycles_per_vector + s.latency


def _rows(ins: InstrInfo) -> int:
    ts = _tensors(ins)
    if not ts or not ts[0].shape:
        return 1
    last = ts[0].shape[-1] or 1
    return max(1, ts[0].numel // last)


# --------------------------------------------------------------------------- the cost
def instruction_cost(ins: InstrInfo, hw: HardwareConfig) -> Cost:
    """Cost of one regular instruction on ``hw`` (system instructions cost nothing here)."""
    if ins.kind != "op":
        return Cost("core", 0, {}, op_class="system")
    rule = hw.op_rule(ins.op)       # the hardware file's [ops]: what its own ops cost
    if isinstance(rule, int):
        return Cost("vector", rule, {"vector": rule}, op_class="custom", detail={"cycles": "[ops]"})
    cls = rule or op_class(ins.op)
    if cls == "gemm":
        gs = gemms(ins)
        if gs:
            total, detail, macs = 0, {}, 0
            for g in gs:
                c, d = gemm_cycles(g, hw)
                total += c
                macs += g.macs
                detail = d if not detail else {"gemms": [detail, d]}
            busy = {"systolic": total}
            if len(gs) == 2 and "scaled_dot_product" in ins.op:   # attention: softmax between the GEMMs
                L, S = gs[0].m, gs[0].n
                vec = vector_cycles(gs[0].batch * L * S, 4, "reduction", hw)
                sfu = sfu_cycles(gs[0].batch * L * S, hw)
                busy.update(vector=vec, sfu=sfu)
                total += vec + sfu
            return Cost("systolic", total, busy, macs, cls, True, detail)
        cls = "unknown"     # a GEMM op whose shapes we could not read
        if base_name(ins.op) == "einsum" and len(_einsum_operands(ins)[1]) == 1:
            cls = "reduction"   # one operand: a transpose/trace/sum, no contraction
    if cls == "recurrent":
        cost = recurrent_cost(ins, hw)
        if cost is not None:
            return cost
        cls = "unknown"
    if cls == "interpolation":
        taps = INTERPOLATION_TAPS[base_name(ins.op)]
        c = vector_cycles(max(_elements_out(ins), 1), taps, "elementwise", hw)
        return Cost("vector", c, {"vector": c}, op_class=cls)
    if cls == "alias":
        c = hw.movement.view_cycles
        return Cost("core", c, {"core": c}, op_class=cls)
    if cls == "copy":
        nbytes = _bytes_out(ins, hw)
        c = ceil(nbytes / hw.movement.bytes_per_cycle) + hw.movement.latency if nbytes else hw.movement.latency
        return Cost("mover", c, {"mover": c}, op_class=cls, detail={"bytes": nbytes})
    if cls in ("elementwise", "compare"):
        c = vector_cycles(max(_elements_out(ins), 1), 1, cls, hw)
        return Cost("vector", c, {"vector": c}, op_class=cls)
    if cls in ("reduction", "reduction2"):
        c = vector_cycles(max(_elements_in(ins), 1), 2 if cls == "reduction2" else 1, "reduction", hw)
        return Cost("vector", c, {"vector": c}, op_class=cls)
    if cls == "sfu":
        c = sfu_cycles(max(_elements_out(ins), 1), hw)
        return Cost("sfu", c, {"sfu": c}, op_class=cls)
    if cls == "softmax":
        n = max(_elements_in(ins), 1)
        vec = vector_cycles(n, 4, "reduction", hw)
        sfu = sfu_cycles(n, hw)
        return Cost("vector", vec + sfu, {"vector": vec, "sfu": sfu}, op_class=cls)
    if cls == "norm":
        n = max(_elements_in(ins), 1)
        vec = vector_cycles(n, 5, "reduction", hw)
        sfu = sfu_cycles(_rows(ins), hw)
        return Cost("vector", vec + sfu, {"vector": vec, "sfu": sfu}, op_class=cls)
    if cls == "batchnorm":
        ts = _tensors(ins)
        n = max(_elements_in(ins), 1)
        channels = ts[0].shape[1] if ts and len(ts[0].shape) > 1 else 1
        vec = vector_cycles(n, 2, "elementwise", hw)
        sfu = sfu_cycles(channels, hw)
        return Cost("vector", vec + sfu, {"vector": vec, "sfu": sfu}, op_class=cls)
    # unknown: one element-wise pass, listed by the engine
    n = max(_elements_in(ins), _elements_out(ins), 1)
    c = vector_cycles(n, 1, "unknown", hw)
    return Cost("vector", c, {"vector": c}, op_class="unknown", known=False)
