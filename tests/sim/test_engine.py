"""Event engine: invariants over several programs and hardware configs, and stall attribution.

Programs: a GPT-2-shaped decoder and single layers built with the codec (always present), the
bundled demo MLP, and corpus files when ../shared/corpus exists. Shapes are propagated once
per program; every simulation below reuses them.
"""
import json
import random

import numpy as np
import pytest

from nac_engine.format import read
from nac_engine.sim import load_hardware, prepare, simulate
from nac_engine.sim.engine import INPUT_KINDS
from nac_engine.runtime.shapes import MMAP_FORWARD, MMAP_FREE, MMAP_PRELOAD, MMAP_SAVE_RESULT, Program
from nac_engine.sim.topology import conv_program, gemm_program, transformer_program
from tests.corpus_paths import CORPUS
from tests.resources_path import DEMO

CORPUS_NAC = CORPUS / "nac"


def _corpus(case: str):
    d = CORPUS_NAC / case
    if not d.is_dir():
        return None
    st = json.loads((d / "status.json").read_text())
    feeds = [np.load(d / f["file"]) for f in st.get("feeds", [])]
    with read(str(next(d.glob("*.nac")))) as nac:
        return prepare(nac, feeds=feeds)


_PROGRAMS = {}


def program(name: str) -> Program:
    if name not in _PROGRAMS:
        if name == "gpt":
            nac, inputs = transformer_program(2, 64, 2, 16)
            _PROGRAMS[name] = prepare(nac, inputs=inputs)
        elif name == "gpt_lookahead1":
            nac, inputs = transformer_program(2, 64, 2, 16, preload_lookahead=1)
            _PROGRAMS[name] = prepare(nac, inputs=inputs)
        elif name == "gemm":
            nac, inputs = gemm_program(128, 256, 128, with_data=False)
            _PROGRAMS[name] = prepare(nac, inputs=inputs)
        elif name == "conv":
            nac, inputs = conv_program(16, 16, 8, 16, 3, padding=1, with_data=False)
            _PROGRAMS[name] = prepare(nac, inputs=inputs)
        elif name == "demo_mlp":
            with read(str(DEMO)) as nac:
                _PROGRAMS[name] = prepare(nac, inputs={"x": "2x8"})
        else:
            p = _corpus(name)
            if p is None:
                pytest.skip(f"corpus case {name} absent")
            _PROGRAMS[name] = p
    return _PROGRAMS[name]


BUILT = ["gpt", "gemm", "conv", "demo_mlp"]
CORPUS_CASES = ["bert_tiny", "cnn", "hand_attn_block__v1.6", "mlp_noopt__v1.6"]
ALL = BUILT + CORPUS_CASES

# small SRAMs force spills; the rest are the presets
CONFIGS = [("edge-32x32", {}), ("server-128x128", {}), ("scalesim-32x32-ws", {}),
           ("edge-32x32", {"sram.bytes": 4096}), ("edge-32x32", {"sram.bytes": 24576, "dma.engines": 1})]


def value_bytes(prog: Program, hw) -> list:
    out = []
    for x in prog.instructions:
        if x.kind == "param" and x.stored is not None:
            out.append(x.stored.numel * hw.element_bytes(x.stored.dtype))
        else:
            out.append(sum(t.numel * hw.element_bytes(t.dtype) for t in x.outputs))
    return out


