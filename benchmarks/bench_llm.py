"""A Llama of 1.1 or 7 billion parameters from a Hugging Face directory to a `.nac`: compile, run,
inspect and simulate it within a workstation's memory.

    python benchmarks/bench_llm.py [--config tinyllama|llama7b] [--cache DIR] [--hogs 2] [--skip-int8]

``--config tinyllama`` (L1, fp32, 4.4 GB of weights) measures, each in a fresh process:

* **checkpoint**: the Hugging Face directory (seeded random weights, 2 GB safetensors shards and
  transformers' index; ``benchmarks/llm_checkpoints.py``), written once and cached;
* **compile** ``nac compile --hf DIR --weights external``: wall time and peak RSS
  (target ≤ 3 GB), and the same with ``--quant int8_channel``;
* **run** ``nac_engine.run`` of the file on 32 tokens: wall time (open + run), peak RSS, RssAnon
  and RssFile at the end (target: peak ≤ 1.5 GB), against the baseline **transformers**:
  ``from_pretrained`` from the same directory plus one forward, same thread count (target ≤ 1.2×,
  quiet and beside ``--hogs`` busy processes); logits against transformers' (relative ≤ 1e-4);
* **inspect** ``nac info/verify/dis/lint``: wall time and peak RSS each;
* **Studio** (``benchmarks/studio_llm.py``, offscreen): open → hex/structure/disassembly (≤ 1 s) and
  → graph (≤ 3 s); the tensor inspector on the embedding and an MLP weight (heatmap ≤ 1 s,
  statistics with progress); the Studio process's RssAnon (≤ 0.8 GB); F5 to the end against
  ``Session.run`` (≤ 1.2×), F10 (≤ 30 ms), Step Back (≤ 50 ms), UI stalls (≤ 100 ms);
* **simulate** ``nac sim`` with ``server-128x128`` and ``nac-core-ref`` (target ≤ 60 s each), which
  print cycles, DMA bytes and stalls per decoder layer;
* **diff** ``nac diff`` of the fp32 and int8 files: error growth per layer, wall time and peak RSS;
* **KV cache**: a prefill file (32 tokens) and a decode-step file (64 slots) compiled, chained for
  16 steps by ``nac_engine.generate`` against transformers' greedy ``generate`` with its own
  cache: each step's logits (relative ≤ 1e-4) and the tokens, up to the first near-tie (top-2
  margin ≤ 1e-3, which random weights produce).

``--config llama7b`` (L7, Llama-2-7B's configuration, fp16 shards, 13.5 GB) measures the compile
(``--quant fp16``; target peak RSS ≤ 4 GB), ``info/verify/dis/lint`` and the Studio's open and
inspector figures. Before it writes L7 it
deletes L1's files from the cache (the exercise stays under 35 GB of disk).

Times here (2 cores): L1 about 12 minutes the first time (checkpoint 35 s, compiles 50 s, 67 s and
2 × 40 s for the KV-cache pair, the Studio's figures about 2 minutes), about 9 cached; L7 about 12
minutes the first time. Peak RSS comes from ``wait4``'s rusage of each child.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

GB = 1 << 30
TOKENS = 32
TARGETS = {"compile_rss_gb": {"tinyllama": 3.0, "llama7b": 4.0}, "run_rss_gb": 1.5, "run_ratio": 1.2,
           "logits_rel": 1e-4, "sim_s": 60.0}


def child(cmd: list, env: dict | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in GB, stdout) of ``cmd`` run to its end (its own rusage, from
    ``wait4``); raises on failure (exit 1 is a diff's "diverged", not a failure)."""
    import tempfile
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=ROOT, env={**os.environ, **(env or {})})
        out = p.stdout.read().decode(errors="replace")
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        p.returncode = code
        if code not in (0, 1):
            err.seek(0)
            raise RuntimeError(f"{' '.join(map(str, cmd))} exited {code}:\n"
                               + err.read().decode(errors="replace")[-2000:])
    return wall, usage.ru_maxrss / (1 << 20), out


NAC = [sys.executable, "-m", "nac_engine.cli"]

