"""Quantisation: byte-identical to the reference compiler on the corpus, exact round trip through
our writer and reader, errors reported truthfully, and the model still computes the same thing."""
from __future__ import annotations

import numpy as np
import pytest

import nac_engine
from nac_engine.compiler import quantize as Q
from nac_engine.compiler.quantize import METHODS, quantize_parameters
from nac_engine.format import layout as L
from nac_engine.format import read, write
from nac_engine.format.model import NacFile, Parameter, TensorMeta
from nac_engine.format.quant import dequantize
from nac_engine.format.writer import encode_tensor_meta, param_payload

QUANTISING = ["fp16", "int8_tensor", "int8_channel", "block_fp8"]


def hand_file(tensors: dict) -> NacFile:
    nac = NacFile()
    for pid, (name, arr) in enumerate(tensors.items(), start=1):
        code = L.DTYPE_CODES[arr.dtype.name]
        nac.params[pid] = Parameter(pid, name, TensorMeta(code, tuple(arr.shape), 0), _payload=arr, _file=nac)
    return nac


def reread(nac: NacFile, tmp_path, name="q.nac") -> NacFile:
    path = tmp_path / name
    write(nac, str(path))
    return read(str(path))


# --------------------------------------------------------------------------- the reference's bytes
@pytest.mark.parametrize("float_case, quant_case, method", [
    ("mlp", "mlp_int8t", "int8_tensor"),
    ("mlp", "mlp_int8c__v1.6", "int8_channel"),
    ("mlp", "mlp_bfp8__v1.6", "block_fp8"),
    ("mlp", "mlp_fp16", "fp16"),
    ("cnn__v1.6", "cnn_bfp8__v1.6", "block_fp8"),
])
def test_same_bytes_as_the_reference_compiler(corpus_case, float_case, quant_case, method):
    """The corpus float and quantised files come from the same seeded model: quantising the
    float file's weights must give the quantised file's metadata and data, byte for byte."""
    ours, theirs = read(str(corpus_case(float_case))), read(str(corpus_case(quant_case)))
    quantize_parameters(ours, method)
    assert ours.header.quant_method == theirs.header.quant_method
    assert len(ours.params) == len(theirs.params)
    for p in ours.params.values():
        q = theirs.param_by_name(p.name)
        assert encode_tensor_meta(p.meta) == encode_tensor_meta(q.meta), p.name
        assert bytes(param_payload(ours, p)) == bytes(param_payload(theirs, q)), p.name


# --------------------------------------------------------------------------- round trip and errors
@pytest.mark.parametrize("method", QUANTISING)
def test_round_trip_is_exact_and_errors_are_true(corpus_case, tmp_path, method):
    nac = read(str(corpus_case("cnn")))
    originals = {p.name: np.array(p.array(), dtype=np.float64) for p in nac.params.values()}
    reports = {r.name: r for r in quantize_parameters(nac, method)}
    in_memory = {p.name: dequantize(np.asarray(p.raw()), p.meta) for p in nac.params.values()}
    back = reread(nac, tmp_path)
    assert back.header.quant_method == METHODS[method]
    for p in back.params.values():
        got = p.array()
        assert got.dtype == np.float32 and got.shape == originals[p.name].shape
        assert np.array_equal(got, in_memory[p.name]), p.name
        err = np.abs(got.astype(np.float64) - originals[p.name])
        r = reports[p.name]
        assert r.max_abs_error == pytest.approx(err.max(), rel=0, abs=0)
        assert r.rel_error == pytest.approx(err.max() / np.abs(originals[p.name]).max())
        assert r.stored_bytes == np.asarray(p.raw()).nbytes
        assert r.float_bytes == 4 * originals[p.name].size


@pytest.mark.parametrize("method", ["int8_tensor", "int8_channel", "block_fp8"])
def test_int8_error_is_at_most_half_a_step(method):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((37, 29)) * rng.uniform(0.01, 3, (37, 1))).astype(np.float32)
    nac = hand_file({"w": w})
    quantize_parameters(nac, method)
    meta, stored = nac.params[1].meta, np.asarray(nac.params[1].raw())
    got = dequantize(stored, meta)
    if method == "int8_tensor":
        step = np.full(w.shape, meta.scale, np.float32)
    elif method == "int8_channel":
        step = np.broadcast_to(meta.scales[:, None], w.shape)
    else:
        step = np.repeat(meta.scales, 64)[:w.size].reshape(w.shape)
    assert np.all(np.abs(got - w) <= step / 2 * (1 + 1e-5) + 1e-12)
    assert stored.dtype == np.int8 and stored.min() >= -128 and stored.max() <= 127


