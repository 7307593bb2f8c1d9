"""Hypothesis strategies for MIND Core IR: valid modules (random op chains whose shapes fit, every
result type inferred as it is built), and invalid ones that break exactly one verifier rule.

Values are kept small (dims 1..4, rank <= 4) so the numpy evaluator and the NAC interpreter run
each example in milliseconds; float constants are small integers and halves, so folding and
printing are exact.
"""
from __future__ import annotations

from hypothesis import strategies as st

from nac_engine.peers.mind.canonical import print_module
from nac_engine.peers.mind.ir import Instr, Module, TensorType
from nac_engine.peers.mind.verifier import infer

DIM = st.integers(1, 4)
HALVES = st.integers(-6, 6).map(lambda k: k / 2)


class _Builder:
    def __init__(self, draw):
        self.draw = draw
        self.instrs: list[Instr] = []
        self.types: dict[int, TensorType] = {}

    def add(self, opcode: str, operands=(), params=None, attrs=None, type_=None) -> int:
        vid = len(self.instrs)
        ins = Instr(vid=vid, opcode=opcode, operands=list(operands), params=dict(params or {}),
                    attrs=dict(attrs or {}), type=type_, name=f"%{vid}")
        ins.type = infer(ins, [self.types[v] for v in ins.operands])
        self.types[vid] = ins.type
        self.instrs.append(ins)
        return vid

    def const(self, dtype: str, shape: tuple, low: int = -4, high: int = 4) -> int:
        n = 1
        for d in shape:
            n *= d
        if dtype.startswith("f"):
            vals = self.draw(st.lists(HALVES, min_size=n, max_size=n))
        else:
            vals = self.draw(st.lists(st.integers(low, high), min_size=n, max_size=n))
        data = _nest(vals, shape)
        return self.add("ConstTensor", params={"data": data}, type_=TensorType(dtype, shape))

    def pick(self, pred=lambda t: True):
        cands = [v for v, t in self.types.items() if pred(t)]
        return self.draw(st.sampled_from(cands)) if cands else None


