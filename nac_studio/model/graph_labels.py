"""What the graph writes on nodes and frames, and when it fits (no Qt here).

* :func:`node_attributes`: an instruction's key attributes from its constant arguments
  (``dim=-1``, ``eps=1e-05``, ``stride=[2, 2]``), named by the op's ATen argument order for
  the ops where that name is what a reader looks for, shown instead of signature letters.
* :func:`block_frames`: the rectangle and title of every *expanded* repeated block, so a
  block keeps its name on screen at every zoom (Model Explorer's layer boxes).
* :func:`visible_labels`: which boxes can carry their text at the current zoom, given a
  fixed on-screen font (text is drawn in screen space, not scaled with the scene): the
  level of detail is "the text fits", not a zoom threshold.
* :func:`spread_titles`: titles of stacked frames/blocks that would overlap on screen at an
  overview zoom are thinned out, first come first served, so the ones drawn are legible.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from nac_engine.isa.coerce import InexactCoercion, as_used
from nac_engine.text.literals import format_literal

#: ATen argument names by op base name, positional (what NAC's D field keeps). Only ops whose
#: constant arguments a reader wants named; others show their constants unnamed.
ARG_NAMES = {
    "softmax": ("self", "dim", "dtype"), "_softmax": ("self", "dim", "half_to_float"),
    "log_softmax": ("self", "dim", "dtype"), "_log_softmax": ("self", "dim", "half_to_float"),
    "layer_norm": ("input", "shape", "weight", "bias", "eps", "cudnn"),
    "native_layer_norm": ("input", "shape", "weight", "bias", "eps"),
    "group_norm": ("input", "groups", "weight", "bias", "eps", "cudnn"),
    "batch_norm": ("input", "weight", "bias", "mean", "var", "training", "momentum", "eps", "cudnn"),
    "_native_batch_norm_legit_no_training": ("input", "weight", "bias", "mean", "var", "momentum", "eps"),
    "rms_norm": ("input", "shape", "weight", "eps"),
    "conv1d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv2d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv3d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "convolution": ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "out_pad", "groups"),
    "max_pool2d": ("self", "kernel", "stride", "padding", "dilation", "ceil"),
    "max_pool2d_with_indices": ("self", "kernel", "stride", "padding", "dilation", "ceil"),
    "avg_pool2d": ("self", "kernel", "stride", "padding", "ceil", "count_pad", "divisor"),
    "adaptive_avg_pool2d": ("self", "size"),
    "transpose": ("self", "dim0", "dim1"), "permute": ("self", "dims"),
    "view": ("self", "shape"), "reshape": ("self", "shape"), "_unsafe_view": ("self", "shape"),
    "expand": ("self", "size"), "unsqueeze": ("self", "dim"), "squeeze": ("self", "dim"),
    "split": ("self", "size", "dim"), "split_with_sizes": ("self", "sizes", "dim"),
    "chunk": ("self", "chunks", "dim"), "cat": ("tensors", "dim"), "stack": ("tensors", "dim"),
    "slice": ("self", "dim", "start", "end", "step"), "select": ("self", "dim", "index"),
    "getitem": ("self", "index"), "flatten": ("self", "start", "end"),
    "mean": ("self", "dim", "keepdim", "dtype"), "sum": ("self", "dim", "keepdim", "dtype"),
    "amax": ("self", "dim", "keepdim"), "amin": ("self", "dim", "keepdim"),
    "gelu": ("self", "approximate"), "leaky_relu": ("self", "slope"), "hardtanh": ("self", "min", "max"),
    "clamp": ("self", "min", "max"), "pow": ("self", "exponent"),
    "scaled_dot_product_attention": ("q", "k", "v", "mask", "dropout", "causal", "scale"),
    "embedding": ("weight", "indices", "padding_idx", "scale_grad", "sparse"),
    "addmm": ("self", "mat1", "mat2", "beta", "alpha"),
    "_to_copy": ("self", "dtype"), "to": ("self", "dtype"),
    "dropout": ("input", "p", "train"),
}
#: Attribute values not worth a word on the box (defaults that every call passes).
_OVERLOAD = re.compile(r"\.(default|Tensor|Scalar|int|dim|self|out|using_ints|Tensor_Scalar|Tensor_Tensor|"
                       r"Scalar_Tensor|dim_IntList|correction|input|other|memory_format|dtype|names|"
                       r"[A-Za-z_]*Tensor[A-Za-z_]*|[a-z_]+_int|[a-z_]+_dim)$")


def op_base_name(name: str) -> str:
    """``aten.layer_norm.default`` → ``layer_norm``; ``nac.add`` → ``add``;
    ``transformers.grouped_mm_fallback.default`` → ``grouped_mm_fallback``."""
    s = name
    for pre in ("aten.", "nac.", "prims.", "torch.", "ops.", "transformers."):
        if s.startswith(pre):
            s = s[len(pre):]
            break
    s = _OVERLOAD.sub("", s)
    return s



_BORING = {("gelu", "approximate"): ("none", '"none"'), ("scaled_dot_product_attention", "dropout"): ("0", "0.0"),
           ("scaled_dot_product_attention", "causal"): ("False",), ("layer_norm", "cudnn"): ("False", "True"),
           ("batch_norm", "cudnn"): ("False", "True"), ("group_norm", "cudnn"): ("False", "True"),
           ("dropout", "train"): ("False",)}
#: For these the shape is on the edges already; naming it on the box is noise.
_SKIP = {("layer_norm", "shape"), ("native_layer_norm", "shape"), ("rms_norm", "shape")}
MAX_ATTRS = 3
MAX_VALUE = 18


def _literal(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.6g}" if value == value else "nan"
    if isinstance(value, str):
        return value
    try:
        return format_literal(None, value)
    except (ValueError, TypeError, AttributeError):
        return repr(value)


def node_attributes(nac, ins, base: Optional[str] = None, memo: Optional[dict] = None) -> str:
    """``dim=-1 · eps=1e-05``: an instruction's constant arguments, named where known;
    "" when it has none. ``base``: the op's base name, if the caller has it. ``memo``: a
    dict shared over one file's instructions (a transformer repeats the same op with the
    same constants in every layer; the text depends only on op, C and where D is 0)."""
    if not getattr(ins, "const_ids", True):
        return ""          # no constant arguments: nothing to name (most instructions)
    if memo is not None:
        key = (ins.a, ins.b, tuple(ins.c or ()), tuple(v == 0 for v in (ins.d or ())))
        found = memo.get(key)
        if found is None:
            found = memo[key] = node_attributes(nac, ins, base)
        return found
    try:
        args = nac.arguments(ins)
    except Exception:     # noqa: BLE001 - a damaged instruction: the box shows no attributes
        return ""
    if base is None:
        base = op_base_name(nac.instruction_name(ins))
    names = ARG_NAMES.get(base.lstrip("_") if base not in ARG_NAMES else base, ())
    out = []
    for pos, arg in enumerate(args):
        if arg.kind != "const" or arg.value is None:
            continue
        name = names[pos] if pos < len(names) else ""
        if (base, name) in _SKIP:
            continue
        try:            # a shared constant (keepdim stored as 1.0) as the op uses it
            value = as_used(arg.value, arg.code)
        except InexactCoercion:
            value = arg.value
        text = _literal(value)
        if text in _BORING.get((base, name), ()):
            continue
        if len(text) > MAX_VALUE:
            text = text[:MAX_VALUE - 1] + "…"
        out.append(f"{name}={text}" if name else text)
        if len(out) == MAX_ATTRS:
            break
    return " · ".join(out)


# --------------------------------------------------------------------------- frames
@dataclass
class Frame:
    """An expanded block drawn as a titled rectangle around its nodes."""
    key: str                 # block prefix or module path
    title: str
    x0: float
    y0: float
    x1: float
    y1: float
    depth: int = 0           # nesting depth (module frames inside module frames)

    @property
    def rect(self) -> tuple[float, float, float, float]:
        return self.x0, self.y0, self.x1 - self.x0, self.y1 - self.y0


FRAME_PAD = 10.0
FRAME_TITLE = 16.0           # room above the first row for the title, scene units


def block_frames(graph, pos: np.ndarray, size: np.ndarray) -> list[Frame]:
    """Frames of the blocks of ``graph`` that are drawn expanded (not collapsed)."""
    if not len(graph.nodes) or not graph.blocks:
        return []
    ticks = np.array([nd.tick for nd in graph.nodes], dtype=np.int64)
    kinds = np.array([nd.kind != "group" for nd in graph.nodes])
    collapsed = set(graph.collapsed)
    out = []
    for b in graph.blocks:
        if b.prefix in collapsed:
            continue
        sel = (ticks >= b.lo) & (ticks <= b.hi) & kinds
        if b.shared:
            sel &= ~np.isin(ticks, np.array(b.shared, dtype=np.int64))
        idx = np.nonzero(sel)[0]
        if not len(idx):
            continue
        x0 = float((pos[idx, 0] - size[idx, 0] / 2).min()) - FRAME_PAD
        x1 = float((pos[idx, 0] + size[idx, 0] / 2).max()) + FRAME_PAD
        y0 = float((pos[idx, 1] - size[idx, 1] / 2).min()) - FRAME_PAD - FRAME_TITLE
        y1 = float((pos[idx, 1] + size[idx, 1] / 2).max()) + FRAME_PAD
        out.append(Frame(b.prefix, f"{b.prefix}  ·  v{b.lo}–v{b.hi}", x0, y0, x1, y1))
    return out


# --------------------------------------------------------------------------- level of detail
def visible_labels(size: np.ndarray, idx: np.ndarray, scale: float, font_px: float,
                   min_chars: int = 3, char_px: Optional[float] = None) -> np.ndarray:
    """Of the nodes ``idx``, those whose box on screen is tall enough for one line of
    ``font_px`` text and wide enough for ``min_chars`` characters."""
    if not len(idx):
        return idx
    char_px = char_px if char_px is not None else font_px * 0.6
    h = size[idx, 1] * scale
    w = size[idx, 0] * scale
    ok = (h >= font_px - 1) & (w >= min_chars * char_px + 6)      # descenders may touch the border
    return idx[ok]


def spread_titles(boxes: list[tuple[float, float, float, float]]) -> list[int]:
    """Indices of the screen boxes ``(x, y, w, h)`` to draw so none overlaps one already
    kept (in the order given: put the important ones first)."""
    kept: list[int] = []
    placed: list[tuple[float, float, float, float]] = []
    for i, (x, y, w, h) in enumerate(boxes):
        if any(x < px + pw and px < x + w and y < py + ph and py < y + h for px, py, pw, ph in placed):
            continue
        kept.append(i)
        placed.append((x, y, w, h))
    return kept


# --------------------------------------------------------------------------- fan-out bundles
BUNDLE_MIN = 4         # a value read by at least this many nodes...
BUNDLE_SPAN = 4        # ...over edges longer than this many layers is drawn as one bundle


def fanout_bundles(edges: np.ndarray, layer: np.ndarray) -> dict[int, tuple[int, list[int]]]:
    """Sources whose value fans out far (a causal mask read by every block): source node ->
    (the edge still drawn whole: its shortest, [edges drawn as a short labelled stub into
    their consumer instead]). Twelve parallel lines down the graph become one line, a
    ``×12`` count on the source and a stub naming it at each reader (Model Explorer draws
    such edges the same way)."""
    out: dict[int, tuple[int, list[int]]] = {}
    if not len(edges):
        return out
    span = layer[edges[:, 1]] - layer[edges[:, 0]]
    srcs, counts = np.unique(edges[:, 0], return_counts=True)
    for src in srcs[counts >= BUNDLE_MIN].tolist():
        e = np.nonzero(edges[:, 0] == src)[0]
        long_ = e[span[e] > BUNDLE_SPAN]
        if len(long_) < BUNDLE_MIN - 1:
            continue
        kept = int(e[np.argmin(span[e])])
        out[int(src)] = (kept, [int(x) for x in long_.tolist() if x != kept])
    return out