_RUN = textwrap.dedent("""
    import json, sys, time
    import numpy as np, torch, nac_engine, nac_engine.runtime.session   # imported before the clock, as for eager
    t0 = time.perf_counter()
    ids = np.random.default_rng(0).integers(0, 32000, (1, {tokens}))
    out = nac_engine.run(sys.argv[1], {{"input_ids": ids, "attention_mask": np.ones((1, {tokens}), np.int64)}})
    wall = time.perf_counter() - t0
    np.save(sys.argv[2], np.asarray(out[0]))
    status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
    kb = lambda k: int(status[k].split()[0]) / (1 << 20)
    print(json.dumps({{"wall": wall, "anon": kb("RssAnon"), "file": kb("RssFile"), "hwm": kb("VmHWM")}}))
""").format(tokens=TOKENS)

_EAGER = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import numpy as np, torch, transformers
    torch.set_num_threads(int(sys.argv[3]))
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 32000, (1, {tokens})))
    t1 = time.perf_counter()
    model = transformers.LlamaForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
    t2 = time.perf_counter()
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones(1, {tokens}, dtype=torch.long), use_cache=False).logits
    t3 = time.perf_counter()
    np.save(sys.argv[2], logits.numpy())
    print(json.dumps({{"wall": t3 - t0, "imports": t1 - t0, "load": t2 - t1, "forward": t3 - t2}}))
""").format(tokens=TOKENS)

_DECODE = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from nac_engine.generate import generate
    prompt = [int(x) for x in np.random.default_rng(1).integers(0, 32000, {tokens})]
    t0 = time.perf_counter()
    g = generate(sys.argv[1], sys.argv[2], prompt, int(sys.argv[4]))
    wall = time.perf_counter() - t0
    np.save(sys.argv[3], np.stack(g.logits))
    print(json.dumps({{"wall": wall, "tokens": g.tokens}}))
""").format(tokens=TOKENS)

_DECODE_REF = textwrap.dedent("""
    import json, sys, time
    import numpy as np, torch, transformers
    torch.set_num_threads(int(sys.argv[4]))
    prompt = [int(x) for x in np.random.default_rng(1).integers(0, 32000, {tokens})]
    t0 = time.perf_counter()
    model = transformers.LlamaForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
    n = int(sys.argv[3])
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             output_logits=True, return_dict_in_generate=True)
    wall = time.perf_counter() - t0
    np.save(sys.argv[2], np.stack([x[0].numpy() for x in out.logits]))
    print(json.dumps({{"tokens": out.sequences[0, len(prompt):].tolist(), "wall": wall}}))
""").format(tokens=TOKENS)


def hogs(n: int):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def report(name: str, value: str, target: str = "", ok: bool = True, missed: list | None = None) -> None:
    flag = "" if ok else "   <-- MISSED"
    print(f"  {name:<46} {value:<36} {target}{flag}", flush=True)
    if not ok and missed is not None:
        missed.append(name)


def checkpoint(name: str, directory: Path, dtype: str) -> None:
    """Write the checkpoint in a child process: this one stays small, and the children it starts
    report their own peak RSS (a forked child inherits its parent's high-water mark)."""
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "llm_checkpoints.py"), name, str(directory),
                    "--dtype", dtype], check=True, cwd=ROOT)


