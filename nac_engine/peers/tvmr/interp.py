"""A stepping interpreter for TVMR programs: the core ISA and the compute extensions (tensor,
ternary, activation) with the integer semantics of ternsig's interpreter (research note §2.3):
i32 hot registers, Signal weights (polarity × magnitude) in cold registers, ``TERNARY_MATMUL`` summed in
i64 and clamped to i32, ``ADD``/``SUB`` saturating, ``MUL`` = (a·b) >> 8, core ``SIGMOID`` =
clamp(((v·gain) >> 10) + 128, 0, 255), the third register of ADD/SUB/MUL/CMP_GT/TERNARY_MATMUL masked
to its low four bits, ``add Hd, Hs, Cn`` adding polarity·magnitude·255. Rust's truncating division
is kept (``_tdiv``).

Host-only operations (the ones that yield a ``DomainOp``: LOAD/STORE_WEIGHTS, neuro, orchestration,
lifecycle, ipc, bank, pool, parts of learning) are not computed: the step reports them as
``host`` and execution continues. Weights come from the caller (``weights={"C0": (polarity,
magnitude)}`` or keyed by thermogram key) or are synthetic, seeded per register.

``TvmrMachine.step()`` runs one instruction and returns a :class:`Step`; ``history`` keeps every
register write by tick, so ``registers_at(tick)`` gives the hot registers as they were after it —
what a debugger UI drives.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ...errors import NacFormatError
from . import isa

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
MAX_ELEMENTS = 1 << 24          # per register; a hostile definition cannot make us allocate more
MAX_TOTAL_ELEMENTS = 1 << 26


class TvmrRuntimeError(NacFormatError):
    """An instruction that cannot execute (unallocated register, bad shape): names instruction and why."""


@dataclass
class Hot:
    data: np.ndarray            # int32, flat
    shape: list[int]


@dataclass
class Cold:
    polarity: np.ndarray        # int8 in {-1, 0, 1}
    magnitude: np.ndarray       # uint8
    shape: list[int]

    @property
    def effective(self) -> np.ndarray:
        return self.polarity.astype(np.int64) * self.magnitude.astype(np.int64)


@dataclass
class Step:
    tick: int                   # how many instructions ran before this one
    index: int                  # instruction index (pc)
    mnemonic: str
    status: str                 # "ok" | "host" | "unsupported" | "halt" | "error"
    message: str = ""
    writes: list[str] = field(default_factory=list)


def _sat(a) -> np.ndarray:
    return np.clip(a, I32_MIN, I32_MAX).astype(np.int32)


def _wrap32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.int64).astype(np.int32)      # `as i32`: two's-complement wrap


def _tdiv(a, b):
    """Integer division truncating toward zero (Rust), elementwise."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def synthetic_weights(shape: list[int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    n = int(np.prod(shape)) if shape else 1
    rng = np.random.default_rng(seed)
    return rng.integers(-1, 2, n).astype(np.int8), rng.integers(0, 256, n).astype(np.uint8)


