#!/usr/bin/env python3
"""Codec benchmark: open + index of a large .nac, and encode/decode of a 100k-instruction program.

    python benchmarks/bench_codec.py [--size-mb 1024] [--instructions 100000] [--tmpdir DIR]
                                     [--open-runs 3] [--json] [--check] [--profile]

What it measures (every figure is printed next to a baseline measured in the same run):

1. Generate a ~``--size-mb`` file with internal float32 weights (one square weight and one bias per
   layer), a matching OPS program (param loads, linear/relu/add ops), PERM, CMAP, CNST, DATA names
   and MMAP records, built from the model classes and encoded with ``nac_engine.write``. This runs in
   its own subprocess, so its memory (``write`` builds the whole file in memory) is reported and then
   freed before anything is read.
2. **open + index** in a fresh subprocess per run, so RSS is clean: ``read(path)``, then touch
   ``params``, ``instructions``, the root span's children, ``span_at`` the middle of the file and the
   middle of OPS. Reported: wall time, absolute peak RSS (``ru_maxrss``), and the child's peak after
   ``import nac_engine, numpy`` alone. Baseline: ``open`` + ``mmap`` + one ``struct.unpack`` of the header.
   The "warm" runs open the file as the generator's ``write()`` left it in the page cache; one extra
   run after ``posix_fadvise(DONTNEED)`` shows the cold-page-cache case. RSS is split into anonymous
   (heap the reader allocated) and file-backed (pages of the mapping the reader touched): on kernels
   that cache files in large folios (ext4/xfs, Linux 6.x), a just-written file is mapped in 2 MiB
   units, so touching one record header can add 2 MiB of file-backed RSS.
3. **100k instructions**: ``read(bytes)`` (best of 5), ``write()`` (best of 3) and materialising every
   span (walk ``nac.spans``, best of 3 on fresh reads). Baselines: a bare Python loop doing one
   ``struct.unpack_from`` per instruction over the same bytes (decode), one ``struct.pack`` per
   instruction plus a join (encode).

Targets: open + index < 0.5 s and < 100 MB peak RSS; read of 100k instructions < 0.5 s.
Timings are wall-clock (``time.perf_counter``). ``--check`` exits 1 when a target is missed; the
default is exit 0 — this is a measurement, not a test.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import mmap
import os
import platform
import pstats
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

MiB = 1 << 20
GiB = 1 << 30
OPEN_TARGET_S = 0.5
OPEN_TARGET_RSS_MB = 100.0
DECODE_TARGET_S = 0.5
DISK_FACTOR = 2.5      # free disk needed per byte of generated file
RAM_FACTOR = 4.5       # generator peak ≈ payload arrays + 3 copies made by write(); plus slack

# custom op ids (v1.6 standard table is 10..19; CMAP entries from 20 up)
OP_ADD = 11            # nac.add (standard)
OP_LINEAR, OP_RELU, OP_SOFTMAX, OP_VIEW, OP_MUL = 20, 21, 22, 23, 24
CMAP = {OP_LINEAR: "aten.linear.default", OP_RELU: "aten.relu.default",
        OP_SOFTMAX: "aten._softmax.default", OP_VIEW: "aten.expand.default", OP_MUL: "aten.mul.Tensor"}
SIG_T, SIG_TT, SIG_TTT, SIG_TI, SIG_TSS = 1, 2, 3, 4, 5
PERMS = {SIG_T: "T", SIG_TT: "TT", SIG_TTT: "TTT", SIG_TI: "Ti", SIG_TSS: "TSS"}


# =========================================================================== model builders
def _tables(nac) -> None:
    from nac_engine.format import Constant
    nac.cmap = dict(CMAP)
    nac.perms = dict(PERMS)
    nac.constants = {
        1: Constant(1, 2, -1),               # int64 dim
        2: Constant(2, 2, 1),
        3: Constant(3, 5, (1, 16)),          # list[int32] shapes
        4: Constant(4, 5, (16, 16)),
        5: Constant(5, 3, 0.5),              # float64
        6: Constant(6, 4, "float32"),        # string
    }


def build_big_model(size_mb: int):
    """~size_mb MiB of float32 weights: per layer one d×d weight and one d bias."""
    import numpy as np
    from nac_engine.format import (Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile,
                                   Orch, Parameter, TensorMeta)
    d = 1024
    while d > 64 and size_mb * MiB / (4 * d * d) < 32:   # keep at least ~32 layers when scaled down
        d //= 2
    layers = max(1, round(size_mb * MiB / (4 * d * d + 4 * d)))
    nac = NacFile(header=Header(version="1.6", weights_internal=True, num_inputs=1, num_outputs=1, d_model=d))
    nac.orch = Orch()
    _tables(nac)
    ins = [Instruction(0, 2, 0, None, None)]           # <INPUT B=0> x
    nac.input_names = [InputName(0, "x")]
    x = 0                                               # index of the current activation
    mmap_by_tick: dict[int, list] = {}
    prev_w = None
    for layer in range(layers):
        pw, pb = 2 * layer + 1, 2 * layer + 2
        w = np.full((d, d), (layer + 1) * 1e-3, dtype=np.float32)
        w[0, :] = np.arange(d, dtype=np.float32)       # not a constant page: distinct contents
        b = np.full((d,), -layer * 1e-3, dtype=np.float32)
        nac.params[pw] = Parameter(pw, f"layers.{layer}.linear.weight", meta=TensorMeta(0, (d, d), 0), _payload=w)
        nac.params[pb] = Parameter(pb, f"layers.{layer}.linear.bias", meta=TensorMeta(0, (d,), 0), _payload=b)
        iw = len(ins)
        ins.append(Instruction(iw, 2, 1, (1, pw), None))
        ins.append(Instruction(iw + 1, 2, 1, (1, pb), None))
        il = iw + 2
        ins.append(Instruction(il, OP_LINEAR, SIG_TTT, None, (x - il, -2, -1)))
        ins.append(Instruction(il + 1, OP_RELU, SIG_T, None, (-1,)))
        out = il + 1
        if layer % 4 == 3:                              # residual
            ins.append(Instruction(il + 2, OP_ADD, SIG_TT, None, (-1, x - (il + 2))))
            out = il + 2
        cmds = [MmapCommand(20, iw), MmapCommand(20, iw + 1)]         # FREE this layer's params after use
        if prev_w is not None:
            cmds.append(MmapCommand(20, prev_w))
        mmap_by_tick.setdefault(il, []).extend([MmapCommand(10, il)])
        mmap_by_tick.setdefault(il + 1, []).extend(cmds)
        if iw > 0:
            mmap_by_tick.setdefault(iw - 1, []).append(MmapCommand(40, iw))   # PRELOAD the next weight
        prev_w, x = out, out
    n = len(ins)
    ins.append(Instruction(n, 3, 0, (1, 0), (x - n,)))
    nac.instructions = ins
    nac.mmap = [MmapRecord(t, c) for t, c in sorted(mmap_by_tick.items())]
    return nac, {"layers": layers, "d": d, "params": len(nac.params), "instructions": len(ins)}


def build_program(n_instr: int, n_params: int = 1000):
    """A program of exactly n_instr instructions mixing param loads and T/TT/TTT/Ti/TSS ops."""
    import numpy as np
    from nac_engine.format import (Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile,
                                   Orch, Parameter, TensorMeta)
    n_instr = max(n_instr, 12)
    nac = NacFile(header=Header(version="1.6", weights_internal=True, num_inputs=2, num_outputs=1, d_model=16))
    nac.orch = Orch()
    _tables(nac)
    for pid in range(1, n_params + 1):
        arr = np.full((16,), pid, dtype=np.float32)
        nac.params[pid] = Parameter(pid, f"blocks.{pid}.w", meta=TensorMeta(0, (16,), 0), _payload=arr)
    ins = [Instruction(0, 2, 0, None, None), Instruction(1, 2, 0, None, None)]
    nac.input_names = [InputName(0, "x"), InputName(1, "mask")]
    x, k = 0, 0
    records = []
    last = n_instr - 1                                   # the OUTPUT goes there
    # One block (10 instructions): load W, load b, linear TTT, relu T, softmax Ti, expand TSS,
    # mul TT (with the mask input: a long backward reference), add TT (residual), load, add.
    while True:
        i = len(ins)
        if i + 10 > last:
            break
        p1 = k % n_params + 1
        p2 = (k + 1) % n_params + 1
        p3 = (k + 2) % n_params + 1
        k += 3
        block = [
            (2, 1, (1, p1), None),
            (2, 1, (1, p2), None),
            (OP_LINEAR, SIG_TTT, None, (x - (i + 2), -2, -1)),
            (OP_RELU, SIG_T, None, (-1,)),
            (OP_SOFTMAX, SIG_TI, (1, 1), (-1, 0)),
            (OP_VIEW, SIG_TSS, (2, 3, 4), (-1, 0, 0)),
            (OP_MUL, SIG_TT, None, (-1, max(1 - (i + 6), -32768))),
            (OP_ADD, SIG_TT, None, (-1, x - (i + 7))),
            (2, 1, (1, p3), None),
            (OP_ADD, SIG_TT, None, (-2, -1)),
        ]
        for j, (a, b, c, d) in enumerate(block):
            ins.append(Instruction(i + j, a, b, c, d))
        if i + 9 < 65536:                                # MMAP ticks are uint16
            records.append(MmapRecord(i + 2, [MmapCommand(20, i), MmapCommand(20, i + 1)]))
            records.append(MmapRecord(i + 7, [MmapCommand(10, i + 7), MmapCommand(40, i + 8)]))
        x = i + 9
    while len(ins) < last:                               # pad with relu chains
        i = len(ins)
        ins.append(Instruction(i, OP_RELU, SIG_T, None, (-1,)))
    ins.append(Instruction(last, 3, 0, (1, 0), (-1,)))
    nac.instructions = ins
    nac.mmap = records
    return nac


# =========================================================================== helpers
def _rss_mb(kb: float) -> float:
    return kb / 1024.0


def _maxrss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _best(fn, repeat: int, setup=None):
    times, result = [], None
    for _ in range(repeat):
        arg = setup() if setup else None
        gc.collect()
        t0 = time.perf_counter()
        result = fn(arg) if setup else fn()
        times.append(time.perf_counter() - t0)
    return min(times), times, result


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _child(mode: str, *args: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), mode, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child {mode} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _status_kb() -> dict:
    """RssAnon / RssFile / VmRSS / VmHWM of this process in kB (Linux; empty elsewhere)."""
    out = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


def _mapping_kb(path: str) -> dict:
    """Rss and FilePmdMapped of the mapping of ``path`` from /proc/self/smaps (Linux)."""
    out, inside = {}, False
    try:
        with open("/proc/self/smaps") as fh:
            for line in fh:
                first = line.split(None, 1)[0]
                if "-" in first and not first.endswith(":"):
                    inside = line.rstrip().endswith(path)
                elif inside and first in ("Rss:", "FilePmdMapped:"):
                    out[first[:-1]] = out.get(first[:-1], 0) + int(line.split()[1])
    except OSError:
        pass
    return out


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# =========================================================================== child: generate
def child_generate(path: str, size_mb: str) -> dict:
    base = _maxrss_kb()
    import numpy  # noqa: F401
    import nac_engine
    from nac_engine.format.writer import atomic_write
    t0 = time.perf_counter()
    nac, info = build_big_model(int(size_mb))
    t_build = time.perf_counter() - t0
    rss_built = _maxrss_kb()
    t0 = time.perf_counter()
    data = nac_engine.write(nac)
    t_encode = time.perf_counter() - t0
    rss_encode = _maxrss_kb()
    t0 = time.perf_counter()
    atomic_write(path, data)
    t_save = time.perf_counter() - t0
    size = len(data)
    problems = nac_engine.verify(data)
    del data, nac
    return dict(info, size=size, t_build=t_build, t_encode=t_encode, t_save=t_save,
                rss_start_kb=base, rss_built_kb=rss_built, rss_encode_kb=rss_encode,
                problems=[str(p) for p in problems[:5]], n_problems=len(problems))


# =========================================================================== child: open + index
HEADER16 = struct.Struct("<3sBBHHBH9Q4s")      # the 88-byte v1.6 header


def child_open(path: str, cold: str) -> dict:
    t0 = time.perf_counter()
    import numpy  # noqa: F401
    import nac_engine
    t_import = time.perf_counter() - t0
    rss_base = _maxrss_kb()
    st_base = _status_kb()
    if cold == "1" and hasattr(os, "posix_fadvise"):
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    nac = nac_engine.read(path)
    t_read = time.perf_counter() - t0
    params = nac.params
    n_shapes = sum(1 for p in params.values() if p.shape is not None)
    instrs = nac.instructions
    kids = nac.spans.children
    mid = nac.span_at(nac.size // 2)
    ops = next(s for s in kids if s.name == "OPS")
    ops_mid = nac.span_at(ops.offset + ops.length // 2)
    t_total = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    st_after = _status_kb()
    mapping = _mapping_kb(os.path.abspath(path))
    out = dict(status_base=st_base, status_after=st_after, mapping=mapping,
               t_import=t_import, t_read=t_read, t_total=t_total, rss_base_kb=rss_base, rss_peak_kb=r1.ru_maxrss,
               minflt=r1.ru_minflt - r0.ru_minflt, majflt=r1.ru_majflt - r0.ru_majflt,
               params=len(params), with_shape=n_shapes, instructions=len(instrs), root_children=len(kids),
               mid_span=mid.path if mid else None, ops_mid_span=ops_mid.path if ops_mid else None,
               size=nac.size)
    nac.close()
    # Baseline in the same child, after the measured read (so it cannot warm anything read() needs):
    # open + mmap + unpack the header + close. Best of 5.
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        with open(path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            hdr = HEADER16.unpack_from(mm, 0)
            mm.close()
        best = min(best, time.perf_counter() - t0)
    assert hdr[0] == b"NAC"
    out["t_baseline"] = best
    return out


# =========================================================================== 100k instructions
def bench_program(n_instr: int, reps_read: int = 5, reps_other: int = 3) -> tuple[dict, bytes]:
    import nac_engine
    nac = build_program(n_instr)
    t_write, _, data = _best(lambda: nac_engine.write(nac), reps_other)
    t_read, read_times, dec = _best(lambda: nac_engine.read(data), reps_read)
    assert len(dec.instructions) == n_instr, (len(dec.instructions), n_instr)
    problems = nac_engine.verify(dec)
    offsets = [ins.offset for ins in dec.instructions]
    mmap_records = len(dec.mmap)
    params = len(dec.params)

    def walk(nf):
        return sum(1 for _ in nf.spans.walk())
    t_walk, _, n_spans = _best(walk, reps_other, setup=lambda: nac_engine.read(data))
    ops_span = next(s for s in nac_engine.read(data).spans.children if s.name == "OPS")
    ops_len = ops_span.length

    # Baseline (decode): one struct.unpack_from per instruction over the same bytes.
    ab = struct.Struct("<BB").unpack_from

    def bare_unpack():
        buf = data
        out = []
        app = out.append
        for off in offsets:
            app(ab(buf, off))
        return out
    t_base_dec, _, _ = _best(bare_unpack, reps_read)

    # Baseline (encode): one struct.pack per instruction, then join.
    fields = [(ins.a, ins.b, (ins.c or ()) + (ins.d or ())) for ins in nac.instructions]

    def bare_pack():
        pack = struct.pack
        return b"".join([pack(f"<BB{len(cd)}h", a, b, *cd) for a, b, cd in fields])
    t_base_enc, _, _ = _best(bare_pack, reps_other)

    # Heap peak of one read (untimed: tracemalloc slows the run down).
    gc.collect()
    tracemalloc.start()
    tmp = nac_engine.read(data)
    heap_cur, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del tmp

    return dict(n=n_instr, size=len(data), ops_bytes=ops_len, params=params, mmap_records=mmap_records,
                t_write=t_write, t_read=t_read, read_times=read_times, t_walk=t_walk, n_spans=n_spans,
                t_base_decode=t_base_dec, t_base_encode=t_base_enc, heap_peak=heap_peak,
                heap_retained=heap_cur, n_problems=len(problems),
                problems=[str(p) for p in problems[:5]]), data


def profile_read(source, label: str, top: int = 18) -> str:
    import nac_engine
    pr = cProfile.Profile()
    pr.enable()
    nf = nac_engine.read(source)
    _ = nf.spans.children
    pr.disable()
    nf.close()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s)
    st.sort_stats("tottime").print_stats(top)
    return f"--- cProfile: {label} (sorted by tottime) ---\n" + s.getvalue()


# =========================================================================== report
def _row(metric, value, unit, target=None, baseline=None, lower_is_better=True, note=""):
    ratio = (value / baseline) if baseline else None
    status = "-"
    if target is not None:
        status = "PASS" if (value < target if lower_is_better else value > target) else "FAIL"
    return dict(metric=metric, value=value, unit=unit, target=target, baseline=baseline,
                ratio=ratio, status=status, note=note)


def _fmt(v, unit):
    if v is None:
        return "-"
    if unit == "s":
        if v < 1e-3:
            return f"{v * 1e6:.1f} us"
        return f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.2f} s"
    if unit == "MB":
        return f"{v:.1f} MB"
    if unit == "/s":
        return f"{v / 1e3:.0f}k/s"
    return f"{v:g} {unit}".strip()


def render(rows: list) -> str:
    head = ("metric", "value", "target", "baseline", "ratio", "result")
    body = []
    for r in rows:
        tgt = "-" if r["target"] is None else "< " + _fmt(r["target"], r["unit"])
        ratio = "-" if r["ratio"] is None else (f"{r['ratio']:.1f}x" if r["ratio"] < 1000 else f"{r['ratio']:.0f}x")
        body.append((r["metric"], _fmt(r["value"], r["unit"]), tgt, _fmt(r["baseline"], r["unit"]), ratio,
                     r["status"]))
    widths = [max(len(str(x[i])) for x in [head] + body) for i in range(len(head))]
    line = lambda cols: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)   # noqa: E731
                                  for i, (c, w) in enumerate(zip(cols, widths)))
    out = [line(head), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    return "\n".join(out)


# =========================================================================== main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated .nac (MiB, default 1024)")
    ap.add_argument("--instructions", type=int, default=100_000, help="instructions in the decode benchmark")
    ap.add_argument("--tmpdir", default=None, help="where the big file goes (default: the system temp dir)")
    ap.add_argument("--open-runs", type=int, default=3, help="fresh subprocesses for open + index (best is kept)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table to stderr)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--profile", action="store_true", help="also print cProfile hot spots of read()")
    ap.add_argument("--keep", action="store_true", help="keep the generated file")
    args = ap.parse_args(argv)
    out = sys.stderr if args.json else sys.stdout

    import numpy as np
    import nac_engine

    parent = args.tmpdir or tempfile.gettempdir()
    os.makedirs(parent, exist_ok=True)
    size_mb = args.size_mb
    free = shutil.disk_usage(parent).free
    need = DISK_FACTOR * size_mb * MiB
    if free < need:
        new = int(free / DISK_FACTOR / MiB)
        _log(f"NOTE: only {free / GiB:.2f} GiB free in {parent}; {size_mb} MiB needs "
             f"{need / GiB:.2f} GiB (x{DISK_FACTOR}). Scaling the file down to {new} MiB.")
        size_mb = new
    avail = _mem_available()
    if avail is not None and avail < RAM_FACTOR * size_mb * MiB:
        new = int(avail / RAM_FACTOR / MiB)
        _log(f"NOTE: only {avail / GiB:.2f} GiB RAM available; the generator needs ~{RAM_FACTOR}x the file "
             f"size. Scaling the file down to {new} MiB.")
        size_mb = new
    if size_mb < 16:
        _log("ERROR: less than 16 MiB can be generated here; giving up.")
        return 2

    workdir = tempfile.mkdtemp(prefix="nac-bench-", dir=parent)
    path = os.path.join(workdir, "big.nac")
    rows: list = []
    info: dict = {"python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform(),
                  "cpus": os.cpu_count(), "nac_engine": getattr(nac_engine, "__version__", "?"),
                  "size_mb_requested": args.size_mb, "size_mb": size_mb, "path": path}
    profiles = []
    try:
        # ---- 1. generate ---------------------------------------------------------
        _log(f"[1/3] generating ~{size_mb} MiB .nac in {workdir} (subprocess) ...")
        gen = _child("--_generate", path, str(size_mb))
        info["generate"] = gen
        _log(f"      {gen['size'] / MiB:.0f} MiB, {gen['params']} params, {gen['instructions']} instructions, "
             f"{gen['layers']} layers of {gen['d']}x{gen['d']}; verify: {gen['n_problems']} problem(s)")
        rows.append(_row("gen: build model + arrays", gen["t_build"], "s"))
        rows.append(_row("gen: write() encode to bytes", gen["t_encode"], "s"))
        rows.append(_row("gen: save (atomic, fsync)", gen["t_save"], "s"))
        rows.append(_row("gen: RSS after arrays", _rss_mb(gen["rss_built_kb"]), "MB"))
        rows.append(_row("gen: peak RSS during write()", _rss_mb(gen["rss_encode_kb"]), "MB",
                         baseline=_rss_mb(gen["rss_built_kb"]),
                         note="baseline = RSS holding the payload arrays"))

        # ---- 2. open + index -----------------------------------------------------
        _log(f"[2/3] open + index, {args.open_runs} fresh subprocess(es) + 1 cold-cache run ...")
        runs = [_child("--_open", path, "0") for _ in range(max(1, args.open_runs))]
        cold = _child("--_open", path, "1")
        info["open_runs"] = runs
        info["open_cold"] = cold
        best = min(runs, key=lambda r: r["t_total"])
        peak = max(r["rss_peak_kb"] for r in runs)
        base_rss = min(r["rss_base_kb"] for r in runs)
        t_base = min(r["t_baseline"] for r in runs)

        def delta(r, key):
            return (r["status_after"].get(key, 0) - r["status_base"].get(key, 0)) / 1024.0
        worst = max(runs, key=lambda r: r["rss_peak_kb"])
        _log(f"      {best['params']} params, {best['instructions']} instructions, "
             f"span_at(mid) -> {best['mid_span']}, span_at(OPS mid) -> {best['ops_mid_span']}")
        _log(f"      warm: mapping of the file {worst['mapping']}; cold: {cold['mapping']} (kB)")
        mb = gen["size"] / MiB
        rows.append(_row(f"open+index {mb:.0f} MiB (warm, as written)", best["t_total"], "s", OPEN_TARGET_S, t_base))
        rows.append(_row("  of which read()", best["t_read"], "s", None, t_base))
        rows.append(_row("open+index (cold cache)", cold["t_total"], "s", OPEN_TARGET_S, t_base))
        rows.append(_row("  baseline: mmap + unpack header", t_base, "s"))
        rows.append(_row("peak RSS open+index (warm, as written)", _rss_mb(peak), "MB", OPEN_TARGET_RSS_MB,
                         _rss_mb(base_rss)))
        rows.append(_row("  +anon (heap) over import", delta(worst, "RssAnon"), "MB"))
        rows.append(_row("  +file-backed (mmap) over import", delta(worst, "RssFile"), "MB"))
        rows.append(_row("peak RSS open+index (cold)", _rss_mb(cold["rss_peak_kb"]), "MB", OPEN_TARGET_RSS_MB,
                         _rss_mb(cold["rss_base_kb"])))
        rows.append(_row("  +anon (heap) over import", delta(cold, "RssAnon"), "MB"))
        rows.append(_row("  +file-backed (mmap) over import", delta(cold, "RssFile"), "MB"))
        rows.append(_row("  peak RSS after import only", _rss_mb(base_rss), "MB"))
        if args.profile:
            profiles.append(profile_read(path, f"read({gen['size'] / MiB:.0f} MiB file) + spans.children"))

        # ---- 3. 100k instructions ------------------------------------------------
        _log(f"[3/3] {args.instructions} instructions: write, read(bytes) x5, span walk ...")
        prog, data = bench_program(args.instructions)
        info["program"] = prog
        n = prog["n"]
        _log(f"      {prog['size'] / 1024:.0f} KiB file, OPS {prog['ops_bytes'] / 1024:.0f} KiB, "
             f"{prog['params']} params, {prog['mmap_records']} MMAP records, {prog['n_spans']} spans; "
             f"verify: {prog['n_problems']} problem(s)")
        rows.append(_row(f"read(bytes) {n} instr", prog["t_read"], "s", DECODE_TARGET_S, prog["t_base_decode"]))
        rows.append(_row("  decode rate", n / prog["t_read"], "/s", None, None))
        rows.append(_row("  baseline: unpack_from per instr", prog["t_base_decode"], "s"))
        rows.append(_row(f"write() {n} instr", prog["t_write"], "s", None, prog["t_base_encode"]))
        rows.append(_row("  baseline: struct.pack per instr", prog["t_base_encode"], "s"))
        rows.append(_row(f"walk all spans ({prog['n_spans']})", prog["t_walk"], "s", None, prog["t_base_decode"]))
        rows.append(_row("read(bytes) heap peak (tracemalloc)", prog["heap_peak"] / MiB, "MB", None, None))
        if args.profile:
            profiles.append(profile_read(data, f"read(bytes) of {n} instructions"))
        del data
    finally:
        if args.keep:
            _log(f"kept {path}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    table = render(rows)
    print(f"NAC codec benchmark — Python {info['python']}, numpy {info['numpy']}, {info['cpus']} CPUs", file=out)
    print(table, file=out)
    print("ratio = value / baseline measured in the same run (for RSS: peak / peak after import).", file=out)
    for p in profiles:
        print(p, file=out)
    if args.json:
        json.dump({"rows": rows, "info": info}, sys.stdout, indent=2, default=str)
        print()
    failed = [r["metric"] for r in rows if r["status"] == "FAIL"]
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--_generate":
        print(json.dumps(child_generate(*sys.argv[2:4])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--_open":
        print(json.dumps(child_open(*sys.argv[2:4])))
    else:
        sys.exit(main())