def tinyllama(args, cache: Path, missed: list) -> None:
    import numpy as np
    from nac_engine.threads import usable_cpus
    directory = cache / "tinyllama-hf"
    t0 = time.perf_counter()
    checkpoint("tinyllama", directory, "float32")
    size = sum(f.stat().st_size for f in directory.glob("*.safetensors"))
    report("checkpoint (cached after the first run)", f"{size / GB:.2f} GB in {time.perf_counter() - t0:.1f} s")
    nac = cache / "l1.nac"
    base = ["compile", "--hf", str(directory), "--hf-class", "LlamaForCausalLM", "--weights", "external",
            "--seq-len", str(TOKENS)]
    wall, rss, _ = child(NAC + base + ["-o", str(nac)])
    limit = TARGETS["compile_rss_gb"]["tinyllama"]
    report("compile fp32 (external weights): peak RSS", f"{rss:.2f} GB in {wall:.1f} s", f"≤ {limit} GB",
           rss <= limit, missed)
    int8 = cache / "l1_int8.nac"
    if not args.skip_int8:
        wall, rss, _ = child(NAC + base + ["--quant", "int8_channel", "-o", str(int8)])
        report("compile int8_channel: peak RSS", f"{rss:.2f} GB in {wall:.1f} s", f"≤ {limit} GB",
               rss <= limit, missed)

    threads = str(usable_cpus())
    env = {"NAC_NUM_THREADS": threads}
    ours_npy, eager_npy = cache / "l1_nac_logits.npy", cache / "l1_eager_logits.npy"
    child([sys.executable, "-c", _RUN, str(nac), str(ours_npy)], env)        # page cache warm for both
    for load in (0, args.hogs):
        procs = hogs(load)
        try:
            _, rss, out = child([sys.executable, "-c", _RUN, str(nac), str(ours_npy)], env)
            ours = json.loads(out.strip().splitlines()[-1])
            _, _, out = child([sys.executable, "-c", _EAGER, str(directory), str(eager_npy), threads], env)
            eager = json.loads(out.strip().splitlines()[-1])
        finally:
            for p in procs:
                p.kill()
        what = "quiet" if load == 0 else f"{load} CPU hogs"
        base_s = eager["load"] + eager["forward"]
        ratio = ours["wall"] / base_s
        report(f"run 32 tokens, {what}: nac_engine.run", f"{ours['wall']:.2f} s = {ratio:.2f}× transformers",
               f"≤ {TARGETS['run_ratio']}×", ratio <= TARGETS["run_ratio"], missed)
        report(f"  baseline transformers ({threads} threads, {what})",
               f"from_pretrained {eager['load']:.2f} s + forward {eager['forward']:.2f} s")
        if load == 0:
            report("run: peak RSS (VmHWM)", f"{ours['hwm']:.2f} GB (at exit RssAnon {ours['anon']:.2f}, "
                   f"RssFile {ours['file']:.2f})", f"≤ {TARGETS['run_rss_gb']} GB",
                   ours["hwm"] <= TARGETS["run_rss_gb"], missed)
            a, b = np.load(ours_npy), np.load(eager_npy)
            rel = float(np.abs(a - b).max() / np.abs(b).max())
            report("run: logits vs transformers (max abs / max |ref|)", f"{rel:.2e}",
                   f"≤ {TARGETS['logits_rel']:g}", rel <= TARGETS["logits_rel"], missed)
    decode_chain(args, directory, cache, env, threads, missed)
    inspect(nac, missed)
    studio(nac, missed, debugger=True)
    for hw, extra in (("server-128x128", []), ("nac-core-ref", ["--set", "refcore.idx_width=11", "--set",
                                                                "refcore.watchdog_cycles=0"])):
        wall, rss, out = child(NAC + ["sim", str(nac), "--hw", hw] + extra)
        lines = out.splitlines()
        layers = sum(1 for line in lines if line.strip().startswith("model.layers."))
        report(f"sim {hw}{' (11-bit index, no watchdog)' if extra else ''}",
               f"{wall:.1f} s, {rss:.2f} GB, {layers} layer rows", f"≤ {TARGETS['sim_s']:g} s",
               wall <= TARGETS["sim_s"] and layers == 22, missed)
        print("    " + lines[0][:110])
    if not args.skip_int8:
        wall, rss, out = child(NAC + ["diff", str(nac), str(int8), "--metric", "relative"])
        rows = [line for line in out.splitlines() if line.strip().startswith("model.layers.") and
                len(line.split()) == 4]
        report("diff fp32 vs int8_channel", f"{wall:.1f} s, {rss:.2f} GB, {len(rows)} layer rows", "22 rows",
               len(rows) == 22, missed)
        for line in rows[:2] + rows[-2:]:
            print("    " + line.strip())