class TvmrMachine:
    def __init__(self, f, inputs=None, weights: Optional[dict] = None, seed: int = 0, target=None):
        self.f = f
        self.ins = f.instructions
        self.hot: list[Optional[Hot]] = [None] * 64
        self.cold: list[Optional[Cold]] = [None] * 64
        self.param = np.zeros(64, np.int32)
        self.pc = 0
        self.tick = 0
        self.halted = False
        self.error: Optional[str] = None
        self.output: Optional[np.ndarray] = None
        self.loop_stack: list[list[int]] = []        # [body_start, remaining]
        self.call_stack: list[int] = []
        self.steps: list[Step] = []
        self.history: list[tuple[int, int, np.ndarray]] = []   # (tick, hot index, data after the write)
        self.host_ops: list[Step] = []
        weights = weights or {}
        total = 0
        for r in f.registers:
            bank, idx = r.reg >> 6, r.reg & 0x3F
            n = int(np.prod(r.dims)) if r.dims else 1
            if n > MAX_ELEMENTS or total + n > MAX_TOTAL_ELEMENTS:
                raise TvmrRuntimeError(f"registers/{r.name}", r.offset, f"{n:,} elements is more than this "
                                                                       "interpreter allocates")
            total += n
            if bank == 0:
                self.hot[idx] = Hot(np.zeros(n, np.int32), list(r.dims))
            elif bank == 1:
                given = weights.get(r.name, weights.get(r.key_text) if r.key else None)
                if given is not None:
                    pol, mag = (np.asarray(x).reshape(-1) for x in given)
                    if pol.size != n or mag.size != n:
                        raise ValueError(f"weights for {r.name}: {pol.size} values, {n} expected")
                    pol, mag = pol.astype(np.int8), mag.astype(np.uint8)
                else:
                    pol, mag = synthetic_weights(r.dims, seed * 64 + idx)
                self.cold[idx] = Cold(pol, mag, list(r.dims))
        if inputs is None:
            li = next((i for i in self.ins if i.ext_id == 0 and i.opcode == 0x1007), None)
            reg = f.register(li.operands[0]) if li else None
            n = int(np.prod(reg.dims)) if reg and reg.dims else 1
            inputs = np.random.default_rng(seed + 1).integers(-255, 256, min(n, MAX_ELEMENTS))
        self.input = np.asarray(inputs, dtype=np.int64).reshape(-1).astype(np.int32)
        self.target = np.asarray(target if target is not None else [], dtype=np.int64).reshape(-1).astype(np.int32)

    # -- public stepping API ----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.halted or self.error is not None or self.pc >= len(self.ins)

    def step(self) -> Optional[Step]:
        """Execute the instruction at ``pc``; ``None`` once the program has halted or failed."""
        if self.done:
            return None
        i = self.ins[self.pc]
        st = Step(self.tick, i.index, i.mnemonic, "ok")
        nxt = self.pc + 1
        try:
            nxt = self._exec(i, st, nxt)
        except TvmrRuntimeError as e:
            st.status, st.message = "error", e.reason
            self.error = f"instruction {i.index} ({i.mnemonic}): {e.reason}"
        if st.status == "host":
            self.host_ops.append(st)
        self.steps.append(st)
        self.tick += 1
        self.pc = nxt
        return st

    def run(self, max_steps: int = 1_000_000) -> Optional[np.ndarray]:
        """Step until HALT, the end, an error or ``max_steps``; returns the output buffer."""
        for _ in range(max_steps):
            if self.step() is None:
                break
        else:
            if not self.done:
                self.error = f"stopped after {max_steps:,} steps (no HALT reached)"
        return self.output

    def registers(self) -> dict[str, np.ndarray]:
        """Hot registers now (name -> int32 array shaped as held)."""
        return {f"H{k}": h.data.reshape(h.shape) if h.shape and int(np.prod(h.shape)) == h.data.size else h.data
                for k, h in enumerate(self.hot) if h is not None}

    def registers_at(self, tick: int) -> dict[str, np.ndarray]:
        """Hot register values as they were after ``tick`` instructions ran (only those written so far,
        plus their initial zeros)."""
        out = {f"H{r.reg & 0x3F}": np.zeros(int(np.prod(r.dims)) if r.dims else 1, np.int32)
               for r in self.f.registers if r.reg >> 6 == 0}
        for t, k, data in self.history:
            if t >= tick:
                break
            out[f"H{k}"] = data
        return out

    # -- execution ------------------------------------------------------------------------------------
    def _h(self, b: int, what: str = "source") -> Hot:
        h = self.hot[b & 0x3F]
        if h is None:
            raise TvmrRuntimeError("hot", b, f"{what} H{b & 0x3F} not allocated")
        return h

    def _c(self, b: int) -> Cold:
        c = self.cold[b & 0x3F]
        if c is None:
            raise TvmrRuntimeError("cold", b, f"cold register C{b & 0x3F} not allocated")
        return c

    def _set(self, b: int, data, shape, st: Step) -> None:
        data = np.asarray(data).astype(np.int32).reshape(-1)
        if data.size > MAX_ELEMENTS:
            raise TvmrRuntimeError("hot", b, f"result of {data.size:,} elements is too large")
        k = b & 0x3F
        self.hot[k] = Hot(data, list(shape))
        self.history.append((self.tick, k, data.copy()))
        st.writes.append(f"H{k}")

    def _exec(self, i, st: Step, nxt: int) -> int:
        op = i.op
        a, b, c, d = i.operands
        if op is None:
            st.status, st.message = "unsupported", "unknown opcode"
            return nxt
        if op.domain:
            st.status, st.message = "host", f"host-only operation ({isa.ext_name(i.ext_id)}): yields a DomainOp; skipped"
            return nxt
        if i.ext_id == 0:
            return self._core(i.opcode, a, b, c, d, st, nxt)
        if i.ext_id in isa.COMPUTE_EXTENSIONS:
            self._compute_ext(i.ext_id, op.mnemonic, a, b, c, d, st)
            return nxt
        st.status, st.message = "unsupported", f"{isa.ext_name(i.ext_id)} is not a compute extension"
        return nxt

    def _core(self, o: int, a, b, c, d, st: Step, nxt: int) -> int:
        if o == 0x0001:
            self.halted = True
            st.status = "halt"
            return nxt
        if o in (0x0000, 0x0004, 0x0005, 0x7001, 0x7002, 0x7003, 0x7000, 0x7005):
            return nxt
        if o == 0x1007:         # LOAD_INPUT: the host input buffer
            self._set(a, self.input, [self.input.size], st)
        elif o == 0x1009:
            self._set(a, self.target, [self.target.size], st)
        elif o == 0x1008:       # STORE_OUTPUT: source is B
            self.output = self._h(b).data.copy()
        elif o == 0x1004:
            s = self._h(b)
            self._set(a, s.data, s.shape, st)
        elif o == 0x1005:
            x, y = self._h(a), self._h(b)
            self._set(a, y.data, y.shape, st)
            self._set(b, x.data, x.shape, st)
        elif o == 0x1006:
            h = self._h(a, "target")
            self._set(a, np.zeros_like(h.data), h.shape, st)
        elif o == 0x1001:
            self.hot[a & 0x3F] = None if a >> 6 == 0 else self.hot[a & 0x3F]
            if a >> 6 == 1:
                self.cold[a & 0x3F] = None
        elif o in (0x4000, 0x4013):
            self._ternary_matmul(a, b, c & 0x0F, st)
        elif o == 0x3001:
            self._core_add(a, b, c, st)
        elif o == 0x300E:
            s, t = self._h(b), self._h(c & 0x0F)
            m = min(s.data.size, t.data.size)
            self._set(a, _sat(s.data[:m].astype(np.int64) - t.data[:m]), s.shape, st)
        elif o == 0x3002:
            s, t = self._h(b), self._h(c & 0x0F)
            m = min(s.data.size, t.data.size)
            self._set(a, _wrap32((s.data[:m].astype(np.int64) * t.data[:m]) >> 8), s.shape, st)
        elif o == 0x300F:
            s, t = self._h(b), self._h(c & 0x0F)
            m = min(s.data.size, t.data.size)
            self._set(a, np.where(s.data[:m] > t.data[:m], 255, 0), s.shape, st)
        elif o == 0x3003:
            s = self._h(b)
            self._set(a, np.maximum(s.data, 0), s.shape, st)
        elif o == 0x3004:
            s = self._h(b)
            gain = d if d > 0 else 64
            self._set(a, np.clip(((s.data.astype(np.int64) * gain) >> 10) + 128, 0, 255), s.shape, st)
        elif o == 0x3007:
            s = self._h(b)
            v = s.data.astype(np.int64)
            sig = np.clip((((v * 435) >> 8) >> 10) + 128, 0, 255)
            self._set(a, _wrap32((v * sig) >> 8), s.shape, st)
        elif o == 0x3005:
            s = self._h(b)
            cen = s.data.astype(np.int64) - 128
            t = _tdiv(cen * 64, np.maximum(64 + (np.abs(cen) >> 1), 1))
            self._set(a, np.clip(t + 128, 0, 255), s.shape, st)
        elif o == 0x3006:
            s = self._h(b)
            v = s.data.astype(np.int64)
            if v.size == 0:
                self._set(a, v, s.shape, st)
            else:
                sh = v - v.max()
                e = np.where(sh >= 0, 256, np.maximum(256 + np.maximum(sh, -256), 1))
                tot = int(e.sum())
                self._set(a, (e * 255) // tot if tot > 0 else np.zeros_like(e), s.shape, st)
        elif o == 0x3009:       # SHIFT: amount in C (Rust release builds mask the amount to 5 bits)
            s = self._h(b)
            self._set(a, s.data >> (c & 31), s.shape, st)
        elif o == 0x300A:
            self._clamp(a, b, c, d, st)
        elif o == 0x300B:
            s = self._h(b)
            self._set(a, _sat(-s.data.astype(np.int64)), s.shape, st)
        elif o == 0x3008:
            s = self._h(b)
            self._set(a, _sat(_tdiv(s.data.astype(np.int64) * ((c << 8) | d), 256)), s.shape, st)
        elif o == 0x3010:
            s = self._h(b)
            self._set(a, [int(s.data.max()) if s.data.size else 0], [1], st)
        elif o == 0x3011:
            v = (c << 8) | d
            self._set(a, [v - 0x10000 if v & 0x8000 else v], [1], st)
        elif o == 0x4009:
            self._add_bias(a, b, c & 0x0F, 256, st)
        elif o == 0x4002:
            s = self._h(b)
            sh = (c << 8) | d
            self._set(a, s.data >> min(sh if sh > 0 else 8, 31), s.shape, st)
        elif o == 0x400D:
            s = self._h(b)
            self._set(a, [int(np.argmax(s.data)) if s.data.size else 0], [1], st)
        elif o == 0x400C:
            s = self._h(b)
            part = s.data[c:c + d]
            self._set(a, part, [part.size], st)
        elif o == 0x400E:
            s, t = self._h(b), self._h(c)
            out = np.concatenate([s.data, t.data])
            self._set(a, out, [out.size], st)
        elif o in (0x400F, 0x4010, 0x4011):
            s = self._h(b)
            self._set(a, s.data, s.shape, st)
        elif o == 0x6000:
            count = (c << 8) | d
            if count == 0:
                return self._after_end_loop(nxt)
            self.loop_stack.append([nxt, count])
        elif o == 0x6001:
            if self.loop_stack:
                top = self.loop_stack[-1]
                top[1] -= 1
                if top[1] > 0:
                    return top[0]
                self.loop_stack.pop()
        elif o == 0x6002:
            if self.loop_stack:
                self.loop_stack.pop()
                return self._after_end_loop(nxt)
        elif o in (0x6008, 0x6006, 0x6009, 0x600A):
            tgt = (c << 8) | d
            if tgt >= len(self.ins):
                raise TvmrRuntimeError("control", tgt, f"JUMP target {tgt} out of bounds")
            if o == 0x6006:
                if len(self.call_stack) >= 1024:
                    raise TvmrRuntimeError("control", tgt, "call stack deeper than 1024")
                self.call_stack.append(nxt)
                return tgt
            if o == 0x6008:
                return tgt
            h = self.hot[a & 0x3F]
            zero = h is None or not np.any(h.data)
            return tgt if zero == (o == 0x6009) else nxt
        elif o == 0x6007:
            if not self.call_stack:
                self.halted = True
                st.status = "halt"
                return nxt
            return self.call_stack.pop()
        elif o == 0x600B:
            return nxt + a
        else:
            st.status, st.message = "unsupported", "not implemented by this interpreter (learning/architecture op)"
        return nxt

    def _after_end_loop(self, pos: int) -> int:
        depth = 0
        for k in range(pos, len(self.ins)):
            i = self.ins[k]
            if i.ext_id == 0 and i.opcode == 0x6000:
                depth += 1
            elif i.ext_id == 0 and i.opcode == 0x6001:
                if depth == 0:
                    return k + 1
                depth -= 1
        return len(self.ins)

    def _ternary_matmul(self, dst: int, wreg: int, xreg: int, st: Step) -> None:
        w = self._c(wreg)
        x = self._h(xreg)
        if len(w.shape) < 2:
            raise TvmrRuntimeError("cold", wreg, "Weights must be 2D")
        out_dim, in_dim = w.shape[0], w.shape[1]
        m = min(in_dim, x.data.size)
        eff = w.effective[:out_dim * in_dim].reshape(out_dim, in_dim)[:, :m]
        # i64 accumulation exactly as the VM; every |term| < 2**39, so an int64 dot cannot overflow
        y = eff @ x.data[:m].astype(np.int64)
        self._set(dst, _sat(y), [out_dim], st)

    def _core_add(self, a, b, c, st: Step) -> None:
        if b >> 6 != 0:
            return
        if c >> 6 == 1:
            self._add_bias(a, b, c & 0x0F, 255, st)
        elif c >> 6 == 0:
            s, t = self._h(b), self._h(c & 0x0F)
            out = s.data.astype(np.int64).copy()
            m = min(s.data.size, t.data.size)
            out[:m] += t.data[:m]
            self._set(a, _sat(out), s.shape, st)

    def _add_bias(self, a, b, cold_idx, scale, st: Step) -> None:
        s = self._h(b)
        bias = self.cold[cold_idx]
        if bias is None:
            raise TvmrRuntimeError("cold", cold_idx, f"bias C{cold_idx} not allocated")
        out = s.data.astype(np.int64).copy()
        m = min(out.size, bias.polarity.size)
        out[:m] += bias.effective[:m] * scale
        self._set(a, _sat(out), s.shape, st)

    def _clamp(self, a, b, c, d, st: Step) -> None:
        s = self._h(b)
        lo, hi = (c - 128) * 256, (d - 128) * 256
        if lo > hi:
            raise TvmrRuntimeError("operands", c, f"clamp min {lo} > max {hi}")
        self._set(a, np.clip(s.data, lo, hi), s.shape, st)

    def _compute_ext(self, ext: int, m: str, a, b, c, d, st: Step) -> None:
        if ext == 0x0003:
            s = self._h(b)
            v = s.data.astype(np.int64)
            if m == "RELU":
                r = np.maximum(v, 0)
            elif m == "SIGMOID":
                x = np.clip(v, -2048, 2048)
                r = np.clip(128 + _tdiv(x * 32, 256 + np.abs(x)), 0, 255)
            elif m == "TANH":
                x = np.clip(v, -2048, 2048)
                r = np.clip(_tdiv(x * 127, 128 + np.abs(x)), -127, 127)
            elif m == "SOFTMAX":
                if v.size == 0:
                    r = v
                else:
                    e = np.maximum(256 + np.maximum(v - v.max(), -1024), 1)
                    r = _tdiv(e * 255, max(int(e.sum()), 1))
            else:   # GELU
                gate = 128 + np.clip(_tdiv(v * 54, 256), -128, 127)
                r = _wrap32(_tdiv(v * gate, 256))
            self._set(a, r, s.shape, st)
            return
        if ext == 0x0002:
            if m == "TERNARY_MATMUL":
                self._ternary_matmul(a, b, c, st)
            elif m == "TERNARY_ADD_BIAS":
                self._add_bias(a, b, c & 0x0F, 256, st)
            elif m == "DEQUANTIZE":
                s = self._h(b)
                sh = (c << 8) | d
                self._set(a, s.data >> min(sh if sh > 0 else 8, 31), s.shape, st)
            else:
                st.status, st.message = "unsupported", "not implemented by this interpreter"
            return
        # tensor (0x0001)
        if m == "ADD":
            s = self._h(b)
            if c >> 6 == 1:
                self._add_bias(a, b, c & 0x3F, 256, st)
                return
            t = self._h(c & 0x3F)
            n = max(s.data.size, t.data.size)
            out = np.zeros(n, np.int64)
            out[:s.data.size] += s.data
            out[:t.data.size] += t.data
            self._set(a, _sat(out), s.shape, st)
        elif m in ("SUB", "MUL", "CMP_GT"):
            s, t = self._h(b), self._h(c)
            if m == "SUB":
                n = max(s.data.size, t.data.size)
                out = np.zeros(n, np.int64)
                out[:s.data.size] += s.data
                out[:t.data.size] -= t.data
                self._set(a, _sat(out), s.shape, st)
            else:
                k = min(s.data.size, t.data.size)
                x, y = s.data[:k].astype(np.int64), t.data[:k].astype(np.int64)
                self._set(a, _sat((x * y) >> 8) if m == "MUL" else (x > y).astype(np.int64),
                          s.shape if m == "MUL" else [k], st)
        elif m == "SCALE":
            s = self._h(b)
            self._set(a, _sat(_tdiv(s.data.astype(np.int64) * ((c << 8) | d), 256)), s.shape, st)
        elif m == "SHIFT":
            s = self._h(b)
            self._set(a, s.data >> (c & 31), s.shape, st)
        elif m == "CLAMP":
            self._clamp(a, b, c, d, st)
        elif m == "MAX_REDUCE":
            s = self._h(b)
            self._set(a, [int(s.data.max()) if s.data.size else 0], [1], st)
        elif m == "NEGATE":
            s = self._h(b)
            self._set(a, _sat(-s.data.astype(np.int64)), s.shape, st)
        elif m == "ARGMAX":
            s = self._h(b)
            self._set(a, [int(np.argmax(s.data)) if s.data.size else 0], [1], st)
        elif m == "SLICE":
            s = self._h(b)
            part = s.data[c:c + d]
            self._set(a, part, [part.size], st)
        elif m == "CONCAT":
            s, t = self._h(b), self._h(c)
            out = np.concatenate([s.data, t.data])
            self._set(a, out, [out.size], st)
        elif m in ("SQUEEZE", "UNSQUEEZE", "TRANSPOSE"):
            s = self._h(b)
            self._set(a, s.data, s.shape, st)
        else:
            st.status, st.message = "unsupported", "not implemented by this interpreter"


def run(f, inputs=None, weights=None, seed: int = 0, max_steps: int = 1_000_000) -> TvmrMachine:
    """Run a decoded program to the end; returns the machine (``output``, ``steps``, ``host_ops``)."""
    m = TvmrMachine(f, inputs=inputs, weights=weights, seed=seed)
    m.run(max_steps)
    return m
