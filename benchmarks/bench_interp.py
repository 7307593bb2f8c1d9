"""Interpreter overheads, as ratios against PyTorch eager measured in the same run.

* full run: ``Session.run()`` on the largest corpus model vs the same ATen calls replayed
  back to back in plain PyTorch eager (the kernels and arguments the session used,
  recorded once: the cost of the computation with no interpreter around it);
* stepping: ``Debugger.step()`` per instruction vs that eager replay, i.e. the debugger's
  per-instruction overhead beyond kernel time (target < 50 µs).

    python benchmarks/bench_interp.py [--case bert_tiny] [--repeat 50] [--json]

The GPT-2-size ratio (target ≤ 1.3× eager) belongs to the compiler issue, which builds it.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nac_engine import read  # noqa: E402
from nac_engine.runtime.debugger import Debugger  # noqa: E402
from nac_engine.runtime.session import Session  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "nac"


class _Recorder(Session):
    """Records (kernel, concrete args) of every regular op: the eager replay baseline."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = []

    def call_op(self, ins):
        fn = self.kernels(self.nac.op_name(ins.a))
        self.calls.append((fn, self.gather(ins)))
        return super().call_op(ins)


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="bert_tiny", help="corpus case folder (default: the largest, bert_tiny)")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    case = CORPUS / a.case
    if not case.is_dir():
        print(f"corpus case {case} not found (../shared/corpus is needed)", file=sys.stderr)
        return 2
    path = next(case.glob("*.nac"))
    feeds = [np.load(f) for f in sorted(case.glob("feed_*.npy"))]
    nac = read(path)
    n = len(nac.instructions)

    rec = _Recorder(nac, feeds=feeds)
    rec.run()
    calls = rec.calls

    def eager():
        for fn, args in calls:
            fn(*args)

    session = Session(nac, feeds=feeds)
    session.run()   # warm caches (param tensors, kernel lookups)
    eager_best, eager_med = _best(eager, a.repeat)
    run_best, run_med = _best(session.run, a.repeat)

    def stepping():
        dbg = Debugger(nac, feeds=feeds)
        while not dbg.finished:
            dbg.step()
    stepping()
    step_best, step_med = _best(stepping, max(3, a.repeat // 5))
    per_instr_us = (step_best - eager_best) / n * 1e6
    per_run_instr_us = (run_best - eager_best) / n * 1e6

    rows = [
        ("instructions", n, "", ""),
        ("ATen calls replayed (eager baseline)", len(calls), "", ""),
        ("eager replay, best", f"{eager_best * 1e3:.3f} ms", "", "1.00x"),
        ("Session.run(), best", f"{run_best * 1e3:.3f} ms", "", f"{run_best / eager_best:.2f}x"),
        ("  overhead per instruction", f"{per_run_instr_us:.1f} us", "", ""),
        ("Debugger.step() x n, best", f"{step_best * 1e3:.3f} ms", "", f"{step_best / eager_best:.2f}x"),
        ("  stepping overhead per instruction", f"{per_instr_us:.1f} us", "< 50 us",
         "PASS" if per_instr_us < 50 else "FAIL"),
    ]
    if a.json:
        print(json.dumps({"case": a.case, "instructions": n, "eager_s": eager_best, "run_s": run_best,
                          "step_s": step_best, "run_ratio": run_best / eager_best,
                          "step_overhead_us": per_instr_us, "run_overhead_us": per_run_instr_us}, indent=2))
    else:
        print(f"interpreter benchmark — {a.case} ({path.name}), best of {a.repeat}")
        for name, value, target, ratio in rows:
            print(f"  {name:<40} {str(value):>14} {target:>10} {ratio:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