# --------------------------------------------------------------------------- conservation
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("hw_name,overrides", CONFIGS)
def test_dram_bytes_are_conserved(name, hw_name, overrides):
    """DRAM traffic derived from the program, not from the engine's own counters.

    Reads: every ``<INPUT>`` is loaded once (a spilled one streams to its first reader);
    further readers of a spilled input, and every reader of a spilled result, read it from
    DRAM again.

    Writes: a computed result lands in SRAM (graph outputs too: the core writes its results
    to SRAM, nothing else holds them). It reaches DRAM only when it does not fit (its spill
    write, when it is computed) or when it is a graph output (written back at ``<OUTPUT>``,
    unless its spill already put it there). So every computed graph output is written exactly
    once, by one of the two, and the other writes are the spills of non-output results. An
    ``<INPUT>`` returned as an output is written back from SRAM unless it streamed (spilled:
    it never left DRAM)."""
    prog = program(name)
    hw = load_hardware(hw_name, overrides)
    r = simulate(prog, hw)
    nb = value_bytes(prog, hw)
    # the engine's totals are its transfers
    assert r.dram_read_bytes == sum(t.bytes for t in r.transfers if t.src == "dram")
    assert r.dram_write_bytes == sum(t.bytes for t in r.transfers if t.dst == "dram")
    spilled = {s["value"] for s in r.spills}
    readers = {}
    for x in prog.instructions:
        if x.kind in ("op", "subreturn", "control"):
            for v in x.reads:
                readers[v] = readers.get(v, 0) + 1
    loaded_inputs = sum(nb[x.tick] for x in prog.instructions if x.kind in INPUT_KINDS)
    spill_reads = sum(nb[s["value"]] * (readers.get(s["value"], 0) - (s["kind"] != "result"))
                      for s in r.spills)
    assert r.dram_bytes_by_kind["preload"] + r.dram_bytes_by_kind["on_demand"] == loaded_inputs
    assert r.dram_bytes_by_kind["spill_read"] == spill_reads
    assert len(spilled) == len(r.spills)
    assert r.dram_read_bytes == loaded_inputs + spill_reads
    outputs = list(dict.fromkeys(prog.outputs))
    computed = [v for v in outputs if prog.instructions[v].kind not in INPUT_KINDS]
    returned_inputs = [v for v in outputs if prog.instructions[v].kind in INPUT_KINDS and v not in spilled]
    other_spills = sum(nb[s["value"]] for s in r.spills if s["kind"] == "result" and s["value"] not in outputs)
    assert r.dram_write_bytes == other_spills + sum(nb[v] for v in computed) + sum(nb[v] for v in returned_inputs)
    writes = {}
    for t in r.transfers:
        if t.dst == "dram":
            writes[t.value] = writes.get(t.value, 0) + 1
    assert all(writes.get(v, 0) == (1 if nb[v] else 0) for v in computed), "each output reaches DRAM once"
    assert r.dram_bytes_by_kind["writeback"] == sum(nb[v] for v in outputs if v not in spilled)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("hw_name,overrides", CONFIGS)
def test_time_and_memory_accounting(name, hw_name, overrides):
    prog = program(name)
    hw = load_hardware(hw_name, overrides)
    r = simulate(prog, hw)
    core = 0
    for rec in r.instructions:
        assert rec.issue_cycle == core, "instructions run back to back"
        assert rec.start_cycle - rec.issue_cycle == rec.stall_cycles >= 0
        assert rec.end_cycle - rec.start_cycle == rec.dispatch_cycles + rec.compute_cycles
        if rec.stall_cycles:
            assert rec.stall_cause and sum(rec.stall_breakdown.values()) == rec.stall_cycles
        core = rec.end_cycle
    assert r.core_cycles == core and r.total_cycles == core + r.drain_cycles
    assert sum(r.stall_cycles_by_cause.values()) == r.stall_cycles
    assert max(r.sram_bytes) == r.peak_sram_bytes <= hw.sram.bytes
    assert all(b >= 0 for b in r.sram_bytes) and r.sram_cycles == sorted(r.sram_cycles)
    for b in r.buffers:      # every buffer's lifetime is inside the run
        assert 0 <= b["alloc_cycle"] <= (b["free_cycle"] if b["free_cycle"] is not None else r.total_cycles)
    for t in r.transfers:
        assert t.issue_cycle <= t.start_cycle < t.end_cycle <= r.total_cycles
    for e in range(hw.dma.engines):     # one transfer at a time per engine
        spans = sorted((t.start_cycle, t.end_cycle) for t in r.transfers if t.engine == e)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


# --------------------------------------------------------------------------- monotonicity
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("hw_name,overrides", CONFIGS[:2] + CONFIGS[3:])
def test_more_dram_bandwidth_never_slower(name, hw_name, overrides):
    prog = program(name)
    hw = load_hardware(hw_name, overrides)
    totals = [simulate(prog, hw.with_overrides({"dram.bytes_per_cycle": bw})).total_cycles
              for bw in (0.25, 1, 3, 8, 16, 64, 512, 1e5)]
    assert all(a >= b for a, b in zip(totals, totals[1:])), totals
    assert totals[0] > totals[-1]
    lat = [simulate(prog, hw.with_overrides({"dram.latency": x})).total_cycles for x in (1000, 300, 100, 10, 0)]
    assert all(a >= b for a, b in zip(lat, lat[1:])), lat
    eng = [simulate(prog, hw.with_overrides({"dma.engines": e})).total_cycles for e in (1, 2, 3, 8)]
    assert all(a >= b for a, b in zip(eng, eng[1:])), eng


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("hw_name", ["edge-32x32", "scalesim-32x32-os"])
def test_more_sram_never_slower_and_spills_less(name, hw_name):
    prog = program(name)
    hw = load_hardware(hw_name)
    sizes = [256, 1024, 4096, 8192, 16384, 32768, 65536, 1 << 18, 1 << 20, 1 << 24]
    runs = [simulate(prog, hw.with_overrides({"sram.bytes": s})) for s in sizes]
    totals = [r.total_cycles for r in runs]
    assert all(a >= b for a, b in zip(totals, totals[1:])), totals
    spills = [{(s["value"], s["kind"]) for s in r.spills} for r in runs]
    assert all(b <= a for a, b in zip(spills, spills[1:])), "a larger SRAM spills a subset"
    assert spills[0] and not spills[-1]
    if name in ("gpt", "bert_tiny", "cnn", "hand_attn_block__v1.6"):
        # results spill and are read back: a small SRAM costs time. (In the single layers and
        # MLPs only weights read once spill; they stream to their reader at no extra cost.)
        assert totals[0] > totals[-1]


