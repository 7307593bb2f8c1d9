"""Cost of decoding crafted large sections (issue 15 §5: linear in the file, <= 20 B of RAM per
file byte, >= 10 MB/s per decoder). Builds the files in a temp dir from the model classes:

* ``orch_1m``: 1 MB of ORCH bytecode (a real MEP program repeated: ~240k instructions)
* ``mmap_4m``: a 4 MB MMAP schedule (5,200 records of 255 commands)
* ``orch_distinct``: 1 MB of ORCH whose instructions all differ (random operands, a jump in five)
* ``cnst_65k``: 65,000 int constants; ``cnst_lists``: 30 int lists of 65,535 values (7.8 MB)
* ``ops_1m``: 100,000 instructions (1 MB of OPS); ``tensors_25k``: 25,000 tensor records;
  ``rsrc_20k``: 20,000 RSRC entries

For each: read, verify and dis, CPU seconds (best of ``--repeat``, without tracing) -> MB/s, and the
peak traced allocation per file byte (tracemalloc, a separate pass). A calibration loop (a pure
Python pass over 1 MB) is printed too: on a busy machine every figure scales with it.

    python3 benchmarks/bench_hostile_cost.py [--repeat 2] [--only orch_1m,mmap_4m]
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nac_engine import read, verify, write  # noqa: E402
from nac_engine.format.model import (Constant, Instruction, MmapCommand, MmapRecord, Orch, Parameter,  # noqa: E402
                                     Resource, TensorMeta)
from nac_engine.isa.disasm import iter_disassembly  # noqa: E402
from tests.format.test_regressions import small_file  # noqa: E402

# A small real MEP program (load model, load array, run, argmax, print, return): 29 bytes.
MEP_PROGRAM = bytes.fromhex("100000001400010080000100010162000201040302005f020300fe0101")


CASES = ("orch_1m", "orch_distinct", "mmap_4m", "cnst_65k", "cnst_lists", "ops_1m", "tensors_25k", "rsrc_20k")


def build(name: str) -> bytes:
    nac = small_file()
    if name == "orch_1m":
        nac.orch = Orch((MEP_PROGRAM * (1_000_000 // len(MEP_PROGRAM) + 1))[:1_000_000],
                        [Constant(i, 4, f"s{i}") for i in range(4)])
    elif name == "mmap_4m":
        rnd = random.Random(1)
        n = len(nac.instructions)
        nac.mmap = [MmapRecord(t, [MmapCommand(10, rnd.randrange(n)) for _ in range(255)])
                    for t in range(4_000_000 // (3 + 3 * 255))]
    elif name == "cnst_65k":
        for cid in range(10, 65_000):
            nac.constants[cid] = Constant(cid, 2, cid % 7)
    elif name == "cnst_lists":
        for cid in range(10, 40):
            nac.constants[cid] = Constant(cid, 5, tuple(range(cid, cid + 65_535)))
    elif name == "orch_distinct":
        # every instruction different (random operands), a jump in five: no text is reused
        rnd = random.Random(2)
        kinds = [(0x04, 3), (0x14, 3), (0x61, 4), (0x5F, 3), (0xA8, 3), (0x59, 2)]
        parts, size = [], 0
        while size < 1_000_000:
            op, n = kinds[rnd.randrange(len(kinds))]
            body = bytes(rnd.randrange(7) if (op == 0x61 and j == 0) else rnd.randrange(256) for j in range(n))
            parts.append(bytes([op]) + body)
            size += 1 + n
        nac.orch = Orch(b"".join(parts), [Constant(i, 4, f"s{i}") for i in range(4)])
    elif name == "ops_1m":
        # linear(v, v) and softmax(v, -1, True) alternating: 1 MB of instruction records
        base = nac.instructions[2].a
        body = []
        for i in range(2, 2 + 100_000):
            body.append(Instruction(i, base, 2, None, (-1, -1)) if i % 2 else
                        Instruction(i, base + 1, 3, (2, 3, 2), (-1, 0, 0)))
        n = len(body) + 2
        nac.instructions = nac.instructions[:2] + body + [Instruction(n, 3, 0, (1, 0), (-1,))]
    elif name == "tensors_25k":
        for pid in range(2, 25_000):
            nac.params[pid] = Parameter(pid, f"p{pid}", meta=TensorMeta(0, (2,), 0),
                                        _payload=bytes(8))
    elif name == "rsrc_20k":
        nac.rsrc = [Resource(f"res/{i}.json", _payload=b'{"k": %d}' % i) for i in range(20_000)]
    return write(nac)


STEPS = {
    "read": lambda p: read(p, strict=False).problems,
    "verify": lambda p: verify(p),
    "dis": lambda p: sum(len(line) for line in iter_disassembly(read(p, strict=False))),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default=",".join(CASES))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    for _ in bytes(1_000_000):
        pass
    print(f"calibration: pure-Python loop over 1 MB in {time.perf_counter() - t0:.3f} s "
          "(about 0.02 s on an idle machine)")
    with tempfile.TemporaryDirectory() as d:
        for name in args.only.split(","):
            path = os.path.join(d, name + ".nac")
            with open(path, "wb") as fh:
                fh.write(build(name))
            size = os.path.getsize(path)
            for step, fn in STEPS.items():
                best = min(_timed(fn, path) for _ in range(max(1, args.repeat)))
                tracemalloc.start()
                fn(path)
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                print(f"{name:11s} {size / 1e6:5.2f} MB  {step:6s} {best:7.2f} s  {size / best / 1e6:7.2f} MB/s  "
                      f"peak {peak / size:6.1f} B per file byte")
    return 0


def _timed(fn, path) -> float:
    # CPU time of this process: on a shared machine wall time mostly measures the neighbours
    t0 = time.process_time()
    fn(path)
    return time.process_time() - t0


if __name__ == "__main__":
    sys.exit(main())
