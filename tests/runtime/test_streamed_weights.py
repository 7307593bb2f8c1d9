"""A file whose weights are too many to hold (an LLM) runs with each weight read at its use and
released after its last one; the results equal a session that holds them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import nac_engine
from nac_engine.compiler.external import write_compiled
from nac_engine.format.safetensors_file import SafetensorsFile
from nac_engine.runtime import session as session_module
from nac_engine.runtime.debugger import Debugger
from nac_engine.runtime.session import Session

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Chain(torch.nn.Module):
    def __init__(self, width: int, depth: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width, bias=False) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


@pytest.fixture
def chain_file(tmp_path):
    torch.manual_seed(0)
    model = Chain(64, 6).eval()
    x = torch.randn(2, 64)
    nac = nac_engine.compile(model, (x,), weights="external")
    path = tmp_path / "chain.nac"
    write_compiled(nac, path)
    with torch.no_grad():
        want = model(x).numpy()
    return str(path), x.numpy(), want


def test_a_session_over_the_budget_reads_each_weight_once_per_run_and_holds_none(chain_file, monkeypatch):
    path, x, want = chain_file
    held = Session(path, feeds=[x])
    assert held.holds_weights
    np.testing.assert_allclose(held.run()[0], want, rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(session_module, "RESIDENT_WEIGHTS_MAX", 0)
    reads = []
    original = SafetensorsFile.read
    monkeypatch.setattr(SafetensorsFile, "read", lambda self, key: reads.append(key) or original(self, key))
    streamed = Session(path, feeds=[x])
    assert not streamed.holds_weights
    for _ in range(2):
        reads.clear()
        np.testing.assert_array_equal(streamed.run()[0], held.run()[0])
        assert sorted(reads) == sorted(f"layers.{i}.weight" for i in range(6))
        assert not streamed._params
        # nothing but the output is left once the run is over: every weight was released
        assert all(not (isinstance(v, torch.Tensor) and v.shape == (64, 64)) for v in streamed.results.values())


def test_the_debugger_steps_back_over_weights_it_does_not_hold(chain_file, monkeypatch):
    path, x, want = chain_file
    monkeypatch.setattr(session_module, "RESIDENT_WEIGHTS_MAX", 0)
    d = Debugger(path, feeds=[x])
    assert not d.session.holds_weights
    d.continue_()
    np.testing.assert_allclose(d.session.outputs[0], want, rtol=1e-5, atol=1e-6)
    end = d.session.tick
    for _ in range(end):
        d.step_back()
    assert d.session.tick == 0
    d.continue_()
    np.testing.assert_allclose(d.session.outputs[0], want, rtol=1e-5, atol=1e-6)
    assert d.param_value("layers.0.weight").shape == (64, 64)
    assert not d.session._params


_MAKE = textwrap.dedent("""
    import sys, torch, nac_engine
    from nac_engine.compiler.external import write_compiled
    width, depth, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    layers = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(depth)]).eval()
    with torch.no_grad():
        for l in layers:
            l.weight.normal_(0, width ** -0.5)
    write_compiled(nac_engine.compile(layers, (torch.randn(1, width),), weights="external"), out)
""")

_RUN = textwrap.dedent("""
    import json, sys, numpy as np, nac_engine
    out = nac_engine.run(sys.argv[1], feeds=[np.ones((1, int(sys.argv[2])), np.float32)])
    status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
    kb = lambda k: int(status[k].split()[0])
    print(json.dumps({"hwm": kb("VmHWM"), "anon": kb("RssAnon"), "finite": bool(np.isfinite(out[0]).all())}))
""")


@pytest.mark.slow
def test_run_memory_does_not_grow_with_the_weight_bytes(tmp_path):
    """20 weights of 64 MB (1.3 GB, over the 1 GiB a session holds) and 32 (2 GB): the peak RSS is about the same,
    the mapped/read pages of one or two weights at a time, not the file."""
    width = 4096                           # 4096² float32 = 64 MB per weight
    peaks = {}
    for depth in (20, 32):
        path = str(tmp_path / f"chain{depth}.nac")
        subprocess.run([sys.executable, "-c", _MAKE, str(width), str(depth), path], check=True, cwd=ROOT)
        r = subprocess.run([sys.executable, "-c", _RUN, path, str(width)], check=True, cwd=ROOT,
                           capture_output=True, text=True)
        peaks[depth] = json.loads(r.stdout.strip().splitlines()[-1])
        assert peaks[depth]["finite"]
        os.remove(path)
        os.remove(path.replace(".nac", ".safetensors"))
    weight_mb = width * width * 4 / 2**20
    growth_mb = (peaks[32]["hwm"] - peaks[20]["hwm"]) / 1024
    # 12 more weights (0.75 GB) may add at most two weights' worth of peak
    assert growth_mb < 2 * weight_mb, (peaks, growth_mb)
    assert peaks[32]["hwm"] / 1024 < 1024, peaks          # a 2 GB file in well under 1 GB


def test_sim_and_diff_group_costs_and_errors_by_decoder_layer(tmp_path):
    """A Llama's repeated blocks (model.layers.N) get a row each in the simulator's and the diff's
    per-layer tables."""
    import transformers
    from nac_engine.diff import diff_files
    from nac_engine.format import read
    from nac_engine.sim.api import simulate
    from nac_engine.sim.config import load_hardware
    from nac_engine.sim.layers import OUTSIDE, per_layer
    config = transformers.AutoConfig.for_model(
        model_type="llama", hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, vocab_size=50, max_position_embeddings=32, use_cache=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    kwargs = {"input_ids": torch.randint(0, 50, (1, 6))}
    from nac_engine.compiler.quantize import quantize_parameters
    paths = {None: str(tmp_path / "f32.nac"), "int8_channel": str(tmp_path / "int8.nac")}
    write_compiled(nac_engine.compile(model, (), kwargs), paths[None])
    quantised = read(paths[None])                  # the same program, its weights quantised
    quantize_parameters(quantised, "int8_channel")
    write_compiled(quantised, paths["int8_channel"])
    result = simulate(paths[None], load_hardware("edge-32x32"), inputs={"input_ids": kwargs["input_ids"].numpy()})
    layers = per_layer(result, read(paths[None]))
    assert [c.layer for c in layers] == [f"model.layers.{i}" for i in range(3)] + [OUTSIDE]
    assert all(c.cycles > 0 and c.dma_bytes > 0 for c in layers[:3])
    assert sum(c.cycles for c in layers) == result.total_cycles
    diff = diff_files(paths[None], paths["int8_channel"], metric="relative")
    rows = diff.layers()
    assert [r[0] for r in rows] == [f"model.layers.{i}" for i in range(3)]
    assert all(r[1] > 0 and r[2] is not None and r[2] > 0 for r in rows)


def test_shapes_of_external_weights_come_from_the_header(chain_file, monkeypatch):
    """The meta-device shape pass (graph edges, the simulator) reads no weight data: an LLM's
    13 GB would be read just to learn 300 shapes."""
    from nac_engine.format import read
    from nac_engine.runtime.shapes import program_shapes
    path, x, _ = chain_file
    reads = []
    original = SafetensorsFile.read
    monkeypatch.setattr(SafetensorsFile, "read", lambda self, key: reads.append(key) or original(self, key))
    nac = read(path)
    assert all(p.meta is None for p in nac.params.values())
    prog = program_shapes(nac, feeds=[x])
    assert reads == []
    assert all(p.meta is not None and p.meta.shape == (64, 64) for p in nac.params.values())
    assert prog is not None