def _dma_event_ticks(prog: Program) -> set:
    """Ticks at which something other than a PRELOAD may issue a transfer (no-spill runs)."""
    preloaded = {t for cmds in prog.mmap.values() for a, t in cmds if a == MMAP_PRELOAD}
    ticks = {x.tick for x in prog.instructions if x.kind in INPUT_KINDS and x.tick not in preloaded}
    ticks |= {x.tick for x in prog.instructions if x.kind == "output"}
    return ticks


def _move_preloads_later(prog: Program, rng: random.Random) -> Program:
    """Move blocks of PRELOADs (all of one tick, kept in order) later, never past their targets
    and never past the next tick that issues a transfer, where they go before its PRELOADs:
    the order of DMA requests is unchanged, only their issue times grow."""
    mm = {t: list(c) for t, c in prog.mmap.items()}
    pre_ticks = sorted(t for t, c in mm.items() if any(a == MMAP_PRELOAD for a, _ in c))
    events = sorted(_dma_event_ticks(prog) | set(pre_ticks))
    moved = dict()
    for t in pre_ticks:
        block = [(a, x) for a, x in mm[t] if a == MMAP_PRELOAD]
        later = [e for e in events if e > t]
        limit = min([x for _, x in block] + ([later[0]] if later else [len(prog.instructions) - 1]))
        if limit > t and rng.random() < 0.7:
            moved[t] = (rng.randint(t + 1, limit), block)
    for t, (dest, block) in sorted(moved.items(), reverse=True):
        mm[t] = [c for c in mm[t] if c[0] != MMAP_PRELOAD]
        rest = mm.get(dest, [])
        first_pre = next((k for k, c in enumerate(rest) if c[0] == MMAP_PRELOAD), len(rest))
        mm[dest] = rest[:first_pre] + block + rest[first_pre:]
    return Program(prog.name, prog.instructions, mm, prog.outputs, prog.has_schedule, prog.shape_source)


@pytest.mark.parametrize("name", ["gpt", "gpt_lookahead1", "gemm", "conv", "demo_mlp", "bert_tiny", "cnn",
                                  "hand_attn_block__v1.6"])
def test_preloads_moved_later_never_faster(name):
    prog = program(name)
    rng = random.Random(1234)
    slower = 0
    for hw in (load_hardware("edge-32x32"), load_hardware("server-128x128"),
               load_hardware("edge-32x32", {"dram.bytes_per_cycle": 2.0, "dma.engines": 1}),
               load_hardware("edge-32x32", {"dram.latency": 2000, "dma.engines": 4})):
        base = simulate(prog, hw)
        assert not base.spills
        for _ in range(6):
            variant = _move_preloads_later(prog, rng)
            r = simulate(variant, hw)
            assert not r.spills
            assert r.total_cycles >= base.total_cycles
            slower += r.total_cycles > base.total_cycles
    assert slower, "moving PRELOADs later made no run slower: the test would not see a regression"


# --------------------------------------------------------------------------- FORWARD
@pytest.mark.parametrize("name", ["gpt", "demo_mlp", "bert_tiny", "cnn", "hand_attn_block__v1.6"])
def test_forward_never_writes_sram(name):
    prog = program(name)
    hw = load_hardware("edge-32x32")
    r = simulate(prog, hw)
    forwarded = {v for v, cmds in prog.mmap.items() for a, _t in cmds if a == MMAP_FORWARD}
    assert forwarded
    recs = {x.tick: x for x in r.instructions}
    buffered = {b["value"] for b in r.buffers}
    for v in forwarded:
        if recs[v].kind in INPUT_KINDS:
            continue
        assert recs[v].route == "forwarded"
        assert recs[v].sram_write_bytes == 0
        assert v not in buffered
    # the same program with every FORWARD v→u turned into SAVE_RESULT v + FREE v at u
    mm = {t: [c for c in cmds if c[0] != MMAP_FORWARD] for t, cmds in prog.mmap.items()}
    extra = 0
    for v, cmds in prog.mmap.items():
        for a, u in cmds:
            if a == MMAP_FORWARD and recs[v].kind not in INPUT_KINDS:
                mm[v].append((MMAP_SAVE_RESULT, v))
                mm.setdefault(u, []).insert(0, (MMAP_FREE, v))
                extra += recs[v].out_bytes
    saved = simulate(Program(prog.name, prog.instructions, mm, prog.outputs, True), hw)
    assert sum(x.sram_write_bytes for x in saved.instructions) == \
        sum(x.sram_write_bytes for x in r.instructions) + extra
    assert saved.peak_sram_bytes >= r.peak_sram_bytes
    assert extra > 0