def _nest(vals: list, shape: tuple):
    if not shape:
        return vals[0]
    if len(shape) == 1:
        return list(vals)
    step = len(vals) // shape[0]
    return [_nest(vals[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


_OPS = ("binop", "binop_const", "unary", "reduce", "reshape", "transpose", "expand", "squeeze", "slice",
        "index", "matmul", "dot", "gather", "conv", "scalar")


@st.composite
def valid_modules(draw, max_ops: int = 8, dtypes=("f32",)) -> Module:
    b = _Builder(draw)
    for k in range(draw(st.integers(1, 3))):
        dt = draw(st.sampled_from(dtypes))
        shape = tuple(draw(st.lists(DIM, min_size=1, max_size=3)))
        b.add("Input", attrs={"name": f"in{k}"}, type_=TensorType(dt, shape))
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(_OPS))
        if kind == "binop":
            a = b.pick()
            ta = b.types[a]
            c = b.pick(lambda t: t.dtype == ta.dtype and _broadcasts(t.shape, ta.shape))
            b.add("BinOp", [a, c], {"op": draw(st.sampled_from(("Add", "Sub", "Mul")))})
        elif kind == "binop_const":
            a = b.pick()
            ta = b.types[a]
            cshape = tuple(ta.shape[len(ta.shape) - draw(st.integers(0, ta.rank)):])
            c = b.const(ta.dtype, cshape)
            ops = [a, c] if draw(st.booleans()) else [c, a]
            b.add("BinOp", ops, {"op": draw(st.sampled_from(("Add", "Sub", "Mul")))})
        elif kind == "scalar":
            a = b.pick(lambda t: t.dtype in ("f32", "i64"))
            if a is None:
                continue
            if b.types[a].dtype == "f32":
                c = b.add("ConstF32", params={"value": draw(HALVES)})
            else:
                c = b.add("ConstI64", params={"value": draw(st.integers(-5, 5))})
            b.add("BinOp", [c, a], {"op": draw(st.sampled_from(("Add", "Mul", "Sub")))})
        elif kind == "unary":
            op = draw(st.sampled_from(("Relu", "Neg", "Exp", "Log")))
            inputs = {i.vid for i in b.instrs if i.opcode == "Input"}
            # Exp/Log only of inputs (|x| < 2): chained, they overflow or hit 0 at slightly different points
            a = b.pick(lambda t: t.dtype == "f32") if op in ("Relu", "Neg") else \
                b.pick(lambda t: t.dtype == "f32" and t in [b.types[v] for v in inputs])
            if a is None or (op in ("Exp", "Log") and a not in inputs):
                continue
            b.add(op, [a])
        elif kind == "reduce":
            a = b.pick(lambda t: t.rank >= 1)
            if a is None:
                continue
            r = b.types[a].rank
            axes = draw(st.lists(st.integers(0, r - 1), unique=True, max_size=r))
            op = "Mean" if b.types[a].dtype == "f32" and draw(st.booleans()) else "Sum"
            b.add(op, [a], {"axes": axes, "keepdims": draw(st.booleans())})
        elif kind == "reshape":
            a = b.pick()
            t = b.types[a]
            shape = draw(st.sampled_from([[t.numel()], [-1], list(reversed(t.shape)) or [1],
                                          [1] + list(t.shape)]))
            b.add("Reshape", [a], {"new_shape": shape})
        elif kind == "transpose":
            a = b.pick(lambda t: t.rank >= 1)
            if a is None:
                continue
            perm = draw(st.permutations(range(b.types[a].rank)))
            b.add("Transpose", [a], {"permutation": list(perm)})
        elif kind == "expand":
            a = b.pick(lambda t: t.rank <= 3)
            if a is None:
                continue
            b.add("ExpandDims", [a], {"axes": [draw(st.integers(0, b.types[a].rank))]})
        elif kind == "squeeze":
            a = b.pick(lambda t: 1 in t.shape)
            if a is None:
                continue
            ones = [i for i, d in enumerate(b.types[a].shape) if d == 1]
            b.add("Squeeze", [a], {"axes": draw(st.lists(st.sampled_from(ones), unique=True, min_size=1))})
        elif kind == "slice":
            a = b.pick(lambda t: t.rank >= 1)
            if a is None:
                continue
            t = b.types[a]
            starts, ends, steps = [], [], []
            for d in t.shape:
                s = draw(st.integers(0, d - 1))
                starts.append(s)
                ends.append(draw(st.integers(s + 1, d + 1)))
                steps.append(draw(st.integers(1, 2)))
            b.add("Slice", [a], {"starts": starts, "ends": ends, "steps": steps})
        elif kind == "index":
            a = b.pick(lambda t: t.rank >= 1)
            if a is None:
                continue
            b.add("Index", [a], {"indices": [draw(st.integers(0, d - 1)) for d in b.types[a].shape]})
        elif kind == "matmul":
            a = b.pick(lambda t: t.rank >= 2)
            if a is None:
                continue
            ta = b.types[a]
            c = b.const(ta.dtype, (ta.shape[-1], draw(DIM)))
            b.add("MatMul", [a, c])
        elif kind == "dot":
            a = b.pick(lambda t: t.rank in (1, 2))
            if a is None:
                continue
            ta = b.types[a]
            c = b.const(ta.dtype, (ta.shape[-1],))
            b.add("Dot", [a, c])
        elif kind == "gather":
            a = b.pick(lambda t: t.rank >= 1)
            if a is None:
                continue
            ta = b.types[a]
            ishape = tuple(draw(st.lists(DIM, min_size=1, max_size=2)))
            idx = b.const("i64", ishape, 0, ta.shape[0] - 1)
            b.add("Gather", [a, idx])
        elif kind == "conv":
            if "f32" not in dtypes:
                continue
            n, h, w, c = 1, draw(st.integers(2, 5)), draw(st.integers(2, 5)), draw(st.integers(1, 3))
            x = b.add("Input", attrs={"name": f"img{len(b.instrs)}"}, type_=TensorType("f32", (n, h, w, c)))
            kh, kw = draw(st.integers(1, min(h, 3))), draw(st.integers(1, min(w, 3)))
            f = b.const("f32", (kh, kw, c, draw(st.integers(1, 3))))
            pad = draw(st.sampled_from(["Valid", "Same", ((0, 1), (1, 0))]))
            b.add("Conv2d", [x, f], {"strides": [draw(st.integers(1, 2)), draw(st.integers(1, 2))], "padding": pad})
    last = len(b.instrs) - 1
    outs = sorted({last} | set(draw(st.lists(st.integers(0, last), max_size=2))))
    return Module(instrs=b.instrs, outputs=outs)


def _broadcasts(a: tuple, b: tuple) -> bool:
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and 1 not in (x, y):
            return False
    return True


#: rule -> a function(next_id, draw) returning the text lines that break it (and only it)
def _broken_lines(rule: str, k: int, draw) -> tuple[list[str], list[str]]:
    """(lines to append, extra outputs) that break ``rule`` once, using fresh inputs at ids k, k+1…"""
    d1, d2 = draw(DIM), draw(DIM)
    inp = lambda i, name, t: f'%{i} = Input() {{name: "{name}"}} : {t}'   # noqa: E731
    f = lambda *dims: f"Tensor<f32, [{', '.join(map(str, dims))}]>"        # noqa: E731
    if rule == "use-before-def":
        return [f"%{k} = Relu(%{k + 5}) : {f(d1)}", inp(k + 5, "late", f(d1))], []
    if rule == "multiple-definition":
        return [inp(k, "p", f(d1)), inp(k, "q", f(d1))], []
    if rule == "undefined-output":
        return [], [f"%{k + 40}"]
    if rule == "input-name":
        return [f"%{k} = Input() : {f(d1)}"], []
    if rule == "const-count":
        return [f"%{k} = ConstTensor([1.0, 2.0, 3.0]) : {f(d1 + 3)}"], []
    if rule == "reshape-element-count":
        return [inp(k, "r", f(d1, d2)), f"%{k + 1} = Reshape(%{k}, [{d1 * d2 + 1}]) : {f(d1 * d2 + 1)}"], []
    if rule == "transpose-perm":
        return [inp(k, "t", f(d1, d2)), f"%{k + 1} = Transpose(%{k}, [0, 0]) : {f(d1, d1)}"], []
    if rule == "result-type":
        return [inp(k, "u", f(d1, d2)), f"%{k + 1} = Relu(%{k}) : {f(d1, d2 + 1)}"], []
    if rule == "dtype-mismatch":
        return [inp(k, "a", f(d1)), f'%{k + 1} = Input() {{name: "b"}} : Tensor<i64, [{d1}]>',
                f"%{k + 2} = BinOp(Add, %{k}, %{k + 1}) : {f(d1)}"], []
    if rule == "broadcast":
        return [inp(k, "a", f(d1 + 1)), inp(k + 1, "b", f(d1 + 2)),
                f"%{k + 2} = BinOp(Mul, %{k}, %{k + 1}) : {f(d1 + 1)}"], []
    if rule == "matmul-shape":
        return [inp(k, "a", f(d1, d2)), inp(k + 1, "b", f(d2 + 1, 2)),
                f"%{k + 2} = MatMul(%{k}, %{k + 1}) : {f(d1, 2)}"], []
    if rule == "reduce-axes":
        return [inp(k, "a", f(d1, d2)), f"%{k + 1} = Sum(%{k}, [2], false) : {f(d1)}"], []
    if rule == "slice-zero-step":
        return [inp(k, "a", f(d1)), f"%{k + 1} = Slice(%{k}, [0], [{d1}], [0]) : {f(d1)}"], []
    if rule == "slice-lengths":
        return [inp(k, "a", f(d1, d2)), f"%{k + 1} = Slice(%{k}, [0], [{d1}], [1]) : {f(d1, d2)}"], []
    if rule == "index-length":
        return [inp(k, "a", f(d1, d2)), f"%{k + 1} = Index(%{k}, [0]) : {f()}"], []
    if rule == "squeeze-axes":
        return [inp(k, "a", f(d1 + 1, d2)), f"%{k + 1} = Squeeze(%{k}, [0]) : {f(d2)}"], []
    if rule == "gather-index-dtype":
        return [inp(k, "a", f(d1, d2)), inp(k + 1, "i", f(2)), f"%{k + 2} = Gather(%{k}, %{k + 1}) : {f(2, d2)}"], []
    if rule == "conv-channels":
        return [inp(k, "x", f(1, 4, 4, d1)), inp(k + 1, "w", f(3, 3, d1 + 1, 2)),
                f"%{k + 2} = Conv2d(%{k}, %{k + 1}, [1, 1], Valid) : {f(1, 2, 2, 2)}"], []
    if rule == "conv-strides":
        return [inp(k, "x", f(1, 4, 4, d1)), inp(k + 1, "w", f(3, 3, d1, 2)),
                f"%{k + 2} = Conv2d(%{k}, %{k + 1}, [0, 1], Valid) : {f(1, 2, 2, 2)}"], []
    if rule == "dtype-kind":
        return [f'%{k} = Input() {{name: "a"}} : Tensor<i64, [{d1}]>', f"%{k + 1} = Relu(%{k}) : Tensor<i64, [{d1}]>"], []
    if rule == "unknown-op":
        return [inp(k, "a", f(d1)), f"%{k + 1} = Softmax(%{k}) : {f(d1)}"], []
    if rule == "div-not-core":
        return [inp(k, "a", f(d1)), f"%{k + 1} = BinOp(Div, %{k}, %{k}) : {f(d1)}"], []
    if rule == "operands":
        return [inp(k, "a", f(d1)), f"%{k + 1} = Relu(%{k}, %{k}) : {f(d1)}"], []
    if rule == "dim-positive":
        return [f"%{k} = Input() {{name: \"z\"}} : Tensor<f32, [{d1}, 0]>"], []
    if rule == "expand-axes":
        return [inp(k, "a", f(d1)), f"%{k + 1} = ExpandDims(%{k}, [3]) : {f(d1, 1)}"], []
    if rule == "reshape-dims":
        return [inp(k, "a", f(d1)), f"%{k + 1} = Reshape(%{k}, [-1, -1]) : {f(d1, 1)}"], []
    if rule == "dot-shape":
        return [inp(k, "a", f(d1)), inp(k + 1, "b", f(d1 + 1)), f"%{k + 2} = Dot(%{k}, %{k + 1}) : {f()}"], []
    if rule == "conv-shape":
        return [inp(k, "x", f(4, 4, d1)), inp(k + 1, "w", f(3, 3, d1, 2)),
                f"%{k + 2} = Conv2d(%{k}, %{k + 1}, [1, 1], Valid) : {f(2, 2, 2)}"], []
    if rule == "const-shape":
        return [f"%{k} = ConstTensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]) : {f(3, 2)}"], []
    if rule == "const-dtype":
        return [f"%{k} = ConstTensor([1.5, 2.0]) : Tensor<i64, [2]>"], []
    if rule == "missing-type":
        return [f'%{k} = Input() {{name: "m"}}'], []
    raise KeyError(rule)


BREAKABLE = ("use-before-def", "multiple-definition", "undefined-output", "input-name", "const-count",
             "reshape-element-count", "transpose-perm", "result-type", "dtype-mismatch", "broadcast",
             "matmul-shape", "reduce-axes", "slice-zero-step", "slice-lengths", "index-length", "squeeze-axes",
             "gather-index-dtype", "conv-channels", "conv-strides", "dtype-kind", "unknown-op", "div-not-core",
             "operands", "dim-positive", "expand-axes", "reshape-dims", "dot-shape", "conv-shape", "const-dtype", "const-shape",
             "missing-type")


@st.composite
def invalid_modules(draw) -> tuple[str, str]:
    """(text, the one rule it breaks)."""
    mod = draw(valid_modules(max_ops=4))
    rule = draw(st.sampled_from(BREAKABLE))
    k = len(mod.instrs)
    lines, extra_outputs = _broken_lines(rule, k, draw)
    text = print_module(mod).splitlines()
    outputs = text.pop()
    if extra_outputs:
        outputs += ", " + ", ".join(extra_outputs)
    return "\n".join(text + lines + [outputs]) + "\n", rule