def test_rank_one_under_int8_channel_is_stored_per_tensor():
    nac = hand_file({"w": np.ones((4, 3), np.float32), "b": np.arange(4, dtype=np.float32)})
    quantize_parameters(nac, "int8_channel")
    assert nac.header.quant_method == L.QUANT_INT8_CHANNEL
    assert [p.meta.quant for p in nac.params.values()] == [L.QUANT_INT8_CHANNEL, L.QUANT_INT8_TENSOR]


def test_zero_tensors_use_the_reference_placeholder_scales():
    nac = hand_file({"a": np.zeros((2, 3), np.float32)})
    quantize_parameters(nac, "int8_tensor")
    assert np.float32(nac.params[1].meta.scale) == np.float32(1e-9)
    nac = hand_file({"a": np.zeros((2, 3), np.float32)})
    quantize_parameters(nac, "int8_channel")
    assert np.all(nac.params[1].meta.scales == np.float32(1e-9))
    nac = hand_file({"a": np.zeros(70, np.float32)})
    quantize_parameters(nac, "block_fp8")
    assert nac.params[1].meta.scales.tolist() == [1.0, 1.0]
    assert nac.params[1].meta.shape == (128,) and nac.params[1].meta.original_shape == (70,)


@pytest.mark.parametrize("method", QUANTISING + ["none"])
def test_integer_tensors_are_untouched(method, tmp_path):
    ids = np.arange(12, dtype=np.int64).reshape(3, 4)
    nac = hand_file({"ids": ids, "mask": np.array([True, False]), "w": np.ones((2, 2), np.float32)})
    reports = quantize_parameters(nac, method)
    assert [r.stored_as for r in reports[:2]] == ["none", "none"]
    back = reread(nac, tmp_path)
    assert np.array_equal(back.params[1].array(), ids) and back.params[1].meta.quant == 0
    assert back.params[2].array().tolist() == [True, False]


@pytest.mark.parametrize("method", QUANTISING)
def test_empty_and_odd_shapes(method, tmp_path):
    tensors = {"empty": np.zeros((0, 4), np.float32), "none_wide": np.zeros((4, 0), np.float32),
               "vec": np.array([1.5, -2.5, 3.5], np.float32), "f64": np.linspace(-1, 1, 65)}
    nac = hand_file(tensors)
    quantize_parameters(nac, method)
    back = reread(nac, tmp_path)
    for p in back.params.values():
        assert p.array().shape == tensors[p.name].shape


def test_scalar_under_block_fp8():
    # regression: the reader once took an empty original shape (a 0-d tensor) for a missing one
    nac = hand_file({"s": np.array(1.5, np.float32)})
    quantize_parameters(nac, "block_fp8")
    assert dequantize(np.asarray(nac.params[1].raw()), nac.params[1].meta).shape == ()


def test_bfloat16_and_float16_sources_are_widened_exactly():
    bits = np.array([0x3FC0, 0xC020, 0x0000], np.uint16)     # bf16 1.5, -2.5, 0
    nac = NacFile()
    nac.params[1] = Parameter(1, "b", TensorMeta(3, (3,), 0), _payload=bits, _file=nac)
    nac.params[2] = Parameter(2, "h", TensorMeta(2, (3,), 0), _payload=np.array([1.5, -2.5, 0], "<f2"), _file=nac)
    reports = quantize_parameters(nac, "fp16")
    assert [r.max_abs_error for r in reports] == [0.0, 0.0]
    assert [r.float_bytes for r in reports] == [6, 6]


# --------------------------------------------------------------------------- non-finite values
def _mask(fill: float) -> np.ndarray:
    return np.triu(np.full((6, 6), fill, np.float32), 1)


@pytest.mark.parametrize("method", ["int8_tensor", "int8_channel", "block_fp8"])
def test_int8_leaves_non_finite_and_overflowing_tensors_float(method, tmp_path):
    w = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    nan = w.copy()
    nan[1, 2] = np.nan
    tensors = {"mask": _mask(-np.inf), "nan": nan, "at_min": _mask(np.finfo(np.float32).min), "w": w}
    reports = {r.name: r for r in quantize_parameters(hand_file(tensors), method)}
    assert "non-finite values (15 -inf)" in reports["mask"].skipped
    assert "1 NaN" in reports["nan"].skipped
    assert "decode as inf" in reports["at_min"].skipped       # finfo.min * 127 / 127 rounds past float32
    assert reports["w"].skipped == "" and reports["w"].stored_as != "none" and reports["w"].max_abs_error > 0
    nac = hand_file(tensors)
    quantize_parameters(nac, method)
    back = reread(nac, tmp_path)
    assert back.header.quant_method == METHODS[method]
    for name in ("mask", "nan", "at_min"):
        p = back.param_by_name(name)
        assert p.meta.quant == 0 and p.meta.dtype == 0
        np.testing.assert_array_equal(p.array(), tensors[name])   # bit-for-bit, inf and NaN included
        assert reports[name].stored_as == "none" and reports[name].stored_bytes == tensors[name].nbytes