# --------------------------------------------------------------------------- attribution
def _gemm_with(mm: dict):
    nac, inputs = gemm_program(64, 512, 512, with_data=False)      # x 128 KiB, W 1 MiB (float32)
    prog = prepare(nac, inputs=inputs)
    return Program(prog.name, prog.instructions, mm, prog.outputs, True)


def test_late_preload_is_attributed_to_it():
    # x loads on demand at tick 0; W's PRELOAD comes only at its own tick 1
    prog = _gemm_with({1: [(MMAP_PRELOAD, 1)], 2: [(MMAP_FREE, 0), (MMAP_FREE, 1)]})
    hw = load_hardware("edge-32x32", {"dma.engines": 1, "dram.latency": 100, "dram.bytes_per_cycle": 16,
                                      "sram.bytes": 4 << 20})
    r = simulate(prog, hw)
    x, w, gemm = r.instructions[:3]
    assert x.route == "loaded" and x.stall_breakdown == {"on_demand": 100 + 64 * 512 * 4 // 16}
    assert w.route == "preloaded" and w.stall_cycles == 0
    assert gemm.stall_target == 1 and gemm.stall_cause == "late PRELOAD: v1"
    assert gemm.stall_breakdown == {"preload_late": 100 + 512 * 512 * 4 // 16}


@pytest.mark.parametrize("engines", [1, 2])
def test_queueing_behind_another_transfer_is_dma_busy(engines):
    # W's PRELOAD issues at tick 0 before x's on-demand fetch: x waits for the DMA
    prog = _gemm_with({0: [(MMAP_PRELOAD, 1)], 2: [(MMAP_FREE, 0), (MMAP_FREE, 1)]})
    hw = load_hardware("edge-32x32", {"dma.engines": engines, "dram.latency": 100, "dram.bytes_per_cycle": 16,
                                      "sram.bytes": 4 << 20})
    x = simulate(prog, hw).instructions[0]
    w_data, x_data = 512 * 512 * 4 // 16, 64 * 512 * 4 // 16
    busy = w_data + (100 if engines == 1 else 0)      # a second engine overlaps the latency only
    assert x.stall_breakdown == {"dma_busy": busy, "on_demand": 100 + x_data}
    assert x.stall_cause == "DMA busy: v0 waited %d cycles behind other transfers" % busy


def test_no_schedule_means_on_demand_loads():
    prog = program("demo_mlp")
    bare = Program(prog.name, prog.instructions, {}, prog.outputs, False)
    r = simulate(bare, load_hardware("edge-32x32"))
    loads = [x for x in r.instructions if x.kind in INPUT_KINDS]
    assert loads and all(x.route == "loaded" and x.stall_breakdown.get("on_demand") for x in loads)
    assert r.dram_bytes_by_kind["preload"] == 0
    assert not any("SAVE_RESULT" in w for w in r.warnings)      # no schedule: nothing to complain about
    scheduled = simulate(prog, load_hardware("edge-32x32"))
    assert scheduled.total_cycles < r.total_cycles               # preloading hides load time


def test_spilled_results_are_written_and_read_back():
    prog = program("gpt")
    r = simulate(prog, load_hardware("edge-32x32", {"sram.bytes": 2048}))
    kinds = {s["kind"] for s in r.spills}
    assert "result" in kinds and "preload" in kinds
    assert r.dram_bytes_by_kind["spill_write"] > 0 and r.dram_bytes_by_kind["spill_read"] > 0
    assert r.stall_cycles_by_cause["sram_full"] > 0
    assert any(x.stall_cause and x.stall_cause.startswith("SRAM full") for x in r.instructions)
    for s in r.spills:
        assert s["needed_bytes"] > 2048


def test_unknown_ops_get_the_default_cost_and_are_listed():
    prog = program("demo_mlp")
    ins = list(prog.instructions)
    k = next(i for i, x in enumerate(ins) if x.op == "aten.relu.default")
    from dataclasses import replace
    ins[k] = replace(ins[k], op="aten.mystery_op.default")
    r = simulate(Program(prog.name, ins, prog.mmap, prog.outputs, True), load_hardware("edge-32x32"))
    assert r.unknown_ops == {"aten.mystery_op.default": 1}
    rec = r.instructions[k]
    assert rec.op_class == "unknown" and rec.unit == "vector" and rec.compute_cycles > 0


def test_result_json_has_the_issue_keys():
    r = simulate(program("gemm"), load_hardware("edge-32x32"))
    d = r.to_json()
    for key in ("total_cycles", "instructions", "dram_read_bytes", "dram_write_bytes", "peak_sram_bytes",
                "utilization"):
        assert key in d
    for rec in d["instructions"]:
        assert {"tick", "op", "start_cycle", "end_cycle", "compute_cycles", "stall_cycles",
                "stall_cause"} <= set(rec)
    json.dumps(d)
    assert r.to_csv().splitlines()[0].startswith("tick,op,kind")
    assert len(r.to_csv().splitlines()) == len(r.instructions) + 1


def test_control_flow_branches_not_taken_cost_nothing():
    from nac_engine.format import layout as L
    from nac_engine.format.model import Constant, Header, InputName, Instruction, NacFile
    nac = NacFile(Header(version="1.8", num_inputs=1, num_outputs=1))
    nac.cmap, nac.perms = {32: "aten.sum.default"}, {1: "T", 2: "Tf", 3: "TT"}
    nac.constants = {1: Constant(1, L.CONST_FLOAT64, 0.0)}
    rows = [(2, 0, None, None), (32, 1, None, (-1,)), (13, 2, (1, 1), (-1, 0)), (6, 0, (3, 2, 3), (-1,)),
            (11, 3, None, (-4, -4)), (3, 0, (1, 0), (-1,)),        # true: x + x, return
            (14, 1, None, (-6,)), (14, 1, None, (-1,)), (3, 0, (1, 0), (-2,))]   # false: -(-x)
    nac.instructions = [Instruction(i, *r) for i, r in enumerate(rows)]
    nac.input_names = [InputName(0, "x")]
    hw = load_hardware("edge-32x32")
    taken = simulate(nac, hw, inputs={"x": np.ones(4096, np.float32)})
    assert [r.kind for r in taken.instructions][4:] == ["op", "output", "skipped", "skipped", "skipped"]
    other = simulate(nac, hw, inputs={"x": -np.ones(4096, np.float32)})
    assert [r.kind for r in other.instructions][4:] == ["skipped", "skipped", "op", "op", "output"]
    for r in (taken, other):
        assert "CPU" in r.warnings[0]           # a branch needs the predicate's value: no meta run
        for rec in r.instructions:
            if rec.kind == "skipped":
                assert rec.end_cycle == rec.start_cycle == rec.issue_cycle and rec.compute_cycles == 0
    assert other.macs == taken.macs == 0
    assert other.core_cycles > taken.core_cycles     # two negations against one add


def test_graph_outputs_land_in_sram_and_are_written_back_once():
    nac, inputs = gemm_program(64, 512, 512, with_data=False)
    prog = prepare(nac, inputs=inputs)
    x, w, out = 64 * 512 * 4, 512 * 512 * 4, 64 * 512 * 4
    hw = load_hardware("edge-32x32", {"sram.bytes": 4 << 20})
    r = simulate(prog, hw)
    gemm = r.instructions[2]
    assert gemm.route == "output" and gemm.sram_write_bytes == out
    assert r.peak_sram_bytes == x + w + out          # x and W are freed when the GEMM ends, after it wrote
    buf = [b for b in r.buffers if b["value"] == 2]
    assert len(buf) == 1 and buf[0]["alloc_cycle"] == gemm.start_cycle and buf[0]["kind"] == "output"
    wb = [t for t in r.transfers if t.kind == "writeback"]
    assert [(t.value, t.src, t.bytes) for t in wb] == [(2, "sram", out)]
    assert r.dram_write_bytes == out
    # room for x but not for x and the result: the result spills, written to DRAM once, when computed
    small = simulate(prog, hw.with_overrides({"sram.bytes": x + out - 1}))
    assert [(s["value"], s["kind"]) for s in small.spills if s["value"] == 2] == [(2, "result")]
    assert small.dram_bytes_by_kind["spill_write"] == out and small.dram_bytes_by_kind["writeback"] == 0
    assert small.peak_sram_bytes <= x + out - 1