def decode_chain(args, directory: Path, cache: Path, env: dict, threads: str, missed: list) -> None:
    """Prefill (32 tokens) and a decode step (64 slots), chained for 16 steps against transformers'
    greedy generate with its own cache: every step's logits, and the tokens up to a near-tie."""
    import numpy as np
    files = {}
    for kind in ("prefill", "decode"):
        files[kind] = cache / f"l1_{kind}.nac"
        wall, rss, _ = child(NAC + ["compile", "--hf", str(directory), "--hf-class", "LlamaForCausalLM",
                                    "--weights", "external", "--kv-cache", kind, "--seq-len", str(TOKENS),
                                    "--cache-slots", "64", "-o", str(files[kind])])
        report(f"compile --kv-cache {kind}: peak RSS", f"{rss:.2f} GB in {wall:.1f} s")
    steps = 16
    ours_npy, ref_npy = cache / "l1_decode_nac.npy", cache / "l1_decode_ref.npy"
    _, rss, out = child([sys.executable, "-c", _DECODE, str(files["prefill"]), str(files["decode"]), str(ours_npy),
                         str(steps)], env)
    ours = json.loads(out.strip().splitlines()[-1])
    _, ref_rss, out = child([sys.executable, "-c", _DECODE_REF, str(directory), str(ref_npy), str(steps), threads],
                            env)
    ref = json.loads(out.strip().splitlines()[-1])
    a, b = np.load(ours_npy), np.load(ref_npy)
    rel = max(float(np.abs(x - y).max() / np.abs(y).max()) for x, y in zip(a, b))
    same = 0
    for t, w, lg in zip(ours["tokens"], ref["tokens"], b):
        top2 = np.sort(lg)[-2:]
        if top2[1] - top2[0] <= 1e-3:
            break                          # a near-tie: the runs may part here
        if t != w:
            same = -1
            break
        same += 1
    report(f"decode chain, {steps} steps: logits vs transformers generate", f"max relative {rel:.2e}",
           f"≤ {TARGETS['logits_rel']:g}", rel <= TARGETS["logits_rel"], missed)
    report("decode chain: greedy tokens equal up to a near-tie", f"{same} of {steps} checked equal",
           "no difference", same >= 0, missed)
    # baseline: transformers' from_pretrained of the same directory plus its greedy generate
    report("decode chain: time (prefill + 16 steps), peak RSS",
           f"{ours['wall']:.1f} s, {rss:.2f} GB; transformers from_pretrained + generate {ref['wall']:.1f} s, "
           f"{ref_rss:.2f} GB = {ours['wall'] / ref['wall']:.2f}×")


STUDIO = {"interactive_s": 1.0, "graph_s": 3.0, "stall_ms": 100.0, "inspector_s": 1.0, "anon_gb": 0.8,
          "continue_ratio": 1.2, "step_ms": 30.0, "step_back_ms": 50.0}


