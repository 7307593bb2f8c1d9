#!/usr/bin/env python3
"""MIND Core IR benchmark: decode (parse + verify + spans), canonicalise, graph, convert to NAC,
numpy evaluation and the NAC interpreter, on a generated chain of ``--instructions`` Core ops.

    python benchmarks/bench_mind.py [--instructions 10000] [--runs 3]

Every figure is printed beside a baseline measured in the same run:

* decode vs ``json.loads`` of the same module written as JSON (one object per instruction): what a
  parser that does no text work of its own costs for the same content;
* canonicalise+print, graph and convert vs decode (how they scale with the same module);
* ``nac run`` of the converted program vs the numpy evaluator (the oracle) on the same inputs.

Values stay finite (a MatMul by a scaled identity, Relu, Transpose, residual Add), so the two
executions are also compared (max relative difference). Best of ``--runs`` for the fast stages.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def make_module(n: int) -> tuple[bytes, bytes]:
    lines = ['%0 = Input() {name: "x"} : Tensor<f32, [8, 8]>',
             '%1 = ConstTensor(' + str((np.eye(8) * 0.5).tolist()) + ') : Tensor<f32, [8, 8]>']
    objs = [{"id": 0, "op": "Input", "name": "x", "type": ["f32", [8, 8]]},
            {"id": 1, "op": "ConstTensor", "data": (np.eye(8) * 0.5).tolist(), "type": ["f32", [8, 8]]}]
    v = 1
    for k in range(n):
        kind = k % 4
        if kind == 0:
            lines.append(f"%{v + 1} = MatMul(%{v}, %1) : Tensor<f32, [8, 8]>")
            objs.append({"id": v + 1, "op": "MatMul", "args": [v, 1], "type": ["f32", [8, 8]]})
        elif kind == 1:
            lines.append(f"%{v + 1} = BinOp(Add, %{v}, %0) : Tensor<f32, [8, 8]>  # residual")
            objs.append({"id": v + 1, "op": "BinOp", "kind": "Add", "args": [v, 0], "type": ["f32", [8, 8]]})
        elif kind == 2:
            lines.append(f"%{v + 1} = Relu(%{v}) : Tensor<f32, [8, 8]>")
            objs.append({"id": v + 1, "op": "Relu", "args": [v], "type": ["f32", [8, 8]]})
        else:
            lines.append(f"%{v + 1} = Transpose(%{v}, [1, 0]) : Tensor<f32, [8, 8]>")
            objs.append({"id": v + 1, "op": "Transpose", "args": [v], "perm": [1, 0], "type": ["f32", [8, 8]]})
        v += 1
    lines.append(f"outputs: %{v}")
    return ("\n".join(lines) + "\n").encode(), json.dumps({"instrs": objs, "outputs": [v]}).encode()


def best(fn, runs: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instructions", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    import nac_engine
    from nac_engine.peers.mind import decode
    from nac_engine.peers.mind.canonical import canonical_text
    from nac_engine.peers.mind.convert import convert_module
    from nac_engine.peers.mind.evaluator import evaluate, random_inputs

    text, js = make_module(args.instructions)
    t_json, _ = best(lambda: json.loads(js), args.runs)
    t_dec, f = best(lambda: decode(text), args.runs)
    assert not f.problems, f.problems[:3]
    n = len(f.module.instrs)
    print(f"module: {n:,} instructions, {len(text) / 1e6:.2f} MB of IR text ({len(js) / 1e6:.2f} MB as JSON)")
    print(f"decode (parse+verify+spans) {t_dec:.3f} s = {n / t_dec:,.0f} instr/s   "
          f"baseline json.loads {t_json:.3f} s   ratio {t_dec / t_json:.1f}x")
    t_leaves, leaves = best(lambda: sum(1 for _ in decode(text).root.leaves()), 1)
    print(f"decode + every token span ({leaves:,} leaves) {t_leaves:.3f} s   ratio to decode {t_leaves / t_dec:.2f}x")
    t_can, _ = best(lambda: canonical_text(f.module), args.runs)
    print(f"canonicalise + print {t_can:.3f} s   ratio to decode {t_can / t_dec:.2f}x")
    t_graph, _ = best(f.graph, args.runs)
    print(f"dataflow graph {t_graph:.3f} s   ratio to decode {t_graph / t_dec:.2f}x")
    t_conv, res = best(lambda: convert_module(f.module), 1)
    print(f"convert to NAC {t_conv:.3f} s -> {len(res.nac.instructions):,} instructions   "
          f"ratio to decode {t_conv / t_dec:.2f}x")
    x = random_inputs(f.module)
    t_eval, ref = best(lambda: evaluate(f.module, x), args.runs)
    nac_engine.run(res.nac, inputs=x)          # first run loads torch and the kernels
    t_run, got = best(lambda: nac_engine.run(res.nac, inputs=x), args.runs)
    rel = float(np.max(np.abs(got[0] - ref[0])) / max(1e-30, float(np.max(np.abs(ref[0])))))
    print(f"nac run {t_run:.3f} s   baseline numpy evaluator {t_eval:.3f} s   ratio {t_run / t_eval:.2f}x   "
          f"max relative difference {rel:.2e}")


if __name__ == "__main__":
    main()
