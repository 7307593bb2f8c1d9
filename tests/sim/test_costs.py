"""Cost classes of ops the compiler emits: nothing a compiled model uses is an unknown op.

Tiny Hugging Face configs (2 layers, width 32, sequence 8) keep the compiles to a few seconds."""
import json
import warnings
from math import ceil

import numpy as np
import pytest

from nac_engine.sim import load_hardware, simulate
from nac_engine.sim.costs import gemm_cycles, Gemm, instruction_cost, op_class, sfu_cycles, vector_cycles
from nac_engine.runtime.shapes import InstrInfo, TensorInfo

HF_CONFIGS = {
    "gpt2": {"model_type": "gpt2", "vocab_size": 100, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64,
             "bos_token_id": 0, "eos_token_id": 0},
    "bert": {"model_type": "bert", "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64},
}


@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
def test_compiled_hf_models_have_no_unknown_ops(tmp_path, name):
    from nac_engine.compiler import compile_model, hf
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(HF_CONFIGS[name]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = hf.build(str(cfg), batch=1, seq_len=8)
        nac = compile_model(m.model, (), m.kwargs).nac
    r = simulate(nac, "edge-32x32", inputs={k: "1x8:int64" for k in m.kwargs})
    assert r.unknown_ops == {}
    classes = {x.op: x.op_class for x in r.instructions}
    assert classes.get("aten.take.default", "copy") == "copy"
    assert classes.get("aten.__and__.Tensor", "elementwise") == "elementwise"


T = lambda *shape, dtype="float32": ("t", TensorInfo(tuple(shape), dtype))  # noqa: E731


def test_gather_is_data_movement_by_bytes():
    hw = load_hardware("edge-32x32")
    x = InstrInfo(0, "aten.take.default", "op", (T(64, 64), T(1000, dtype="int64")), (TensorInfo((1000,), "float32"),))
    c = instruction_cost(x, hw)
    assert (c.unit, c.op_class, c.known) == ("mover", "copy", True)
    assert c.cycles == ceil(4000 / hw.movement.bytes_per_cycle) + hw.movement.latency


@pytest.mark.parametrize("op", ["aten.__and__.Tensor", "aten.__or__.Tensor", "aten.__xor__.Tensor",
                                "aten.__invert__.default", "aten.bitwise_left_shift.Tensor",
                                "aten.logical_and.default"])
def test_bitwise_ops_are_vector_elementwise(op):
    hw = load_hardware("edge-32x32")
    x = InstrInfo(0, op, "op", (T(4096, dtype="bool"), T(4096, dtype="bool")), (TensorInfo((4096,), "bool"),))
    c = instruction_cost(x, hw)
    assert (c.unit, c.op_class, c.known) == ("vector", "elementwise", True)
    assert c.cycles == vector_cycles(4096, 1, "elementwise", hw)


def test_bilinear_interpolation_is_four_taps():
    hw = load_hardware("edge-32x32")
    x = InstrInfo(0, "aten.upsample_bilinear2d.vec", "op", (T(1, 3, 8, 8), ("c", None), ("c", False), ("c", (2.0, 2.0))),
                  (TensorInfo((1, 3, 16, 16), "float32"),))
    c = instruction_cost(x, hw)
    assert (c.op_class, c.known) == ("interpolation", True)
    assert c.cycles == vector_cycles(3 * 16 * 16, 4, "elementwise", hw)


def _lstm(T_, B, n_in, H, layers=1, batch_first=False, op="aten.lstm.input", gates=4):
    x = T(B, T_, n_in) if batch_first else T(T_, B, n_in)
    hx = [T(layers, B, H)] * (2 if op.startswith("aten.lstm") else 1)
    params = []
    for layer in range(layers):
        params += [T(gates * H, n_in if layer == 0 else H), T(gates * H, H), T(gates * H), T(gates * H)]
    consts = [("c", True), ("c", layers), ("c", 0.0), ("c", False), ("c", False), ("c", batch_first)]
    return InstrInfo(0, op, "op", tuple([x] + hx + params + consts), (TensorInfo((T_, B, H), "float32"),))


@pytest.mark.parametrize("batch_first", [False, True])
def test_lstm_is_its_gemms_per_timestep(batch_first):
    hw = load_hardware("edge-32x32")
    T_, B, n_in, H = 7, 2, 16, 24
    c = instruction_cost(_lstm(T_, B, n_in, H, batch_first=batch_first), hw)
    proj = gemm_cycles(Gemm(T_ * B, n_in, 4 * H), hw)[0]
    step = gemm_cycles(Gemm(B, H, 4 * H), hw)[0]
    vec = vector_cycles(B * (4 * H + 3 * H), 1, "elementwise", hw)
    sfu = sfu_cycles(B * (4 * H + H), hw)
    assert (c.unit, c.op_class, c.known) == ("systolic", "recurrent", True)
    assert c.busy == {"systolic": proj + T_ * step, "vector": T_ * vec, "sfu": T_ * sfu}
    assert c.cycles == proj + T_ * (step + vec + sfu)
    assert c.macs == T_ * B * n_in * 4 * H + T_ * B * H * 4 * H


def test_more_timesteps_cost_more_than_a_wider_batch():
    # the same MACs, but the steps of a recurrence run one after another
    hw = load_hardware("edge-32x32")
    long = instruction_cost(_lstm(32, 1, 16, 16), hw)
    wide = instruction_cost(_lstm(1, 32, 16, 16), hw)
    assert long.macs == wide.macs and long.cycles > 2 * wide.cycles
    assert long.busy["systolic"] > 10 * wide.busy["systolic"]     # 32 fills and drains against one


def test_a_compiled_gru_has_no_unknown_ops():
    import torch
    from nac_engine.compiler import compile_model
    gru = torch.nn.GRU(8, 12, num_layers=2, batch_first=True).eval()
    x = torch.randn(3, 5, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nac = compile_model(gru, (x,)).nac
    r = simulate(nac, "edge-32x32", inputs={"input": x.numpy()})
    assert r.unknown_ops == {}
    rec = [x for x in r.instructions if x.op == "aten.gru.input"]
    assert len(rec) == 1 and rec[0].op_class == "recurrent"
    T_, B, G, H = 5, 3, 3, 12
    assert rec[0].macs == (T_ * B * 8 * G * H + T_ * B * H * G * H) + (T_ * B * H * G * H + T_ * B * H * G * H)
    # the derived GRU kernel runs longer than the TINY watchdog (a reset on the RTL): timed with it off
    ref = simulate(nac, load_hardware("nac-core-ref", {"refcore.watchdog_cycles": 0}),
                   inputs={"input": x.numpy()})
    k = [x for x in ref.instructions if x.op == "aten.gru.input"][0].compute_cycles
    assert k > 100 * T_       # the derived kernel latency counts the steps, not one element-wise pass


def test_unparseable_recurrent_shapes_stay_unknown():
    hw = load_hardware("edge-32x32")
    x = InstrInfo(0, "aten.lstm.data", "op", (T(10, 4), T(5, dtype="int64")), (TensorInfo((10, 8), "float32"),))
    assert op_class(x.op) == "recurrent"
    c = instruction_cost(x, hw)
    assert (c.op_class, c.known) == ("unknown", False)
    assert np.isfinite(c.cycles)


def test_the_hardware_file_says_what_its_own_ops_cost():
    """[ops]: a custom operator (or any op) costed as a class or as fixed cycles; globs, the first
    match wins; matched as namespace::op and as the file names it."""
    ins = InstrInfo(0, "mylib.fused_gelu.default", "op", (T(4, 256),), (TensorInfo((4, 256), "float32"),))
    plain = load_hardware("edge-32x32")
    assert instruction_cost(ins, plain).op_class == "unknown" and not instruction_cost(ins, plain).known
    hw = plain.with_overrides({"ops": {"mylib::fused_gelu": 120, "mylib::*": "softmax"}})
    c = instruction_cost(ins, hw)
    assert (c.unit, c.cycles, c.op_class, c.known) == ("vector", 120, "custom", True)
    other = InstrInfo(1, "mylib.other.default", "op", (T(4, 256),), (TensorInfo((4, 256), "float32"),))
    soft = InstrInfo(2, "aten._softmax.default", "op", (T(4, 256),), (TensorInfo((4, 256), "float32"),))
    assert instruction_cost(other, hw).cycles == instruction_cost(soft, plain).cycles
    assert instruction_cost(other, hw).op_class == "softmax"
    # overriding a known op, written as the file names it
    hw2 = plain.with_overrides({"ops": {"aten._softmax.default": 7}})
    assert instruction_cost(soft, hw2).cycles == 7
    assert hw2.to_dict()["ops"] == {"aten._softmax.default": 7}
