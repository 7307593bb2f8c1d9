"""A full cold run of a real-sized model, load included, against PyTorch eager doing the same.

For AlexNet, VGG-11-bn, ResNet-50 (their published layer shapes, written out here: torchvision is
not a dependency) and GPT-2 small (transformers' configuration, random weights), compiled with
``nac_engine.compile`` to a ``.nac`` with internal weights and saved beside a ``.safetensors`` of
the same weights, each contender runs in a **fresh process** (imports done and not timed; what is
timed is what a program pays from "here is a file" to "here are the outputs"):

* **nac run(path)**: ``nac_engine.run(path, inputs)``: read, session set-up, run;
* **nac run(NacFile)**: ``nac_engine.run(read(path), inputs)`` with the ``read`` timed too (a
  program that keeps the decoded file, e.g. to look at it first);
* **eager (baseline)**: the real alternative: ``safetensors.torch.load_file`` of the same weights,
  ``load_state_dict(assign=True)`` into the model built on the meta device, and its forward under
  ``torch.no_grad()``;
* beside them: the eager forward alone (weights already in memory), and a second ``run(path)`` in
  the same process.

Both sides use the same torch thread count (``NAC_NUM_THREADS`` and ``torch.set_num_threads``,
the count ``nac_engine.threads`` chooses for this machine now). Each figure is the least of
``--repeat`` fresh processes, contenders interleaved in a rotating order. Target (issue 25 §2b): cold ``run(path)``
≤ 1.3× eager on every model. The files' page cache is warm for both sides (each reads its own
file once before timing starts).

Then, on every corpus file under 64 KB that runs: the first run in a fresh process against the
second (target ≤ 2×; issue 25 §2b).

    python benchmarks/bench_cold_run.py [--repeat 3] [--models alexnet,vgg11_bn,resnet50,gpt2] [--hogs 2]
                                        [--skip-small]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 1.3
FIRST_RUN_TARGET = 2.0
MODELS = ("alexnet", "vgg11_bn", "resnet50", "gpt2")


# -------------------------------------------------------------------------------- the models
def build(name: str):
    """(model, example inputs) with seeded random weights."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    if name == "alexnet":
        feats = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2))
        head = nn.Sequential(nn.Dropout(), nn.Linear(256 * 36, 4096), nn.ReLU(inplace=True), nn.Dropout(),
                             nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Linear(4096, 1000))
        model = nn.Sequential(feats, nn.AdaptiveAvgPool2d((6, 6)), nn.Flatten(), head)
        return model.eval(), (torch.randn(1, 3, 224, 224),)
    if name == "vgg11_bn":
        layers, cin = [], 3
        for c in (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"):
            if c == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
                cin = c
        head = nn.Sequential(nn.Linear(512 * 49, 4096), nn.ReLU(True), nn.Dropout(), nn.Linear(4096, 4096),
                             nn.ReLU(True), nn.Dropout(), nn.Linear(4096, 1000))
        model = nn.Sequential(nn.Sequential(*layers), nn.AdaptiveAvgPool2d((7, 7)), nn.Flatten(), head)
        _randomise_bn(model)
        return model.eval(), (torch.randn(1, 3, 224, 224),)
    if name == "resnet50":
        model = _resnet50()
        _randomise_bn(model)
        return model.eval(), (torch.randn(1, 3, 224, 224),)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024, use_cache=False)
        model = GPT2LMHeadModel(cfg).eval()
        return model, (torch.randint(0, 50257, (1, 128)),)
    raise SystemExit(f"unknown model {name!r}; choose from {', '.join(MODELS)}")


def _randomise_bn(model) -> None:
    """Running statistics that are not the identity, so batch norm does real work."""
    import torch
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)


def _resnet50():
    """ResNet-50: bottleneck blocks (1×1, 3×3, 1×1, expansion 4), stages of 3, 4, 6, 3."""
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            idt = x if self.down is None else self.down(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            return self.relu(self.bn3(self.conv3(y)) + idt)

    layers, cin = [], 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(2048, 1000))


