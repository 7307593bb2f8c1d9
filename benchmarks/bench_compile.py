"""Compiler at GPT-2 size: compile time, peak memory, and the interpreter against eager on the result.

A 12-layer, 768-wide GPT-2 (``GPT2Model``, random weights from its config, ``use_cache=False``)
is built, then:

* **compile**: ``compile_model`` + ``write_compiled`` to a temporary file; wall time (target
  < 60 s) and the process's peak RSS while compiling (target < 3× the weight bytes). The peak
  counter is reset after the model is built (``/proc/self/clear_refs``), so the figure is the
  highest RSS reached *during* the compile — the model's own weights included, since they stay
  resident. The RSS growth over the model alone is printed too;
* **run**: the written file is opened (memory-mapped) and run by ``Session`` on the same
  ``input_ids`` as ``model(input_ids)`` in eager PyTorch; median of ``--repeat`` runs each,
  after one warm-up run (the interpreter's first run also loads the weights; printed apart).
  Target: interpreter ≤ 1.3× eager. Outputs are compared too.

    python benchmarks/bench_compile.py [--layers 12] [--width 768] [--seq-len 128] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _status(field: str) -> int:
    """VmRSS / VmHWM of this process in bytes (Linux)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")      # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")

    import torch
    from transformers import GPT2Config, GPT2Model

    import nac_engine
    from nac_engine.compiler.external import write_compiled
    from nac_engine.compiler.pipeline import compile_model
    from nac_engine.runtime.session import Session

    torch.manual_seed(0)
    config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=args.heads, use_cache=False)
    model = GPT2Model(config).eval()
    weight_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    ids = torch.randint(0, config.vocab_size, (1, args.seq_len), generator=torch.Generator().manual_seed(0))

    rss_model = _status("VmRSS")
    peak_reset = _reset_peak()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt2.nac")
        t0 = time.perf_counter()
        res = compile_model(model, (), {"input_ids": ids})
        t_compile = time.perf_counter() - t0
        write_compiled(res.nac, path)
        t_total = time.perf_counter() - t0
        peak = _status("VmHWM")
        file_bytes = os.path.getsize(path)
        report = res.report
        del res

        with torch.no_grad():
            ref = model(input_ids=ids).last_hidden_state.numpy()
        nac = nac_engine.read(path)
        session = Session(nac, inputs={"input_ids": ids.numpy()})
        t0 = time.perf_counter()
        out = session.run()[0]
        t_first = time.perf_counter() - t0
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        t_interp = _median(session.run, args.repeat)
        with torch.no_grad():
            model(input_ids=ids)
            t_eager = _median(lambda: model(input_ids=ids), args.repeat)
        session.close()

    figures = {
        "model": f"GPT2Model {args.layers}x{args.width}, seq {args.seq_len}",
        "weight_bytes": weight_bytes, "file_bytes": file_bytes, "instructions": report.instructions,
        "instructions_exported": report.instructions_exported,
        "compile_s": round(t_compile, 3), "compile_and_write_s": round(t_total, 3),
        "stage_s": {k: round(v, 3) for k, v in report.timings.items()},
        "peak_rss_bytes": peak, "rss_model_bytes": rss_model, "peak_reset": peak_reset,
        "peak_rss_over_weights": round(peak / weight_bytes, 3),
        "rss_growth_over_weights": round((peak - rss_model) / weight_bytes, 3),
        "mmap_peak_live": {k: v["peak"] for k, v in report.mmap.items()},
        "interp_first_run_s": round(t_first, 4), "interp_run_s": round(t_interp, 4), "eager_run_s": round(t_eager, 4),
        "interp_over_eager": round(t_interp / t_eager, 3), "max_rel_error": err,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    mib = 1024 * 1024
    print(f"{figures['model']}: {weight_bytes / mib:.1f} MiB of weights, file {file_bytes / mib:.1f} MiB, "
          f"{report.instructions_exported} -> {report.instructions} instructions")
    print(f"compile        {t_compile:7.2f} s (+ write: {t_total:.2f} s)   target < 60 s   "
          + ", ".join(f"{k} {v:.2f}s" for k, v in report.timings.items()))
    print(f"peak RSS       {peak / mib:7.0f} MiB = {peak / weight_bytes:.2f}x weights   target < 3x"
          f"   (model alone {rss_model / mib:.0f} MiB; compile added {(peak - rss_model) / weight_bytes:.2f}x"
          f"{'' if peak_reset else '; peak counter NOT reset: includes the model build'})")
    print("MMAP peak live " + ", ".join(f"{k} {v / mib:.1f} MiB" for k, v in figures["mmap_peak_live"].items()))
    print(f"interpreter    {t_interp * 1e3:7.1f} ms   eager {t_eager * 1e3:.1f} ms   "
          f"ratio {t_interp / t_eager:.2f}x   target <= 1.3x   (first run with weight load {t_first * 1e3:.0f} ms)")
    print(f"max rel error  {err:.2e} (interpreter vs eager, relative to max |output|)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