def test_fp16_stores_infinities_exactly_but_not_values_past_its_range(tmp_path):
    tensors = {"mask": _mask(-np.inf), "at_min": _mask(np.finfo(np.float32).min),
               "big": np.array([1.0, 7e4], np.float32)}
    nac = hand_file(tensors)
    reports = {r.name: r for r in quantize_parameters(nac, "fp16")}
    assert reports["mask"].stored_as == "FP16" and reports["mask"].max_abs_error == 0.0
    assert reports["mask"].rel_error == 0.0                   # not NaN from -inf - -inf
    for name in ("at_min", "big"):
        assert reports[name].stored_as == "none" and "decode as inf" in reports[name].skipped
    back = reread(nac, tmp_path)
    for name, want in tensors.items():
        np.testing.assert_array_equal(back.param_by_name(name).array(), want)


# --------------------------------------------------------------------------- refusals
def test_bad_methods_and_double_quantisation():
    with pytest.raises(ValueError, match="unknown quantisation method"):
        quantize_parameters(hand_file({"w": np.ones(3, np.float32)}), "int4")
    nac = hand_file({"w": np.ones(3, np.float32)})
    quantize_parameters(nac, "INT8_TENSOR")
    with pytest.raises(ValueError, match="already quantised"):
        quantize_parameters(nac, "fp16")


def test_a_failure_leaves_the_file_unchanged(monkeypatch):
    nac = hand_file({"a": np.ones((2, 2), np.float32), "b": np.ones((2, 2), np.float32)})
    calls = []

    def flaky(w):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return Q._int8_tensor(w)
    monkeypatch.setitem(Q._ENCODERS, L.QUANT_INT8_TENSOR, flaky)
    with pytest.raises(RuntimeError):
        quantize_parameters(nac, "int8_tensor")
    assert nac.header.quant_method == 0 and all(p.meta.quant == 0 and p.meta.dtype == 0 for p in nac.params.values())


# --------------------------------------------------------------------------- the model still works
@pytest.mark.parametrize("method, tol", [("none", 1e-6), ("fp16", 1e-3), ("int8_tensor", 3e-2),
                                         ("int8_channel", 3e-2), ("block_fp8", 3e-2)])
def test_quantised_model_output_vs_pytorch(corpus_case, tmp_path, method, tol):
    """Output of the quantised CNN (our interpreter) vs PyTorch fp32 eager, relative to the
    output's max magnitude. The tolerance is a sanity bound, not a figure of merit."""
    path = corpus_case("cnn")
    want = np.load(path.parent / "torch_output_0.npy")
    feeds = [np.load(path.parent / "feed_0.npy")]
    nac = read(str(path))
    quantize_parameters(nac, method)
    got = nac_engine.run(reread(nac, tmp_path), feeds=feeds)[0]
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel <= tol


def test_a_scale_that_overflows_gives_inf_without_numpy_warnings(recwarn):
    """A hostile file's scale of 3e38 times a stored 100 is inf: the values say so (the views count
    non-finite values), and no RuntimeWarning lands on the user's terminal (the fuzz printed dozens)."""
    import numpy as np
    from nac_engine.format import layout as L
    from nac_engine.format.quant import dequantize
    from nac_engine.format.tensor_meta import TensorMeta
    meta = TensorMeta(dtype=0, shape=(3,), quant=L.QUANT_INT8_TENSOR, scale=3e38)
    got = dequantize(np.array([100, -100, 0], np.int8), meta)
    assert got.tolist() == [float("inf"), float("-inf"), 0.0]
    chan = TensorMeta(dtype=0, shape=(2, 1), quant=L.QUANT_INT8_CHANNEL, scales=np.array([3e38, np.inf], np.float32), axis=0)
    assert np.isinf(dequantize(np.array([[100], [0]], np.int8), chan)[0, 0])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