# -------------------------------------------------------------------------------- preparation
def prepare(name: str, workdir: pathlib.Path) -> dict:
    import numpy as np
    import torch
    from safetensors.torch import save_file

    import nac_engine
    nac_path, st_path, in_path = (workdir / f"{name}{ext}" for ext in (".nac", ".safetensors", ".inputs.npz"))
    model, args = build(name)
    if not nac_path.exists():
        nac = nac_engine.compile(model, args)
        nac_engine.write(nac, nac_path)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if name == "gpt2":        # tied: save the one tensor once, as save_pretrained does
            state.pop("lm_head.weight", None)
        save_file(state, str(st_path))
        np.savez(in_path, *[a.numpy() for a in args])
    return {"nac": str(nac_path), "st": str(st_path), "inputs": str(in_path),
            "nac_mb": nac_path.stat().st_size / 1e6}


_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
import numpy as np, torch
torch.set_num_threads({threads})
from nac_engine import read
from nac_engine.runtime import run     # the interpreter's modules imported before anything is timed
from safetensors.torch import load_file
sys.path.insert(0, {bench!r})
from bench_cold_run import build
which, name, nac_path, st_path, in_path = {which!r}, {name!r}, {nac!r}, {st!r}, {inputs!r}
inputs = [np.load(in_path)[k] for k in sorted(np.load(in_path).files, key=lambda k: int(k.split("_")[1]))]
out = {{}}
if which == "eager":
    with torch.device("meta"):
        model, _ = build(name)
    targs = tuple(torch.from_numpy(a) for a in inputs)
    t0 = time.perf_counter()
    state = load_file(st_path)
    if name == "gpt2":
        state["lm_head.weight"] = state["transformer.wte.weight"]
    model.load_state_dict(state, assign=True, strict=False)
    if name == "gpt2":
        model.tie_weights()
    with torch.no_grad():
        y = model(*targs)
    out["cold"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.no_grad():
        model(*targs)
    out["forward"] = time.perf_counter() - t0
elif which == "path":
    t0 = time.perf_counter()
    run(nac_path, feeds=inputs)
    out["cold"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    run(nac_path, feeds=inputs)
    out["second"] = time.perf_counter() - t0
elif which == "nacfile":
    t0 = time.perf_counter()
    nac = read(nac_path)
    out["read"] = time.perf_counter() - t0
    run(nac, feeds=inputs)
    out["cold"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def child(which: str, name: str, files: dict, threads: int) -> dict:
    code = _CHILD.format(root=str(ROOT), bench=str(ROOT / "benchmarks"), threads=threads, which=which, name=name,
                         **{k: files[k] for k in ("nac", "st", "inputs")})
    env = {**os.environ, "NAC_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"{which} {name} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(name: str, files: dict, threads: int, repeat: int) -> dict:
    for f in (files["nac"], files["st"]):       # both files in the page cache before anything is timed
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    best: dict = {}
    kinds = ("eager", "path", "nacfile")
    for r in range(repeat):
        for which in kinds[r % 3:] + kinds[:r % 3]:     # rotated: no contender always runs first
            for key, v in child(which, name, files, threads).items():
                k = f"{which}.{key}"
                best[k] = min(best.get(k, v), v)
    return best


_FIRST_RUN = r"""
import json, sys, time
sys.path.insert(0, {root!r})
import numpy as np
from nac_engine.runtime import run     # imports done: what is timed is the run's own first-use cost
feeds = [np.load(f) for f in {feeds!r}]
out = []
for _ in range(2):
    t0 = time.perf_counter()
    run({path!r}, feeds=feeds)
    out.append(time.perf_counter() - t0)
print(json.dumps(out))
"""


def first_runs(threads: int) -> list:
    """(name, first run s, second run s) of every corpus file under 64 KB that runs, each in a
    fresh process (imports done before timing: a fresh process's first run pays for call plans,
    kernel lookups and lazy imports inside the engine, not for importing torch)."""
    corpus = ROOT.parent / "shared" / "corpus" / "nac"
    rows = []
    for path in sorted(corpus.glob("*/*.nac")):
        if path.stat().st_size >= 64 << 10:
            continue
        feeds = [str(f) for f in sorted(path.parent.glob("feed_*.npy"))]
        code = _FIRST_RUN.format(root=str(ROOT), feeds=feeds, path=str(path))
        env = {**os.environ, "NAC_NUM_THREADS": str(threads)}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        if r.returncode != 0:
            continue              # files the interpreter refuses are not this figure's business
        first, second = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append((path.parent.name, first, second))
    return rows


def hogs_started(n: int) -> list:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--hogs", type=int, default=2, help="CPU-bound processes for the loaded figures (0: quiet only)")
    ap.add_argument("--skip-small", action="store_true", help="no first-run figures on the corpus' small files")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "nac_bench_cold_run"))
    a = ap.parse_args()
    from nac_engine import threads as nac_threads
    work = pathlib.Path(a.cache)
    work.mkdir(parents=True, exist_ok=True)
    names = [n for n in a.models.split(",") if n]
    files = {n: prepare(n, work) for n in names}
    missed = []
    loads = [("quiet", 0)] + ([(f"{a.hogs} CPU hogs", a.hogs)] if a.hogs else [])
    for label, n_hogs in loads:
        hogs = hogs_started(n_hogs)
        try:
            threads = nac_threads.choose()
            print(f"\n== {label} (load average {os.getloadavg()[0]:.1f}; {threads} torch thread(s) on both sides; "
                  f"least of {a.repeat} fresh processes)")
            print(f"{'model':10} {'MB':>6} {'eager load+fwd':>15} {'fwd only':>9} {'nac run(path)':>14} {'ratio':>6} "
                  f"{'2nd run':>8} {'read+run(NacFile)':>18} {'ratio':>6}")
            for n in names:
                m = measure(n, files[n], threads, a.repeat)
                r_path = m["path.cold"] / m["eager.cold"]
                r_file = m["nacfile.cold"] / m["eager.cold"]
                print(f"{n:10} {files[n]['nac_mb']:6.0f} {m['eager.cold'] * 1e3:13.0f}ms {m['eager.forward'] * 1e3:7.0f}ms "
                      f"{m['path.cold'] * 1e3:12.0f}ms {r_path:5.2f}× {m['path.second'] * 1e3:6.0f}ms "
                      f"{m['nacfile.cold'] * 1e3:16.0f}ms {r_file:5.2f}×")
                if r_path > TARGET:
                    missed.append(f"{n} cold run(path) {r_path:.2f}× eager ({label}; target ≤ {TARGET}×)")
        finally:
            for h in hogs:
                h.kill()
    if not a.skip_small:
        threads = nac_threads.choose()
        rows = first_runs(threads)
        if rows:
            ratios = sorted(f / sec for _, f, sec in rows)
            worst = max(rows, key=lambda r: r[1] / r[2])
            print(f"\n== small files (corpus, < 64 KB): the first run in a fresh process against the second "
                  f"(load average {os.getloadavg()[0]:.1f})")
            print(f"{len(rows)} files: median {ratios[len(ratios) // 2]:.2f}×, worst {worst[1] / worst[2]:.2f}× "
                  f"({worst[0]}: {worst[1] * 1e3:.1f} ms then {worst[2] * 1e3:.1f} ms)")
            if worst[1] / worst[2] > FIRST_RUN_TARGET:
                missed.append(f"first run {worst[1] / worst[2]:.2f}× the second on {worst[0]} "
                              f"(target ≤ {FIRST_RUN_TARGET}×)")
    print("targets met" if not missed else "TARGETS MISSED: " + "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