def studio(nac: Path, missed: list, debugger: bool) -> None:
    """The Studio on the file (benchmarks/studio_llm.py in a child, offscreen): open, graph,
    the inspector on the embedding and an MLP weight, its own RssAnon; with ``debugger`` F10,
    Continue to the end against Session.run, and Step Back."""
    import statistics
    cmd = [sys.executable, str(ROOT / "benchmarks" / "studio_llm.py"), str(nac)] + (["--debugger"] if debugger else [])
    _, _, out = child(cmd, {"QT_QPA_PLATFORM": "offscreen"})
    r = json.loads(out.strip().splitlines()[-1])
    t = STUDIO
    report("Studio: open → hex/structure/disassembly", f"{r['interactive_s']:.2f} s", f"≤ {t['interactive_s']:g} s",
           r["interactive_s"] <= t["interactive_s"], missed)
    report("Studio: open → graph (collapsed by layer)", f"{r['graph_s']:.2f} s", f"≤ {t['graph_s']:g} s",
           r["graph_s"] <= t["graph_s"], missed)
    report("Studio: longest UI stall while opening", f"{r['open_stall_ms']:.0f} ms", f"≤ {t['stall_ms']:g} ms",
           r["open_stall_ms"] <= t["stall_ms"], missed)
    for label in ("embed", "mlp"):
        i = r.get(label)
        if i is None:
            continue
        ok = i["first_view_s"] <= t["inspector_s"] and i["stall_ms"] <= t["stall_ms"]
        report(f"Studio: inspector on the {'embedding' if label == 'embed' else 'layer-0 MLP down weight'}",
               f"heatmap {i['first_view_s']:.2f} s, statistics {i['stats_s']:.1f} s, stall {i['stall_ms']:.0f} ms"
               + ("" if i["windowed"] else " (sent whole)"), f"heatmap ≤ {t['inspector_s']:g} s, stall ≤ 100 ms",
               ok, missed)
    report("Studio process RssAnon (the engine host apart)", f"{r['studio_rss_anon_gb']:.2f} GB",
           f"≤ {t['anon_gb']} GB", r["studio_rss_anon_gb"] <= t["anon_gb"], missed)
    d = r.get("debugger")
    if d:
        ratio = d["cold_continue_s"] / d["cold_run_s"]
        report("Studio: F5 to the end (first run) vs Session.run", f"{d['cold_continue_s']:.1f} s vs "
               f"{d['cold_run_s']:.1f} s = {ratio:.2f}×", f"≤ {t['continue_ratio']}×", ratio <= t["continue_ratio"],
               missed)
        warm = d["continue_s"] / d["run_s"]
        report("Studio: F5 to the end (weights loaded) vs Session.run", f"{d['continue_s']:.1f} s vs "
               f"{d['run_s']:.1f} s = {warm:.2f}×", f"≤ {t['continue_ratio']}×", warm <= t["continue_ratio"], missed)
        step = statistics.median(d["step_ms"])
        report("Studio: F10 (median of 20)", f"{step:.1f} ms (worst {max(d['step_ms']):.0f})", f"≤ {t['step_ms']:g} ms",
               step <= t["step_ms"], missed)
        back = statistics.median(d["step_back_ms"])
        report("Studio: Step Back (median of 5)", f"{back:.1f} ms (worst {max(d['step_back_ms']):.0f})",
               f"≤ {t['step_back_ms']:g} ms", back <= t["step_back_ms"], missed)
        report("Studio: longest UI stall during Continue", f"{d['stall_ms']:.0f} ms", f"≤ {t['stall_ms']:g} ms",
               d["stall_ms"] <= t["stall_ms"], missed)


def inspect(nac: Path, missed: list) -> None:
    for verb in ("info", "verify", "dis", "lint"):
        wall, rss, _ = child(NAC + [verb, str(nac)])
        report(f"nac {verb}", f"{wall:.2f} s, peak RSS {rss * 1024:.0f} MB", "bounded (< 1 GB)", rss < 1.0, missed)


def llama7b(args, cache: Path, missed: list) -> None:
    for p in [cache / "tinyllama-hf"] + sorted(cache.glob("l1*")):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    directory = cache / "llama7b-hf"
    free = shutil.disk_usage(cache).free
    if not (directory / "model.safetensors.index.json").exists() and free < 30 * GB:
        raise SystemExit(f"llama7b needs about 27 GB free in {cache}; {free / GB:.1f} GB are")
    t0 = time.perf_counter()
    checkpoint("llama7b", directory, "float16")
    size = sum(f.stat().st_size for f in directory.glob("*.safetensors"))
    report("checkpoint fp16 (cached after the first run)", f"{size / GB:.2f} GB in {time.perf_counter() - t0:.1f} s")
    nac = cache / "l7.nac"
    wall, rss, _ = child(NAC + ["compile", "--hf", str(directory), "--hf-class", "LlamaForCausalLM", "--weights",
                                "external", "--quant", "fp16", "--seq-len", str(TOKENS), "-o", str(nac)])
    limit = TARGETS["compile_rss_gb"]["llama7b"]
    report("compile fp16 (external weights): peak RSS", f"{rss:.2f} GB in {wall:.1f} s", f"≤ {limit} GB",
           rss <= limit, missed)
    inspect(nac, missed)
    studio(nac, missed, debugger=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=("tinyllama", "llama7b"), default="tinyllama")
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "nac-bench", "llm"))
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--skip-int8", action="store_true", help="tinyllama: no int8 compile and no diff")
    args = ap.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    print(f"bench_llm --config {args.config} (cache {cache}, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.2f})", flush=True)
    missed: list = []
    (tinyllama if args.config == "tinyllama" else llama7b)(args, cache, missed)
    print("targets met" if not missed else "TARGETS MISSED: " + "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
